//! Where a workload's threads ran: summaries of a timeline of samples over NUMA nodes.
//!
//! The sampler visits every thread of every workload instance each T ms and records a
//! [`Sample`]: the thread's CPU and whether it was runnable. One visit stamps all its
//! samples with the same `t_ms`; such a group is a *tick*. From the timeline this
//! module computes, the way the seeds did by hand from `ps`:
//!
//! - per instance, the node of each thread at each tick ([`InstanceSummary::nodes`],
//!   rendered by [`InstanceSummary::numa_nodes_line`] like seed 001's
//!   `NUMA nodes: 2 2 2 1 1 ...`);
//! - per instance, the average number of its threads on each node over the ticks in
//!   which it had threads (seed 003's `Average 13.05 13.54 27.65 25.76`);
//! - per node, the average number of threads of all instances against the node's CPUs
//!   (seed 003: "NUMA nodes #2 and #3 are overcommitted");
//! - per tick, the threads on each node (seed 003's detailed report), for heat maps.
//!
//! Every count comes twice. *All threads*, whatever their state, is what seed 003
//! counted from `ps`: a thread's node is where it last ran, which is where its memory
//! and cache are. *Runnable only* (state `R`) counts the threads that were running or
//! waiting for a CPU at the tick, which is what competes for the node's CPUs; a node
//! is overcommitted when its runnable threads outnumber its CPUs.
//!
//! A workload of hundreds of threads is not read whole at every tick: the sampler
//! reads a rotating subset and gives each sample the *weight* of the threads it
//! stands for (a process of 40 threads of which 10 were read: 4.0). Counts are sums
//! of weights, estimates of the whole population; with every thread read, every
//! weight is 1 and counts are exact. A sample carries two weights: within its
//! instance (for the instance's own averages) and within the whole workload (for the
//! nodes' totals), which differ when a tick visited only some of many instances.
//!
//! A sample on a CPU that the [`NodeMap`] does not know is not placed on any node; it
//! is counted in `unmapped_samples` so that a stale map shows.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use farm_proto::NumaNode;

/// One thread of one workload instance at one tick.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Milliseconds since the run started; equal for all samples of one tick.
    pub t_ms: u64,
    /// Which instance of the workload (0 for a single-instance run).
    pub instance: u32,
    pub tid: u32,
    /// The CPU it ran on, waited on, or last ran on (task stat field 39).
    pub cpu: u32,
    /// State `R`: running or waiting for a CPU.
    pub running: bool,
    /// How many threads of the whole workload this sample stands for at its tick:
    /// 1 when the sweep read them all.
    pub weight: f64,
    /// How many threads of its own instance it stands for: 1 when the sweep read
    /// all of the instance's threads, `threads / threads read` when a subset.
    pub instance_weight: f64,
}

impl Sample {
    /// A sample from a sweep that read every thread.
    pub fn whole(t_ms: u64, instance: u32, tid: u32, cpu: u32, running: bool) -> Sample {
        Sample {
            t_ms,
            instance,
            tid,
            cpu,
            running,
            weight: 1.0,
            instance_weight: 1.0,
        }
    }
}

/// Which NUMA node each CPU belongs to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeMap {
    node_of: BTreeMap<u32, u32>,
    cpus_of: BTreeMap<u32, usize>,
}

impl NodeMap {
    /// From the nodes of the capabilities. A machine without NUMA nodes in sysfs
    /// (s390x, or `CONFIG_NUMA=n`) has none; pass [`NodeMap::single`] for it instead.
    pub fn from_nodes(nodes: &[NumaNode]) -> Self {
        let mut map = NodeMap::default();
        for node in nodes {
            for &cpu in &node.cpus {
                map.insert(cpu, node.id);
            }
        }
        map
    }

    /// All `cpus` on node 0.
    pub fn single(cpus: &[u32]) -> Self {
        let mut map = NodeMap::default();
        for &cpu in cpus {
            map.insert(cpu, 0);
        }
        map
    }

    fn insert(&mut self, cpu: u32, node: u32) {
        if let Some(old) = self.node_of.insert(cpu, node)
            && let Some(n) = self.cpus_of.get_mut(&old)
        {
            *n -= 1;
        }
        *self.cpus_of.entry(node).or_default() += 1;
    }

    pub fn node(&self, cpu: u32) -> Option<u32> {
        self.node_of.get(&cpu).copied()
    }

    /// The node ids, ascending.
    pub fn nodes(&self) -> impl Iterator<Item = u32> + '_ {
        self.cpus_of.keys().copied()
    }

    /// How many CPUs the map puts on `node`.
    pub fn cpus_on(&self, node: u32) -> usize {
        self.cpus_of.get(&node).copied().unwrap_or(0)
    }
}

/// Thread counts per node, by node id; every node of the map has an entry.
pub type PerNode<T> = BTreeMap<u32, T>;

/// The threads on each node at one tick: sums of sample weights, whole numbers
/// when the tick read every thread.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTick {
    pub t_ms: u64,
    pub threads: PerNode<f64>,
    pub runnable: PerNode<f64>,
}

/// Where the threads of one instance were.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceSummary {
    pub instance: u32,
    /// Per tick in which the instance had threads: `(t_ms, node of each thread in tid
    /// order)`, `None` for a CPU the map does not know.
    pub nodes: Vec<(u64, Vec<Option<u32>>)>,
    /// Average threads per node over those ticks, all states.
    pub avg_threads: PerNode<f64>,
    /// Average runnable threads per node over those ticks.
    pub avg_runnable: PerNode<f64>,
    /// Its threads per node at each of those ticks.
    pub series: Vec<NodeTick>,
}

