//! Turning what was measured into a run's telemetry: scalar metrics (with
//! units and directions) for comparison, and the structured `Telemetry`
//! message for placement, IPIs, wasted cores and topology. Pure.

use std::time::Duration;

use farm_proto::{
    Direction, InstancePlacement, Metric, NodeLoad, NodeTick, RunqueueTick, Telemetry,
};

use super::interrupts::{self, IpiKind, IrqDelta};
use super::perf::Counts;
use super::placement::{self, NodeMap};
use super::sampler::Collected;
use super::topology::{self, Topology};
use super::waste;

/// Everything a run measured besides its own figures of merit.
pub struct Inputs<'a> {
    pub wall: Duration,
    pub counts: Option<Counts>,
    /// The run's total runqueue wait where the runqueues counted it (a
    /// guest's, which runs the workload alone: exited threads included);
    /// `None` for the sum of the threads' last sweeps.
    pub runqueue_wait_s: Option<f64>,
    pub irqs: &'a [IrqDelta],
    pub collected: &'a Collected,
    pub map: &'a NodeMap,
    /// CPUs the workload could use (online during the run).
    pub allowed: &'a [u32],
    pub user_hz: u64,
    pub topology: Option<(&'a Topology, &'a Topology)>,
}

/// `m` of `farm_spec`'s table of the metrics every run may report, with
/// this run's value: the one place their names, units and directions come
/// from.
pub fn known(m: farm_spec::metric::Metric, value: f64) -> Metric {
    Metric {
        name: m.name.into(),
        value,
        unit: m.unit.into(),
        direction: Direction::from(m.direction) as i32,
    }
}

/// A metric outside `farm_spec`'s table (a balancing counter per level),
/// lower is better.
pub fn known_named(name: String, unit: &str, value: f64) -> Metric {
    Metric {
        name,
        value,
        unit: unit.into(),
        direction: Direction::from(farm_spec::Direction::LowerIsBetter) as i32,
    }
}

fn ipi_name(k: Option<IpiKind>) -> &'static str {
    match k {
        Some(IpiKind::Rescheduling) => "rescheduling",
        Some(IpiKind::FunctionCall) => "function_call",
        Some(IpiKind::TlbShootdown) => "tlb_shootdown",
        Some(IpiKind::Mixed) => "mixed",
        Some(IpiKind::Other) => "other",
        None => "",
    }
}

fn levels(t: &Topology) -> Vec<String> {
    t.domains
        .per_cpu
        .iter()
        .map(|(cpu, ls)| {
            let names: Vec<String> = ls
                .iter()
                .map(|l| format!("{}[{}]", l.name, topology::format_cpu_list(&l.span)))
                .collect();
            format!("cpu{cpu}: {}", names.join(" "))
        })
        .collect()
}

/// Instances whose own placement series a run's telemetry carries: heat
/// maps of more would not be read, and 400 of them would bloat every result.
const MAX_INSTANCE_SERIES: u32 = 64;

/// A tick's threads per node, rounded, in the order of `node_ids`.
fn node_tick(t: &placement::NodeTick, node_ids: &[u32]) -> NodeTick {
    let per = |m: &placement::PerNode<f64>| -> Vec<u32> {
        node_ids
            .iter()
            .map(|n| m.get(n).copied().unwrap_or(0.0).round() as u32)
            .collect()
    };
    NodeTick {
        t_ms: t.t_ms,
        threads: per(&t.threads),
        runnable: per(&t.runnable),
    }
}

