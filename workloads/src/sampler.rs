//! `farm-workload --sample`: the guest runner's sampler without a fork.
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
//! | `task <line>` | `/proc/P/task/T/stat` of each thread of the session, cut after field 39 |
//! | `mig /proc/P/task/T/sched:se.nr_migrations : N` | that thread's `sched`, every tenth sweep |
//! | `rq /proc/P/task/T/schedstat:<run> <wait> <slices>` | that thread's `schedstat` |
//! | `cpu <line>` | each `cpu` line of `/proc/stat` |
//! | `sampler <u> <s> 0m0.000s 0m0.000s` | its own CPU time when it stops, in `times`' form |
//!
//! Only the workload's session is read (the shell sampler read every task
//! of the guest and left the host to pick): a process of another session
//! is remembered by pid and never read again. `mig` lines come every tenth
//! sweep (the counter is cumulative). Like the host's sampler it keeps to
//! a budget of 0.4% of the workload's CPU time, by spacing its sweeps
//! (never closer than `--interval-ms`, never further than 2 s). It stops at
//! the sweep after `--stop`'s file appears. Given `--session-from FIFO`, it
//! starts before the workload, pays its start-up then, and counts its cost
//! from the moment the runner writes the session id. A file that vanishes
//! meanwhile (a thread that exited) is skipped, as the shell's
//! `2>/dev/null` did.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// The sampler's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub session: Session,
    pub interval: Duration,
    pub stop: String,
}

/// Whose threads to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Session {
    /// This session id.
    Id(u32),
    /// The id read from this file (a FIFO the runner writes once the
    /// workload started): the sampler starts, and pays its start-up, before
    /// the workload does, and counts its cost from then on.
    From(String),
}

/// The longest a session id read from a file may be.
const MAX_SESSION_TEXT: usize = 32;

fn session_id(root: &Path, s: &Session) -> io::Result<u32> {
    match s {
        Session::Id(id) => Ok(*id),
        Session::From(path) => {
            let text = fs::read_to_string(root.join(path.trim_start_matches('/')))?;
            text.trim()
                .get(..text.trim().len().min(MAX_SESSION_TEXT))
                .and_then(|t| t.parse().ok())
                .ok_or_else(|| io::Error::other(format!("{path}: not a session id")))
        }
    }
}

/// The shortest and longest interval taken.
pub const MIN_INTERVAL_MS: u64 = 10;
pub const MAX_INTERVAL_MS: u64 = 10_000;

/// Field 6 of a `stat` line, the session, counted after the comm's `)`.
fn session_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(3)?.parse().ok()
}

/// A `stat` line up to field 39 (processor), the last the host reads: the
/// other 13 fields are a quarter of the bytes every sweep sends over the
/// report channel, a serial port whose every byte costs the guest.
fn through_processor(stat: &str) -> &str {
    let stat = stat.trim_end();
    let Some(close) = stat.rfind(')') else {
        return stat;
    };
    // After the comm, field n is the (n - 2)th word: field 39 the 37th.
    let mut words = 0;
    let mut in_word = false;
    for (i, b) in stat.bytes().enumerate().skip(close + 1) {
        let space = b == b' ';
        if !space && !in_word {
            words += 1;
        }
        if space && in_word && words == 37 {
            return &stat[..i];
        }
        in_word = !space;
    }
    stat
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

/// `/proc/uptime`'s first field as written (`12.34`), and in centiseconds.
fn uptime(root: &Path) -> Option<(String, u64)> {
    let text = fs::read_to_string(root.join("proc/uptime")).ok()?;
    let first = text.split_whitespace().next()?;
    let (s, frac) = first.split_once('.')?;
    let cs = s.parse::<u64>().ok()? * 100 + frac.get(..2)?.parse::<u64>().ok()?;
    Some((first.to_owned(), cs))
}

/// The sampler's CPU time may be at most this fraction of the workload's,
/// as on hosts: sweeps are spaced further apart (up to [`MAX_STRETCH_MS`])
/// when one costs more than that.
const BUDGET: f64 = 0.004;
/// The longest the budget stretches the interval to.
const MAX_STRETCH_MS: u64 = 2000;
/// `se.nr_migrations` is cumulative and its `sched` file the dearest to
/// read (the kernel formats ~50 fields): read every this many sweeps.
const MIGRATIONS_EVERY: u64 = 10;

/// The sweeps' state: which pids are the session's and which are not, and
/// an open handle per thread's `stat` and `schedstat`, re-read with
/// `pread` (one system call, where open, read and close are three; under
/// TCG every one counts).
#[derive(Default)]
struct Sweeper {
    others: HashSet<u32>,
    ours: HashSet<u32>,
    files: std::collections::HashMap<(u32, &'static str), fs::File>,
    sweeps: u64,
    buf: Vec<u8>,
}

impl Sweeper {
    /// The text of `/proc/<pid>/task/<tid>/<name>` through a kept handle.
    fn read(&mut self, root: &Path, pid: u32, tid: u32, name: &'static str) -> Option<String> {
        use std::collections::hash_map::Entry;
        use std::os::unix::fs::FileExt;
        let file = match self.files.entry((tid, name)) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                e.insert(fs::File::open(root.join(format!("proc/{pid}/task/{tid}/{name}"))).ok()?)
            }
        };
        self.buf.resize(4096, 0);
        let n = file.read_at(&mut self.buf, 0).ok()?;
        if n == 0 {
            self.files.remove(&(tid, name));
            return None;
        }
        String::from_utf8(self.buf[..n].to_vec()).ok()
    }

    /// One sweep's lines into `out`, stamped `up`; the session's CPU time
    /// so far (its threads' `schedstat` run time, ns).
    fn sweep(&mut self, root: &Path, up: &str, session: u32, out: &mut String) -> u64 {
        let proc = root.join("proc");
        let _ = writeln!(out, "sample {up}");
        let migrations_now = self.sweeps.is_multiple_of(MIGRATIONS_EVERY);
        self.sweeps += 1;
        let mut run_ns = 0;
        let pids = numbered(&proc);
        let mut alive = HashSet::new();
        for pid in pids {
            if self.others.contains(&pid) {
                continue;
            }
            if !self.ours.contains(&pid) {
                let Ok(stat) = fs::read_to_string(proc.join(format!("{pid}/stat"))) else {
                    continue;
                };
                if session_of(&stat) != Some(session) {
                    self.others.insert(pid);
                    continue;
                }
                self.ours.insert(pid);
            }
            for tid in numbered(&proc.join(format!("{pid}/task"))) {
                let Some(stat) = self.read(root, pid, tid, "stat") else {
                    continue;
                };
                alive.insert(tid);
                let _ = writeln!(out, "task {}", through_processor(&stat));
                let dir = format!("/proc/{pid}/task/{tid}");
                if migrations_now
                    && let Ok(sched) = fs::read_to_string(root.join(&dir[1..]).join("sched"))
                    && let Some(n) = migrations(&sched)
                {
                    let _ = writeln!(out, "mig {dir}/sched:se.nr_migrations : {n}");
                }
                if let Some(s) = self.read(root, pid, tid, "schedstat") {
                    run_ns += s
                        .split_whitespace()
                        .next()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    let _ = writeln!(out, "rq {dir}/schedstat:{}", s.trim_end());
                }
            }
        }
        // Handles of threads that are gone would pin their /proc entries.
        self.files.retain(|(tid, _), _| alive.contains(tid));
        if let Ok(stat) = fs::read_to_string(proc.join("stat")) {
            for line in stat.lines().filter(|l| l.starts_with("cpu")) {
                let _ = writeln!(out, "cpu {line}");
            }
        }
        run_ns
    }
}