impl InstanceSummary {
    /// Seed 001's line: the node of each tick, separated by spaces. With several
    /// threads, a tick shows their nodes joined by `/` in tid order (`2/2/1`); an
    /// unknown node shows as `?`.
    pub fn numa_nodes_line(&self) -> String {
        let tick = |nodes: &Vec<Option<u32>>| {
            nodes
                .iter()
                .map(|n| n.map_or_else(|| "?".to_owned(), |n| n.to_string()))
                .collect::<Vec<_>>()
                .join("/")
        };
        self.nodes
            .iter()
            .map(|(_, nodes)| tick(nodes))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The load of one node over the whole timeline, all instances together.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLoad {
    pub node: u32,
    pub cpus: usize,
    /// Average over all ticks of the threads whose CPU is on this node, all states.
    pub avg_threads: f64,
    /// Average over all ticks of the runnable threads on this node.
    pub avg_runnable: f64,
    /// The most threads (all states) seen on the node at one tick.
    pub peak_threads: f64,
}

impl NodeLoad {
    /// More runnable threads than CPUs, on average: some of them waited.
    pub fn overcommitted(&self) -> bool {
        self.avg_runnable > self.cpus as f64
    }

    /// Seed 003's wording: "node 2 holds 27.6 threads (27.6 runnable) on 24 CPUs".
    pub fn describe(&self) -> String {
        format!(
            "node {} holds {:.1} threads ({:.1} runnable) on {} CPUs",
            self.node, self.avg_threads, self.avg_runnable, self.cpus
        )
    }
}

/// Everything this module derives from a timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Placement {
    /// By instance id, ascending.
    pub instances: Vec<InstanceSummary>,
    /// By node id, ascending; every node of the map.
    pub nodes: Vec<NodeLoad>,
    /// All instances together, one entry per tick, by time.
    pub series: Vec<NodeTick>,
    /// Samples whose CPU the map does not know; they are in no count.
    pub unmapped_samples: usize,
}

/// Summarises a timeline; `samples` may come in any order.
pub fn summarize(samples: &[Sample], map: &NodeMap) -> Placement {
    let series = node_series(samples, map);
    let ticks = series.len().max(1) as f64;
    let nodes = map
        .nodes()
        .map(|node| {
            let sum = |f: fn(&NodeTick) -> &PerNode<f64>| {
                series.iter().map(|t| count(f(t), node)).sum::<f64>()
            };
            NodeLoad {
                node,
                cpus: map.cpus_on(node),
                avg_threads: sum(|t| &t.threads) / ticks,
                avg_runnable: sum(|t| &t.runnable) / ticks,
                peak_threads: series
                    .iter()
                    .map(|t| count(&t.threads, node))
                    .fold(0.0, f64::max),
            }
        })
        .collect();
    let mut by_instance: BTreeMap<u32, Vec<Sample>> = BTreeMap::new();
    for s in samples {
        by_instance.entry(s.instance).or_default().push(*s);
    }
    let instances = by_instance
        .into_iter()
        .map(|(instance, samples)| instance_summary(instance, &samples, map))
        .collect();
    Placement {
        instances,
        nodes,
        series,
        unmapped_samples: samples.iter().filter(|s| map.node(s.cpu).is_none()).count(),
    }
}

/// The threads per node at each tick of `samples` (filter the samples first for one
/// instance's series), by time. Every node of the map has an entry, zero or not.
pub fn node_series(samples: &[Sample], map: &NodeMap) -> Vec<NodeTick> {
    series_by(samples, map, |s| s.weight)
}

fn series_by(samples: &[Sample], map: &NodeMap, weight: fn(&Sample) -> f64) -> Vec<NodeTick> {
    let empty: PerNode<f64> = map.nodes().map(|n| (n, 0.0)).collect();
    let mut ticks: BTreeMap<u64, NodeTick> = BTreeMap::new();
    for s in samples {
        let tick = ticks.entry(s.t_ms).or_insert_with(|| NodeTick {
            t_ms: s.t_ms,
            threads: empty.clone(),
            runnable: empty.clone(),
        });
        if let Some(node) = map.node(s.cpu) {
            *tick.threads.entry(node).or_default() += weight(s);
            if s.running {
                *tick.runnable.entry(node).or_default() += weight(s);
            }
        }
    }
    ticks.into_values().collect()
}

fn instance_summary(instance: u32, samples: &[Sample], map: &NodeMap) -> InstanceSummary {
    let mut by_tick: BTreeMap<u64, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by_tick.entry(s.t_ms).or_default().push(s);
    }
    let nodes = by_tick
        .iter()
        .map(|(&t, tick)| {
            let mut tick = tick.clone();
            tick.sort_by_key(|s| s.tid);
            (t, tick.iter().map(|s| map.node(s.cpu)).collect())
        })
        .collect();
    let series = series_by(samples, map, |s| s.instance_weight);
    let ticks = series.len().max(1) as f64;
    let average = |f: fn(&NodeTick) -> &PerNode<f64>| -> PerNode<f64> {
        map.nodes()
            .map(|node| {
                let sum: f64 = series.iter().map(|t| count(f(t), node)).sum();
                (node, sum / ticks)
            })
            .collect()
    };
    InstanceSummary {
        instance,
        nodes,
        avg_threads: average(|t| &t.threads),
        avg_runnable: average(|t| &t.runnable),
        series,
    }
}

fn count(per_node: &PerNode<f64>, node: u32) -> f64 {
    per_node.get(&node).copied().unwrap_or(0.0)
}
