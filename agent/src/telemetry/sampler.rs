//! The placement sampler: every interval (default 100 ms) the CPU and run
//! state of every thread of the workload's process tree, stamped together
//! with a `/proc/stat` snapshot so that the work-conservation check can line
//! them up.
//!
//! It runs on a thread of its own, started *before* the workload so that it
//! does not inherit the workload's perf counters, and it measures its own
//! CPU time so every run reports what telemetry cost it.

use std::path::Path;
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
    loop {
        let t_ms = t0.elapsed().as_millis() as u64;
        if !sample(root, pid, t_ms, &mut out) {
            break;
        }
        next += interval;
        let wait = next.saturating_duration_since(Instant::now());
        match rx.recv_timeout(wait) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Ok(Msg::Track(_)) => {}
        }
    }
    out.cost = thread_cpu().saturating_sub(cpu0);
    debug!(
        samples = out.samples.len(),
        ticks = out.snapshots.len(),
        cost_us = out.cost.as_micros() as u64,
        "sampler done"
    );
    out
}

/// One sweep; false once the workload is gone.
fn sample(root: &Path, pid: u32, t_ms: u64, out: &mut Collected) -> bool {
    let procs = tree(root, pid);
    if procs.is_empty() {
        return false;
    }
    let Ok(stat) = procstat::read(root) else {
        return false;
    };
    let mut found = false;
    for (i, p) in procs.iter().enumerate() {
        // Threads exit between listing and reading: what is gone is skipped.
        let Ok(tasks) = taskstat::read_process(root, *p) else {
            continue;
        };
        for t in tasks {
            if t.state == 'Z' || t.state == 'X' {
                continue;
            }
            found = true;
            let instance = if procs.len() > 1 {
                i as u32
            } else {
                instance_of(&t.comm)
            };
            out.samples.push(Sample {
                t_ms,
                instance,
                tid: t.tid,
                cpu: t.cpu,
                running: t.is_runnable(),
            });
        }
    }
    out.snapshots.push(Snapshot { t_ms, stat });
    found
}

/// Workloads whose instances are threads of one process: the built-in
/// `stream` runs each instance as a thread `stream-<N>`, where seed 001 ran N
/// single-threaded processes. Other workloads' threads (`lu-3`) are workers
/// of one instance.
const THREAD_INSTANCES: &[&str] = &["stream-"];

/// The instance a thread belongs to in a single-process workload.
pub fn instance_of(comm: &str) -> u32 {
    THREAD_INSTANCES
        .iter()
        .find_map(|p| comm.strip_prefix(p))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// `pid` and its descendants, parents first, via `/proc/PID/task/TID/children`.
fn tree(root: &Path, pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let task_dir = root.join(format!("proc/{p}/task"));
        let Ok(tasks) = std::fs::read_dir(&task_dir) else {
            continue;
        };
        out.push(p);
        for t in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(t.path().join("children")) {
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
            ("stream-3", 3),
            ("lu", 0),
            ("lu-1", 0),
            ("stream-x", 0),
            ("cpu-hog-2", 0),
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
