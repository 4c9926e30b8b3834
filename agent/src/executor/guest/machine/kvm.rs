//! Whether KVM really runs guests on this host.
//!
//! `/dev/kvm` existing proves little: on the farm's hosts (themselves KVM
//! guests) nested KVM opens fine and then hangs in the guest's early boot.
//! So a guest of the host's own arch is booted once under KVM with a kernel
//! from the cache and an initramfs whose `/init` only says `farm-kvm-ok` on
//! the channel and powers off, with a short timeout. The verdict is kept in
//! `<cache>/kvm-probe`, keyed by the host's kernel release and QEMU's size,
//! so that agents sharing a cache probe once; until a kernel is cached there
//! is nothing to boot and guests use TCG.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::qemu;
use crate::executor::guest::arch::{Accel, GuestArch};
use crate::executor::guest::image::{initramfs, kernels};

/// A KVM guest reaches init in a second or two; a nested KVM that hangs
/// never does.
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

const PROBE_INIT: &str = r#"#!/bin/sh
echo farm-kvm-ok > /dev/ttyS1
poweroff -f
"#;

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A guest booted under KVM and reported.
    Works,
    /// It did not, and why.
    Fails(String),
}

/// The arch of this host's own guests, the only ones KVM could run.
pub fn host_arch() -> Option<GuestArch> {
    let arch: farm_spec::Arch = std::env::consts::ARCH.parse().ok()?;
    GuestArch::try_from(arch).ok()
}

/// The accelerator for a guest of `arch`: KVM when it is the host's arch
/// and the probe (run now if it never ran against this cache) saw KVM boot
/// a guest; TCG otherwise.
pub fn accel_for(arch: GuestArch, cache: &Path) -> Accel {
    decide_accel(
        Some(arch) == host_arch(),
        Path::new("/dev/kvm").exists(),
        || verdict(cache),
    )
}

/// The decision of [`accel_for`] over what it looks up, apart so that tests
/// can give it every input whatever the machine: KVM only for a guest of the
/// host's arch, with `/dev/kvm`, and a probe (asked only then) that saw KVM
/// boot a guest.
pub fn decide_accel(
    host_arch: bool,
    dev_kvm: bool,
    probe: impl FnOnce() -> Option<Verdict>,
) -> Accel {
    if !host_arch || !dev_kvm {
        return Accel::Tcg;
    }
    match probe() {
        Some(Verdict::Works) => Accel::Kvm,
        Some(Verdict::Fails(_)) | None => Accel::Tcg,
    }
}

/// The verdict kept in the cache for this host, without probing.
pub fn kept_verdict(cache: &Path) -> Option<Verdict> {
    fs::read_to_string(cache.join("kvm-probe"))
        .ok()
        .and_then(|t| parse_record(&t, &probe_key()))
}

/// The cached verdict, probing first when there is none and a kernel of the
/// host's arch is cached. `None`: nothing to probe with yet.
pub fn verdict(cache: &Path) -> Option<Verdict> {
    // One probe at a time in this process; the file serves the others.
    static PROBING: Mutex<()> = Mutex::new(());
    let _one = PROBING.lock().unwrap_or_else(|e| e.into_inner());
    let key = probe_key();
    let file = cache.join("kvm-probe");
    if let Some(v) = fs::read_to_string(&file)
        .ok()
        .and_then(|t| parse_record(&t, &key))
    {
        return Some(v);
    }
    let vmlinuz = cached_kernel(cache)?;
    // One line, as the record keeps it.
    let (v, kept) = match probe(cache, &vmlinuz) {
        Probe::Booted(v) => (v, true),
        Probe::Setup(why) => (Verdict::Fails(why), false),
    };
    let v = match v {
        Verdict::Fails(why) => Verdict::Fails(why.replace('\n', " ")),
        works => works,
    };
    match &v {
        Verdict::Works => tracing::info!("KVM boots guests here: guests of this arch use it"),
        Verdict::Fails(why) => tracing::warn!(%why, "KVM does not boot guests here: TCG only"),
    }
    // A probe that could not even start says nothing about KVM: ask again
    // next time rather than keep TCG for good.
    if !kept {
        return Some(v);
    }
    if let Err(e) = fs::write(&file, record(&key, &v)) {
        tracing::warn!(file = %file.display(), error = %e, "cannot keep the KVM probe's verdict");
    }
    Some(v)
}

/// The verdict as the cache keeps it: key line, then `works` or `fails <why>`.
fn record(key: &str, v: &Verdict) -> String {
    match v {
        Verdict::Works => format!("{key}\nworks\n"),
        Verdict::Fails(why) => format!("{key}\nfails {}\n", why.replace('\n', " ")),
    }
}

