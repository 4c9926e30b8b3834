//! Guests: running workloads inside QEMU guests booted with a chosen kernel,
//! so that the kernel itself (and NUMA topologies this host does not have)
//! becomes an axis of the matrix.
//!
//! This is the foundation only:
//! - [`kernels`]: `debian:<version>` → a cached, unpacked Debian kernel
//!   (`apt-get download`, `dpkg-deb -x`, sha256 manifest).
//! - [`initramfs`]: a busybox-static initramfs (newc cpio written here,
//!   gzipped by `gzip`) whose `/init` is a tiny guest runner: it reports the
//!   release, NUMA nodes and sched domains, cycles cpu1 through hotplug, and
//!   powers off. Cached by the hash of its contents.
//! - [`qemu`]: boots x86_64 under TCG with 2 NUMA nodes, the console to a
//!   log and the report on the second serial port (ttyS1) to a file, with a
//!   timeout that kills and reaps QEMU; parses the report.
//!
//! - [`job`]: an initramfs carrying `farm-workload` (with the shared
//!   libraries `ldd` names) and a validated argv in `/job`, whose runner
//!   runs one built-in workload and reports its metric lines; the booted
//!   guest's [`job::GuestRun`].
//!
//! Still missing: external tools inside the guest; a streaming
//! channel (unix socket or virtio-serial, whose modules would have to be
//! carried in the initramfs) instead of a file read after poweroff; KVM
//! probing (nested KVM hangs on the farm's hosts, so TCG only); other
//! architectures (s390x); guest topologies other than "N equal nodes";
//! wiring into capabilities, placement and the executor; eviction of the
//! cache.

/// Why this machine cannot boot guests, if it cannot: the programs guests
/// need (QEMU, a static busybox, apt and dpkg for kernels, gzip, ldd,
/// sha256sum), each named with its Debian package.
pub fn available() -> Result<(), String> {
    let mut missing = Vec::new();
    for (path, package) in [
        (qemu::QEMU_X86_64, "qemu-system-x86"),
        (initramfs::BUSYBOX, "busybox-static"),
        ("/usr/bin/apt-get", "apt"),
        ("/usr/bin/dpkg-deb", "dpkg"),
        ("/usr/bin/gzip", "gzip"),
        ("/usr/bin/ldd", "libc-bin"),
        ("/usr/bin/sha256sum", "coreutils"),
    ] {
        if !Path::new(path).is_file() {
            missing.push(format!("{path} ({package})"));
        }
    }
    // Debian's dynamically linked `busybox` installs /bin/busybox too, and
    // a guest has no libraries for it.
    if missing.is_empty() {
        let ldd = Command::new("/usr/bin/ldd")
            .arg(initramfs::BUSYBOX)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run /usr/bin/ldd: {e}"))?;
        if ldd.status.success() {
            missing.push(format!("a static {} (busybox-static)", initramfs::BUSYBOX));
        }
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("missing {}", missing.join(", ")))
    }
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

pub mod initramfs;
pub mod job;
pub mod kernels;
pub mod qemu;

use std::ffi::OsStr;
use std::path::Path;
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
