//! Booting a guest under QEMU (x86_64 or s390x, TCG or KVM) and bringing
//! back what it wrote on its report channel.
//!
//! The console goes to `console.log`, the report channel to `channel.log`,
//! QEMU's own stderr to `qemu.log`, all in the boot's directory. The channel
//! ([`Channel`]) is a virtio-serial port named `farm` where the kernel has
//! the driver (Debian's kernels, as modules that travel in the initramfs;
//! s390x has no second serial port), else a second serial port (guest
//! ttyS1: the farm's own builds, which have no modules). QEMU is killed
//! and reaped when it outlives the timeout, when the run is cancelled, and
//! whenever its guard is dropped, so no process is left behind. A guest is
//! not waited for once its report is complete, nor once its console says it
//! halted ([`ending`]): a kernel that cannot power off ends as soon as one
//! that can.

pub mod ending;

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::executor::guest::arch::{Accel, GuestArch};
use crate::executor::guest::image::tail;

/// The most a guest may write on the report channel: a sweep of 20,000
/// tasks is about 5 MiB, and a run has a few dozen sweeps at most before
/// its timeout in the cases the farm runs.
const MAX_CHANNEL_BYTES: u64 = 256 << 20;

/// The virtio-serial port's name, which the guest looks for under
/// `/sys/class/virtio-ports/*/name`.
pub const PORT_NAME: &str = "farm";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("guest: find QEMU: {qemu} is missing (install the Debian package {package})")]
    NoQemu {
        qemu: &'static str,
        package: &'static str,
    },
    #[error("guest: {step}: {source}")]
    Step {
        step: &'static str,
        source: std::io::Error,
    },
    #[error(
        "guest: timeout: not powered off after {after:?}; killed QEMU. Console tail:\n{console_tail}"
    )]
    Timeout {
        after: Duration,
        console_tail: String,
    },
    #[error("guest: QEMU exited with {status}: {stderr}. Console tail:\n{console_tail}")]
    Exit {
        status: String,
        stderr: String,
        console_tail: String,
    },
    #[error("guest: cancelled; killed QEMU")]
    Cancelled,
    #[error(
        "guest: report: the report channel passed {} MiB; killed QEMU. Console tail:\n{console_tail}",
        MAX_CHANNEL_BYTES >> 20
    )]
    ChannelFull { console_tail: String },
    #[error(
        "guest: halted before its report was complete (the kernel could not power off, or \
         init halted it); killed QEMU. Console tail:\n{console_tail}"
    )]
    Halted { console_tail: String },
    #[error("guest: the kernel panicked: {line}. Console tail:\n{console_tail}")]
    Panicked { line: String, console_tail: String },
}

/// How the guest's report reaches the host.
///
/// A 16550 UART under TCG costs the guest a trap per byte and an interrupt
/// per 16: the in-guest sampler's sweeps of 40 threads (6 KB) cost more
/// than their reads of `/proc`. A virtio-serial port takes a sweep in one
/// buffer and one notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The second serial port (guest `ttyS1`): x86_64 only, always there.
    Serial,
    /// A virtio-serial port named [`PORT_NAME`] (virtio-serial-pci on
    /// x86_64, virtio-serial-ccw on s390x); the kernel needs
    /// `virtio_console` (and on x86_64 `virtio_pci`).
    VirtioSerial,
}

/// A guest machine: `cpus` CPUs and `memory_mib` split evenly over `nodes`
/// NUMA nodes (node i gets a contiguous range of CPUs; s390x has no NUMA).
#[derive(Debug, Clone)]
pub struct Machine {
    pub arch: GuestArch,
    pub accel: Accel,
    pub cpus: u32,
    pub memory_mib: u32,
    pub nodes: u32,
    pub timeout: Duration,
    /// Words added to the kernel's command line, each checked by
    /// `farm_spec::sched::CmdlineWord` (no space, no quote).
    pub cmdline: Vec<String>,
    /// The report channel (s390x has only [`Channel::VirtioSerial`]).
    pub channel: Channel,
}

impl Default for Machine {
    fn default() -> Self {
        Machine {
            arch: GuestArch::X86_64,
            accel: Accel::Tcg,
            cpus: 4,
            memory_mib: 512,
            nodes: 2,
            timeout: Duration::from_secs(120),
            cmdline: Vec::new(),
            channel: Channel::Serial,
        }
    }
}

