//! The placement sampler: every interval (default 100 ms) the CPU and run
//! state of the threads of the workload's process tree, stamped together
//! with a `/proc/stat` snapshot so that the work-conservation check can line
//! them up. Every thread at every sweep while that costs under 0.4% of the
//! workload's CPU; beyond, a rotating, weighted subset (see [`Sweeper`]).
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
use super::runqueue::{self, Waits};
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
    /// Threads read, and threads there were, summed over the sweeps: below 1
    /// as a ratio when the budget made sweeps read a subset.
    pub threads_read: u64,
    pub threads_seen: u64,
    /// The runqueue wait of the threads read, from their `schedstat`.
    pub waits: Waits,
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
    let mut budget = Budget::default();
    let mut step = interval;
    let mut last_ms = 0;
    loop {
        let t_ms = t0.elapsed().as_millis() as u64;
        let before = thread_cpu();
        let Some((reads, read_cost)) = state.sample(t_ms, budget.quota, &mut out) else {
            break;
        };
        let cost = thread_cpu().saturating_sub(before).as_secs_f64();
        // What the workload used since the last sweep, at its current rate.
        let earned = state.rate.unwrap_or(0.0) * t_ms.saturating_sub(last_ms) as f64 / 1000.0;
        last_ms = t_ms;
        let used = state.workload_ticks as f64 / user_hz;
        // Stay within the overhead budget: first by reading a subset of the
        // threads at each sweep, and only when even the smallest subset costs
        // too much by sweeping less often (up to MAX_INTERVAL), coming back to
        // the interval asked for once the budget allows.
        let starved = budget.update(cost, reads, read_cost, earned, used);
        step = if starved {
            (step * 2).min(MAX_INTERVAL)
        } else {
            interval
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
    out.waits.finish();
    out.cost = thread_cpu().saturating_sub(cpu0);
    // The interval actually kept, on average, for the record.
    if out.snapshots.len() > 1 {
        let span = out.snapshots.last().map_or(0, |s| s.t_ms) - out.snapshots[0].t_ms;
        out.interval = Duration::from_millis(span / (out.snapshots.len() as u64 - 1));
    }
    debug!(
        samples = out.samples.len(),
        ticks = out.snapshots.len(),
        threads_read = out.threads_read,
        threads_seen = out.threads_seen,
        cost_us = out.cost.as_micros() as u64,
        "sampler done"
    );
    out
}

/// The sampler's CPU time may be at most this fraction of the workload's.
const BUDGET: f64 = 0.004;
/// The longest interval the budget may stretch sweeps to.
const MAX_INTERVAL: Duration = Duration::from_secs(2);
/// The fewest files a sweep reads once the budget binds; below this the
/// sampler sweeps less often instead.
const MIN_READS: usize = 8;
/// The first sweep's files, before any cost is known: opening the `stat`
/// files of hundreds of threads for the first time costs ~15 µs each.
const FIRST_READS: usize = 64;
/// Until the workload has used this much CPU (seconds) every sweep is whole:
/// there is no rate to budget against yet.
const WARMUP_CPU_S: f64 = 0.1;
/// ... unless they cost more than this (CPU-seconds) before it has.
const WARMUP_DEBT_S: f64 = 0.001;

/// The overhead budget as a credit in CPU-seconds: each sweep earns BUDGET
/// of the CPU time the workload used since the last one and spends what the
/// sweep cost. The next sweep may read as many files as the credit and one
/// more sweep's earnings pay for, after the sweep's fixed part
/// (`/proc/stat`, the tree, the listings), at the measured cost per file.
struct Budget {
    credit: f64,
    /// Seconds of sampler CPU per `stat` file read, smoothed.
    per_read: f64,
    /// Seconds of sampler CPU per sweep besides the reads, smoothed.
    fixed: f64,
    /// BUDGET × the workload's CPU per sweep, smoothed.
    income: f64,
    /// Files the next sweep may read; `usize::MAX` is all of them.
    quota: usize,

    /// Sweeping less often than asked, until the budget pays for
    /// 2 × MIN_READS files again (hysteresis: no flapping at the edge).
    starved: bool,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            credit: 0.0,
            per_read: 0.0,
            fixed: 0.0,
            income: 0.0,
            quota: FIRST_READS,
            starved: false,
        }
    }
}

