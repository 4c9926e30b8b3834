//! What the host and the runner say to each other: the files the host
//! writes into the image (`/job`: the argv one argument a line, program
//! first; `/state`: the machine state as words and numbers), each checked
//! here before it is written (no newline, no NUL, a small character set),
//! and the lines the runner reports, parsed into a [`GuestRun`].

use std::path::{Component, Path};
use std::time::Duration;

use super::telemetry::{LineError, Observed};

pub use crate::executor::guest::image::GUEST_BINARY;

/// Why the runner's report cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("the guest reported nothing")]
    Nothing,
    #[error("unexpected first line `{0}`")]
    FirstLine(String),
    #[error("`{0}` after done")]
    AfterDone(String),
    #[error("malformed domain line `{0}`")]
    Domain(String),
    /// The runner's `error` line: a state it could not apply.
    #[error("the guest could not {0}")]
    Guest(String),
    #[error("bad exit code in `{0}`")]
    ExitCode(String),
    #[error("bad wall time in `{0}`")]
    WallTime(String),
    #[error(transparent)]
    Telemetry(#[from] LineError),
    #[error("unknown line `{0}`")]
    Unknown(String),
    #[error("the report has no `done` line (the guest stopped early)")]
    NoDone,
    #[error("the report has no {0}")]
    Missing(&'static str),
}

/// Why a job cannot be written for the runner.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "guest job: argument `{0}` refused: only A-Z a-z 0-9 and _ . = + - , : / @ % are allowed"
    )]
    Argument(String),
    #[error("guest job: program `{0}` refused: it must be an absolute path without `..`")]
    Program(String),
}

/// A machine state to apply inside the guest before the workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestState {
    /// CPUs to take offline and bring back (`cycle:`).
    pub cycle: Vec<u32>,
    /// CPUs to keep offline during the run (`offline:`).
    pub offline: Vec<u32>,
    /// `kernel.sched_autogroup_enabled`.
    pub autogroup: Option<bool>,
    /// Run the workload in a cgroup (cgroup2, mounted by the runner) of its own.
    pub cgroup: bool,
    /// `cpu.weight` of that cgroup.
    pub cpu_weight: Option<u32>,
    /// `cpu.max` of that cgroup: quota and period in µs.
    pub cpu_max: Option<(u64, u64)>,
    /// `cpuset.cpus` of that cgroup.
    pub cpuset: Vec<u32>,
    /// Sched feature toggles, `NAME` or `NO_NAME` (A-Z, 0-9, _ only:
    /// `farm_spec::sched::SchedFeature`).
    pub features: Vec<farm_spec::sched::SchedFeature>,
    /// Debugfs tunables (the farm's closed set of names) and their values.
    pub tunables: Vec<(farm_spec::Tunable, u64)>,
    /// `kernel.numa_balancing`.
    pub numa_balancing: Option<u32>,
    /// Words for the kernel's command line (QEMU's `-append`), not `/state`.
    pub cmdline: Vec<String>,
}

impl GuestState {
    /// The runner's `/state` file: a word and numbers a line (a CPU list is
    /// digits, commas and dashes; a feature is A-Z, 0-9 and _, a tunable one
    /// of the farm's names), so nothing in it can be more than a word to
    /// the shell that reads it. The cgroup line comes before its
    /// limits, which the runner writes into the cgroup it made.
    pub fn file(&self) -> String {
        let mut out = String::new();
        for c in &self.cycle {
            out.push_str(&format!("cycle {c}\n"));
        }
        for c in &self.offline {
            out.push_str(&format!("offline {c}\n"));
        }
        if let Some(a) = self.autogroup {
            out.push_str(&format!("autogroup {}\n", u8::from(a)));
        }
        if self.cgroup {
            out.push_str("cgroup 1\n");
            if let Some(w) = self.cpu_weight {
                out.push_str(&format!("cpu_weight {w}\n"));
            }
            if let Some((q, p)) = self.cpu_max {
                out.push_str(&format!("cpu_max {q} {p}\n"));
            }
            if !self.cpuset.is_empty() {
                out.push_str(&format!(
                    "cpuset {}\n",
                    farm_spec::CpuSet::from_cpus(self.cpuset.iter().copied())
                ));
            }
        }
        for f in &self.features {
            out.push_str(&format!("feature {f}\n"));
        }
        for (t, v) in &self.tunables {
            out.push_str(&format!("tunable {t} {v}\n"));
        }
        if let Some(n) = self.numa_balancing {
            out.push_str(&format!("numa_balancing {n}\n"));
        }
        out
    }
}

