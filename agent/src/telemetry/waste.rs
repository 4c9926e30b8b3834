//! The work-conservation check: CPU time wasted while threads waited.
//!
//! "The Linux Scheduler: a Decade of Wasted Cores" (Lozi et al., EuroSys 2016), cited
//! by seeds 000 and 003, states the invariant a work-conserving scheduler keeps: no CPU
//! sits idle while another CPU has a thread waiting to run. This module measures how
//! much it was broken during a run, from what the sampler sees every T ms: each
//! thread's state and CPU (task `stat`) and each CPU's idle time (`/proc/stat`).
//!
//! # Definition
//!
//! The sampler takes a [`Snapshot`] of `/proc/stat` and the [`Sample`]s of the
//! workload's threads in one sweep, stamped with the same `t_ms`. For each pair of
//! consecutive snapshots k, k+1, an interval of `d` seconds:
//!
//! - **waiting** on CPU c at snapshot k: `w_k(c) = max(0, R_k(c) - 1)`, where `R_k(c)`
//!   is the number of sampled threads in state `R` whose CPU is c. One of them may be
//!   running; the others wait on c's run queue. When the sampler read a subset of a
//!   large workload's threads, `R_k(c)` is the sum of the samples' weights, an
//!   estimate, and counts as a queue from 1.5 on.
//! - **waiting in the interval**: `W = Σ_c min(w_k(c), w_k+1(c))`. Only a queue seen at
//!   both ends, on the same CPU, counts: a thread seen waiting at one end may have run
//!   for most of the interval.
//! - **idle in the interval**: `I = Σ_c min(d, idle_c)` over the *allowed* CPUs (those
//!   the workload may run on) online at both snapshots and with no thread waiting at
//!   either end, where `idle_c` is c's `idle + iowait` delta in seconds. An idle CPU
//!   outside the workload's cpuset could not have taken its threads; a CPU with its own
//!   queue that idled in between only shows that its queue drained.
//! - **wasted**: `min(W × d, I)` CPU-seconds. Waiting threads could at most have used
//!   the idle time there was, and the idle CPUs could at most have run the threads that
//!   waited.
//!
//! The run's total is the sum over intervals; as a share of the run it is
//! `wasted / (wall × allowed CPUs)`, wall being the first to the last snapshot. Each
//! interval's waste is attributed to NUMA nodes in proportion to the idle time of their
//! CPUs in that interval: the waste is capacity left unused on that node.
//!
//! The check sees only the threads it is given: pass the samples of every program
//! whose waiting should count (the measured workload and its competing load alike).
//! It is a lower bound: queues shorter than the sampling interval are not seen, and
//! `/proc/stat` counts in USER_HZ ticks (10 ms), so idle shorter than that is lost.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use super::placement::{NodeMap, Sample};
use super::procstat::{self, CpuTimes, ProcStat};

/// `/proc/stat` at one tick of the sampler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The `t_ms` of the thread samples taken in the same sweep.
    pub t_ms: u64,
    pub stat: ProcStat,
}

/// The result of the check over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Waste {
    /// Idle CPU time that waiting threads could have used, in CPU-seconds.
    pub wasted_cpu_s: f64,
    /// From the first to the last snapshot, in seconds.
    pub wall_s: f64,
    pub allowed_cpus: usize,
    /// `wasted / (wall × allowed CPUs)`, in percent; 0 for a run shorter than an interval.
    pub percent: f64,
    /// `wasted_cpu_s` split by the node of the idle CPUs; every node of the map has an
    /// entry. Idle time on a CPU the map does not know is in no node.
    pub per_node: BTreeMap<u32, f64>,
    /// Intervals examined, and those with some waste.
    pub intervals: usize,
    pub intervals_with_waste: usize,
}

/// Runs the check. `snapshots` and `samples` may come in any order; a snapshot's
/// threads are the samples with its `t_ms` (a snapshot without samples had no threads).
/// `allowed` are the CPUs the workload may run on; `user_hz` is the unit of
/// `/proc/stat` ([`procstat::user_hz`]).
pub fn check(
    snapshots: &[Snapshot],
    samples: &[Sample],
    allowed: &[u32],
    map: &NodeMap,
    user_hz: u64,
) -> Waste {
    let mut snapshots: Vec<&Snapshot> = snapshots.iter().collect();
    snapshots.sort_by_key(|s| s.t_ms);
    // Runnable threads per CPU at each tick: sums of weights, so estimates when
    // the tick read a subset of the threads (see `placement`).
    let mut runnable: BTreeMap<u64, BTreeMap<u32, f64>> = BTreeMap::new();
    for s in samples.iter().filter(|s| s.running) {
        *runnable
            .entry(s.t_ms)
            .or_default()
            .entry(s.cpu)
            .or_default() += s.weight;
    }
    // A CPU with two or more runnable threads (rounded, for estimates) has
    // all but one of them waiting.
    let waiting_at = |t_ms: u64| -> BTreeMap<u32, f64> {
        runnable
            .get(&t_ms)
            .map(|per_cpu| {
                per_cpu
                    .iter()
                    .filter(|&(_, &r)| r >= 1.5)
                    .map(|(&cpu, &r)| (cpu, r - 1.0))
                    .collect()
            })
            .unwrap_or_default()
    };
    let allowed: BTreeSet<u32> = allowed.iter().copied().collect();
    let mut per_node: BTreeMap<u32, f64> = map.nodes().map(|n| (n, 0.0)).collect();
    let mut wasted_cpu_s = 0.0;
    let mut intervals = 0;
    let mut intervals_with_waste = 0;
    for pair in snapshots.windows(2) {
        let [start, end] = [pair[0], pair[1]];
        let d = (end.t_ms - start.t_ms) as f64 / 1000.0;
        if d <= 0.0 {
            continue;
        }
        intervals += 1;
        let (w0, w1) = (waiting_at(start.t_ms), waiting_at(end.t_ms));
        let waiting: f64 = w0
            .iter()
            .filter_map(|(cpu, &a)| Some(a.min(*w1.get(cpu)?)))
            .sum();
        if waiting <= 0.0 {
            continue;
        }
        let spent = procstat::delta(&start.stat, &end.stat);
        let idle_by_cpu: Vec<(u32, f64)> = spent
            .per_cpu
            .iter()
            .filter(|(cpu, _)| {
                allowed.contains(cpu) && !w0.contains_key(cpu) && !w1.contains_key(cpu)
            })
            .map(|(&cpu, t): (&u32, &CpuTimes)| (cpu, procstat::idle_seconds(t, user_hz).min(d)))
            .collect();
        let idle: f64 = idle_by_cpu.iter().map(|(_, s)| s).sum();
        let wasted = (waiting * d).min(idle);
        if wasted <= 0.0 {
            continue;
        }
        intervals_with_waste += 1;
        wasted_cpu_s += wasted;
        for (cpu, s) in idle_by_cpu {
            if let Some(node) = map.node(cpu) {
                *per_node.entry(node).or_default() += wasted * s / idle;
            }
        }
    }
    let wall_s = match (snapshots.first(), snapshots.last()) {
        (Some(first), Some(last)) => (last.t_ms - first.t_ms) as f64 / 1000.0,
        _ => 0.0,
    };
    let capacity = wall_s * allowed.len() as f64;
    Waste {
        wasted_cpu_s,
        wall_s,
        allowed_cpus: allowed.len(),
        percent: if capacity > 0.0 {
            100.0 * wasted_cpu_s / capacity
        } else {
            0.0
        },
        per_node,
        intervals,
        intervals_with_waste,
    }
}
