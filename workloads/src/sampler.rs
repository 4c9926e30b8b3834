//! `farm-workload sample`: the guest runner's sampler without a fork.
//!
//! The runner's shell sampler forks a `sed` and a `grep` or two per sweep;
//! under TCG each fork costs tens of milliseconds, and the sweeps cost a
//! tenth of the CPUs they measure (`telemetry_overhead_pct` 9–12% on
//! x86_64 guests). This program reads the same files itself and writes the
//! same lines on stdout (the runner points it at the report channel):
//!
//! | line | from |
//! |---|---|
//! | `sample <uptime>` | `/proc/uptime`'s first field, at the start of each sweep |
//! | `task <line>` | `/proc/P/task/T/stat` of each thread of the session |
//! | `mig /proc/P/task/T/sched:se.nr_migrations : N` | that thread's `sched` |
//! | `rq /proc/P/task/T/schedstat:<run> <wait> <slices>` | that thread's `schedstat` |
//! | `cpu <line>` | each `cpu` line of `/proc/stat` |
//! | `sampler <u> <s> 0m0.000s 0m0.000s` | its own CPU time when it stops, in `times`' form |
//!
//! Only the workload's session is read (the shell sampler read every task
//! of the guest and left the host to pick): a process of another session
//! is remembered by pid and never read again. It stops at the sweep after
//! `--stop`'s file appears. A file that vanishes meanwhile (a thread that
//! exited) is skipped, as the shell's `2>/dev/null` did.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// The sampler's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub session: u32,
    pub interval: Duration,
    pub stop: String,
}

/// The shortest and longest interval taken.
pub const MIN_INTERVAL_MS: u64 = 10;
pub const MAX_INTERVAL_MS: u64 = 10_000;

/// Field 6 of a `stat` line, the session, counted after the comm's `)`.
fn session_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(3)?.parse().ok()
}

/// One thread's migrations line of its `sched` file, if it has one.
fn migrations(sched: &str) -> Option<&str> {
    sched
        .lines()
        .find(|l| l.starts_with("se.nr_migrations"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, n)| n.trim())
}

/// The numeric entries of `dir`.
fn numbered(dir: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// `times`' form of a duration: `0m1.230s`.
fn times_form(d: Duration) -> String {
    let ms = d.as_millis();
    format!("{}m{}.{:03}s", ms / 60_000, ms / 1000 % 60, ms % 1000)
}

/// This process's CPU time: the first field of its `schedstat` (it is
/// single-threaded), nanoseconds on a CPU.
fn own_cpu(root: &Path) -> Duration {
    fs::read_to_string(root.join("proc/self/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map(Duration::from_nanos)
        .unwrap_or_default()
}

/// One sweep's lines into `out`; `others` are pids known to be of another
/// session.
fn sweep(root: &Path, session: u32, others: &mut HashSet<u32>, out: &mut String) {
    let proc = root.join("proc");
    if let Ok(up) = fs::read_to_string(proc.join("uptime"))
        && let Some(first) = up.split_whitespace().next()
    {
        let _ = writeln!(out, "sample {first}");
    }
    for pid in numbered(&proc) {
        if others.contains(&pid) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(proc.join(format!("{pid}/stat"))) else {
            continue;
        };
        if session_of(&stat) != Some(session) {
            others.insert(pid);
            continue;
        }
        for tid in numbered(&proc.join(format!("{pid}/task"))) {
            let dir = format!("/proc/{pid}/task/{tid}");
            let file = |name: &str| fs::read_to_string(root.join(&dir[1..]).join(name)).ok();
            let Some(stat) = file("stat") else {
                continue;
            };
            let _ = writeln!(out, "task {}", stat.trim_end());
            if let Some(n) = file("sched").as_deref().and_then(migrations) {
                let _ = writeln!(out, "mig {dir}/sched:se.nr_migrations : {n}");
            }
            if let Some(s) = file("schedstat") {
                let _ = writeln!(out, "rq {dir}/schedstat:{}", s.trim_end());
            }
        }
    }
    if let Ok(stat) = fs::read_to_string(proc.join("stat")) {
        for line in stat.lines().filter(|l| l.starts_with("cpu")) {
            let _ = writeln!(out, "cpu {line}");
        }
    }
}

/// Sweeps `root`'s `/proc` every interval until the stop file appears,
/// then reports its own cost.
pub fn run(root: &Path, o: &Options, w: &mut dyn Write) -> io::Result<()> {
    let mut others = HashSet::new();
    let mut out = String::new();
    let mut next = Instant::now();
    loop {
        out.clear();
        sweep(root, o.session, &mut others, &mut out);
        // One write a sweep: lines of a sweep never interleave with others'.
        w.write_all(out.as_bytes())?;
        w.flush()?;
        if root.join(o.stop.trim_start_matches('/')).exists() {
            break;
        }
        next += o.interval;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let cpu = own_cpu(root);
    writeln!(w, "sampler {} 0m0.000s 0m0.000s 0m0.000s", times_form(cpu))?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_session_and_skips_the_rest() {
        let root = tempfile_root();
        let mut out = Vec::new();
        let o = Options {
            session: 40,
            interval: Duration::from_millis(10),
            stop: "/tmp/stop".into(),
        };
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::write(root.join("tmp/stop"), "").unwrap();
        run(&root, &o, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "sample 12.34",
                "task 41 (hog) R 40 40 40 0",
                "mig /proc/41/task/41/sched:se.nr_migrations : 7",
                "rq /proc/41/task/41/schedstat:100 200 3",
                "cpu cpu  1 2 3 4",
                "cpu cpu0 1 2 3 4",
                "sampler 0m0.000s 0m0.000s 0m0.000s 0m0.000s",
            ]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn times_form_is_the_shells() {
        assert_eq!(times_form(Duration::from_millis(61_230)), "1m1.230s");
        assert_eq!(times_form(Duration::from_micros(999)), "0m0.000s");
    }

    /// A fake root: the workload (session 40, pid 41) and the runner (pid 1,
    /// session 0).
    fn tempfile_root() -> std::path::PathBuf {
        let root = std::env::temp_dir().join(format!("farm-sampler-{}", std::process::id()));
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, s).unwrap();
        };
        w("proc/uptime", "12.34 40.00\n");
        w("proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 5\nctxt 9\n");
        w("proc/1/stat", "1 (init) S 0 0 0 0\n");
        w("proc/1/task/1/stat", "1 (init) S 0 0 0 0\n");
        w("proc/41/stat", "41 (hog) R 40 40 40 0\n");
        w("proc/41/task/41/stat", "41 (hog) R 40 40 40 0\n");
        w(
            "proc/41/task/41/sched",
            "hog (41, #threads: 1)\nse.exec_start : 1.0\nse.nr_migrations                             :                    7\n",
        );
        w("proc/41/task/41/schedstat", "100 200 3\n");
        root
    }
}
