use farm_proto::{Cell, Metric, RunResult};
use prost::Message as _;

use super::*;
use crate::ids::{BisectionId, CellIndex, MatrixId};

/// The regressed cell, as the wire has it and converted as it enters.
fn cell() -> crate::cell::Cell {
    crate::cell::Cell::try_from(&Cell {
        index: 1,
        name: "hackbench(groups=2) | kernel=git:linux@bisect-bad".into(),
        kernel: "git:linux@bisect-bad".into(),
        baseline: Some(0),
        verdict: Some(VerdictPolicy {
            min_effect: 0.05,
            max_runs: 10,
            repetitions: 10,
            ..VerdictPolicy::default()
        }),
        ..Cell::default()
    })
    .unwrap()
}

/// The kernels of a test, as the callers of `create` give them: parsed.
fn kernels(ks: &[&str]) -> Vec<farm_spec::Kernel> {
    ks.iter().map(|k| k.parse().unwrap()).collect()
}

fn new<'a>(
    c: &'a crate::cell::Cell,
    good: &'a farm_spec::Kernel,
    between: &'a [farm_spec::Kernel],
) -> New<'a> {
    New {
        id: BisectionId::nth(1),
        matrix_id: MatrixId::nth(1),
        matrix_name: "seed 002".into(),
        timeout_s: 600,
        cell: c,
        good,
        between,
        metric: "time_s".into(),
        direction: Direction::LowerIsBetter,
        runs: 0,
        max_runs: 0,
        created_ms: 1,
    }
}

#[test]
fn a_record_lists_good_then_between_then_bad_with_the_defaults() {
    let c = cell();
    let (good, between) = (
        &kernels(&["git:linux@v6.1"])[0],
        kernels(&["git:linux@abc123"]),
    );
    let b = create(new(&c, good, &between)).unwrap();
    assert_eq!(
        b.kernels,
        ["git:linux@v6.1", "git:linux@abc123", "git:linux@bisect-bad"]
    );
    assert_eq!((b.runs, b.max_runs), (DEFAULT_RUNS, DEFAULT_MAX_RUNS));
    let t = b.template.as_ref().unwrap();
    assert_eq!(t.baseline, None);
    // The policy's minimum effect is the bisector's.
    assert_eq!(bisector(&b).unwrap().options.min_effect, 0.05);
}

#[test]
fn bad_requests_name_what_is_wrong() {
    let c = cell();
    let good = &kernels(&["git:linux@v6.1"])[0];
    let e = create(new(&c, &kernels(&["git:linux@bisect-bad"])[0], &[])).unwrap_err();
    assert_eq!(e, Error::SameEnds("git:linux@bisect-bad".into()));
    let e = create(new(&c, good, &kernels(&["git:linux@v6.1"]))).unwrap_err();
    assert_eq!(e, Error::Repeated("git:linux@v6.1".into()));
    // A kernel that is none is refused where the request enters, by its
    // place in the bisection (good is 0).
    let e = between(&["git:linux@c1".to_owned(), "git:linux@a..b".to_owned()]).unwrap_err();
    assert!(
        matches!(&e, Error::Kernel { index: 2, prefix, .. } if prefix == "git:linux@a..b"),
        "{e}"
    );
    let mut n = new(&c, good, &[]);
    n.runs = 1;
    assert_eq!(
        create(n).unwrap_err(),
        Error::Bisect(bisect::Error::Runs {
            runs: 1,
            max_runs: 30
        })
    );
}

#[test]
fn a_round_is_a_matrix_of_the_template_with_each_kernel() {
    let c = cell();
    let between: Vec<_> = (0..3)
        .map(|i| format!("git:linux@c{i}").parse().unwrap())
        .collect();
    let b = create(new(&c, &kernels(&["git:linux@v6.1"])[0], &between)).unwrap();
    let m = round_matrix(&b, &[0, 2, 4], 10, 1, Some((0, 1))).unwrap();
    assert_eq!(m.name, "seed 002 bisect b-000000000001 round 1");
    assert_eq!(m.repetitions, 10);
    let kernels: Vec<String> = m.cells.iter().map(|c| c.kernel.to_string()).collect();
    assert_eq!(
        kernels,
        ["git:linux@v6.1", "git:linux@c1", "git:linux@bisect-bad"]
    );
    assert_eq!(m.cells[1].name, "hackbench(groups=2) | kernel=git:linux@c1");
    assert_eq!(m.cells[1].index.get(), 1);
    // The step's kernel is compared with good; the ends with nothing.
    let baselines: Vec<Option<u32>> = m
        .cells
        .iter()
        .map(|c| c.baseline.map(|b| b.get()))
        .collect();
    assert_eq!(baselines, [None, Some(0), None]);
    let p = m.cells[0].verdict.as_ref().unwrap();
    assert_eq!((p.max_runs, p.repetitions, p.min_effect), (10, 10, 0.05));
}

