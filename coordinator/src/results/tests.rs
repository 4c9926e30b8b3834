use super::*;
use crate::ids::{AgentId, CellIndex, MatrixId};
use farm_proto::{Metric, RunResult};

/// A cell written as the wire has it (an empty kernel is `running`),
/// converted as it enters.
fn typed(mut c: farm_proto::Cell) -> Cell {
    if c.kernel.is_empty() {
        c.kernel = "running".into();
    }
    Cell::try_from(&c).unwrap()
}

fn run(cell: u32, state: RunState, wall: f64) -> RunRecord {
    RunRecord {
        run_id: crate::ids::RunId::new(MatrixId::nth(0), CellIndex::new(cell), 0),
        matrix_id: MatrixId::nth(0),
        cell: CellIndex::new(cell),
        repetition: 0,
        seq: 0,
        state,
        attempt: 1,
        agent_id: Some(AgentId::nth(1)),
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
        typed(farm_proto::Cell {
            index: 0,
            name: "base".into(),
            ..Default::default()
        }),
        typed(farm_proto::Cell {
            index: 1,
            name: "cand".into(),
            baseline: Some(0),
            ..Default::default()
        }),
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
        ..crate::policy::of(&cells[1])
    });
    let s = summarise(&cells, &refs, Vec::new());
    assert_eq!(s[1].verdict, WireVerdict::Regression as i32);
    // Another arch is never compared, whatever the policy says.
    let runs: Vec<RunRecord> = runs
        .into_iter()
        .map(|mut r| {
            if let Some(res) = &mut r.result {
                res.arch = if r.cell.get() == 1 { "s390x" } else { "x86_64" }.into();
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
    let cell = typed(farm_proto::Cell::default());
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
    let cells = vec![typed(farm_proto::Cell {
        index: 0,
        name: "c".into(),
        ..Default::default()
    })];
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

/// A cell's series point: matrix `i` on kernel `k{i}`, one wall_s.
fn point(i: u64, wall: f64) -> Point {
    Point {
        matrix_id: MatrixId::nth(i),
        matrix_seq: i,
        cell: crate::ids::CellIndex::new(0),
        submitted_ms: i,
        kernel: format!("k{i}"),
        medians: vec![Median {
            name: "wall_s".into(),
            unit: "s".into(),
            value: wall,
        }],
    }
}

#[test]
fn a_steady_drift_is_a_drift_not_a_staircase() {
    // 40 matrices, wall time up 0.5% of 10 s each, ±0.5% noise (fixed).
    let wobble = [
        0.05, -0.03, 0.0, 0.04, -0.05, 0.02, -0.01, 0.03, -0.04, 0.01,
    ];
    let points: Vec<Point> = (0..40u64)
        .map(|i| point(i, 10.0 + 0.05 * i as f64 + wobble[i as usize % 10]))
        .collect();
    let h = &histories(&points, 30)[0];
    assert_eq!(h.change_points, vec![], "a drift is not cut into steps");
    let d = h.drift.as_ref().expect("a drift");
    assert_eq!((d.start_index, d.points), (10, 30));
    assert!(d.slope_low < 0.05 && 0.05 < d.slope_high, "{d:?}");
    // Over the last 30 points the level moved by 29 × 0.05 from about 10.5.
    assert!(
        (d.level_end / d.level_start - 11.95 / 10.5).abs() < 0.01,
        "{d:?}"
    );
    // As a regression, it is labelled with the regime's first point (the
    // history's first: no change point), with the 2% minimum effect.
    let summary = CellSummary {
        metrics: vec![MetricSummary {
            name: "wall_s".into(),
            direction: WireDirection::LowerIsBetter as i32,
            ..Default::default()
        }],
        history: vec![h.clone()],
        ..Default::default()
    };
    let r = drift_regressions(&typed(farm_proto::Cell::default()), &summary);
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].kernel.as_str(), r[0].matrix_id.as_str()),
        ("k0", MatrixId::nth(0).to_string().as_str())
    );
    assert!((r[0].ratio - d.level_end / d.level_start).abs() < 1e-12);
    // A window of 10 sees 9 × 0.05 = 4%; a minimum effect of 5% does not
    // call that a regression, and a throughput rising so is no regression.
    let h10 = &histories(&points, 10)[0];
    let cell = typed(farm_proto::Cell {
        verdict: Some(VerdictPolicy {
            min_effect: 0.05,
            ..Default::default()
        }),
        ..Default::default()
    });
    let short = CellSummary {
        history: vec![h10.clone()],
        ..summary.clone()
    };
    assert!(h10.drift.is_some());
    assert_eq!(drift_regressions(&cell, &short), vec![]);
    let faster = CellSummary {
        metrics: vec![MetricSummary {
            name: "wall_s".into(),
            direction: WireDirection::HigherIsBetter as i32,
            ..Default::default()
        }],
        ..summary
    };
    assert_eq!(
        drift_regressions(&typed(farm_proto::Cell::default()), &faster),
        vec![]
    );
}

#[test]
fn a_step_is_a_change_point_and_no_drift() {
    let wobble = [
        0.05, -0.03, 0.0, 0.04, -0.05, 0.02, -0.01, 0.03, -0.04, 0.01,
    ];
    let points: Vec<Point> = (0..30u64)
        .map(|i| {
            point(
                i,
                if i < 15 { 10.0 } else { 12.0 } + wobble[i as usize % 10],
            )
        })
        .collect();
    let h = &histories(&points, 30)[0];
    let at: Vec<u32> = h.change_points.iter().map(|c| c.index).collect();
    assert_eq!(at, vec![15]);
    // The 15 points after it are flat.
    assert_eq!(h.drift, None);
}

/// The host's load moved with the kernel here (a run slower by half keeps
/// more threads runnable), and so did cpu-migrations: only the latter is
/// the kernel's, and only it makes a diagnosis line.
#[test]
fn the_hosts_conditions_are_never_a_diagnosis_line() {
    let cells = base_and_candidate();
    let with = |cell: u32, k: u32| {
        let slow = f64::from(cell) * 0.5 + 1.0;
        let jitter = 0.01 * f64::from(k);
        let mut r = run(cell, RunState::Finished, slow + jitter);
        let res = r.result.as_mut().unwrap();
        for (name, value) in [
            ("cpu_migrations", 1000.0 * slow + jitter),
            ("host_load", 2.0 * slow + jitter),
            ("host_cpus", 2.0),
        ] {
            res.metrics.push(Metric {
                name: name.into(),
                value,
                unit: String::new(),
                direction: 1,
            });
        }
        r
    };
    let runs: Vec<RunRecord> = (0..10).flat_map(|k| [with(0, k), with(1, k)]).collect();
    let refs: Vec<&RunRecord> = runs.iter().collect();
    let s = summarise(&cells, &refs, Vec::new());
    assert_eq!(s[1].verdict, WireVerdict::Regression as i32);
    let load = s[1].metrics.iter().find(|m| m.name == "host_load").unwrap();
    assert_eq!(load.verdict, WireVerdict::Regression as i32, "it did move");
    assert_eq!(
        s[1].diagnosis,
        ["cpu-migrations ×1.50 (1,000 → 1,500)"],
        "{:?}",
        s[1].diagnosis
    );
}