impl Budget {
    /// Books one sweep that cost `cost` CPU-seconds, `read_cost` of them
    /// reading `reads` files, while the workload used `earned` (`used` in
    /// all). True while even [`MIN_READS`] files per sweep are more than the
    /// budget pays for.
    fn update(&mut self, cost: f64, reads: usize, read_cost: f64, earned: f64, used: f64) -> bool {
        const SMOOTH: f64 = 0.3;
        let smooth = |old: f64, new: f64| {
            if old == 0.0 {
                new
            } else {
                old + SMOOTH * (new - old)
            }
        };
        if reads > 0 {
            self.per_read = smooth(self.per_read, read_cost / reads as f64);
        }
        self.fixed = smooth(self.fixed, (cost - read_cost).max(0.0));
        self.income = smooth(self.income, BUDGET * earned);
        self.credit += BUDGET * earned - cost;
        // Savings beyond a couple of whole sweeps would only let a burst of
        // whole sweeps through later: cap them.
        let whole = self.fixed + self.per_read * reads.max(MIN_READS) as f64;
        self.credit = self.credit.min(2.0 * whole);
        let affordable = if used < WARMUP_CPU_S {
            // While the workload starts there is no rate to go by: sweeps
            // may run up a debt of WARMUP_DEBT_S. A workload that forks
            // hundreds of processes and waits for them uses little CPU
            // while it does.
            (self.credit + WARMUP_DEBT_S - self.fixed) / self.per_read
        } else {
            (self.credit + self.income - self.fixed) / self.per_read
        };
        self.quota = if affordable >= usize::MAX as f64 {
            usize::MAX
        } else {
            (affordable.max(0.0) as usize).max(MIN_READS)
        };
        // Starved: even the smallest sweep costs more than a sweep earns, so
        // only sweeping less often keeps to the budget. A debt alone (the
        // first whole sweep) is paid back with small sweeps at the interval.
        let floor = if self.starved {
            2 * MIN_READS
        } else {
            MIN_READS
        };
        self.starved = used >= WARMUP_CPU_S
            && affordable < floor as f64
            && self.income < self.fixed + self.per_read * floor as f64;
        self.starved
    }
}

/// How many sweeps between full re-reads of the process tree: processes come
/// and go far less often than threads, and reading every thread's `children`
/// file at every sweep doubled the sampler's cost.
const TREE_EVERY: u32 = 10;
/// A tree of at most this many processes is re-read (main threads' children)
/// at every sweep; a larger one only every TREE_EVERY sweeps.
const SMALL_TREE: usize = 16;

/// One process of the workload, as the sweeps know it.
struct Proc {
    /// Its instance, numbered in the order the processes were found.
    instance: u32,
    /// Its threads at the last listing, ascending.
    tids: Vec<u32>,
    /// Where the next subset of its threads starts.
    cursor: usize,
    /// Its CPU time (clock ticks) and when it was read, at its last visit.
    last: Option<(u64, u64)>,
}

/// The sampler's state between sweeps: the process tree, and an open handle
/// per thread's `stat` file. Re-reading an open procfs file with `pread`
/// skips the path walk and the open/close of every thread at every sweep.
///
/// A workload of hundreds of threads costs ~4 µs per thread per sweep even so
/// (hackbench: 1.2% of its CPU at 100 ms), so when the budget binds a sweep
/// reads a subset: the processes in turn when there are more than the
/// budget pays for, and within each visited process a share of its threads
/// proportional to its size, continuing where the last sweep stopped, so
/// that every thread is read in turn. Each sample is weighted by the threads
/// it stands for (see `placement`).
struct Sweeper {
    root: PathBuf,
    pid: u32,
    sweeps: u32,
    /// Pids in tree order, parents first.
    order: Vec<u32>,
    /// Processes seen forking (the root always): where new children appear.
    parents: Vec<u32>,
    procs: HashMap<u32, Proc>,
    next_instance: u32,
    /// Where the next round of processes starts, when not all fit a sweep.
    proc_cursor: usize,
    stats: HashMap<(u32, u32), File>,
    /// The same threads' `schedstat` files, kept open alike.
    scheds: HashMap<(u32, u32), File>,
    buf: Vec<u8>,
    /// CPU time the workload has used so far, in clock ticks, as seen by the sweeps.
    workload_ticks: u64,
    /// The workload's CPU use at the last sweep, in CPUs: each visited
    /// process's since its previous visit, scaled up to all processes when a
    /// sweep visited only some. Per process, not summed over what the sweep
    /// happened to visit, which would swing with the rotation.
    rate: Option<f64>,
    user_hz: f64,
}