/// QEMU's argv (without the program) for `machine`, booting `vmlinuz` and
/// `initrd`, with the serial ports to files in `dir`.
pub fn argv(machine: &Machine, vmlinuz: &Path, initrd: &Path, dir: &Path) -> Vec<String> {
    let mut a: Vec<String> = vec!["-accel".into(), machine.accel.name().into()];
    match (machine.arch, machine.accel) {
        (GuestArch::X86_64, Accel::Kvm) => a.extend(["-cpu".into(), "host".into()]),
        (GuestArch::X86_64, Accel::Tcg) => a.extend(["-cpu".into(), "max".into()]),
        // QEMU's default s390x CPU model is what TCG emulates best.
        (GuestArch::S390x, _) => {}
    }
    a.extend([
        "-m".into(),
        machine.memory_mib.to_string(),
        "-smp".into(),
        machine.cpus.to_string(),
    ]);
    let nodes = machine.nodes.max(1);
    if machine.nodes > 1 && machine.arch.has_numa() {
        let per_cpu = machine.cpus / nodes;
        let per_mem = machine.memory_mib / nodes;
        for n in 0..nodes {
            let first = n * per_cpu;
            let last = if n + 1 == nodes {
                machine.cpus - 1
            } else {
                first + per_cpu - 1
            };
            let mem = if n + 1 == nodes {
                machine.memory_mib - per_mem * (nodes - 1)
            } else {
                per_mem
            };
            a.push("-object".into());
            a.push(format!("memory-backend-ram,id=m{n},size={mem}M"));
            a.push("-numa".into());
            a.push(format!("node,nodeid={n},cpus={first}-{last},memdev=m{n}"));
        }
    }
    a.extend([
        "-kernel".to_string(),
        vmlinuz.display().to_string(),
        "-initrd".to_string(),
        initrd.display().to_string(),
        "-append".to_string(),
        std::iter::once(format!(
            "console={} quiet panic=-1 sched_verbose",
            machine.arch.console()
        ))
        .chain(machine.cmdline.iter().cloned())
        .collect::<Vec<_>>()
        .join(" "),
        "-display".to_string(),
        "none".to_string(),
        "-no-reboot".to_string(),
        "-nodefaults".to_string(),
        "-serial".to_string(),
        format!("file:{}", dir.join("console.log").display()),
    ]);
    let channel = dir.join("channel.log");
    let bus = match machine.arch {
        GuestArch::X86_64 => "virtio-serial-pci",
        GuestArch::S390x => "virtio-serial-ccw",
    };
    match (machine.channel, machine.arch) {
        (Channel::Serial, GuestArch::X86_64) => {
            a.extend(["-serial".into(), format!("file:{}", channel.display())])
        }
        // s390x has no second serial port.
        (Channel::VirtioSerial, _) | (Channel::Serial, GuestArch::S390x) => a.extend([
            "-device".into(),
            format!("{bus},id=vser"),
            "-chardev".into(),
            format!("file,id=farmch,path={}", channel.display()),
            "-device".into(),
            format!("virtserialport,bus=vser.0,chardev=farmch,name={PORT_NAME}"),
        ]),
    }
    a
}

/// What a caller learns of a running guest, and how it stops one early.
pub struct Watch<'a> {
    /// Called once with QEMU's pid, right after it started (to journal it).
    pub on_spawn: &'a mut dyn FnMut(u32),
    /// Called about every 50 ms with the time since the start.
    pub on_tick: &'a mut dyn FnMut(Duration),
    /// Asked as often: true kills QEMU and fails with [`Error::Cancelled`].
    pub cancelled: &'a dyn Fn() -> bool,
    /// Asked as often: true when the report channel holds all the guest
    /// has to say, after which QEMU is stopped and the boot has succeeded,
    /// whether or not the guest could power off.
    pub report_complete: &'a mut dyn FnMut() -> bool,
}

/// Kills and reaps QEMU when dropped, unless it has already been reaped.
struct Guard {
    child: Option<Child>,
}

