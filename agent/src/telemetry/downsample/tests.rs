use std::time::Duration;

use farm_proto::{InstancePlacement, NodeTick, NumaNode};

use super::*;
use crate::executor::contract::{End, Outcome, finish};
use crate::executor::launch::Output;
use crate::telemetry::placement::{NodeMap, Sample};
use crate::telemetry::report;
use crate::telemetry::sampler::{Collected, DEFAULT_INTERVAL};

/// `thin(0..n, keep)`, the indexes kept.
fn check(n: usize, keep: usize, expected: &[usize]) {
    let points: Vec<usize> = (0..n).collect();
    assert_eq!(thin(&points, keep), expected, "n {n}, keep {keep}");
}

#[test]
fn thinning_keeps_the_first_and_the_last_and_steps_evenly() {
    check(10, 4, &[0, 3, 6, 9]);
    check(10, 3, &[0, 4, 9]);
    check(10, 2, &[0, 9]);
    // Never fewer than the first and the last.
    check(10, 1, &[0, 9]);
    check(10, 0, &[0, 9]);
    // As many or fewer points than asked: all of them.
    check(10, 10, &[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    check(3, 20, &[0, 1, 2]);
    check(1, 2, &[0]);
    check(0, 2, &[]);
    // One short of all: a single point is left out, in the middle.
    check(5, 4, &[0, 1, 2, 4]);
}

#[test]
fn thinning_a_long_series_keeps_exactly_as_many_as_asked() {
    let points: Vec<usize> = (0..6000).collect();
    let kept = thin(&points, 1000);
    assert_eq!(kept.len(), 1000);
    assert_eq!((kept[0], kept[1], kept[998], kept[999]), (0, 6, 5992, 5999));
    // Steps of 6, and of 7 now and then (5999 / 999 = 6.005).
    let steps: Vec<usize> = kept.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(steps.iter().filter(|&&s| s == 6).count(), 994);
    assert_eq!(steps.iter().filter(|&&s| s == 7).count(), 5);
}

fn tick(t_ms: u64) -> NodeTick {
    NodeTick {
        t_ms,
        threads: vec![1, 0],
        runnable: vec![1, 0],
    }
}

#[test]
fn every_series_is_thinned_alike_and_the_telemetry_says_from_how_many() {
    let mut t = Telemetry {
        series: (0..10).map(|k| tick(k * 100)).collect(),
        instances: vec![
            InstancePlacement {
                instance: 0,
                numa_nodes: "0 1 0 1 0 1 0 1 0 1".into(),
                series: (0..10).map(|k| tick(k * 100)).collect(),
                ..Default::default()
            },
            // Had threads in fewer ticks; no series of its own (past the
            // 64 that have one), only its line.
            InstancePlacement {
                instance: 64,
                numa_nodes: "1/0 1/1 0/0 0/1 1/1".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    assert_eq!(longest(&t), 10);
    thin_telemetry(&mut t, 4);
    let times = |s: &[NodeTick]| s.iter().map(|k| k.t_ms).collect::<Vec<_>>();
    assert_eq!(times(&t.series), [0, 300, 600, 900]);
    assert_eq!(times(&t.instances[0].series), [0, 300, 600, 900]);
    assert_eq!(t.instances[0].numa_nodes, "0 1 0 1");
    assert_eq!(t.instances[1].numa_nodes, "1/0 1/1 0/0 1/1");
    assert_eq!(t.downsampled_from, 10);

    // Series no longer than asked are left whole, and said to be.
    let mut short = Telemetry {
        series: (0..3).map(|k| tick(k * 100)).collect(),
        ..Default::default()
    };
    let before = short.clone();
    thin_telemetry(&mut short, 4);
    assert_eq!(short, before);
    assert_eq!(short.downsampled_from, 0);
}

#[test]
fn a_result_within_its_budget_is_left_alone() {
    let mut result = RunResult {
        ok: true,
        telemetry: Some(Telemetry {
            series: (0..100).map(|k| tick(k * 100)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let before = result.clone();
    to_budget(&mut result, before.encoded_len());
    assert_eq!(result, before);
    // One byte less, and ticks go.
    to_budget(&mut result, before.encoded_len() - 1);
    let t = result.telemetry.as_ref().unwrap();
    assert!(result.encoded_len() < before.encoded_len());
    assert_eq!((t.series.len(), t.downsampled_from), (99, 100));
    // A result without telemetry has nothing to thin.
    let mut bare = RunResult {
        error: "x".repeat(100),
        ..Default::default()
    };
    to_budget(&mut bare, 10);
    assert_eq!(bare.error.len(), 100);
    assert_eq!(bare.telemetry, None);
}

/// How a 10-minute `stream` run of 64 instances (one thread each) samples
/// at the agent's interval on a machine of 4 nodes of 16 CPUs: every
/// thread at every sweep, each instance moving to the next CPU every 5 s.
fn ten_minute_stream_of_64() -> Collected {
    const INSTANCES: u32 = 64;
    let ticks = Duration::from_secs(600).as_millis() / DEFAULT_INTERVAL.as_millis();
    assert_eq!(ticks, 6000);
    let step = DEFAULT_INTERVAL.as_millis() as u64;
    let samples: Vec<Sample> = (0..ticks as u64)
        .flat_map(|k| {
            (0..INSTANCES).map(move |i| {
                let cpu = (i + (k / 50) as u32) % 64;
                Sample::whole(k * step, i, 1000 + i, cpu, (k + u64::from(i)) % 4 != 0)
            })
        })
        .collect();
    let n = samples.len() as u64;
    Collected {
        interval: DEFAULT_INTERVAL,
        samples,
        threads_read: n,
        threads_seen: n,
        ..Default::default()
    }
}

#[test]
fn a_ten_minute_stream_run_of_64_instances_fits_its_budget() {
    let collected = ten_minute_stream_of_64();
    assert_eq!(collected.samples.len(), 6000 * 64);
    let map = NodeMap::from_nodes(
        &(0..4)
            .map(|id| NumaNode {
                id,
                cpus: (id * 16..(id + 1) * 16).collect(),
            })
            .collect::<Vec<_>>(),
    );
    let allowed: Vec<u32> = (0..64).collect();
    let (metrics, whole) = report::build(&report::Inputs {
        wall: Duration::from_secs(600),
        counts: None,
        runqueue_wait_s: None,
        irqs: &[],
        collected: &collected,
        map: &map,
        allowed: &allowed,
        user_hz: 100,
        topology: None,
    });
    assert_eq!(whole.series.len(), 6000);
    assert_eq!(whole.instances.len(), 64);
    let unthinned = RunResult {
        ok: true,
        metrics: metrics.clone(),
        telemetry: Some(whole.clone()),
        ..Default::default()
    };
    // Whole, it would not even be sent.
    assert!(unthinned.encoded_len() > farm_proto::MAX_AGENT_MESSAGE_BYTES);

    // The result as the host executor assembles it.
    let mut result = RunResult::default();
    let outcome = Outcome {
        end: End::Exited(0),
        stdout: String::new(),
        stderr: String::new(),
        metrics,
        telemetry: Some(whole.clone()),
        console: None,
    };
    finish(&mut result, outcome, Output::MetricLines, 660);
    assert!(result.ok, "{}", result.error);
    assert!(result.encoded_len() <= RESULT_BUDGET_BYTES);
    let t = result.telemetry.as_ref().unwrap();
    assert_eq!(t.downsampled_from, 6000);
    // As many as fit: a tick every 750 ms or so.
    assert_eq!(t.series.len(), 803);
    assert_eq!(t.series.first(), whole.series.first());
    assert_eq!(t.series.last(), whole.series.last());
    for (i, w) in t.instances.iter().zip(&whole.instances) {
        assert_eq!(i.series.len(), 803);
        assert_eq!(i.series.first(), w.series.first());
        assert_eq!(i.series.last(), w.series.last());
        let ticks = |line: &str| line.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let (kept, all) = (ticks(&i.numa_nodes), ticks(&w.numa_nodes));
        assert_eq!(kept.len(), 803);
        assert_eq!((kept.first(), kept.last()), (all.first(), all.last()));
        // What is averaged over the run is over every tick still.
        assert_eq!(
            (&i.avg_threads, &i.avg_runnable),
            (&w.avg_threads, &w.avg_runnable)
        );
    }
    assert_eq!(t.nodes, whole.nodes);
}