impl Sweeper {
    fn new(root: &Path, pid: u32) -> Sweeper {
        Sweeper {
            root: root.to_path_buf(),
            pid,
            sweeps: 0,
            order: Vec::new(),
            parents: Vec::new(),
            procs: HashMap::new(),
            next_instance: 0,
            proc_cursor: 0,
            stats: HashMap::new(),
            scheds: HashMap::new(),
            buf: vec![0; 1024],
            workload_ticks: 0,
            rate: None,
            user_hz: procstat::user_hz().max(1) as f64,
        }
    }

    fn refresh_tree(&mut self) {
        // A small tree is re-walked (main threads' children) at every sweep
        // and under every thread at every TREE_EVERY-th. A large one (rt-tests'
        // hackbench forks 400 processes) costs a file per process to walk:
        // between walks, spaced in proportion to its size, only the
        // processes seen forking are asked for new children, every
        // TREE_EVERY sweeps (a parent of 400 lists them in ~65 µs).
        let n = self.order.len();
        let period = TREE_EVERY * (n / SMALL_TREE).clamp(1, 10) as u32;
        let full = self.sweeps % period == period - 1;
        if self.sweeps == 0 || full || n <= SMALL_TREE {
            let (order, parents) = tree(&self.root, self.pid, self.pid, full);
            self.order = order;
            self.parents = parents;
            let order = &self.order;
            self.procs.retain(|p, _| order.contains(p));
        } else if self.sweeps.is_multiple_of(TREE_EVERY) {
            for p in self.parents.clone() {
                for c in children(&self.root, p) {
                    if !self.procs.contains_key(&c) {
                        let (order, parents) = tree(&self.root, c, self.pid, false);
                        self.order.extend(order);
                        self.parents.extend(parents);
                    }
                }
            }
        }
        for &p in &self.order {
            self.procs.entry(p).or_insert_with(|| {
                self.next_instance += 1;
                Proc {
                    instance: self.next_instance - 1,
                    tids: vec![p],
                    cursor: 0,
                    last: None,
                }
            });
        }
    }

