//! What every archive must do, one suite for all of them
//! (`farm_coordinator::archive::Archive`): an ended matrix kept whole and
//! once, series read by their index in order, the latest first when cut.
//! Each case gets a factory that opens a connection to the same, initially
//! empty, archive.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used)]

use farm_coordinator::archive::{Archive, ArchivedMatrix, Location};
use farm_coordinator::ids::{CellIndex, MatrixId};
use farm_coordinator::results::{Median, Point};
use farm_coordinator::store::{Execution, MatrixRecord, RunRecord, RunState};
use farm_proto::{GetResultsResponse, MatrixState, MatrixStatus, Metric, RunResult};

type Open<'a> = &'a dyn Fn() -> Box<dyn Archive>;
type Case = fn(Open<'_>);

const CASES: &[(&str, Case)] = &[
    (
        "a_matrix_is_kept_whole_and_once",
        a_matrix_is_kept_whole_and_once,
    ),
    (
        "a_series_is_read_in_order_and_cut_to_its_latest",
        a_series_is_read_in_order_and_cut_to_its_latest,
    ),
    ("an_unknown_matrix_is_none", an_unknown_matrix_is_none),
];

#[cfg(feature = "ha")]
#[path = "support/postgres.rs"]
mod postgres;

#[test]
fn sqlite_passes_the_archive_suite() {
    for (name, case) in CASES {
        eprintln!("case {name}");
        let dir = tempfile::tempdir().unwrap();
        let at = Location::Sqlite(dir.path().join("farm.db"));
        case(&|| at.open().unwrap());
    }
}

#[cfg(feature = "ha")]
#[test]
fn postgres_passes_the_archive_suite() {
    for (name, case) in CASES {
        eprintln!("case {name}");
        let pg = postgres::Postgres::start();
        let at = Location::parse_url(&pg.url()).unwrap();
        case(&|| at.open().unwrap());
    }
}

/// PostgreSQL stopped: a put fails naming it, and the same connection
/// archives once the server is back.
#[cfg(feature = "ha")]
#[test]
fn postgres_down_fails_a_put_and_the_connection_comes_back() {
    let mut pg = postgres::Postgres::start();
    let at = Location::parse_url(&pg.url()).unwrap();
    let mut a = at.open().unwrap();
    assert!(a.put(&matrix(matrix_id(1), 1, b"s", 2.0)).unwrap());
    pg.stop();
    let e = a
        .put(&matrix(matrix_id(2), 2, b"s", 3.0))
        .unwrap_err()
        .to_string();
    let want = format!(
        "archive (PostgreSQL at 127.0.0.1:{}/postgres (user postgres)):",
        pg.port
    );
    assert!(e.starts_with(&want), "{e}");
    pg.resume();
    assert!(a.put(&matrix(matrix_id(2), 2, b"s", 3.0)).unwrap());
    let values: Vec<f64> = a
        .series(b"s", 10)
        .unwrap()
        .iter()
        .map(|p| p.medians[0].value)
        .collect();
    assert_eq!(values, [2.0, 3.0]);
}

#[cfg(feature = "ha")]
#[test]
fn a_bad_archive_url_is_refused_where_it_enters() {
    let e = Location::parse_url("mysql://db/farm").unwrap_err();
    assert_eq!(
        e.to_string(),
        "expected postgres://… or postgresql://…, got \"mysql://db/farm\""
    );
}

/// The agent that ran every run of [`matrix`].
const AGENT: &str = "a-000000000001";

/// The test matrix `n`'s id, made as one that enters is: parsed from its
/// one spelling, `m-` and 12 hex digits.
fn matrix_id(n: u64) -> MatrixId {
    format!("m-{n:012x}").parse().unwrap()
}

/// An ended matrix of two cells on series `series`, whose first cell's
/// wall_s median is `wall_s`; the second cell has only a failed run.
fn matrix(id: MatrixId, seq: u64, series: &[u8], wall_s: f64) -> ArchivedMatrix {
    let cells = vec![
        farm_proto::Cell {
            index: 0,
            name: "c0".into(),
            kernel: "debian:6.1.0-47-amd64".into(),
            ..Default::default()
        },
        farm_proto::Cell {
            index: 1,
            name: "c1".into(),
            kernel: "debian:6.12.38-amd64".into(),
            ..Default::default()
        },
    ];
    let run = |rep: u32, cell: u32, state: RunState, value: f64| RunRecord {
        run_id: farm_coordinator::ids::RunId::new(id, CellIndex::new(cell), rep),
        matrix_id: id,
        cell: CellIndex::new(cell),
        repetition: rep,
        seq: u64::from(rep * 2 + cell),
        state,
        attempt: 1,
        agent_id: Some(AGENT.parse().unwrap()),
        result: (state != RunState::Cancelled).then(|| RunResult {
            ok: state == RunState::Finished,
            metrics: vec![Metric {
                name: "wall_s".into(),
                value,
                unit: "s".into(),
                ..Default::default()
            }],
            ..Default::default()
        }),
    };
    let runs = vec![
        run(0, 0, RunState::Finished, wall_s - 0.1),
        run(0, 1, RunState::Failed, 0.0),
        run(1, 0, RunState::Finished, wall_s),
        run(1, 1, RunState::Cancelled, 0.0),
        run(2, 0, RunState::Finished, wall_s + 0.1),
    ];
    ArchivedMatrix {
        record: MatrixRecord {
            id,
            seq,
            name: "nightly".into(),
            file_name: "n.toml".into(),
            source: "name = \"nightly\"".into(),
            submitted_ms: 1_000 + seq,
            timeout_s: 60,
            cancelled: false,
            cells: farm_coordinator::cell::all(&cells).unwrap(),
            execution: Some(Execution {
                schedule_id: "s-000000000001".parse().unwrap(),
                at_ms: 5,
                kernel: String::new(),
            }),
        },
        runs,
        status: MatrixStatus {
            matrix_id: id.to_string(),
            name: "nightly".into(),
            state: MatrixState::Done as i32,
            submitted_unix_ms: 1_000 + seq,
            ..Default::default()
        },
        summary: GetResultsResponse {
            cells: vec![farm_proto::CellSummary {
                cell_index: 0,
                cell_name: "c0".into(),
                ..Default::default()
            }],
            ..Default::default()
        },
        points: vec![(
            series.to_vec(),
            Point {
                matrix_id: id,
                matrix_seq: seq,
                cell: CellIndex::new(0),
                submitted_ms: 1_000 + seq,
                kernel: "debian:6.1".into(),
                medians: vec![Median {
                    name: "wall_s".into(),
                    unit: "s".into(),
                    value: wall_s,
                }],
            },
        )],
    }
}

fn a_matrix_is_kept_whole_and_once(open: Open<'_>) {
    let id = matrix_id(1);
    let m = matrix(id, 7, b"series", 2.0);
    assert!(open().put(&m).unwrap(), "archived now");
    // Again (a crash before the live delete): nothing changes.
    let mut again = m.clone();
    again.points[0].1.medians[0].value = 99.0;
    again.runs.truncate(1);
    assert!(!open().put(&again).unwrap(), "already archived");

    let got = open().matrix(id).unwrap().unwrap();
    assert_eq!(got.status, m.status);
    assert_eq!(got.cells, farm_coordinator::cell::wire(&m.record.cells));
    assert_eq!(got.results.status.as_ref(), Some(&m.status));
    assert_eq!(got.results.cells, m.summary.cells);
    // The ended runs (finished and failed), in dispatch order, with results.
    let runs: Vec<(String, u32, u32, &str)> = got
        .results
        .runs
        .iter()
        .map(|r| {
            (
                r.run_id.clone(),
                r.cell_index,
                r.repetition,
                r.agent_id.as_str(),
            )
        })
        .collect();
    assert_eq!(
        runs,
        [
            (format!("{id}.c0.r0"), 0, 0, AGENT),
            (format!("{id}.c1.r0"), 1, 0, AGENT),
            (format!("{id}.c0.r1"), 0, 1, AGENT),
            (format!("{id}.c0.r2"), 0, 2, AGENT),
        ]
    );
    assert_eq!(
        got.results.runs[3].result.as_ref().unwrap().metrics[0].value,
        2.1
    );
    let series = open().series(b"series", 10).unwrap();
    assert_eq!(series, vec![m.points[0].1.clone()]);
}

fn a_series_is_read_in_order_and_cut_to_its_latest(open: Open<'_>) {
    let mut a = open();
    // Archived out of order, on two series.
    for seq in (1..=30u64).rev() {
        let key: &[u8] = if seq % 3 == 0 { b"other" } else { b"mine" };
        a.put(&matrix(matrix_id(seq), seq, key, seq as f64))
            .unwrap();
    }
    let mine = open().series(b"mine", 1_000).unwrap();
    let seqs: Vec<u64> = mine.iter().map(|p| p.matrix_seq).collect();
    let want: Vec<u64> = (1..=30).filter(|s| s % 3 != 0).collect();
    assert_eq!(seqs, want);
    assert!(
        mine.iter()
            .all(|p| p.medians[0].value == p.matrix_seq as f64)
    );
    // Cut: the latest 5, oldest first.
    let cut: Vec<u64> = open()
        .series(b"mine", 5)
        .unwrap()
        .iter()
        .map(|p| p.matrix_seq)
        .collect();
    assert_eq!(cut, [23, 25, 26, 28, 29]);
    assert_eq!(open().series(b"other", 1_000).unwrap().len(), 10);
    assert!(open().series(b"none", 1_000).unwrap().is_empty());
}

fn an_unknown_matrix_is_none(open: Open<'_>) {
    assert_eq!(open().matrix(matrix_id(0x404)).unwrap(), None);
}
