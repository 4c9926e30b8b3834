//! Timelines shaped like the seeds' experiments, on a small four-node machine.

use std::collections::BTreeMap;

use farm_proto::NumaNode;

use super::{NodeMap, NodeTick, Sample, node_series, summarize};

/// Four nodes of two CPUs: node n holds CPUs 2n and 2n+1.
fn four_nodes() -> NodeMap {
    NodeMap::from_nodes(
        &(0..4)
            .map(|id| NumaNode {
                id,
                cpus: vec![2 * id, 2 * id + 1],
            })
            .collect::<Vec<_>>(),
    )
}

/// Samples from `(t_ms, instance, tid, cpu, running)` rows.
fn timeline(rows: &[(u64, u32, u32, u32, bool)]) -> Vec<Sample> {
    rows.iter()
        .map(|&(t_ms, instance, tid, cpu, running)| Sample {
            t_ms,
            instance,
            tid,
            cpu,
            running,
            weight: 1.0,
            instance_weight: 1.0,
        })
        .collect()
}

/// One single-threaded instance per entry of `nodes_per_tick`, sampled every 100 ms on
/// the first CPU of the given node.
fn single_threaded(instances: &[&[u32]]) -> Vec<Sample> {
    let mut samples = Vec::new();
    for (i, nodes) in instances.iter().enumerate() {
        let i = i as u32;
        for (k, &node) in nodes.iter().enumerate() {
            samples.push(Sample {
                t_ms: 100 * k as u64,
                instance: i + 1,
                tid: 1000 + i,
                cpu: 2 * node,
                running: true,
                weight: 1.0,
                instance_weight: 1.0,
            });
        }
    }
    samples
}

fn per_node(values: [f64; 4]) -> BTreeMap<u32, f64> {
    (0..4).zip(values).collect()
}

#[test]
fn seed_001_numa_nodes_lines() {
    // Seed 001: instances 3 and 4 share node 3, node 1 runs none for most of the run.
    let samples = single_threaded(&[
        &[2, 2, 1, 1, 2, 2],
        &[0, 0, 0, 0, 0, 0],
        &[3, 3, 0, 0, 3, 3],
        &[3, 3, 3, 3, 3, 0],
    ]);
    let placement = summarize(&samples, &four_nodes());
    let lines: Vec<(u32, String)> = placement
        .instances
        .iter()
        .map(|i| (i.instance, i.numa_nodes_line()))
        .collect();
    assert_eq!(
        lines,
        [
            (1, "2 2 1 1 2 2".to_owned()),
            (2, "0 0 0 0 0 0".to_owned()),
            (3, "3 3 0 0 3 3".to_owned()),
            (4, "3 3 3 3 3 0".to_owned()),
        ]
    );
    let node3: Vec<f64> = placement
        .instances
        .iter()
        .map(|i| i.avg_threads[&3])
        .collect();
    assert_eq!(node3, [0.0, 0.0, 4.0 / 6.0, 5.0 / 6.0]);
    let loads: Vec<(u32, f64, f64)> = placement
        .nodes
        .iter()
        .map(|n| (n.node, n.avg_threads, n.peak_threads))
        .collect();
    assert_eq!(
        loads,
        [
            (0, 9.0 / 6.0, 2.0),
            (1, 2.0 / 6.0, 1.0),
            (2, 4.0 / 6.0, 1.0),
            (3, 9.0 / 6.0, 2.0),
        ]
    );
    assert_eq!(placement.series.len(), 6);
    assert_eq!(placement.unmapped_samples, 0);
}

