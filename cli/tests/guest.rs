//! The kernel axis end to end: a real coordinator and agent, a matrix with
//! the running kernel and a Debian kernel; the Debian cells run in a QEMU
//! guest under TCG and say so in every result.
//!
//! Needs qemu-system-x86 and busybox-static (scripts/test.sh installs them)
//! and Debian's package archive; it fails, never skips, without them.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Farm, serial, wait_for};

/// A coordinator and one agent whose guests share the tests' kernel cache.
fn guest_farm() -> Farm {
    if let Err(why) = farm_agent::guest::available() {
        panic!("guests need Debian packages qemu-system-x86 and busybox-static: {why}");
    }
    let mut farm = Farm::start(&[]);
    let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/guest-cache");
    let state = farm.dir.path().join("agent-state");
    farm.start_agent_with(&state, &[("FARM_GUEST_CACHE", cache.display().to_string())]);
    farm.wait_agents(1);
    farm
}

#[test]
fn a_debian_kernel_cell_runs_in_a_tcg_guest_beside_the_host_cell() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "kernels.toml",
        r#"
name = "kernels"
repetitions = 2
timeout_s = 120
kernels = ["running", "debian:6.1.0-57-cloud-amd64"]

[[workloads]]
name = "cpu-hog"
params = { threads = 2, seconds = 1 }
"#,
    );
    let id = farm.submit(&file);
    wait_for(Duration::from_secs(300), "the matrix to finish", || {
        farm.results(&id)["state"] == "done"
    });
    let v = farm.results(&id);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "{v}");
    for r in results {
        assert_eq!(r["ok"], true, "{r}");
        assert!(r["metrics"]["hog_ops_per_s"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["metrics"]["wall_s"].as_f64().unwrap() >= 1.0, "{r}");
        assert_eq!(r["arch"], "x86_64", "{r}");
        let guest = r["cell"] == 1;
        if guest {
            assert_eq!(r["executor"], "tcg", "{r}");
            assert_eq!(r["kernel_release"], "6.1.0-57-cloud-amd64", "{r}");
            // From the assignment to the workload's start, cached or not.
            let start = r["metrics"]["guest_start_s"].as_f64().unwrap();
            assert!(start > 0.5 && start < 60.0, "{r}");
            eprintln!("guest_start_s {start:.2}");
        } else {
            assert_eq!(r["executor"], "host", "{r}");
        }
    }
}

/// Seed 000 in a guest: cpu1 taken offline and brought back before the run
/// on a 2-node guest; the result carries the sched domains before and after
/// (debugfs, `sched_verbose`) and their difference.
#[test]
fn a_hotplug_cycle_inside_a_guest_reports_the_domains_before_and_after() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "seed000.toml",
        r#"
name = "hotplug-in-guest"
timeout_s = 120
kernels = ["debian:6.1.0-57-cloud-amd64"]

[[workloads]]
name = "cpu-hog"
params = { threads = 4, seconds = 1 }

[[states]]
name = "cycled"
hotplug = "cycle:1"
autogroup = 0
"#,
    );
    let id = farm.submit(&file);
    wait_for(Duration::from_secs(300), "the matrix to finish", || {
        farm.results(&id)["state"] == "done"
    });
    let v = farm.results(&id);
    let r = &v["results"][0];
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["executor"], "tcg", "{r}");
    let t = &r["telemetry"]["topology"];
    assert!(t["source"].as_str().unwrap().contains("debugfs"), "{t}");
    let before = t["before"].as_array().unwrap();
    let after = t["after"].as_array().unwrap();
    assert_eq!(before.len(), 4, "{t}");
    assert_eq!(after.len(), 4, "{t}");
    for line in before.iter().chain(after) {
        assert!(line.as_str().unwrap().contains("NUMA"), "{t}");
    }
    // Debian's 6.1 rebuilds the NUMA level after the cycle: nothing changed.
    assert_eq!(t["changes"], serde_json::json!([]), "{t}");
}
