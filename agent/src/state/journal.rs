//! The restore journal: every machine change is written here, with the value
//! it replaces, and fsynced *before* the change is made. Undoing the journal
//! in reverse order puts the machine back as it was — after a normal run, and
//! after a crash at any instant, when the agent starts again.
//!
//! One entry per line:
//!
//! ```text
//! cpu-online 1 1                       cpu1's online file read 1 before we wrote it
//! sysctl kernel/sched_autogroup_enabled 1
//! cgroup /sys/fs/cgroup/cpu/farm/r42/workload      a directory we created
//! subtree-control /sys/fs/cgroup cpu  a cgroup2 controller we enabled
//! process 4242 123456                 a process we started (pid, start time)
//! sched-feature RUN_TO_PARITY 1       a debugfs feature toggle and whether it was on
//! sched-tunable base_slice_ns 3000000 a debugfs tunable and its value
//! ```
//!
//! Undo steps are idempotent, so a crash while restoring is repaired by
//! restoring again. The journal is local and written only by the agent, but
//! its paths are still checked on replay: only CPU online files, a short list
//! of sysctls, the scheduler's debugfs features and the farm's tunables
//! (`farm_spec` names) and cgroups under `.../farm/` are ever touched.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tracing::{info, warn};

/// Sysctls a journal may restore; anything else in a journal is refused.
pub const SYSCTLS: &[&str] = &[
    "kernel/sched_autogroup_enabled",
    "kernel/numa_balancing",
    "kernel/sched_schedstats",
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: io::Error },
    #[error("{}:{line}: bad journal entry {text:?}: {why}", path.display())]
    Parse {
        path: PathBuf,
        line: usize,
        text: String,
        why: &'static str,
    },
    #[error("restoring {entry}: {why}")]
    Undo { entry: String, why: String },
    /// `why` is not a `#[source]`: the message already holds its text, and
    /// an error chain (anyhow's `Caused by`) would print it twice.
    #[error("restoring {entry}: {why}")]
    Cgroup { entry: String, why: CgroupError },
}

/// Why one of our cgroups could not be removed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("{}: processes {pids:?} will not die", path.display())]
    WillNotDie { path: PathBuf, pids: Vec<i32> },
    #[error("{}: {source}", path.display())]
    Remove {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    CpuOnline {
        cpu: u32,
        was: bool,
    },
    Sysctl {
        key: String,
        was: String,
    },
    Cgroup {
        path: PathBuf,
    },
    SubtreeControl {
        path: PathBuf,
        controller: String,
    },
    Process {
        pid: i32,
        start_time: u64,
    },
    SchedFeature {
        feature: farm_spec::sched::SchedFeature,
    },
    SchedTunable {
        tunable: farm_spec::Tunable,
        was: u64,
    },
}

impl Entry {
    fn to_line(&self) -> String {
        match self {
            Entry::CpuOnline { cpu, was } => format!("cpu-online {cpu} {}", u8::from(*was)),
            Entry::Sysctl { key, was } => format!("sysctl {key} {was}"),
            Entry::Cgroup { path } => format!("cgroup {}", path.display()),
            Entry::SubtreeControl { path, controller } => {
                format!("subtree-control {} {controller}", path.display())
            }
            Entry::Process { pid, start_time } => format!("process {pid} {start_time}"),
            Entry::SchedFeature { feature } => {
                format!(
                    "sched-feature {} {}",
                    feature.name(),
                    u8::from(feature.on())
                )
            }
            Entry::SchedTunable { tunable, was } => format!("sched-tunable {tunable} {was}"),
        }
    }

