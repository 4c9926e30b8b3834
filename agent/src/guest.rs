//! Guests: running workloads inside QEMU guests booted with a chosen kernel,
//! so that the kernel itself, other architectures (s390x) and NUMA
//! topologies this host does not have become axes of the matrix.
//!
//! - [`arch`]: what differs between x86_64 and s390x guests, and TCG/KVM.
//! - [`kernels`]: `debian:<version>` → a cached, unpacked Debian kernel of
//!   the version's arch (`apt-get download`, `dpkg-deb -x`, sha256 manifest).
//! - [`sysroot`]: Debian packages of any arch (the external tools, s390x's
//!   busybox) with the libraries they need, for the images.
//! - [`modules`]: the kernel modules a channel needs, in load order.
//! - [`initramfs`]: busybox-static initramfs images (newc cpio written
//!   here, gzipped by `gzip`), cached by the hash of their contents; the
//!   foundation's runner that reports a guest's topology.
//! - [`qemu`]: boots a guest with its console to a log and the report on a
//!   channel of its own (ttyS1 on x86_64, virtio-serial on s390x), with a
//!   timeout and cancellation that kill and reap QEMU; parses the report.
//! - [`job`]: the image that runs one workload with its machine state and
//!   samples it, and the booted guest's [`job::GuestRun`].
//! - [`telemetry`]: the guest's raw /proc lines turned into a run's telemetry.
//! - [`kvm`]: whether KVM really boots guests here (probed once, kept).
//! - [`cache`]: the cache's entries touched when used, and the least
//!   recently used evicted beyond a budget after each guest run.
//!
//! `file:<path>` kernels are images in the agent's `--kernel-dir`s
//! ([`kernels::resolve_file`]). Still missing: competing loads and
//! client/server tools inside guests.

/// Why this machine cannot boot guests of `arch`, if it cannot: the
/// programs guests need (QEMU, a static busybox, apt and dpkg for kernels
/// and packages, gzip, ldd or readelf, sha256sum), each named with its
/// Debian package, and for a foreign arch its registration with dpkg.
pub fn available(arch: GuestArch) -> Result<(), String> {
    let mut missing = Vec::new();
    let mut needed = vec![
        arch.qemu(),
        ("/usr/bin/apt-get", "apt"),
        ("/usr/bin/dpkg-deb", "dpkg"),
        ("/usr/bin/gzip", "gzip"),
        ("/usr/bin/sha256sum", "coreutils"),
        // The external tools' libraries, from Debian's packages of the arch.
        ("/usr/bin/readelf", "binutils"),
    ];
    match arch {
        // The farm's own binaries with their libraries, and the host's busybox.
        GuestArch::X86_64 => needed.extend([
            (initramfs::BUSYBOX, "busybox-static"),
            ("/usr/bin/ldd", "libc-bin"),
        ]),
        // Debian's s390x packages only (busybox-static:s390x included).
        GuestArch::S390x => {}
    }
    for (path, package) in needed {
        if !Path::new(path).is_file() {
            missing.push(format!("{path} ({package})"));
        }
    }
    // Debian's dynamically linked `busybox` installs /bin/busybox too, and
    // a guest has no libraries for it.
    if missing.is_empty() && arch == GuestArch::X86_64 {
        let ldd = Command::new("/usr/bin/ldd")
            .arg(initramfs::BUSYBOX)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run /usr/bin/ldd: {e}"))?;
        if ldd.status.success() {
            missing.push(format!("a static {} (busybox-static)", initramfs::BUSYBOX));
        }
    }
    if missing.is_empty() && Some(arch) != kvm::host_arch() && !foreign_arch(arch.deb_arch()) {
        missing.push(format!(
            "{0} packages (dpkg --add-architecture {0} && apt-get update)",
            arch.deb_arch()
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("missing {}", missing.join(", ")))
    }
}

/// Whether dpkg lists `deb_arch` among its foreign architectures.
fn foreign_arch(deb_arch: &str) -> bool {
    Command::new("/usr/bin/dpkg")
        .arg("--print-foreign-architectures")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == deb_arch)
        })
        .unwrap_or(false)
}

/// `$XDG_CACHE_HOME/farm/guests`, else `$HOME/.cache/farm/guests`: kernels
/// are tens of megabytes, worth keeping across agents and runs.
pub fn default_cache() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| std::path::PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("farm/guests"))
}

pub mod arch;
pub mod cache;
pub mod initramfs;
pub mod job;
pub mod kernels;
pub mod kvm;
pub mod modules;
pub mod qemu;
pub mod sysroot;
pub mod telemetry;

use std::ffi::OsStr;
use std::path::Path;

use arch::GuestArch;
use std::process::{Command, Output, Stdio};

/// Runs `program` (an absolute path) with `args`, never through a shell;
/// a non-zero exit is an error carrying the tail of its stderr.
pub(crate) fn run_tool<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    cwd: Option<&Path>,
) -> Result<Output, String> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    tracing::debug!(program = %program.display(), "running tool");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", program.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "{} exited with {}: {}",
            program.display(),
            out.status,
            tail(&stderr, 10)
        ));
    }
    Ok(out)
}

/// sha256 of a file, by `/usr/bin/sha256sum` (the crate has no hash dependency).
pub(crate) fn sha256_file(path: &Path) -> Result<String, String> {
    let out = run_tool(Path::new("/usr/bin/sha256sum"), &[path], None)?;
    parse_sha256sum(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| format!("sha256sum of {}: unexpected output", path.display()))
}

fn parse_sha256sum(out: &str) -> Option<String> {
    let hex = out.split_whitespace().next()?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A name unique within this machine for a temporary sibling of a cache entry.
pub(crate) fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256sum_output() {
        let line = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855  /x\n";
        assert_eq!(
            parse_sha256sum(line).unwrap(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(parse_sha256sum("sha256sum: /x: No such file\n"), None);
        assert_eq!(parse_sha256sum(""), None);
    }

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
