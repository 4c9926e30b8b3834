//! Scenarios on a two-node machine (node 0: cpus 0-1, node 1: cpus 2-3), sampled every
//! 100 ms, USER_HZ 100 (so 10 idle ticks are a whole interval).

use farm_proto::NumaNode;

use super::{Snapshot, Waste, check};
use crate::telemetry::placement::{NodeMap, Sample};
use crate::telemetry::procstat::{CpuTimes, ProcStat};

fn two_nodes() -> NodeMap {
    NodeMap::from_nodes(&[
        NumaNode {
            id: 0,
            cpus: vec![0, 1],
        },
        NumaNode {
            id: 1,
            cpus: vec![2, 3],
        },
    ])
}

/// `/proc/stat` at `t_ms` with the given cumulative (idle, iowait) ticks per CPU.
fn snap(t_ms: u64, idle: &[(u32, u64, u64)]) -> Snapshot {
    let per_cpu = idle
        .iter()
        .map(|&(cpu, idle, iowait)| {
            (
                cpu,
                CpuTimes {
                    idle,
                    iowait,
                    ..CpuTimes::default()
                },
            )
        })
        .collect();
    Snapshot {
        t_ms,
        stat: ProcStat {
            total: CpuTimes::default(),
            per_cpu,
        },
    }
}

/// Threads of the workload at `t_ms`: `(cpu, runnable)` each.
fn threads(t_ms: u64, on: &[(u32, bool)]) -> Vec<Sample> {
    on.iter()
        .enumerate()
        .map(|(i, &(cpu, running))| Sample {
            t_ms,
            instance: 0,
            tid: 100 + i as u32,
            cpu,
            running,
            weight: 1.0,
            instance_weight: 1.0,
        })
        .collect()
}

/// Three runnable threads on cpu0 (two waiting), one on each CPU of node 1.
fn queue_on_cpu0(t_ms: u64) -> Vec<Sample> {
    threads(
        t_ms,
        &[(0, true), (0, true), (0, true), (2, true), (3, true)],
    )
}

struct Case {
    name: &'static str,
    snapshots: Vec<Snapshot>,
    samples: Vec<Sample>,
    allowed: &'static [u32],
    wasted: f64,
    per_node: [f64; 2],
    percent: f64,
    intervals: (usize, usize),
}

fn check_case(case: Case) {
    let got: Waste = check(
        &case.snapshots,
        &case.samples,
        case.allowed,
        &two_nodes(),
        100,
    );
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(
        close(got.wasted_cpu_s, case.wasted),
        "{}: wasted {} != {}",
        case.name,
        got.wasted_cpu_s,
        case.wasted
    );
    for (node, want) in case.per_node.iter().enumerate() {
        assert!(
            close(got.per_node[&(node as u32)], *want),
            "{}: node {node}: {:?}",
            case.name,
            got.per_node
        );
    }
    assert!(
        close(got.percent, case.percent),
        "{}: percent {} != {}",
        case.name,
        got.percent,
        case.percent
    );
    assert_eq!(
        (got.intervals, got.intervals_with_waste),
        case.intervals,
        "{}",
        case.name
    );
    assert_eq!(got.allowed_cpus, case.allowed.len(), "{}", case.name);
}

