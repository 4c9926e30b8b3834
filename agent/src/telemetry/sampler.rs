//! The placement sampler: every interval (default 100 ms) the CPU and run
//! state of every thread of the workload's process tree, stamped together
//! with a `/proc/stat` snapshot so that the work-conservation check can line
//! them up.
//!
//! It runs on a thread of its own, started *before* the workload so that it
//! does not inherit the workload's perf counters, and it measures its own
//! CPU time so every run reports what telemetry cost it.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::time::{ClockId, clock_gettime};
use tracing::debug;

use super::placement::Sample;
use super::waste::Snapshot;
use super::{procstat, taskstat};

pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(100);

/// What the sampler saw.
#[derive(Debug, Default)]
pub struct Collected {
    pub interval: Duration,
    pub samples: Vec<Sample>,
    pub snapshots: Vec<Snapshot>,
    /// CPU time the sampler thread itself used.
    pub cost: Duration,
}

enum Msg {
    Track(u32),
    Stop,
}

pub struct Sampler {
    tx: mpsc::Sender<Msg>,
    thread: std::thread::JoinHandle<Collected>,
}

impl Sampler {
    pub fn spawn(root: &Path, interval: Duration) -> std::io::Result<Sampler> {
        let (tx, rx) = mpsc::channel();
        let root = root.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("sampler".into())
            .spawn(move || sample_loop(&root, interval, &rx))?;
        Ok(Sampler { tx, thread })
    }

    /// Starts sampling the process tree rooted at `pid`.
    pub fn track(&self, pid: u32) {
        let _ = self.tx.send(Msg::Track(pid));
    }

    pub fn finish(self) -> Collected {
        let _ = self.tx.send(Msg::Stop);
        self.thread.join().unwrap_or_default()
    }
}

fn thread_cpu() -> Duration {
    clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map(Duration::from)
        .unwrap_or_default()
}

fn sample_loop(root: &Path, interval: Duration, rx: &mpsc::Receiver<Msg>) -> Collected {
    let mut out = Collected {
        interval,
        ..Default::default()
    };
    let pid = match rx.recv() {
        Ok(Msg::Track(pid)) => pid,
        _ => return out,
    };
    let cpu0 = thread_cpu();
    let t0 = Instant::now();
    let mut next = t0;
    let mut state = Sweeper::new(root, pid);
    let user_hz = procstat::user_hz().max(1) as f64;
    let mut step = interval;
    loop {
        let t_ms = t0.elapsed().as_millis() as u64;
        if !state.sample(t_ms, &mut out) {
            break;
        }
        // Stay within the overhead budget: while the sampler has cost more
        // than BUDGET of the CPU time the workload has used, sweep less
        // often (up to MAX_INTERVAL); come back to the interval asked for
        // once under it. Only workloads of hundreds of threads get here.
        let cost = thread_cpu().saturating_sub(cpu0).as_secs_f64();
        let used = state.workload_ticks as f64 / user_hz;
        step = if used > 0.1 && cost > BUDGET * used {
            (step * 2).min(MAX_INTERVAL)
        } else {
            (step / 2).max(interval)
        };
        // After a stall, start again from now rather than catch up with
        // back-to-back sweeps that would share a timestamp.
        next = (next + step).max(Instant::now());
        let wait = next.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(Msg::Track(_)) => {}
        }
    }
    out.cost = thread_cpu().saturating_sub(cpu0);
    // The interval actually kept, on average, for the record.
    if out.snapshots.len() > 1 {
        let span = out.snapshots.last().map_or(0, |s| s.t_ms) - out.snapshots[0].t_ms;
        out.interval = Duration::from_millis(span / (out.snapshots.len() as u64 - 1));
    }
    debug!(
        samples = out.samples.len(),
        ticks = out.snapshots.len(),
        cost_us = out.cost.as_micros() as u64,
        "sampler done"
    );
    out
}

/// The sampler's CPU time may be at most this fraction of the workload's.
const BUDGET: f64 = 0.004;
/// The longest interval the budget may stretch sweeps to.
const MAX_INTERVAL: Duration = Duration::from_secs(2);

/// How many sweeps between full re-reads of the process tree: processes come
/// and go far less often than threads, and reading every thread's `children`
/// file at every sweep doubled the sampler's cost.
const TREE_EVERY: u32 = 10;

/// The sampler's state between sweeps: the process tree, and an open handle
/// per thread's `stat` file. Re-reading an open procfs file with `pread`
/// skips the path walk and the open/close of every thread at every sweep,
/// which is most of the cost with hundreds of threads (hackbench).
struct Sweeper {
    root: PathBuf,
    pid: u32,
    sweeps: u32,
    stats: HashMap<(u32, u32), File>,
    buf: Vec<u8>,
    /// utime + stime of each process (all its threads) at its last sweep.
    ticks: HashMap<u32, u64>,
    /// CPU time the workload has used so far, in clock ticks, as seen by the sweeps.
    workload_ticks: u64,
}

impl Sweeper {
    fn new(root: &Path, pid: u32) -> Sweeper {
        Sweeper {
            root: root.to_path_buf(),
            pid,
            sweeps: 0,
            stats: HashMap::new(),
            buf: vec![0; 1024],
            ticks: HashMap::new(),
            workload_ticks: 0,
        }
    }

