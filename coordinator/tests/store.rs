//! What every store backend must do, one suite for all of them
//! (`farm_coordinator::store::Backend`): durable, whole batches, and
//! everything given back after a restart. Each case gets a factory that
//! opens the same, initially empty, stored state; opening again is a
//! restart.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use farm_coordinator::ids::{AgentId, CellIndex, MatrixId, RunId, ScheduleId};
use farm_coordinator::store::{
    AgentRecord, Backend, Execution, MatrixRecord, Op, RunRecord, RunState, ScheduleRecord, Sqlite,
};

type Open<'a> = &'a dyn Fn() -> Box<dyn Backend>;
/// A case of the suite: it gets a fresh store's opener.
type Case = fn(Open<'_>);

/// Every case of the suite, by name.
const CASES: &[(&str, Case)] = &[
    (
        "apply_then_reopen_sees_everything",
        apply_then_reopen_sees_everything,
    ),
    (
        "identities_are_kept_bound_and_forgotten_with_their_agent",
        identities_are_kept_bound_and_forgotten_with_their_agent,
    ),
    (
        "a_failing_batch_changes_nothing",
        a_failing_batch_changes_nothing,
    ),
    ("an_empty_store_loads_empty", an_empty_store_loads_empty),
    ("a_large_matrix_is_kept_whole", a_large_matrix_is_kept_whole),
    (
        "an_archived_matrix_leaves_whole_and_alone",
        an_archived_matrix_leaves_whole_and_alone,
    ),
    (
        "a_bisection_is_kept_as_last_put_in_creation_order",
        a_bisection_is_kept_as_last_put_in_creation_order,
    ),
];

#[cfg(feature = "ha")]
#[path = "support/etcd.rs"]
mod cluster;
#[cfg(feature = "ha")]
#[path = "store/etcd.rs"]
mod etcd;

#[test]
fn sqlite_passes_the_store_suite() {
    for (name, case) in CASES {
        eprintln!("case {name}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("farm.db");
        case(&|| Box::new(Sqlite::open(&path).unwrap()));
    }
}

/// A cell whose stored state this build cannot read (a damaged store, or a
/// value a later build wrote), as the wire would carry it.
pub fn unreadable_cell() -> Vec<u8> {
    use prost::Message;
    farm_proto::Cell {
        index: 0,
        name: cell_name(0, 0),
        kernel: "running".into(),
        state: Some(farm_proto::MachineState {
            name: "s".into(),
            hotplug: "sideways:1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

/// What the store says of [`unreadable_cell`]: the cell and the field.
pub const UNREADABLE: &str = "cell 0: state: ";

/// The test matrix `n`'s id, made as one that enters is: parsed from its
/// one spelling, `m-` and 12 hex digits.
pub fn matrix_id(n: u64) -> MatrixId {
    format!("m-{n:012x}").parse().unwrap()
}

/// The test agent `n`'s id, made as [`matrix_id`] makes a matrix's.
pub fn agent_id(n: u64) -> AgentId {
    format!("a-{n:012x}").parse().unwrap()
}

/// The matrix of [`loads_the_unreadable_apart`] whose cell the damage
/// makes unreadable; the other is `matrix_id(1)`.
pub fn unreadable_matrix() -> MatrixId {
    matrix_id(2)
}

/// A store whose one matrix of two has a cell that does not convert:
/// `load` gives the other matrix, and this one apart with the cell named,
/// still stored as it was (a second load says the same).
pub fn loads_the_unreadable_apart(open: Open<'_>, damage: &dyn Fn()) {
    let (ok, bad) = (matrix_id(1), unreadable_matrix());
    open()
        .apply(&[big_matrix(ok, 1, 1, 1, 0), big_matrix(bad, 2, 1, 1, 0)])
        .unwrap();
    damage();
    for _ in 0..2 {
        let snap = open().load().unwrap();
        let ids: Vec<MatrixId> = snap.matrices.iter().map(|m| m.id).collect();
        assert_eq!(ids, [ok]);
        assert_eq!(snap.unreadable.len(), 1);
        let u = &snap.unreadable[0];
        assert_eq!((u.record.id, u.record.seq), (bad, 2));
        let why = u.error.to_string();
        assert!(
            why.starts_with(UNREADABLE) && why.contains("sideways"),
            "{why}"
        );
        // Its runs are still stored; the scheduler leaves them alone.
        assert_eq!(snap.runs.iter().filter(|r| r.matrix_id == bad).count(), 1);
    }
}

#[test]
fn sqlite_loads_a_matrix_whose_cell_does_not_convert_apart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("farm.db");
    loads_the_unreadable_apart(&|| Box::new(Sqlite::open(&path).unwrap()), &|| {
        let db = rusqlite::Connection::open(&path).unwrap();
        let n = db
            .execute(
                "UPDATE cells SET cell = ?1 WHERE matrix_id = ?2",
                rusqlite::params![unreadable_cell(), unreadable_matrix().to_string()],
            )
            .unwrap();
        assert_eq!(n, 1);
    });
}

fn an_empty_store_loads_empty(open: Open<'_>) {
    let mut s = open();
    // An empty batch is a no-op, not an error.
    s.apply(&[]).unwrap();
    let snap = s.load().unwrap();
    assert_eq!(
        (
            snap.matrices.len(),
            snap.runs.len(),
            snap.agents.len(),
            snap.schedules.len()
        ),
        (0, 0, 0, 0)
    );
}

/// Cell `i`'s name, `pad` bytes longer than its number.
/// A cell written as the wire has it, on the running kernel unless it
/// names one, converted as the store's callers hold it.
pub fn cell(mut c: farm_proto::Cell) -> farm_coordinator::cell::Cell {
    if c.kernel.is_empty() {
        c.kernel = "running".into();
    }
    farm_coordinator::cell::Cell::try_from(&c).unwrap()
}

pub fn cell_name(i: u32, pad: usize) -> String {
    format!("{i}{}", "x".repeat(pad))
}

/// A matrix of `cells` cells and `runs` runs, each cell with a name of
/// `pad` bytes.
pub fn big_matrix(id: MatrixId, seq: u64, cells: u32, runs: u32, pad: usize) -> Op {
    let m = MatrixRecord {
        id,
        seq,
        name: "big".into(),
        file_name: "big.toml".into(),
        source: "name = \"big\"".into(),
        submitted_ms: 1,
        timeout_s: 60,
        cancelled: false,
        cells: (0..cells)
            .map(|i| {
                cell(farm_proto::Cell {
                    index: i,
                    name: cell_name(i, pad),
                    ..Default::default()
                })
            })
            .collect(),
        execution: None,
    };
    let runs = (0..runs)
        .map(|i| RunRecord {
            run_id: RunId::new(id, CellIndex::new(i % cells.max(1)), i / cells.max(1)),
            matrix_id: id,
            cell: CellIndex::new(i % cells.max(1)),
            repetition: i / cells.max(1),
            seq: u64::from(i),
            state: RunState::Queued,
            attempt: 0,
            agent_id: None,
            result: None,
        })
        .collect();
    Op::PutMatrix(Box::new(m), runs)
}

/// A matrix far larger than one etcd transaction (1,000 runs, 2 MiB of
/// cells) comes back whole, beside a batch after it.
fn a_large_matrix_is_kept_whole(open: Open<'_>) {
    let mut s = open();
    let m = matrix_id(1);
    s.apply(&[big_matrix(m, 1, 400, 1000, 5000)]).unwrap();
    s.apply(&[Op::CancelMatrix(m)]).unwrap();
    drop(s);
    let snap = open().load().unwrap();
    assert_eq!(snap.matrices.len(), 1);
    let m = &snap.matrices[0];
    assert!(m.cancelled);
    assert_eq!(m.cells.len(), 400);
    assert!(
        m.cells
            .iter()
            .enumerate()
            .all(|(i, c)| c.index.at() == i && c.name == cell_name(i as u32, 5000))
    );
    assert_eq!(snap.runs.len(), 1000);
}

/// A matrix forgotten after it was archived leaves with every cell and
/// run (a large one too), and nothing of the matrix beside it.
fn an_archived_matrix_leaves_whole_and_alone(open: Open<'_>) {
    let (gone, kept) = (matrix_id(1), matrix_id(2));
    let mut s = open();
    s.apply(&[
        big_matrix(gone, 1, 400, 1000, 5000),
        big_matrix(kept, 2, 3, 6, 10),
    ])
    .unwrap();
    s.apply(&[Op::CancelMatrix(gone)]).unwrap();
    let runs: Vec<RunId> = (0..1000)
        .map(|i| RunId::new(gone, CellIndex::new(i % 400), i / 400))
        .collect();
    s.apply(&[Op::ForgetMatrix {
        id: gone,
        cells: 400,
        runs,
    }])
    .unwrap();
    drop(s);
    let snap = open().load().unwrap();
    let ids: Vec<MatrixId> = snap.matrices.iter().map(|m| m.id).collect();
    assert_eq!(ids, [kept]);
    assert_eq!(snap.matrices[0].cells.len(), 3);
    assert_eq!(snap.runs.len(), 6);
    assert!(snap.runs.iter().all(|r| r.matrix_id == kept));
}

fn run(repetition: u32, state: RunState) -> RunRecord {
    RunRecord {
        run_id: RunId::new(matrix_id(1), CellIndex::new(0), repetition),
        matrix_id: matrix_id(1),
        cell: CellIndex::new(0),
        repetition,
        seq: 0,
        state,
        attempt: 0,
        agent_id: None,
        result: None,
    }
}

/// What a batch wrote is there, whole, after a restart.
fn apply_then_reopen_sees_everything(open: Open<'_>) {
    let schedule_id: ScheduleId = "s-000000000001".parse().unwrap();
    let matrix = MatrixRecord {
        id: matrix_id(1),
        seq: 7,
        name: "n".into(),
        file_name: "f.toml".into(),
        source: "name = \"n\"".into(),
        submitted_ms: 1,
        timeout_s: 60,
        cancelled: false,
        cells: vec![cell(farm_proto::Cell {
            index: 0,
            name: "c0".into(),
            ..Default::default()
        })],
        execution: Some(Execution {
            schedule_id,
            at_ms: 3_600_000,
            kernel: "file:/k/v6.13".into(),
        }),
    };
    let schedule = ScheduleRecord {
        id: schedule_id,
        name: "nightly".into(),
        file_name: "n.toml".into(),
        source: "name = \"nightly\"".into(),
        cron: "0 3 * * *".into(),
        on_new_kernel: "file:/k/*".into(),
        created_ms: 5,
        last_cron_ms: 3_600_000,
        seen_kernels: vec!["file:/k/v6.12".into(), "file:/k/v6.13".into()],
        cancelled: false,
        archived_executions: 41,
    };
    {
        let mut s = open();
        s.apply(&[
            Op::PutSchedule(Box::new(schedule.clone())),
            Op::PutMatrix(Box::new(matrix.clone()), vec![run(0, RunState::Queued)]),
        ])
        .unwrap();
        let mut done = run(0, RunState::Finished);
        done.attempt = 2;
        done.result = Some(farm_proto::RunResult {
            ok: true,
            ..Default::default()
        });
        s.apply(&[Op::PutRun(Box::new(done)), Op::CancelMatrix(matrix_id(1))])
            .unwrap();
    }
    let snap = open().load().unwrap();
    assert_eq!(snap.matrices.len(), 1);
    assert!(snap.matrices[0].cancelled);
    assert_eq!(snap.matrices[0].cells, matrix.cells);
    assert_eq!(snap.matrices[0].execution, matrix.execution);
    assert_eq!(snap.schedules, vec![schedule]);
    assert_eq!(snap.runs.len(), 1);
    assert_eq!(snap.runs[0].state, RunState::Finished);
    assert_eq!(snap.runs[0].attempt, 2);
    assert!(snap.runs[0].result.as_ref().unwrap().ok);
}

/// A binding of an agent id to a certificate lasts as long as the agent.
fn identities_are_kept_bound_and_forgotten_with_their_agent(open: Open<'_>) {
    let (a1, a2, a3) = (agent_id(1), agent_id(2), agent_id(3));
    let agent = |id: AgentId, identity: Option<&str>| {
        Op::PutAgent(Box::new(AgentRecord {
            agent_id: id,
            capabilities: Default::default(),
            registered_ms: 1,
            identity: identity.map(|n| farm_coordinator::identity::Name::parse(n).unwrap()),
        }))
    };
    let bound = |s: &mut dyn Backend| -> Vec<(AgentId, Option<String>)> {
        let mut v: Vec<_> = s
            .load()
            .unwrap()
            .agents
            .into_iter()
            .map(|a| (a.agent_id, a.identity.map(|n| n.to_string())))
            .collect();
        v.sort();
        v
    };
    let mut s = open();
    s.apply(&[agent(a1, Some("n1")), agent(a2, None)]).unwrap();
    // Put again (a catalogue change): the binding stays as it was.
    s.apply(&[agent(a1, Some("n1"))]).unwrap();
    drop(s);
    let mut s = open();
    assert_eq!(bound(s.as_mut()), vec![(a1, Some("n1".into())), (a2, None)]);
    s.apply(&[Op::ForgetAgent(a1)]).unwrap();
    // Forgotten with its agent, so the name can bind a new id.
    s.apply(&[agent(a3, Some("n1"))]).unwrap();
    assert_eq!(bound(s.as_mut()), vec![(a2, None), (a3, Some("n1".into()))]);
}

/// A batch is all or nothing: `PutMatrix` of an existing id fails it, and
/// the run put before it in the same batch is not there.
fn a_failing_batch_changes_nothing(open: Open<'_>) {
    let mut s = open();
    let m = MatrixRecord {
        id: matrix_id(1),
        seq: 1,
        name: "n".into(),
        file_name: "f".into(),
        source: String::new(),
        submitted_ms: 0,
        timeout_s: 1,
        cancelled: false,
        cells: vec![],
        execution: None,
    };
    s.apply(&[Op::PutMatrix(Box::new(m.clone()), vec![])])
        .unwrap();
    // The second PutMatrix violates the primary key: the run before it must roll back.
    let err = s.apply(&[
        Op::PutRun(Box::new(run(1, RunState::Queued))),
        Op::PutMatrix(Box::new(m), vec![]),
    ]);
    assert!(err.is_err());
    assert!(s.load().unwrap().runs.is_empty());
}

/// A bisection is one record, replaced whole each round; a restart gives
/// back the last of each, oldest bisection first.
fn a_bisection_is_kept_as_last_put_in_creation_order(open: Open<'_>) {
    let bisection = |id: &str, created_ms: u64, steps: usize| farm_proto::Bisection {
        bisection_id: id.into(),
        matrix_id: "m".into(),
        cell: 1,
        kernels: vec!["git:linux@v6.1".into(), "git:linux@bisect-bad".into()],
        created_ms,
        steps: (0..steps)
            .map(|i| farm_proto::BisectionStep {
                kernel: i as u32,
                call: "same_as_good".into(),
                ratio_vs_good: f64::NAN,
                ..Default::default()
            })
            .collect(),
        pending_matrices: vec![format!("m-round-{steps}")],
        ..Default::default()
    };
    {
        let mut s = open();
        s.apply(&[
            Op::PutBisection(Box::new(bisection("b-late", 20, 0))),
            Op::PutBisection(Box::new(bisection("b-early", 10, 0))),
        ])
        .unwrap();
        s.apply(&[Op::PutBisection(Box::new(bisection("b-early", 10, 2)))])
            .unwrap();
    }
    let snap = open().load().unwrap();
    let got: Vec<(&str, usize, &str)> = snap
        .bisections
        .iter()
        .map(|b| {
            (
                b.bisection_id.as_str(),
                b.steps.len(),
                b.pending_matrices[0].as_str(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("b-early", 2, "m-round-2"), ("b-late", 0, "m-round-0")]
    );
    // NaN (a comparison not made) survives the store.
    assert!(snap.bisections[0].steps[1].ratio_vs_good.is_nan());
}