#[test]
fn seed_003_averages_and_overcommit() {
    // One instance of six threads, two ticks; at the second, two threads sleep.
    let samples = timeline(&[
        (0, 0, 11, 0, true),
        (0, 0, 12, 1, true),
        (0, 0, 13, 4, true),
        (0, 0, 14, 4, true),
        (0, 0, 15, 5, true),
        (0, 0, 16, 6, true),
        (100, 0, 11, 2, true),
        (100, 0, 12, 4, true),
        (100, 0, 13, 4, false),
        (100, 0, 14, 5, true),
        (100, 0, 15, 7, false),
        (100, 0, 16, 6, true),
    ]);
    let placement = summarize(&samples, &four_nodes());
    let instance = &placement.instances[0];
    assert_eq!(instance.avg_threads, per_node([1.0, 0.5, 3.0, 1.5]));
    assert_eq!(instance.avg_runnable, per_node([1.0, 0.5, 2.5, 1.0]));
    assert_eq!(instance.numa_nodes_line(), "0/0/2/2/2/3 1/2/2/2/3/3");
    let described: Vec<(String, bool)> = placement
        .nodes
        .iter()
        .map(|n| (n.describe(), n.overcommitted()))
        .collect();
    assert_eq!(
        described,
        [
            (
                "node 0 holds 1.0 threads (1.0 runnable) on 2 CPUs".to_owned(),
                false
            ),
            (
                "node 1 holds 0.5 threads (0.5 runnable) on 2 CPUs".to_owned(),
                false
            ),
            (
                "node 2 holds 3.0 threads (2.5 runnable) on 2 CPUs".to_owned(),
                true
            ),
            (
                "node 3 holds 1.5 threads (1.0 runnable) on 2 CPUs".to_owned(),
                false
            ),
        ]
    );
}

#[test]
fn instances_average_over_their_own_ticks() {
    // Instance 1 runs from the start; instance 2 (a single thread) only at the end.
    // The competing load's averages in seed 003 read "1.00 0.75 0.25" this way.
    let samples = timeline(&[
        (0, 1, 10, 0, true),
        (100, 1, 10, 0, true),
        (200, 1, 10, 2, true),
        (300, 1, 10, 4, true),
        (200, 2, 20, 6, true),
        (300, 2, 20, 6, true),
    ]);
    let placement = summarize(&samples, &four_nodes());
    assert_eq!(
        placement.instances[0].avg_threads,
        per_node([0.5, 0.25, 0.25, 0.0])
    );
    assert_eq!(
        placement.instances[1].avg_threads,
        per_node([0.0, 0.0, 0.0, 1.0])
    );
    assert_eq!(
        placement.instances[1].nodes,
        [(200, vec![Some(3)]), (300, vec![Some(3)])]
    );
}

#[test]
fn node_series_for_heat_maps() {
    let samples = timeline(&[
        (100, 0, 1, 0, true),
        (0, 0, 1, 1, true),
        (0, 0, 2, 3, false),
        (100, 0, 2, 0, true),
    ]);
    let map = NodeMap::from_nodes(&[
        NumaNode {
            id: 0,
            cpus: vec![0, 1],
        },
        NumaNode {
            id: 1,
            cpus: vec![2, 3],
        },
    ]);
    let tick = |t_ms, threads: [f64; 2], runnable: [f64; 2]| NodeTick {
        t_ms,
        threads: (0..2).zip(threads).collect(),
        runnable: (0..2).zip(runnable).collect(),
    };
    assert_eq!(
        node_series(&samples, &map),
        [
            tick(0, [1.0, 1.0], [1.0, 0.0]),
            tick(100, [2.0, 0.0], [2.0, 0.0])
        ]
    );
}

#[test]
fn unknown_cpus_and_single_node_machines() {
    // s390x has no NUMA nodes in sysfs: one node for all.
    let map = NodeMap::single(&[0, 1]);
    assert_eq!(map.nodes().collect::<Vec<_>>(), [0]);
    assert_eq!(map.cpus_on(0), 2);
    // A CPU the map does not know (it came online after the map was made).
    let samples = timeline(&[(0, 0, 1, 0, true), (0, 0, 2, 5, true)]);
    let placement = summarize(&samples, &map);
    assert_eq!(placement.unmapped_samples, 1);
    assert_eq!(placement.instances[0].numa_nodes_line(), "0/?");
    assert_eq!(placement.nodes[0].avg_threads, 1.0);
    // No samples at all: zeros, not NaN.
    let empty = summarize(&[], &map);
    assert!(empty.instances.is_empty());
    assert_eq!(empty.nodes[0].avg_threads, 0.0);
}