    /// One sweep; false once the workload is gone.
    fn sample(&mut self, t_ms: u64, out: &mut Collected) -> bool {
        // Every sweep looks for processes forked by main threads; every
        // TREE_EVERY-th also under every other thread.
        let full = self.sweeps % TREE_EVERY == TREE_EVERY - 1;
        let procs = tree(&self.root, self.pid, full);
        self.sweeps += 1;
        if procs.is_empty() {
            return false;
        }
        let Ok(stat) = procstat::read(&self.root) else {
            return false;
        };
        let mut found = false;
        let mut seen: std::collections::HashSet<(u32, u32)> = std::collections::HashSet::new();
        let mut tick: Vec<(Option<u32>, u32, u32, bool)> = Vec::new();
        for (i, &p) in procs.iter().enumerate() {
            // The process's own stat sums all its threads, those gone too:
            // per-thread times of short-burst threads round down to nothing.
            if let Some(t) = self.read_stat((p, 0), format!("proc/{p}/stat")) {
                seen.insert((p, 0));
                let now = t.utime + t.stime;
                let before = self.ticks.insert(p, now).unwrap_or(0);
                self.workload_ticks += now.saturating_sub(before);
            }
            let Ok(dir) = std::fs::read_dir(self.root.join(format!("proc/{p}/task"))) else {
                continue;
            };
            for tid in dir
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            {
                // Threads exit between listing and reading: what is gone is skipped.
                let Some(t) = self.read_task(p, tid) else {
                    continue;
                };
                seen.insert((p, tid));
                if t.state == 'Z' || t.state == 'X' {
                    continue;
                }
                found = true;
                let instance = if procs.len() > 1 {
                    Some(i as u32)
                } else {
                    instance_of(&t.comm)
                };
                tick.push((instance, t.tid, t.cpu, t.is_runnable()));
            }
        }
        // A workload whose instances are threads: its other threads (the
        // main thread waiting for them) belong to no instance.
        let by_thread = tick.iter().any(|(i, ..)| i.is_some());
        for (instance, tid, cpu, running) in tick {
            if by_thread && instance.is_none() {
                continue;
            }
            let instance = instance.unwrap_or(0);
            out.samples.push(Sample {
                t_ms,
                instance,
                tid,
                cpu,
                running,
            });
        }
        // Handles of threads that are gone would pin their /proc entries.
        self.stats.retain(|k, _| seen.contains(k));
        self.ticks.retain(|p, _| seen.contains(&(*p, 0)));
        out.snapshots.push(Snapshot { t_ms, stat });
        found
    }

    fn read_task(&mut self, pid: u32, tid: u32) -> Option<taskstat::TaskSample> {
        self.read_stat((pid, tid), format!("proc/{pid}/task/{tid}/stat"))
    }

    /// Reads a stat file through a handle kept open; `key` names it, with tid
    /// 0 for a process's own stat.
    fn read_stat(&mut self, key: (u32, u32), path: String) -> Option<taskstat::TaskSample> {
        use std::collections::hash_map::Entry;
        use std::os::unix::fs::FileExt;
        let file = match self.stats.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(File::open(self.root.join(path)).ok()?),
        };
        let n = file.read_at(&mut self.buf, 0).ok()?;
        if n == 0 {
            self.stats.remove(&key);
            return None;
        }
        let text = std::str::from_utf8(&self.buf[..n]).ok()?;
        taskstat::parse(text).ok()
    }
}

/// Workloads whose instances are threads of one process: the built-in
/// `stream` runs each instance as a thread `stream-<N>`, where seed 001 ran N
/// single-threaded processes. Other workloads' threads (`lu-3`) are workers
/// of one instance.
const THREAD_INSTANCES: &[&str] = &["stream-"];

/// The instance a thread belongs to in a single-process workload whose
/// instances are threads, or `None` for any other thread.
pub fn instance_of(comm: &str) -> Option<u32> {
    THREAD_INSTANCES
        .iter()
        .find_map(|p| comm.strip_prefix(p))
        .and_then(|n| n.parse().ok())
}

/// `pid` and its descendants, parents first, via `/proc/PID/task/TID/children`.
fn tree(root: &Path, pid: u32, every_thread: bool) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let task_dir = root.join(format!("proc/{p}/task"));
        let Ok(tasks) = std::fs::read_dir(&task_dir) else {
            continue;
        };
        out.push(p);
        // A child is listed under the thread that forked it. Most forks come
        // from a process's main thread; the other threads' lists are read on
        // full scans only, since a workload of hundreds of threads would
        // otherwise pay one more file per thread at every sweep.
        let threads: Vec<PathBuf> = if every_thread {
            tasks.flatten().map(|t| t.path()).collect()
        } else {
            vec![task_dir.join(p.to_string())]
        };
        for t in threads {
            if let Ok(children) = std::fs::read_to_string(t.join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
        if out.len() > 4096 {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    #[test]
    fn instances_from_thread_names() {
        for (comm, want) in [
            ("stream-3", Some(3)),
            ("lu", None),
            ("lu-1", None),
            ("stream-x", None),
            ("cpu-hog-2", None),
        ] {
            assert_eq!(instance_of(comm), want, "{comm}");
        }
    }

    #[test]
    fn samples_a_real_process_tree() {
        // A shell with a busy child: both processes must be seen, each its own instance.
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "while :; do :; done & wait"])
            .process_group(0)
            .spawn()
            .unwrap();
        let s = Sampler::spawn(Path::new("/"), Duration::from_millis(20)).unwrap();
        s.track(child.id());
        std::thread::sleep(Duration::from_millis(300));
        let c = s.finish();
        let pg = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
        let _ = child.wait();
        assert!(c.snapshots.len() >= 5, "{} snapshots", c.snapshots.len());
        let instances: std::collections::BTreeSet<u32> =
            c.samples.iter().map(|s| s.instance).collect();
        assert!(instances.len() >= 2, "{instances:?}");
        assert!(
            c.samples.iter().any(|s| s.running),
            "the busy child was never runnable"
        );
        assert!(c.cost > Duration::ZERO);
    }
}