impl Guard {
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Lines of the console a failed guest's error carries: a kernel panic's
/// header, registers and call trace take about 60.
const CONSOLE_TAIL_LINES: usize = 80;

/// The last lines of the console log in `dir`.
pub fn console_tail(dir: &Path) -> String {
    let text = fs::read(dir.join("console.log")).unwrap_or_default();
    tail(&String::from_utf8_lossy(&text), CONSOLE_TAIL_LINES)
}

/// Runs QEMU until it exits, or until `watch` says the report is complete
/// (or kills it at the timeout, when `watch` says the run was cancelled,
/// and when the console says the guest halted or, a grace later, powers off
/// or panicked); returns the time from its start to its end and the text of
/// the report channel.
pub fn run_to_poweroff(
    machine: &Machine,
    vmlinuz: &Path,
    initrd: &Path,
    dir: &Path,
    watch: Watch<'_>,
) -> Result<(Duration, String), Error> {
    let (qemu, package) = machine.arch.qemu();
    if !Path::new(qemu).is_file() {
        return Err(Error::NoQemu { qemu, package });
    }
    for f in ["console.log", "channel.log"] {
        let _ = fs::remove_file(dir.join(f));
    }
    let stderr = fs::File::create(dir.join("qemu.log")).map_err(|source| Error::Step {
        step: "create qemu.log",
        source,
    })?;
    let started = Instant::now();
    let mut cmd = Command::new(qemu);
    cmd.args(argv(machine, vmlinuz, initrd, dir))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // QEMU dies with the thread that started (and waits for) it, so an
    // agent killed before it journalled the pid leaves no guest running.
    crate::child::die_with_parent(&mut cmd);
    let child = cmd.spawn().map_err(|source| Error::Step {
        step: "start QEMU",
        source,
    })?;
    tracing::info!(pid = child.id(), arch = %machine.arch, accel = machine.accel.name(), kernel = %vmlinuz.display(), "guest started");
    (watch.on_spawn)(child.id());
    let mut guard = Guard { child: Some(child) };
    let mut console = ending::Scan::new(&dir.join("console.log"));
    // The first ending the console showed, and when.
    let mut seen: Option<(ending::Ending, Instant)> = None;
    let status = loop {
        if (watch.report_complete)() {
            guard.kill();
            tracing::debug!("guest report complete, QEMU stopped");
            break None;
        }
        if seen.is_none() {
            seen = console.look().map(|e| (e, Instant::now()));
        }
        if let Some((end, at)) = &seen
            && at.elapsed() >= end.grace()
        {
            guard.kill();
            tracing::info!(?end, "guest ended on its console, QEMU stopped");
            // The report may have become complete since the last look.
            if (watch.report_complete)() {
                break None;
            }
            return Err(ended_without_report(end, dir));
        }
        let child = guard.child.as_mut().expect("not reaped yet");
        match child.try_wait() {
            Ok(Some(status)) => {
                guard.child = None;
                break Some(status);
            }
            Ok(None) => {}
            Err(source) => {
                return Err(Error::Step {
                    step: "wait for QEMU",
                    source,
                });
            }
        }
        if started.elapsed() >= machine.timeout {
            guard.kill();
            tracing::warn!(timeout = ?machine.timeout, "guest timed out, QEMU killed");
            return Err(Error::Timeout {
                after: machine.timeout,
                console_tail: console_tail(dir),
            });
        }
        // A guest (or its workload) flooding the channel would fill the
        // disk and the agent's memory when the report is read.
        let channel_len = fs::metadata(dir.join("channel.log")).map_or(0, |m| m.len());
        if channel_len > MAX_CHANNEL_BYTES {
            guard.kill();
            return Err(Error::ChannelFull {
                console_tail: console_tail(dir),
            });
        }
        if (watch.cancelled)() {
            guard.kill();
            tracing::info!("guest cancelled, QEMU killed");
            return Err(Error::Cancelled);
        }
        (watch.on_tick)(started.elapsed());
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed();
    if let Some(status) = status
        && !status.success()
    {
        let stderr = fs::read_to_string(dir.join("qemu.log")).unwrap_or_default();
        return Err(Error::Exit {
            status: status.to_string(),
            stderr: tail(&stderr, 5),
            console_tail: console_tail(dir),
        });
    }
    if status.is_some()
        && !(watch.report_complete)()
        && let Some(ending::Ending::Panicked(line)) =
            seen.map(|(e, _)| e).or_else(|| console.look())
    {
        // `panic=-1` reset it, and `-no-reboot` made that QEMU's exit.
        return Err(Error::Panicked {
            line,
            console_tail: console_tail(dir),
        });
    }
    let channel = fs::read(dir.join("channel.log")).unwrap_or_default();
    Ok((elapsed, String::from_utf8_lossy(&channel).into_owned()))
}

/// Why a guest the console saw end, and whose report was not complete,
/// failed.
fn ended_without_report(end: &ending::Ending, dir: &Path) -> Error {
    let console_tail = console_tail(dir);
    match end {
        ending::Ending::Panicked(line) => Error::Panicked {
            line: line.clone(),
            console_tail,
        },
        ending::Ending::Halted | ending::Ending::PoweringOff => Error::Halted { console_tail },
    }
}

#[cfg(test)]
mod tests;