    /// Parses one line; `None` with a reason when it is not a valid entry.
    pub fn parse(line: &str) -> Result<Entry, &'static str> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| s.parse::<u64>().map_err(|_| "not a number");
        match f.as_slice() {
            ["cpu-online", cpu, was] => Ok(Entry::CpuOnline {
                cpu: u32::try_from(num(cpu)?).map_err(|_| "cpu out of range")?,
                was: match *was {
                    "0" => false,
                    "1" => true,
                    _ => return Err("online must be 0 or 1"),
                },
            }),
            ["sysctl", key, was] => {
                if !SYSCTLS.contains(key) {
                    return Err("sysctl not in the allowed list");
                }
                Ok(Entry::Sysctl {
                    key: key.to_string(),
                    was: was.to_string(),
                })
            }
            ["cgroup", path] => {
                let path = PathBuf::from(path);
                check_cgroup_path(&path)?;
                Ok(Entry::Cgroup { path })
            }
            ["subtree-control", path, controller] => {
                if !path.starts_with('/') || path.contains("..") || !path.contains("/sys/fs/cgroup")
                {
                    return Err("subtree-control path outside the cgroup tree");
                }
                if !matches!(*controller, "cpu" | "cpuset") {
                    return Err("unknown controller");
                }
                Ok(Entry::SubtreeControl {
                    path: path.into(),
                    controller: controller.to_string(),
                })
            }
            ["process", pid, start] => Ok(Entry::Process {
                pid: i32::try_from(num(pid)?).map_err(|_| "pid out of range")?,
                start_time: num(start)?,
            }),
            ["sched-feature", name, on] => {
                let on = match *on {
                    "0" => false,
                    "1" => true,
                    _ => return Err("a feature is 0 or 1"),
                };
                Ok(Entry::SchedFeature {
                    feature: farm_spec::sched::SchedFeature::new(name, on)
                        .map_err(|_| "not a sched feature name")?,
                })
            }
            ["sched-tunable", name, was] => Ok(Entry::SchedTunable {
                tunable: name.parse().map_err(|_| "not one of the farm's tunables")?,
                was: num(was)?,
            }),
            _ => Err("unknown entry"),
        }
    }
}

fn check_cgroup_path(path: &Path) -> Result<(), &'static str> {
    use std::path::Component;
    let s = path.to_string_lossy();
    let parent_dir = path.components().any(|c| c == Component::ParentDir);
    let farm = path.components().any(|c| c.as_os_str() == "farm");
    if !path.is_absolute() || parent_dir || !s.contains("/sys/fs/cgroup/") || !farm {
        return Err("cgroup path is not one of ours (…/sys/fs/cgroup/…/farm/…)");
    }
    Ok(())
}

/// A test hook: with `FARM_AGENT_CRASH_AT=N` the agent kills itself with
/// SIGKILL at its N-th step of applying or restoring state, so a test can
/// crash it at every step in turn.
static STEPS: AtomicU64 = AtomicU64::new(0);

pub fn step(what: &str) {
    let n = STEPS.fetch_add(1, Ordering::SeqCst) + 1;
    let crash_at = std::env::var("FARM_AGENT_CRASH_AT")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    if crash_at == Some(n) {
        warn!(
            step = n,
            what, "FARM_AGENT_CRASH_AT reached: killing myself"
        );
        let _ = nix::sys::signal::raise(Signal::SIGKILL);
    }
}

pub struct Journal {
    path: PathBuf,
    file: File,
    /// Root of /sys and /proc, so tests can run against a fake tree.
    root: PathBuf,
}

