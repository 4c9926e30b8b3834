//! Booting a guest under QEMU (x86_64 or s390x, TCG or KVM) and reading
//! its report.
//!
//! The console goes to `console.log`, the report channel to `channel.log`,
//! QEMU's own stderr to `qemu.log`, all in the boot's directory. The channel
//! is a second serial port on x86_64 (guest ttyS1, built into Debian's
//! kernels) and a virtio-serial port named `farm` on s390x (which has no
//! second serial port; its modules travel in the initramfs). QEMU is killed
//! and reaped when it outlives the timeout, when the run is cancelled, and
//! whenever its guard is dropped, so no process is left behind.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::arch::{Accel, GuestArch};
use crate::capabilities::parse_cpu_list;

/// What the Debian package `qemu-system-x86` installs.
pub const QEMU_X86_64: &str = "/usr/bin/qemu-system-x86_64";

/// The most a guest may write on the report channel: a sweep of 20,000
/// tasks is about 5 MiB, and a run has a few dozen sweeps at most before
/// its timeout in the cases the farm runs.
const MAX_CHANNEL_BYTES: u64 = 256 << 20;

/// The virtio-serial port's name, which the guest looks for under
/// `/sys/class/virtio-ports/*/name`.
pub const PORT_NAME: &str = "farm";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("guest: {step}: {detail}")]
    Step { step: &'static str, detail: String },
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
    #[error("guest: report: {detail}. Console tail:\n{console_tail}")]
    Report {
        detail: String,
        console_tail: String,
    },
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
        format!(
            "console={} quiet panic=-1 sched_verbose",
            machine.arch.console()
        ),
        "-display".to_string(),
        "none".to_string(),
        "-no-reboot".to_string(),
        "-nodefaults".to_string(),
        "-serial".to_string(),
        format!("file:{}", dir.join("console.log").display()),
    ]);
    let channel = dir.join("channel.log");
    match machine.arch {
        GuestArch::X86_64 => a.extend(["-serial".into(), format!("file:{}", channel.display())]),
        GuestArch::S390x => a.extend([
            "-device".into(),
            "virtio-serial-ccw,id=vser".into(),
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

/// The outcome of a boot that powered off and reported.
#[derive(Debug, Clone)]
pub struct Boot {
    pub report: Report,
    /// From spawning QEMU to its exit.
    pub elapsed: Duration,
    pub dir: PathBuf,
}

/// Boots `vmlinuz` with `initrd` on `machine`; `dir` (which must exist)
/// receives the logs. Returns once QEMU has exited, or kills it at the
/// timeout.
pub fn boot(machine: &Machine, vmlinuz: &Path, initrd: &Path, dir: &Path) -> Result<Boot, Error> {
    let watch = Watch {
        on_spawn: &mut |_| {},
        on_tick: &mut |_| {},
        cancelled: &|| false,
    };
    let (elapsed, channel) = run_to_poweroff(machine, vmlinuz, initrd, dir, watch)?;
    let report = parse_report(&channel).map_err(|detail| Error::Report {
        detail,
        console_tail: console_tail(dir),
    })?;
    tracing::info!(?elapsed, release = %report.release, "guest powered off");
    Ok(Boot {
        report,
        elapsed,
        dir: dir.to_path_buf(),
    })
}

/// Lines of the console a failed guest's error carries: a kernel panic's
/// header, registers and call trace take about 60.
const CONSOLE_TAIL_LINES: usize = 80;

/// The last lines of the console log in `dir`.
pub(crate) fn console_tail(dir: &Path) -> String {
    let text = fs::read(dir.join("console.log")).unwrap_or_default();
    super::tail(&String::from_utf8_lossy(&text), CONSOLE_TAIL_LINES)
}

/// Runs QEMU until it exits (or kills it at the timeout or when `watch`
/// says the run was cancelled); returns the time from its start to its exit
/// and the text of the report channel.
pub(crate) fn run_to_poweroff(
    machine: &Machine,
    vmlinuz: &Path,
    initrd: &Path,
    dir: &Path,
    watch: Watch<'_>,
) -> Result<(Duration, String), Error> {
    let (qemu, package) = machine.arch.qemu();
    if !Path::new(qemu).is_file() {
        return Err(Error::Step {
            step: "find QEMU",
            detail: format!("{qemu} is missing (install the Debian package {package})"),
        });
    }
    for f in ["console.log", "channel.log"] {
        let _ = fs::remove_file(dir.join(f));
    }
    let stderr = fs::File::create(dir.join("qemu.log")).map_err(|e| Error::Step {
        step: "create qemu.log",
        detail: e.to_string(),
    })?;
    let started = Instant::now();
    let mut cmd = Command::new(qemu);
    cmd.args(argv(machine, vmlinuz, initrd, dir))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    // QEMU dies with the thread that started (and waits for) it, so an
    // agent killed before it journalled the pid leaves no guest running.
    crate::executor::host::die_with_parent(&mut cmd);
    let child = cmd.spawn().map_err(|e| Error::Step {
        step: "start QEMU",
        detail: e.to_string(),
    })?;
    tracing::info!(pid = child.id(), arch = %machine.arch, accel = machine.accel.name(), kernel = %vmlinuz.display(), "guest started");
    (watch.on_spawn)(child.id());
    let mut guard = Guard { child: Some(child) };
    let status = loop {
        let child = guard.child.as_mut().expect("not reaped yet");
        match child.try_wait() {
            Ok(Some(status)) => {
                guard.child = None;
                break status;
            }
            Ok(None) => {}
            Err(e) => {
                return Err(Error::Step {
                    step: "wait for QEMU",
                    detail: e.to_string(),
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
            return Err(Error::Report {
                detail: format!(
                    "the report channel passed {} MiB; killed QEMU",
                    MAX_CHANNEL_BYTES >> 20
                ),
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
    if !status.success() {
        let stderr = fs::read_to_string(dir.join("qemu.log")).unwrap_or_default();
        return Err(Error::Exit {
            status: status.to_string(),
            stderr: super::tail(&stderr, 5),
            console_tail: console_tail(dir),
        });
    }
    let channel = fs::read(dir.join("channel.log")).unwrap_or_default();
    Ok((elapsed, String::from_utf8_lossy(&channel).into_owned()))
}

/// What the guest runner reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    pub release: String,
    pub nodes: Vec<Node>,
    pub domains_before: Vec<Domain>,
    pub domains_after: Vec<Domain>,
    pub online_before: Vec<u32>,
    /// Online CPUs while cpu1 was offline.
    pub online_offline: Vec<u32>,
    pub online_after: Vec<u32>,
    /// cpu1 went offline and came back, and nothing else changed.
    pub hotplug_ok: bool,
    /// `error` lines from the guest.
    pub errors: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub id: u32,
    pub cpus: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub cpu: u32,
    pub level: u32,
    pub name: String,
}

/// Parses the runner's lines (see [`super::initramfs::Init::Runner`]).
/// The report must start with `farm-guest 1` and end with `done`.
pub fn parse_report(text: &str) -> Result<Report, String> {
    let mut r = Report::default();
    let mut lines = text
        .lines()
        .map(|l| l.trim_end_matches('\r').trim())
        .filter(|l| !l.is_empty());
    match lines.next() {
        Some("farm-guest 1") => {}
        Some(other) => return Err(format!("unexpected first line `{other}`")),
        None => return Err("the guest reported nothing".into()),
    }
    let mut done = false;
    let num = |s: Option<&str>, what: &str, line: &str| {
        s.and_then(|s| s.parse::<u32>().ok())
            .ok_or_else(|| format!("bad {what} in `{line}`"))
    };
    for line in lines {
        if done {
            return Err(format!("`{line}` after done"));
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "release" => r.release = rest.to_string(),
            "node" => {
                let mut f = rest.split_whitespace();
                let id = num(f.next(), "node id", line)?;
                let cpus = parse_cpu_list(f.next().unwrap_or(""))
                    .map_err(|e| format!("bad cpulist in `{line}`: {e}"))?;
                r.nodes.push(Node { id, cpus });
            }
            "domain" => {
                let mut f = rest.splitn(4, ' ');
                let phase = f.next().unwrap_or("");
                let cpu = num(f.next(), "cpu", line)?;
                let level = num(f.next(), "level", line)?;
                let name = f.next().unwrap_or("").to_string();
                if name.is_empty() {
                    return Err(format!("no domain name in `{line}`"));
                }
                let d = Domain { cpu, level, name };
                match phase {
                    "before" => r.domains_before.push(d),
                    "after" => r.domains_after.push(d),
                    _ => return Err(format!("bad phase in `{line}`")),
                }
            }
            "online" => {
                let (phase, list) = rest.split_once(' ').unwrap_or((rest, ""));
                let cpus =
                    parse_cpu_list(list).map_err(|e| format!("bad cpulist in `{line}`: {e}"))?;
                match phase {
                    "before" => r.online_before = cpus,
                    "offline" => r.online_offline = cpus,
                    "after" => r.online_after = cpus,
                    _ => return Err(format!("bad phase in `{line}`")),
                }
            }
            "error" => r.errors.push(rest.to_string()),
            "done" => done = true,
            _ => return Err(format!("unknown line `{line}`")),
        }
    }
    if !done {
        return Err("the report has no `done` line (the guest stopped early)".into());
    }
    if r.release.is_empty() {
        return Err("the report has no release".into());
    }
    let without_1: Vec<u32> = r
        .online_before
        .iter()
        .copied()
        .filter(|&c| c != 1)
        .collect();
    r.hotplug_ok = r.errors.is_empty()
        && r.online_before.contains(&1)
        && r.online_offline == without_1
        && r.online_after == r.online_before;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDED: &str = "farm-guest 1\r\nrelease 6.1.0-57-cloud-amd64\r\nnode 0 0-1\r\nnode 1 2-3\r\n\
domain before 0 0 MC\r\ndomain before 0 1 NUMA\r\ndomain before 1 0 MC\r\ndomain before 1 1 NUMA\r\n\
online before 0-3\r\nonline offline 0,2-3\r\nonline after 0-3\r\n\
domain after 0 0 MC\r\ndomain after 0 1 NUMA\r\ndone\r\n";

    #[test]
    fn parses_a_recorded_report() {
        let r = parse_report(RECORDED).unwrap();
        assert_eq!(r.release, "6.1.0-57-cloud-amd64");
        assert_eq!(
            r.nodes,
            [
                Node {
                    id: 0,
                    cpus: vec![0, 1]
                },
                Node {
                    id: 1,
                    cpus: vec![2, 3]
                }
            ]
        );
        assert_eq!(r.domains_before.len(), 4);
        assert_eq!(
            r.domains_after[1],
            Domain {
                cpu: 0,
                level: 1,
                name: "NUMA".into()
            }
        );
        assert_eq!(r.online_offline, [0, 2, 3]);
        assert!(r.hotplug_ok);
    }

    #[test]
    fn a_failed_hotplug_is_not_ok() {
        let r =
            parse_report(&RECORDED.replace("online offline 0,2-3", "error cpu1 offline")).unwrap();
        assert!(!r.hotplug_ok);
        assert_eq!(r.errors, ["cpu1 offline"]);
        let r = parse_report(&RECORDED.replace("online after 0-3", "online after 0,2-3")).unwrap();
        assert!(!r.hotplug_ok);
    }

    #[test]
    fn truncated_or_foreign_reports_are_errors() {
        let cut = &RECORDED[..RECORDED.find("done").unwrap()];
        assert!(parse_report(cut).unwrap_err().contains("no `done`"));
        assert!(parse_report("").unwrap_err().contains("nothing"));
        assert!(parse_report("hello\n").unwrap_err().contains("first line"));
        assert!(
            parse_report("farm-guest 1\nnode x 0\ndone\n")
                .unwrap_err()
                .contains("node id")
        );
        assert!(
            parse_report("farm-guest 1\ndone\n")
                .unwrap_err()
                .contains("release")
        );
    }

    #[test]
    fn two_nodes_split_cpus_and_memory() {
        let m = Machine::default();
        let a = argv(&m, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
        assert!(a.contains("-accel tcg -cpu max -m 512 -smp 4"), "{a}");
        assert!(
            a.contains(
                "-object memory-backend-ram,id=m0,size=256M -numa node,nodeid=0,cpus=0-1,memdev=m0"
            ),
            "{a}"
        );
        assert!(a.contains("-numa node,nodeid=1,cpus=2-3,memdev=m1"), "{a}");
        assert!(
            a.contains("-serial file:/d/console.log -serial file:/d/channel.log"),
            "{a}"
        );
        assert!(
            a.contains("-append console=ttyS0 quiet panic=-1 sched_verbose"),
            "{a}"
        );
    }

    #[test]
    fn s390x_has_no_numa_and_a_virtio_serial_channel() {
        let m = Machine {
            arch: GuestArch::S390x,
            cpus: 2,
            nodes: 2,
            ..Machine::default()
        };
        let a = argv(&m, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
        assert!(a.starts_with("-accel tcg -m 512 -smp 2 -kernel /k"), "{a}");
        assert!(!a.contains("-numa"), "{a}");
        assert!(a.contains("console=ttysclp0"), "{a}");
        assert!(
            a.ends_with(
                "-serial file:/d/console.log -device virtio-serial-ccw,id=vser \
                 -chardev file,id=farmch,path=/d/channel.log \
                 -device virtserialport,bus=vser.0,chardev=farmch,name=farm"
            ),
            "{a}"
        );
        let kvm = Machine {
            accel: Accel::Kvm,
            ..Machine::default()
        };
        let a = argv(&kvm, Path::new("/k"), Path::new("/i"), Path::new("/d")).join(" ");
        assert!(a.starts_with("-accel kvm -cpu host "), "{a}");
    }
}