pub fn build(i: &Inputs<'_>) -> (Vec<Metric>, Telemetry) {
    use farm_spec::metric::{
        CONTEXT_SWITCHES, CPU_MIGRATIONS, CPUS_UTILISED, FUNCTION_CALL_IPIS, MIXED_IPIS,
        PAGE_FAULTS, RESCHEDULING_IPIS, RUNQUEUE_WAIT_P99_US, RUNQUEUE_WAIT_S, TASK_CLOCK_S,
        TELEMETRY_OVERHEAD_PCT, TLB_SHOOTDOWNS, WASTED_CORE_PCT, WASTED_CORE_S,
    };
    let wall_s = i.wall.as_secs_f64();
    let mut metrics = Vec::new();
    if let Some(c) = i.counts {
        metrics.push(known(TASK_CLOCK_S, c.task_clock_ns as f64 / 1e9));
        metrics.push(known(CPUS_UTILISED, c.cpus_utilised(wall_s)));
        metrics.push(known(CONTEXT_SWITCHES, c.context_switches as f64));
        metrics.push(known(CPU_MIGRATIONS, c.cpu_migrations as f64));
        metrics.push(known(PAGE_FAULTS, c.page_faults as f64));
        if c.task_clock_ns > 0 {
            // What sampling cost, against the CPU time of what it watched.
            let pct = i.collected.cost.as_secs_f64() / (c.task_clock_ns as f64 / 1e9) * 100.0;
            metrics.push(known(TELEMETRY_OVERHEAD_PCT, pct));
        }
    }
    let totals = interrupts::ipi_totals(i.irqs);
    // A kind is reported only where /proc/interrupts has a line for it:
    // s390x counts every IPI on one `mixed` line, and a zero there would
    // read as "no rescheduling IPIs" rather than "not counted".
    let counted = |k: IpiKind| i.irqs.iter().any(|d| d.ipi == Some(k));
    for (kind, m, value) in [
        (
            IpiKind::Rescheduling,
            RESCHEDULING_IPIS,
            totals.rescheduling,
        ),
        (
            IpiKind::FunctionCall,
            FUNCTION_CALL_IPIS,
            totals.function_call,
        ),
        (IpiKind::TlbShootdown, TLB_SHOOTDOWNS, totals.tlb_shootdown),
        (IpiKind::Mixed, MIXED_IPIS, totals.mixed),
    ] {
        if counted(kind) {
            metrics.push(known(m, value as f64));
        }
    }

    let placed = placement::summarize(&i.collected.samples, i.map);
    let node_ids: Vec<u32> = placed.nodes.iter().map(|n| n.node).collect();
    let wasted = waste::check(
        &i.collected.snapshots,
        &i.collected.samples,
        i.allowed,
        i.map,
        i.user_hz,
    );
    if wasted.intervals > 0 {
        metrics.push(known(WASTED_CORE_S, wasted.wasted_cpu_s));
        metrics.push(known(WASTED_CORE_PCT, wasted.percent));
    }
    let waits = &i.collected.waits;
    // From the sweeps only when some thread's schedstat was read: a kernel
    // without CONFIG_SCHED_INFO has no such file, which is not "no wait".
    let p99 = waits.quantile_us(0.99);
    if let Some(total) = i.runqueue_wait_s.or(p99.map(|_| waits.total_s())) {
        metrics.push(known(RUNQUEUE_WAIT_S, total));
    }
    if let Some(p99) = p99 {
        metrics.push(known(RUNQUEUE_WAIT_P99_US, p99));
    }
    let (topology_source, before, after, changes) = match i.topology {
        Some((b, a)) => (
            b.source.to_string(),
            levels(b),
            levels(a),
            topology::diff(b, a)
                .iter()
                .map(ToString::to_string)
                .collect(),
        ),
        None => (String::new(), Vec::new(), Vec::new(), Vec::new()),
    };
    let telemetry = Telemetry {
        sample_interval_ms: i.collected.interval.as_millis() as u32,
        threads_read_fraction: if i.collected.threads_seen > 0 {
            i.collected.threads_read as f64 / i.collected.threads_seen as f64
        } else {
            0.0
        },
        instances: placed
            .instances
            .iter()
            .map(|s| InstancePlacement {
                instance: s.instance,
                numa_nodes: s.numa_nodes_line(),
                avg_threads: s.avg_threads.iter().map(|(k, v)| (*k, *v)).collect(),
                avg_runnable: s.avg_runnable.iter().map(|(k, v)| (*k, *v)).collect(),
                series: if s.instance < MAX_INSTANCE_SERIES {
                    s.series.iter().map(|t| node_tick(t, &node_ids)).collect()
                } else {
                    Vec::new()
                },
            })
            .collect(),
        nodes: placed
            .nodes
            .iter()
            .map(|n| NodeLoad {
                node: n.node,
                cpus: n.cpus as u32,
                avg_threads: n.avg_threads,
                avg_runnable: n.avg_runnable,
                peak_threads: n.peak_threads.round() as u32,
            })
            .collect(),
        series: placed
            .series
            .iter()
            .map(|t| node_tick(t, &node_ids))
            .collect(),
        irqs: i
            .irqs
            .iter()
            .filter(|d| d.total > 0)
            .map(|d| farm_proto::IrqDelta {
                name: d.name.clone(),
                description: d.description.clone(),
                ipi: ipi_name(d.ipi).into(),
                total: d.total,
                per_cpu: d.per_cpu.iter().map(|(k, v)| (*k, *v)).collect(),
            })
            .collect(),
        wasted_cpu_s_per_node: wasted.per_node.iter().map(|(k, v)| (*k, *v)).collect(),
        topology_source,
        topology_before: before,
        topology_after: after,
        topology_changes: changes,
        runqueue: waits
            .series
            .iter()
            .map(|t| RunqueueTick {
                t_ms: t.t_ms,
                waiting: t.waiting,
            })
            .collect(),
        // Whole here; the result is thinned to its budget once assembled.
        downsampled_from: 0,
    };
    (metrics, telemetry)
}