impl Journal {
    pub fn open(path: &Path, root: &Path) -> Result<Journal> {
        let io = |source| Error::Io {
            path: path.into(),
            source,
        };
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io)?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .read(true)
            .open(path)
            .map_err(io)?;
        Ok(Journal {
            path: path.into(),
            file,
            root: root.into(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Makes `entry` durable; the change it describes may be made after this returns.
    pub fn record(&mut self, entry: &Entry) -> Result<()> {
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        writeln!(self.file, "{}", entry.to_line()).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        step("journal entry written");
        Ok(())
    }

    pub fn entries(&self) -> Result<Vec<Entry>> {
        let text = fs::read_to_string(&self.path).map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            // A line cut short by a crash mid-write is the last one and
            // describes a change that was never made: it is safe to skip.
            let last = i + 1 == text.lines().count();
            match Entry::parse(line) {
                Ok(e) => out.push(e),
                Err(why) if last && !text.ends_with('\n') => {
                    warn!(line = i + 1, why, "ignoring a torn last journal line");
                }
                Err(why) => {
                    return Err(Error::Parse {
                        path: self.path.clone(),
                        line: i + 1,
                        text: line.into(),
                        why,
                    });
                }
            }
        }
        Ok(out)
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.entries()?.is_empty())
    }

    /// Undoes every entry, newest first, then empties the journal. Every
    /// step is attempted even when one fails; the first failure is returned
    /// and the journal kept, so the next start tries again.
    pub fn restore(&mut self) -> Result<usize> {
        let entries = self.entries()?;
        let mut first_err = None;
        for e in entries.iter().rev() {
            if let Err(err) = undo(&self.root, e) {
                warn!("{err}");
                first_err.get_or_insert(err);
            }
            step("journal entry undone");
        }
        if let Some(e) = first_err {
            return Err(e);
        }
        let io = |source| Error::Io {
            path: self.path.clone(),
            source,
        };
        self.file.set_len(0).map_err(io)?;
        self.file.sync_all().map_err(io)?;
        if !entries.is_empty() {
            info!(entries = entries.len(), "machine state restored");
        }
        Ok(entries.len())
    }
}

pub fn cpu_online_path(root: &Path, cpu: u32) -> PathBuf {
    root.join(format!("sys/devices/system/cpu/cpu{cpu}/online"))
}

pub fn sysctl_path(root: &Path, key: &str) -> PathBuf {
    root.join("proc/sys").join(key)
}

/// `/sys/kernel/debug/sched/features` under `root`.
pub fn sched_features_path(root: &Path) -> PathBuf {
    root.join("sys/kernel/debug/sched/features")
}

/// A tunable's file under `root`.
pub fn sched_tunable_path(root: &Path, t: farm_spec::Tunable) -> PathBuf {
    root.join("sys/kernel/debug/sched").join(t.as_str())
}

/// The start time (field 22 of /proc/PID/stat), which tells a process from a
/// later one that reused its pid.
pub fn process_start_time(root: &Path, pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(root.join(format!("proc/{pid}/stat"))).ok()?;
    // comm may hold spaces and parentheses: fields resume after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn undo(root: &Path, e: &Entry) -> Result<()> {
    let fail = |why: String| Error::Undo {
        entry: e.to_line(),
        why,
    };
    match e {
        Entry::CpuOnline { cpu, was } => {
            let path = cpu_online_path(root, *cpu);
            let want = if *was { "1" } else { "0" };
            let now = fs::read_to_string(&path)
                .map_err(|err| fail(format!("{}: {err}", path.display())))?;
            if now.trim() != want {
                fs::write(&path, want).map_err(|err| fail(format!("{}: {err}", path.display())))?;
            }
        }
        Entry::Sysctl { key, was } => {
            let path = sysctl_path(root, key);
            fs::write(&path, was).map_err(|err| fail(format!("{}: {err}", path.display())))?;
        }
        Entry::Process { pid, start_time } => {
            if process_start_time(root, *pid) == Some(*start_time) {
                // Its whole session/group: loads may have children.
                let _ = nix::sys::signal::killpg(Pid::from_raw(*pid), Signal::SIGKILL);
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
        }
        Entry::Cgroup { path } => remove_cgroup(path).map_err(|why| Error::Cgroup {
            entry: e.to_line(),
            why,
        })?,
        Entry::SchedFeature { feature } => {
            // Written as the kernel takes it: `NAME` or `NO_NAME`.
            let path = sched_features_path(root);
            fs::write(&path, feature.to_string())
                .map_err(|err| fail(format!("{}: {err}", path.display())))?;
        }
        Entry::SchedTunable { tunable, was } => {
            let path = sched_tunable_path(root, *tunable);
            fs::write(&path, was.to_string())
                .map_err(|err| fail(format!("{}: {err}", path.display())))?;
        }
        Entry::SubtreeControl { path, controller } => {
            let file = path.join("cgroup.subtree_control");
            fs::write(&file, format!("-{controller}"))
                .map_err(|err| fail(format!("{}: {err}", file.display())))?;
        }
    }
    Ok(())
}

/// Kills whatever is left in one of our cgroups and removes it.
pub fn remove_cgroup(path: &Path) -> Result<(), CgroupError> {
    if !path.exists() {
        return Ok(());
    }
    let procs = path.join("cgroup.procs");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids: Vec<i32> = fs::read_to_string(&procs)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.is_empty() {
            break;
        }
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        if Instant::now() > deadline {
            return Err(CgroupError::WillNotDie {
                path: path.to_path_buf(),
                pids,
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Removal can fail with EBUSY for a moment after the last task exits.
    loop {
        match fs::remove_dir(path) {
            Ok(()) => break,
            Err(e) if e.kind() == io::ErrorKind::NotFound => break,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(source) => {
                return Err(CgroupError::Remove {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
    // Our parents (…/farm/<run>, …/farm) go too once empty; others' are kept.
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d.file_name().is_none_or(|n| n == "cgroup") || !d.to_string_lossy().contains("/farm") {
            break;
        }
        if fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests;
