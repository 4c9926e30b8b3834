use super::*;
use farm_proto::{Metric, RunResult};

fn run(cell: u32, state: RunState, wall: f64) -> RunRecord {
    RunRecord {
        run_id: format!("r{cell}-{wall}"),
        matrix_id: "m".into(),
        cell,
        repetition: 0,
        seq: 0,
        state,
        attempt: 1,
        agent_id: "a".into(),
        result: Some(RunResult {
            ok: state == RunState::Finished,
            metrics: vec![Metric {
                name: "wall_s".into(),
                value: wall,
                unit: "s".into(),
                direction: 1,
            }],
            ..Default::default()
        }),
    }
}

fn on(executor: &str, mut r: RunRecord) -> RunRecord {
    if let Some(res) = &mut r.result {
        res.executor = executor.into();
    }
    r
}

/// Cell 0, and cell 1 compared with it.
fn base_and_candidate() -> Vec<Cell> {
    vec![
        Cell {
            index: 0,
            name: "base".into(),
            ..Default::default()
        },
        Cell {
            index: 1,
            name: "cand".into(),
            baseline: Some(0),
            ..Default::default()
        },
    ]
}

#[test]
fn emulated_runs_are_not_compared_with_real_ones_unless_asked() {
    let mut cells = base_and_candidate();
    // Ten runs a side, the candidate twice as slow: a clear regression
    // when comparable.
    let runs: Vec<RunRecord> = (0..10)
        .flat_map(|k| {
            let jitter = 0.01 * f64::from(k);
            [
                on("host", run(0, RunState::Finished, 1.0 + jitter)),
                on("tcg", run(1, RunState::Finished, 2.0 + jitter)),
            ]
        })
        .collect();
    let refs: Vec<&RunRecord> = runs.iter().collect();
    let s = summarise(&cells, &refs, Vec::new());
    assert_eq!(s[1].verdict, WireVerdict::Unspecified as i32);
    assert!(
        s[1].notes[0].starts_with("not compared: emulated (tcg)"),
        "{:?}",
        s[1].notes
    );
    assert_eq!(s[1].metrics[0].verdict, WireVerdict::Unspecified as i32);
    assert_eq!(s[1].metrics[0].ratio, Some(2.045 / 1.045));
    assert_eq!(
        pair_verdict(
            &cells[1],
            &refs[1..].iter().step_by(2).copied().collect::<Vec<_>>(),
            &refs.iter().step_by(2).copied().collect::<Vec<_>>()
        ),
        None
    );
    cells[1].verdict = Some(VerdictPolicy {
        mix_executors: true,
        ..policy(&cells[1])
    });
    let s = summarise(&cells, &refs, Vec::new());
    assert_eq!(s[1].verdict, WireVerdict::Regression as i32);
    // Another arch is never compared, whatever the policy says.
    let runs: Vec<RunRecord> = runs
        .into_iter()
        .map(|mut r| {
            if let Some(res) = &mut r.result {
                res.arch = if r.cell == 1 { "s390x" } else { "x86_64" }.into();
            }
            r
        })
        .collect();
    let refs: Vec<&RunRecord> = runs.iter().collect();
    let s = summarise(&cells, &refs, Vec::new());
    assert_eq!(s[1].verdict, WireVerdict::Unspecified as i32);
    assert!(
        s[1].notes[0].starts_with("not compared: s390x runs against x86_64 runs"),
        "{:?}",
        s[1].notes
    );
}

#[test]
fn medians_and_ratios_to_baseline() {
    let cells = base_and_candidate();
    let runs = [
        run(0, RunState::Finished, 1.0),
        run(0, RunState::Finished, 3.0),
        run(0, RunState::Finished, 2.0),
        run(1, RunState::Finished, 4.0),
        run(1, RunState::Finished, 5.0),
        // A failed run's figures must not count.
        run(1, RunState::Failed, 100.0),
    ];
    let refs: Vec<&RunRecord> = runs.iter().collect();
    let s = summarise(&cells, &refs, Vec::new());
    assert_eq!(s[0].metrics[0].median, 2.0);
    assert_eq!(s[0].metrics[0].ratio, None);
    assert_eq!(s[1].metrics[0].n, 2);
    assert_eq!(s[1].metrics[0].median, 4.5);
    assert_eq!(s[1].metrics[0].baseline_median, Some(2.0));
    assert_eq!(s[1].metrics[0].ratio, Some(2.25));
}

#[test]
fn a_history_ends_worse_by_the_metrics_direction_and_minimum_effect() {
    // A history whose last change point multiplies the mean by `ratio`.
    let summary = |metric: &str, direction: WireDirection, ratio: f64| CellSummary {
        metrics: vec![MetricSummary {
            name: metric.into(),
            direction: direction as i32,
            ..Default::default()
        }],
        history: vec![History {
            metric: metric.into(),
            points: (0..10)
                .map(|i| SeriesPoint {
                    matrix_id: format!("m{i}"),
                    kernel: format!("k{i}"),
                    t_ms: i,
                    value: if i < 5 { 100.0 } else { 100.0 * ratio },
                })
                .collect(),
            change_points: vec![ChangePoint {
                index: 5,
                mean_before: 100.0,
                mean_after: 100.0 * ratio,
                p_value: 0.001,
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let cell = Cell::default();
    let lower = WireDirection::LowerIsBetter;
    let higher = WireDirection::HigherIsBetter;
    // Slower times and less throughput are regressions, from k5 in m5.
    let r = change_regressions(&cell, &summary("wall_s", lower, 1.3));
    assert_eq!(
        (r[0].kernel.as_str(), r[0].matrix_id.as_str()),
        ("k5", "m5")
    );
    assert!((r[0].ratio - 1.3).abs() < 1e-12);
    assert_eq!(
        change_regressions(&cell, &summary("ops", higher, 0.7)).len(),
        1
    );
    // Faster times and more throughput are not.
    assert!(change_regressions(&cell, &summary("wall_s", lower, 0.7)).is_empty());
    assert!(change_regressions(&cell, &summary("ops", higher, 1.3)).is_empty());
    // Below the default minimum effect (2%), nor is a step in the bad direction.
    assert!(change_regressions(&cell, &summary("wall_s", lower, 1.01)).is_empty());
    // Every change point is listed, whatever its direction.
    assert_eq!(change_points(&summary("ops", higher, 1.3)).len(), 1);
}

/// A result may carry many metrics (an agent's message holds 50,000 in
/// under 4 MiB): a cell's summary is linear in them. Looking each name up
/// by a scan took 1.25e9 comparisons here.
#[test]
fn many_metrics_in_a_result_are_summarised_in_linear_time() {
    const N: usize = 50_000;
    let cells = vec![Cell {
        index: 0,
        name: "c".into(),
        ..Default::default()
    }];
    let mut r = run(0, RunState::Finished, 1.0);
    if let Some(res) = &mut r.result {
        res.metrics.extend((0..N).map(|i| Metric {
            name: format!("instance_{i}_ops"),
            value: 1.0,
            unit: "ops".into(),
            direction: 2,
        }));
    }
    let started = std::time::Instant::now();
    let s = summarise(&cells, &[&r], Vec::new());
    let took = started.elapsed();
    assert_eq!(s[0].metrics.len(), N + 1);
    assert_eq!(s[0].metrics[N].name, format!("instance_{}_ops", N - 1));
    assert!(took < std::time::Duration::from_secs(2), "took {took:?}");
}