/// A validated argv: an absolute program path in the guest, then arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    program: String,
    args: Vec<String>,
}

impl Job {
    /// `program` and its arguments, each checked ([`validate_arg`]).
    pub fn new(program: &str, args: Vec<String>) -> Result<Job, Error> {
        let ok = program.starts_with('/')
            && validate_arg(program).is_ok()
            && Path::new(program)
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !ok {
            return Err(Error::Program(program.to_string()));
        }
        for a in &args {
            validate_arg(a)?;
        }
        Ok(Job {
            program: program.to_string(),
            args,
        })
    }

    /// `farm-workload <workload> --param k=v ...`.
    pub fn built_in(workload: &str, params: &[(&str, &str)]) -> Result<Job, Error> {
        let mut args = vec![workload.to_string()];
        for (k, v) in params {
            args.push("--param".into());
            args.push(format!("{k}={v}"));
        }
        Job::new(GUEST_BINARY, args)
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The text of `/job`: the program, then one argument a line.
    pub fn file(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| format!("{a}\n"))
            .collect()
    }
}

/// Refuses an argument that does not match `^[A-Za-z0-9_.=+,:/@%-]+$`: the
/// runner reads arguments a line each and never evaluates them, so only a
/// newline could do harm; the narrow set keeps it that way if the runner
/// ever changes.
pub fn validate_arg(arg: &str) -> Result<(), Error> {
    let ok = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.=+-,:/@%".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::Argument(arg.to_string()))
    }
}

/// The most `knob` lines a report may hold: one per tunable, features and
/// NUMA balancing.
const MAX_KNOB_LINES: usize = 16;

/// A line quoted in an error, cut to a readable length.
fn cut(line: &str) -> String {
    farm_spec::excerpt(line)
}

/// What a job in a guest returned.
#[derive(Debug)]
pub struct GuestRun {
    pub release: String,
    /// Sched domain names per CPU, in level order, before and after the
    /// state was applied (empty without `sched_verbose` debugfs).
    pub domains_before: std::collections::BTreeMap<u32, Vec<String>>,
    pub domains_after: std::collections::BTreeMap<u32, Vec<String>>,
    /// CPUs online once the state was applied.
    pub online: String,
    /// The scheduler knobs as the guest's kernel shows them once the state
    /// was applied (`knob <name> <value>`: `features` is the whole file).
    pub knobs: std::collections::BTreeMap<String, String>,
    /// The guest kernel's `/proc/cmdline`.
    pub cmdline: String,
    pub exit_code: i32,
    /// The workload's wall time by the guest's /proc/uptime.
    pub wall_s: f64,
    /// The workload's stdout, and the tail of its stderr.
    pub stdout: String,
    pub stderr: String,
    /// Nodes, counters and sweeps, for [`super::telemetry::build`].
    pub observed: Observed,
    pub console_tail: String,
    /// From starting QEMU to its exit.
    pub elapsed: Duration,
    /// From starting QEMU to the runner's `begin` line, written just before
    /// it starts the workload (polled every 50 ms): boot plus state.
    pub begin_after: Option<Duration>,
}

/// Parses the job runner's lines (see [`RUNNER`](super::RUNNER)). Unknown lines and a
/// missing `release`, `exit`, `wall_s` or `done` are errors naming the line;
/// the telemetry lines go to [`Observed`], which checks them.
/// Whether a report that ends in `tail` is complete: its last line is
/// `done`, which only the runner writes (the workload's lines are prefixed),
/// and nothing may follow.
pub fn is_complete(tail: &[u8]) -> bool {
    tail.ends_with(b"\ndone\n") || tail.ends_with(b"\ndone\r\n")
}