#[test]
fn a_stored_record_resumes_the_same_bisector() {
    let c = cell();
    let between: Vec<_> = (0..7)
        .map(|i| format!("git:linux@c{i}").parse().unwrap())
        .collect();
    let mut b = create(new(&c, &kernels(&["git:linux@v6.1"])[0], &between)).unwrap();
    let mut x = bisector(&b).unwrap();
    let at = |v: f64| {
        (0..10)
            .map(|i| v + f64::from(i) * 0.01)
            .collect::<Vec<f64>>()
    };
    b.pending_matrices.push("m-r1".into());
    x.observe(vec![at(1.0), at(1.0), at(2.0)]).unwrap();
    record(&mut b, &x);
    assert_eq!(b.steps.len(), 1);
    assert_eq!(b.steps[0].call, "same_as_good");
    assert_eq!(b.steps[0].matrix_ids, ["m-r1"]);
    assert!(b.pending_matrices.is_empty());
    // Through the wire's encoding, as the store keeps it.
    let stored = Bisection::decode(b.encode_to_vec().as_slice()).unwrap();
    assert_eq!(bisector(&stored).unwrap(), x);
    assert_eq!(
        next(&x),
        Some(Round {
            kernels: vec![0, 6, 8],
            runs: 10,
            focus: Some((0, 1))
        })
    );
}

#[test]
fn round_values_take_finished_runs_of_the_metric_per_cell() {
    let run = |cell: u32, repetition: u32, state: RunState, v: f64| RunRecord {
        run_id: crate::ids::RunId::new(MatrixId::nth(0), CellIndex::new(cell), repetition),
        matrix_id: MatrixId::nth(0),
        cell: CellIndex::new(cell),
        repetition,
        seq: 0,
        state,
        attempt: 1,
        agent_id: None,
        result: Some(RunResult {
            metrics: vec![Metric {
                name: "time_s".into(),
                value: v,
                ..Metric::default()
            }],
            ..RunResult::default()
        }),
    };
    let runs = [
        run(1, 1, RunState::Finished, 2.5),
        run(0, 0, RunState::Finished, 1.0),
        run(1, 0, RunState::Failed, 9.0),
        run(0, 1, RunState::Finished, 1.5),
    ];
    let refs: Vec<&RunRecord> = runs.iter().collect();
    assert_eq!(
        round_values(&refs, 3, "time_s"),
        vec![vec![1.0, 1.5], vec![2.5], vec![]]
    );
    assert_eq!(round_values(&refs, 3, "wall_s"), vec![Vec::<f64>::new(); 3]);
}

#[test]
fn the_metric_is_the_primary_one_that_regressed_most_or_the_one_named() {
    let run = |cell: u32, rep: u32, tps: f64, wall: f64, p99: f64| RunRecord {
        run_id: crate::ids::RunId::new(MatrixId::nth(0), CellIndex::new(cell), rep),
        matrix_id: MatrixId::nth(0),
        cell: CellIndex::new(cell),
        repetition: rep,
        seq: 0,
        state: RunState::Finished,
        attempt: 1,
        agent_id: None,
        result: Some(RunResult {
            metrics: vec![
                Metric {
                    name: "wall_s".into(),
                    value: wall,
                    direction: WireDirection::LowerIsBetter as i32,
                    ..Metric::default()
                },
                Metric {
                    name: "tps".into(),
                    value: tps,
                    direction: WireDirection::HigherIsBetter as i32,
                    ..Metric::default()
                },
                Metric {
                    name: "latency_p99_ms".into(),
                    value: p99,
                    direction: WireDirection::LowerIsBetter as i32,
                    ..Metric::default()
                },
            ],
            ..RunResult::default()
        }),
    };
    // wall_s does not move (a run of fixed length); tps falls by half and
    // the p99 latency grows by a tenth: tps it is.
    let base: Vec<RunRecord> = (0..8)
        .map(|i| {
            run(
                0,
                i,
                1000.0 + f64::from(i),
                1.0 + f64::from(i) * 1e-3,
                1.0 + f64::from(i) * 1e-3,
            )
        })
        .collect();
    let cell: Vec<RunRecord> = (0..8)
        .map(|i| {
            run(
                1,
                i,
                500.0 + f64::from(i),
                1.0 + f64::from(i) * 1e-3,
                1.1 + f64::from(i) * 1e-3,
            )
        })
        .collect();
    let (b, c): (Vec<&RunRecord>, Vec<&RunRecord>) = (base.iter().collect(), cell.iter().collect());
    assert_eq!(
        choose_metric(1, &c, &b, "", 0.02).unwrap(),
        ("tps".to_owned(), Direction::HigherIsBetter)
    );
    assert_eq!(
        choose_metric(1, &c, &b, "wall_s", 0.02).unwrap(),
        ("wall_s".to_owned(), Direction::LowerIsBetter)
    );
    assert_eq!(
        choose_metric(1, &c, &b, "ipc", 0.02).unwrap_err(),
        Error::NoMetric {
            cell: 1,
            metric: "ipc".into()
        }
    );
    // Against itself nothing regressed.
    assert_eq!(
        choose_metric(0, &b, &b, "", 0.02).unwrap_err(),
        Error::NotRegressed { cell: 0 }
    );
}