    /// One sweep reading at most about `quota` `stat` files; the files it
    /// read and the CPU time the reading took, or `None` once the workload is
    /// gone.
    fn sample(&mut self, t_ms: u64, quota: usize, out: &mut Collected) -> Option<(usize, f64)> {
        self.refresh_tree();
        self.sweeps += 1;
        if self.order.is_empty() {
            return None;
        }
        let stat = procstat::read(&self.root).ok()?;
        out.waits.sweep(t_ms);
        let mut reads = 0;
        let mut read_cost = Duration::ZERO;
        // The processes this sweep visits: all, or the next `quota` in turn.
        let visit: Vec<u32> = if self.order.len() <= quota {
            self.order.clone()
        } else {
            let n = self.order.len();
            let start = self.proc_cursor % n;
            self.proc_cursor = start + quota;
            (0..quota).map(|i| self.order[(start + i) % n]).collect()
        };
        let multi = self.order.len() > 1;
        let mut seen_procs = Vec::with_capacity(visit.len());
        let mut gone = Vec::new();
        // Each visited process's own stat: its CPU time, its thread count,
        // and for a single-threaded process its one thread.
        let mut mains = Vec::with_capacity(visit.len());
        // Clock ticks per millisecond of the processes visited before, and
        // their threads.
        let (mut rate_ticks, mut rated) = (0.0, 0usize);
        let clock = thread_cpu();
        for &p in &visit {
            let t = self.read_stat((p, 0), format!("proc/{p}/stat"));
            reads += 1;
            let Some(t) = t else {
                gone.push(p);
                continue;
            };
            let Some(proc) = self.procs.get_mut(&p) else {
                continue;
            };
            let now = t.utime + t.stime;
            let (before, then) = proc.last.unwrap_or((0, t_ms));
            proc.last = Some((now, t_ms));
            self.workload_ticks += now.saturating_sub(before);
            let rated_here = t_ms > then;
            if rated_here {
                rate_ticks += now.saturating_sub(before) as f64 / (t_ms - then) as f64;
            }
            if t.num_threads as usize != proc.tids.len()
                || t.num_threads > 1 && proc.tids.is_empty()
            {
                proc.tids = list_tasks(&self.root, p);
            }
            if rated_here {
                rated += proc.tids.len().max(1);
            }
            seen_procs.push(p);
            mains.push(t);
        }
        read_cost += thread_cpu().saturating_sub(clock);
        // Threads of all known processes (the unvisited at their last count),
        // and of the visited ones; each visited process gets a share of what
        // is left of the quota in proportion to its threads.
        let known: usize = self.procs.values().map(|p| p.tids.len().max(1)).sum();
        let visited: usize = seen_procs
            .iter()
            .map(|p| self.procs[p].tids.len().max(1))
            .sum();
        if rated > 0 {
            // Scaled by threads: a process's share of the CPU goes with its
            // threads. Never more than the machine's CPUs: a parent that has
            // just forked hundreds of children is no sample of them.
            let cpus = stat.per_cpu.len().max(1) as f64;
            let rate = rate_ticks * 1000.0 / self.user_hz * known as f64 / rated as f64;
            self.rate = Some(rate.min(cpus));
        }
        let left = quota.saturating_sub(reads);
        let coverage = known as f64 / visited.max(1) as f64;
        let mut tick: Vec<(Option<u32>, Sample)> = Vec::new();
        let mut read_threads = 0usize;
        let mut found = false;
        for (p, main) in seen_procs.iter().copied().zip(mains) {
            let n = self.procs[&p].tids.len().max(1);
            let instance = self.procs[&p].instance;
            let mut push = |t: &taskstat::TaskSample, k: usize| {
                if t.state == 'Z' || t.state == 'X' {
                    return;
                }
                found = true;
                let inst = if multi {
                    Some(instance)
                } else {
                    instance_of(&t.comm)
                };
                let within = n as f64 / k as f64;
                tick.push((
                    inst,
                    Sample {
                        t_ms,
                        instance: inst.unwrap_or(0),
                        tid: t.tid,
                        cpu: t.cpu,
                        running: t.is_runnable(),
                        weight: within * coverage,
                        // A thread that is an instance stands only for itself.
                        instance_weight: if !multi && inst.is_some() {
                            1.0
                        } else {
                            within
                        },
                    },
                ));
            };
            // No task listed although it has threads: it exited between
            // its status and its task list (seen under load); its main
            // thread stands for it, as for a single-threaded one.
            if main.num_threads <= 1 || self.procs[&p].tids.is_empty() {
                read_threads += 1;
                push(&main, 1);
                let clock = thread_cpu();
                if let Some(info) = self.read_sched((p, 0), format!("proc/{p}/schedstat")) {
                    // The main thread's, under its tid: a process that
                    // starts threads later is read per thread from then on,
                    // and its main thread must stay one thread to the sum.
                    out.waits.observe((p, p), info, coverage);
                }
                read_cost += thread_cpu().saturating_sub(clock);
                continue;
            }
            let k = if visited <= left {
                n
            } else {
                ((left as f64 * n as f64 / visited as f64) as usize).clamp(1, n)
            };
            let proc = self.procs.get_mut(&p).expect("visited");
            let start = proc.cursor % n;
            proc.cursor = start + k;
            let tids: Vec<u32> = (0..k).map(|i| proc.tids[(start + i) % n]).collect();
            let mut got = Vec::with_capacity(k);
            let clock = thread_cpu();
            let weight = n as f64 / k as f64 * coverage;
            for tid in tids {
                // Threads exit between listing and reading: what is gone is skipped.
                if let Some(t) = self.read_task(p, tid) {
                    got.push(t);
                    let path = format!("proc/{p}/task/{tid}/schedstat");
                    if let Some(info) = self.read_sched((p, tid), path) {
                        out.waits.observe((p, tid), info, weight);
                    }
                }
                reads += 1;
            }
            read_cost += thread_cpu().saturating_sub(clock);
            read_threads += got.len();
            for t in &got {
                push(t, got.len());
            }
        }
        // A workload whose instances are threads: its other threads (the
        // main thread waiting for them) belong to no instance.
        let by_thread = tick.iter().any(|(i, _)| i.is_some());
        out.samples.extend(
            tick.into_iter()
                .filter(|(i, _)| !by_thread || i.is_some())
                .map(|(_, s)| s),
        );
        out.threads_read += read_threads as u64;
        out.threads_seen += known as u64;
        out.snapshots.push(Snapshot { t_ms, stat });
        // Handles of processes and threads that are gone would pin their
        // /proc entries.
        for p in gone {
            self.order.retain(|&q| q != p);
            self.procs.remove(&p);
        }
        let procs = &self.procs;
        let alive = |(p, tid): &(u32, u32)| {
            procs
                .get(p)
                .is_some_and(|proc| *tid == 0 || proc.tids.binary_search(tid).is_ok())
        };
        self.stats.retain(|key, _| alive(key));
        self.scheds.retain(|key, _| alive(key));
        // Gone: nothing left to watch, or every process visited and none alive.
        if self.order.is_empty() || (!found && visit.len() >= self.order.len()) {
            return None;
        }
        Some((reads, read_cost.as_secs_f64()))
    }

