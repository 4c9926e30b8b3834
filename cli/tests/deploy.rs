//! The systemd units of `deploy/systemd` checked by systemd itself:
//! `systemd-analyze verify` (every directive known and valid, the binary
//! there and executable: the built ones stand in for /usr/local/bin), and
//! `systemd-analyze security --offline` for the coordinator, which needs no
//! privilege and must stay in the "OK" band. The agent needs root (hotplug,
//! sysctls, cgroups, QEMU): its exposure is printed, not bounded.
//!
//! Needs the Debian package `systemd` (scripts/test.sh installs it); no
//! systemd needs to be running.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

const ANALYZE: &str = "/usr/bin/systemd-analyze";

/// The unit with the built binaries in place of /usr/local/bin, in `dir`.
fn unit(dir: &Path, name: &str) -> PathBuf {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../deploy/systemd")
            .join(name),
    )
    .unwrap();
    let bin_dir = common::sibling_bin("farm-agent")
        .parent()
        .unwrap()
        .display()
        .to_string();
    let path = dir.join(name);
    std::fs::write(&path, text.replace("/usr/local/bin", &bin_dir)).unwrap();
    path
}

fn analyze(args: &[&str]) -> (bool, String) {
    assert!(
        Path::new(ANALYZE).is_file(),
        "{ANALYZE} is missing: install the Debian package systemd (scripts/test.sh does)"
    );
    let out = Command::new(ANALYZE).args(args).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// "Overall exposure level for farm-x.service: 3.1 OK".
fn exposure(report: &str) -> f64 {
    report
        .lines()
        .find_map(|l| l.split("Overall exposure level for ").nth(1))
        .and_then(|l| l.split(": ").nth(1))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no exposure level in:\n{report}"))
}

#[test]
fn the_units_verify_and_the_coordinator_runs_unprivileged() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "farm-coordinator.service",
        "farm-coordinator-ha.service",
        "farm-agent.service",
    ] {
        let path = unit(dir.path(), name);
        let (ok, report) = analyze(&["verify", path.to_str().unwrap()]);
        // Warnings go to stderr with success: any output is a finding.
        assert!(ok && report.trim().is_empty(), "{name}:\n{report}");
    }
    let coordinator = unit(dir.path(), "farm-coordinator.service");
    let (_, report) = analyze(&["security", "--offline=true", coordinator.to_str().unwrap()]);
    let level = exposure(&report);
    assert!(
        level < 4.0,
        "the coordinator's exposure is {level}:\n{report}"
    );
    let agent = unit(dir.path(), "farm-agent.service");
    let (_, report) = analyze(&["security", "--offline=true", agent.to_str().unwrap()]);
    eprintln!(
        "exposure: coordinator {level}, agent {} (root by design)",
        exposure(&report)
    );
}

/// The build user of `deploy/sysusers.d`, made by systemd-sysusers in an
/// empty root as it would be on a host: a system user (UID below 1000)
/// with no home and no login, as `farm-agent --build-user` expects.
#[test]
fn the_build_user_is_a_system_user_without_login() {
    const SYSUSERS: &str = "/usr/bin/systemd-sysusers";
    assert!(
        Path::new(SYSUSERS).is_file(),
        "{SYSUSERS} is missing: install the Debian package systemd (scripts/test.sh does)"
    );
    let conf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/sysusers.d/farm-build.conf");
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("etc")).unwrap();
    let out = Command::new(SYSUSERS)
        .arg(format!("--root={}", root.path().display()))
        .arg(&conf)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let passwd = std::fs::read_to_string(root.path().join("etc/passwd")).unwrap();
    let fields: Vec<&str> = passwd.trim().split(':').collect();
    assert_eq!(fields.len(), 7, "{passwd}");
    assert_eq!(fields[0], "farm-build", "{passwd}");
    let uid: u32 = fields[2].parse().unwrap();
    assert!(uid > 0 && uid < 1000, "{passwd}");
    assert_eq!(
        &fields[5..],
        ["/nonexistent", "/usr/sbin/nologin"],
        "{passwd}"
    );
}