#[test]
fn wasted_core_time() {
    let all: &[u32] = &[0, 1, 2, 3];
    let both_ends = |a: Vec<Sample>, b: Vec<Sample>| [a, b].concat();
    let cases = vec![
        Case {
            name: "two threads wait on cpu0 while cpu1 idles the whole interval",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),
                snap(100, &[(0, 0, 0), (1, 10, 0), (2, 0, 0), (3, 0, 0)]),
            ],
            samples: both_ends(queue_on_cpu0(0), queue_on_cpu0(100)),
            allowed: all,
            // min(2 waiting × 0.1 s, 0.1 s idle)
            wasted: 0.1,
            per_node: [0.1, 0.0],
            // 0.1 of 0.1 s × 4 CPUs
            percent: 25.0,
            intervals: (1, 1),
        },
        Case {
            name: "the queue is seen at the start only",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),
                snap(100, &[(0, 0, 0), (1, 10, 0), (2, 0, 0), (3, 0, 0)]),
            ],
            samples: both_ends(
                queue_on_cpu0(0),
                threads(100, &[(0, true), (1, true), (2, true)]),
            ),
            allowed: all,
            wasted: 0.0,
            per_node: [0.0, 0.0],
            percent: 0.0,
            intervals: (1, 0),
        },
        Case {
            name: "waiting threads that are not runnable do not count",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (1, 0, 0)]),
                snap(100, &[(0, 0, 0), (1, 10, 0)]),
            ],
            samples: both_ends(
                threads(0, &[(0, true), (0, false), (0, false)]),
                threads(100, &[(0, true), (0, false), (0, false)]),
            ),
            allowed: &[0, 1],
            wasted: 0.0,
            per_node: [0.0, 0.0],
            percent: 0.0,
            intervals: (1, 0),
        },
        Case {
            name: "the idle CPU is outside the workload's cpuset",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),
                snap(100, &[(0, 0, 0), (1, 10, 0), (2, 0, 0), (3, 0, 0)]),
            ],
            samples: both_ends(queue_on_cpu0(0), queue_on_cpu0(100)),
            allowed: &[0, 2, 3],
            wasted: 0.0,
            per_node: [0.0, 0.0],
            percent: 0.0,
            intervals: (1, 0),
        },
        Case {
            name: "idle on both nodes, iowait included, attributed by idle time",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),
                // cpu1 idles 0.06 s and waits for I/O 0.04 s; cpu3 idles 0.05 s.
                snap(100, &[(0, 0, 0), (1, 6, 4), (2, 0, 0), (3, 5, 0)]),
            ],
            samples: both_ends(queue_on_cpu0(0), queue_on_cpu0(100)),
            allowed: all,
            // min(0.2, 0.1 + 0.05)
            wasted: 0.15,
            per_node: [0.1, 0.05],
            percent: 37.5,
            intervals: (1, 1),
        },
        Case {
            name: "idle is capped at the interval, waste at the waiting threads",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),
                // 15 ticks in a 100 ms interval: tick rounding.
                snap(100, &[(0, 0, 0), (1, 15, 0), (2, 10, 0), (3, 10, 0)]),
            ],
            samples: both_ends(
                threads(0, &[(0, true), (0, true)]),
                threads(100, &[(0, true), (0, true)]),
            ),
            allowed: all,
            // min(1 waiting × 0.1, 0.1 + 0.1 + 0.1)
            wasted: 0.1,
            per_node: [0.1 / 3.0, 0.2 / 3.0],
            percent: 25.0,
            intervals: (1, 1),
        },
        Case {
            name: "three snapshots, waste in the first interval only, in any order",
            snapshots: vec![
                snap(200, &[(0, 0, 0), (1, 10, 0), (2, 0, 0), (3, 0, 0)]),
                snap(0, &[(0, 0, 0), (1, 0, 0), (2, 0, 0), (3, 0, 0)]),
                snap(100, &[(0, 0, 0), (1, 5, 0), (2, 0, 0), (3, 0, 0)]),
            ],
            samples: [
                queue_on_cpu0(0),
                queue_on_cpu0(100),
                threads(200, &[(0, true), (1, true), (2, true), (3, true)]),
            ]
            .concat(),
            allowed: all,
            wasted: 0.05,
            per_node: [0.05, 0.0],
            // 0.05 of 0.2 s × 4 CPUs
            percent: 6.25,
            intervals: (2, 1),
        },
        Case {
            name: "a CPU offline at one end has no idle to give",
            snapshots: vec![
                snap(0, &[(0, 0, 0), (2, 0, 0), (3, 0, 0)]),
                snap(100, &[(0, 0, 0), (1, 10, 0), (2, 0, 0), (3, 0, 0)]),
            ],
            samples: both_ends(queue_on_cpu0(0), queue_on_cpu0(100)),
            allowed: all,
            wasted: 0.0,
            per_node: [0.0, 0.0],
            percent: 0.0,
            intervals: (1, 0),
        },
        Case {
            name: "a single snapshot is no interval",
            snapshots: vec![snap(0, &[(0, 0, 0), (1, 0, 0)])],
            samples: queue_on_cpu0(0),
            allowed: all,
            wasted: 0.0,
            per_node: [0.0, 0.0],
            percent: 0.0,
            intervals: (0, 0),
        },
    ];
    for case in cases {
        check_case(case);
    }
}