/// Sweeps `root`'s `/proc` every interval (stretched by the budget) until
/// the stop file appears, then reports its own cost.
pub fn run(root: &Path, o: &Options, w: &mut dyn Write) -> io::Result<()> {
    let session = session_id(root, &o.session)?;
    // The cost counts from here: what starting took came before the workload.
    let started = own_cpu(root);
    let mut sweeper = Sweeper::default();
    let mut out = String::new();
    let mut next = Instant::now();
    let mut last_cs = None;
    // The workload's CPU time and ours at the last sweep, and when.
    let mut last: Option<(u64, Duration, Instant)> = None;
    let mut interval = o.interval;
    loop {
        // Every sweep is stamped with a later uptime than the one before
        // (the host refuses one that does not advance): /proc/uptime counts
        // in 10 ms, and a sampler that was starved sweeps again at once.
        let Some((up, cs)) = uptime(root) else {
            return Err(io::Error::other("/proc/uptime does not read"));
        };
        if last_cs.is_some_and(|l| cs <= l) {
            std::thread::sleep(Duration::from_millis(MIN_INTERVAL_MS));
            continue;
        }
        last_cs = Some(cs);
        out.clear();
        let run_ns = sweeper.sweep(root, &up, session, &mut out);
        // One write a sweep: lines of a sweep never interleave with others'.
        w.write_all(out.as_bytes())?;
        w.flush()?;
        if root.join(o.stop.trim_start_matches('/')).exists() {
            break;
        }
        // The budget: this sweep's cost against what the workload used
        // since the last one sets how long until the next.
        let (cpu, now) = (own_cpu(root), Instant::now());
        if let Some((run0, cpu0, t0)) = last {
            let cost = cpu.saturating_sub(cpu0).as_secs_f64();
            let rate = run_ns.saturating_sub(run0) as f64 / 1e9 / (now - t0).as_secs_f64();
            let wanted = cost / (BUDGET * rate.max(1e-3));
            interval = Duration::from_secs_f64(wanted).clamp(
                o.interval,
                Duration::from_millis(MAX_STRETCH_MS).max(o.interval),
            );
        }
        last = Some((run_ns, cpu, now));
        // After a stall, from now on rather than a burst of catching up.
        next = (next + interval).max(Instant::now());
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let cpu = own_cpu(root).saturating_sub(started);
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
            session: Session::From("/tmp/sid".into()),
            interval: Duration::from_millis(10),
            stop: "/tmp/stop".into(),
        };
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::write(root.join("tmp/stop"), "").unwrap();
        std::fs::write(root.join("tmp/sid"), "40\n").unwrap();
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
    fn uptime_in_centiseconds() {
        let root = tempfile_root();
        assert_eq!(uptime(&root), Some(("12.34".to_string(), 1234)));
        std::fs::write(root.join("proc/uptime"), "soon\n").unwrap();
        assert_eq!(uptime(&root), None);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn stat_lines_are_cut_after_the_processor() {
        let full = "7 (a b) R 1 7 7 0 -1 4194560 0 0 0 0 11 12 0 0 20 0 1 0 5 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        let cut = through_processor(full);
        assert!(cut.ends_with(" 17 3"), "{cut}");
        assert_eq!(through_processor("7 (x) S 1"), "7 (x) S 1");
    }

    #[test]
    fn times_form_is_the_shells() {
        assert_eq!(times_form(Duration::from_millis(61_230)), "1m1.230s");
        assert_eq!(times_form(Duration::from_micros(999)), "0m0.000s");
    }

    /// A fake root: the workload (session 40, pid 41) and the runner (pid 1,
    /// session 0).
    fn tempfile_root() -> std::path::PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("farm-sampler-{}-{n}", std::process::id()));
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