fn parse_record(text: &str, key: &str) -> Option<Verdict> {
    let mut lines = text.lines();
    if lines.next()? != key {
        return None;
    }
    match lines.next()?.split_once(' ') {
        None if text.lines().nth(1) == Some("works") => Some(Verdict::Works),
        Some(("fails", why)) => Some(Verdict::Fails(why.to_string())),
        _ => None,
    }
}

/// The host's kernel release and the QEMU binary's size: a new host kernel
/// or QEMU may change the answer.
fn probe_key() -> String {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let qemu_len = host_arch()
        .and_then(|a| fs::metadata(a.qemu().0).ok())
        .map(|m| m.len())
        .unwrap_or(0);
    format!("host {} qemu {qemu_len}", release.trim())
}

/// A kernel of the host's arch in the cache's `kernels/`.
fn cached_kernel(cache: &Path) -> Option<PathBuf> {
    let arch = host_arch()?;
    let mut found: Vec<PathBuf> = fs::read_dir(cache.join("kernels"))
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            kernels::debian(&format!("debian:{name}")).is_ok_and(|d| d.arch() == arch.arch())
                && e.path().join("manifest").is_file()
        })
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            e.path().join("root/boot").join(format!("vmlinuz-{name}"))
        })
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.into_iter().next()
}

/// What one probe learnt.
enum Probe {
    /// A guest was started under KVM: what it did is the verdict.
    Booted(Verdict),
    /// The probe could not start one (no image, no directory, no QEMU).
    Setup(String),
}

/// Boots `vmlinuz` under KVM once.
fn probe(cache: &Path, vmlinuz: &Path) -> Probe {
    let Some(arch) = host_arch() else {
        return Probe::Booted(Verdict::Fails("no guest arch for this host".into()));
    };
    if arch != GuestArch::X86_64 {
        // The probe's init speaks on ttyS1, which only x86_64 guests have.
        return Probe::Booted(Verdict::Fails(format!("no KVM probe for {arch} hosts yet")));
    }
    let image = match initramfs::build_with(
        &cache.join("images"),
        Path::new(initramfs::BUSYBOX),
        initramfs::Applets::Listed,
        PROBE_INIT,
        &[],
    ) {
        Ok(i) => i,
        Err(e) => return Probe::Setup(format!("building the probe's image: {e}")),
    };
    let dir = match tempfile::Builder::new()
        .prefix("kvm-probe-")
        .tempdir_in(cache)
    {
        Ok(d) => d,
        Err(e) => return Probe::Setup(format!("a directory for the probe: {e}")),
    };
    let machine = qemu::Machine {
        arch,
        accel: Accel::Kvm,
        cpus: 1,
        memory_mib: 256,
        nodes: 1,
        timeout: PROBE_TIMEOUT,
        cmdline: Vec::new(),
        // The probe's init speaks on ttyS1: no modules to load.
        channel: qemu::Channel::Serial,
    };
    let channel = dir.path().join("channel.log");
    let watch = qemu::Watch {
        on_spawn: &mut |_| {},
        on_tick: &mut |_| {},
        cancelled: &|| false,
        report_complete: &mut || {
            fs::read_to_string(&channel).is_ok_and(|t| t.lines().any(|l| l.trim() == "farm-kvm-ok"))
        },
    };
    match qemu::run_to_poweroff(&machine, vmlinuz, &image.path, dir.path(), watch) {
        Ok((_, channel)) if channel.lines().any(|l| l.trim() == "farm-kvm-ok") => {
            Probe::Booted(Verdict::Works)
        }
        Ok(_) => Probe::Booted(Verdict::Fails(
            "the KVM guest powered off without reporting".into(),
        )),
        Err(qemu::Error::Timeout { after, .. }) => Probe::Booted(Verdict::Fails(format!(
            "a KVM guest did not boot within {after:?} (nested KVM hangs on some hosts)"
        ))),
        Err(qemu::Error::Exit { status, stderr, .. }) => Probe::Booted(Verdict::Fails(format!(
            "QEMU with KVM exited with {status}: {stderr}"
        ))),
        Err(e @ (qemu::Error::Halted { .. } | qemu::Error::Panicked { .. })) => {
            let first = e.to_string().lines().next().unwrap_or_default().to_owned();
            Probe::Booted(Verdict::Fails(format!(
                "the KVM guest did not report: {first}"
            )))
        }
        Err(e) => Probe::Setup(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