    fn read_task(&mut self, pid: u32, tid: u32) -> Option<taskstat::TaskSample> {
        self.read_stat((pid, tid), format!("proc/{pid}/task/{tid}/stat"))
    }

    /// Reads a stat file through a handle kept open; `key` names it, with tid
    /// 0 for a process's own stat.
    fn read_stat(&mut self, key: (u32, u32), path: String) -> Option<taskstat::TaskSample> {
        let text = read_kept(&mut self.stats, &mut self.buf, &self.root, key, path)?;
        taskstat::parse(text).ok()
    }

    /// A thread's `schedstat` (a process's own: its main thread's), alike.
    fn read_sched(&mut self, key: (u32, u32), path: String) -> Option<runqueue::SchedInfo> {
        let text = read_kept(&mut self.scheds, &mut self.buf, &self.root, key, path)?;
        runqueue::parse(text).ok()
    }
}

/// The text of a procfs file read through a handle kept in `files`; `None`
/// (and the handle dropped) once the task is gone.
fn read_kept<'b>(
    files: &mut HashMap<(u32, u32), File>,
    buf: &'b mut [u8],
    root: &Path,
    key: (u32, u32),
    path: String,
) -> Option<&'b str> {
    use std::collections::hash_map::Entry;
    use std::os::unix::fs::FileExt;
    let file = match files.entry(key) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => e.insert(File::open(root.join(path)).ok()?),
    };
    let n = file.read_at(buf, 0).ok()?;
    if n == 0 {
        files.remove(&key);
        return None;
    }
    std::str::from_utf8(&buf[..n]).ok()
}

/// The threads of process `pid`, ascending; empty once it is gone.
fn list_tasks(root: &Path, pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = std::fs::read_dir(root.join(format!("proc/{pid}/task")))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
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

/// The children of process `pid` (forked by its main thread).
fn children(root: &Path, pid: u32) -> Vec<u32> {
    std::fs::read_to_string(root.join(format!("proc/{pid}/task/{pid}/children")))
        .map(|c| {
            c.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A process of more threads than this has only its main thread's children
/// read, even on a walk under every thread: reading one `children` file per
/// thread of hackbench's 400 was most of a walk's cost, and such workloads
/// fork from their main thread.
const WALK_THREADS: usize = 64;

/// `pid` and its descendants, parents first, via `/proc/PID/task/TID/children`;
/// and those of them that have children (`root_pid`, the workload's root, is
/// always taken to have some).
fn tree(root: &Path, pid: u32, root_pid: u32, every_thread: bool) -> (Vec<u32>, Vec<u32>) {
    let mut out = Vec::new();
    let mut parents = if pid == root_pid {
        vec![pid]
    } else {
        Vec::new()
    };
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let task_dir = root.join(format!("proc/{p}/task"));
        // A child is listed under the thread that forked it. Most forks come
        // from a process's main thread; the other threads' lists are read on
        // walks under every thread only.
        // Beyond a small tree, a walk that is not the periodic whole one
        // takes the processes it finds as they are: asking each of
        // hundreds of new processes for children costs ~18 µs apiece, most
        // of a short run's budget, and they are asked at the next whole walk.
        if !every_thread && out.len() >= SMALL_TREE {
            out.push(p);
            continue;
        }
        let mut threads: Vec<PathBuf> = Vec::new();
        if every_thread {
            let Ok(tasks) = std::fs::read_dir(&task_dir) else {
                continue;
            };
            threads = tasks.flatten().map(|t| t.path()).collect();
        }
        if threads.len() > WALK_THREADS || threads.is_empty() {
            threads = vec![task_dir.join(p.to_string())];
        }
        let before = todo.len();
        let mut alive = false;
        for t in threads {
            if let Ok(children) = std::fs::read_to_string(t.join("children")) {
                alive = true;
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
        if !alive {
            continue;
        }
        out.push(p);
        if todo.len() > before && p != root_pid {
            parents.push(p);
        }
        if out.len() > 4096 {
            break;
        }
    }
    (out, parents)
}

#[cfg(test)]
mod tests;
