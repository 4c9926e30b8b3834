//! Pinning udp-stream's sender and receiver to the CPUs a run asks for
//! (seed 002 pinned netperf's two ends to CPUs in different sockets).
//!
//! The workload cannot pin its own threads (its crate has no dependencies
//! and forbids unsafe code, and std has no affinity call): it names them
//! ([`udp_stream::SENDER_THREAD`], [`udp_stream::RECEIVER_THREAD`]), then
//! waits up to [`udp_stream::PIN_WAIT`] for their allowed CPUs to be the ones
//! asked for, and says on stderr whether they were (`pinned=true|false`). The
//! agent does not read that stderr while the workload runs, so it finds the
//! threads by name in `/proc/<pid>/task/*/comm`, within the same time.
//!
//! It does so from a thread of its own ([`Pinner`]), started before the
//! workload like the sampler: the perf counters count the thread that starts
//! the workload and every thread created after them, and polling must not
//! show up in the workload's context switches.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Instant;

use farm_workload::udp_stream;
use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;
use tracing::{debug, warn};

use crate::executor::launch::Pin;

/// How often the process's threads are looked at while waiting for them.
const POLL: std::time::Duration = std::time::Duration::from_millis(5);

/// A thread waiting for the workload's pid, to pin its threads.
pub(super) struct Pinner {
    pid: mpsc::Sender<i32>,
    thread: std::thread::JoinHandle<()>,
}

impl Pinner {
    /// Starts the pinning thread, or nothing when there is nothing to pin.
    pub fn spawn(root: &Path, pins: &[Pin]) -> std::io::Result<Option<Pinner>> {
        if pins.is_empty() {
            return Ok(None);
        }
        let (pid, pid_rx) = mpsc::channel();
        let (root, pins): (PathBuf, Vec<Pin>) = (root.to_path_buf(), pins.to_vec());
        let thread = std::thread::Builder::new()
            .name("pinner".into())
            .spawn(move || {
                // No pid: the workload did not start.
                if let Ok(pid) = pid_rx.recv() {
                    apply(&root, pid, &pins);
                }
            })?;
        Ok(Some(Pinner { pid, thread }))
    }

    /// Pins the threads of the workload `pid`, from the pinning thread.
    pub fn pin(&self, pid: i32) {
        let _ = self.pid.send(pid);
    }

    /// Waits until the pinning is done or given up.
    pub fn finish(self) {
        drop(self.pid);
        let _ = self.thread.join();
    }
}

/// Pins the threads of process `pid` that `pins` name, each as soon as it
/// exists, giving up after [`udp_stream::PIN_WAIT`]. A thread that cannot be
/// pinned (a CPU offline or outside the run's cpuset) is logged; the workload
/// itself reports it unpinned.
fn apply(root: &Path, pid: i32, pins: &[Pin]) {
    let give_up = Instant::now() + udp_stream::PIN_WAIT;
    let mut todo: Vec<Pin> = pins.to_vec();
    let tasks = root.join(format!("proc/{pid}/task"));
    loop {
        for (tid, comm) in threads(&tasks) {
            let Some(i) = todo.iter().position(|p| p.thread == comm) else {
                continue;
            };
            let pin = todo.swap_remove(i);
            match set_affinity(tid, pin.cpu) {
                Ok(()) => debug!(tid, thread = pin.thread, cpu = pin.cpu, "pinned"),
                Err(e) => warn!(tid, thread = pin.thread, cpu = pin.cpu, "cannot pin: {e}"),
            }
        }
        if todo.is_empty() {
            return;
        }
        if Instant::now() >= give_up {
            let missing: Vec<&str> = todo.iter().map(|p| p.thread).collect();
            warn!(pid, ?missing, "threads to pin did not appear");
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// The threads of a process's `task` directory, by id, with their names. A
/// thread that ends while being read is left out.
fn threads(tasks: &Path) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir(tasks) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let tid = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            Some((tid, comm.trim_end_matches('\n').to_string()))
        })
        .collect()
}

fn set_affinity(tid: i32, cpu: usize) -> nix::Result<()> {
    let mut set = CpuSet::new();
    set.set(cpu)?;
    sched_setaffinity(Pid::from_raw(tid), &set)
}