pub fn parse_run(text: &str) -> Result<GuestRun, ReportError> {
    let mut lines = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty());
    match lines.next().map(str::trim) {
        Some("farm-job 2") => {}
        Some(other) => return Err(ReportError::FirstLine(other.to_string())),
        None => return Err(ReportError::Nothing),
    }
    let mut release = None;
    let mut domains_before: std::collections::BTreeMap<u32, Vec<(usize, String)>> =
        Default::default();
    let mut domains_after = domains_before.clone();
    let mut online = String::new();
    let mut knobs = std::collections::BTreeMap::new();
    let mut cmdline = String::new();
    let mut exit_code = None;
    let mut wall_s = None;
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut observed = Observed::default();
    let mut done = false;
    for line in lines {
        if done {
            return Err(ReportError::AfterDone(line.to_string()));
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "release" if !rest.trim().is_empty() => release = Some(rest.trim().to_string()),
            "begin" | "end" => {}
            "domain" => {
                // `domain <before|after> <cpu> <level> <name>`
                let f: Vec<&str> = rest.split_whitespace().collect();
                let (Some(phase), Some(cpu), Some(level), Some(name), None) = (
                    f.first(),
                    f.get(1).and_then(|c| c.parse::<u32>().ok()),
                    f.get(2).and_then(|l| l.parse::<usize>().ok()),
                    f.get(3),
                    f.get(4),
                ) else {
                    return Err(ReportError::Domain(line.to_string()));
                };
                let map = match *phase {
                    "before" => &mut domains_before,
                    "after" => &mut domains_after,
                    _ => return Err(ReportError::Domain(line.to_string())),
                };
                let levels: &mut Vec<(usize, String)> = map.entry(cpu).or_default();
                levels.push((level, name.to_string()));
            }
            "online" => online = rest.trim().to_string(),
            "cmdline" => cmdline = rest.trim().to_string(),
            "knob" => {
                let (name, value) = rest.split_once(' ').unwrap_or((rest, ""));
                if name.is_empty() || knobs.len() >= MAX_KNOB_LINES {
                    return Err(ReportError::Unknown(cut(line)));
                }
                knobs.insert(name.to_string(), value.trim().to_string());
            }
            "error" => return Err(ReportError::Guest(rest.trim().to_string())),
            "out" => {
                stdout.push_str(rest);
                stdout.push('\n');
            }
            "err" => {
                stderr.push_str(rest);
                stderr.push('\n');
            }
            "exit" => {
                exit_code = Some(
                    rest.trim()
                        .parse::<i32>()
                        .map_err(|_| ReportError::ExitCode(line.to_string()))?,
                )
            }
            "wall_s" => {
                let v = rest
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| ReportError::WallTime(line.to_string()))?;
                wall_s = Some(v);
            }
            "done" => done = true,
            _ => {
                if !observed.line(kind, rest)? {
                    return Err(ReportError::Unknown(line.to_string()));
                }
            }
        }
    }
    if !done {
        return Err(ReportError::NoDone);
    }
    let by_level = |m: std::collections::BTreeMap<u32, Vec<(usize, String)>>| {
        m.into_iter()
            .map(|(cpu, mut levels)| {
                levels.sort();
                (cpu, levels.into_iter().map(|(_, n)| n).collect())
            })
            .collect()
    };
    Ok(GuestRun {
        release: release.ok_or(ReportError::Missing("release"))?,
        domains_before: by_level(domains_before),
        domains_after: by_level(domains_after),
        online,
        knobs,
        cmdline,
        exit_code: exit_code.ok_or(ReportError::Missing("exit code"))?,
        wall_s: wall_s.ok_or(ReportError::Missing("wall_s"))?,
        stdout,
        stderr,
        observed,
        console_tail: String::new(),
        elapsed: Duration::ZERO,
        begin_after: None,
    })
}

#[cfg(test)]
mod tests;
