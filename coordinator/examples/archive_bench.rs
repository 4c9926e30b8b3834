//! History lookups from the archive: fills an archive with `--matrices`
//! ended matrices of `--cells` cells each, so that one series has
//! `--points` points among the other series' points, then times
//! `--lookups` reads of that series' latest 1,000 points (what a history
//! reads, `policy::HISTORY_POINTS`) and prints the median and worst.
//! See docs/BENCHMARKS.md for the commands.

// An example is a program: it prints its report.
#![allow(clippy::print_stdout)]

use std::time::Instant;

use anyhow::{Result, ensure};
use clap::Parser;
use farm_coordinator::archive::{ArchivedMatrix, Location};
use farm_coordinator::ids::CellIndex;
use farm_coordinator::policy::HISTORY_POINTS;
use farm_coordinator::results::{Median, Point};
use farm_coordinator::store::{MatrixRecord, RunRecord, RunState};
use farm_proto::{GetResultsResponse, MatrixState, MatrixStatus, Metric, RunResult};

#[derive(Parser)]
struct Args {
    /// `postgres://…`, or a SQLite file's path.
    #[arg(long)]
    archive: String,
    #[arg(long, default_value_t = 1_000)]
    matrices: u64,
    /// Cells per matrix, each on its own series; cell 0 is the measured one.
    #[arg(long, default_value_t = 10)]
    cells: u32,
    #[arg(long, default_value_t = 200)]
    lookups: usize,
}

fn matrix(seq: u64, cells: u32) -> ArchivedMatrix {
    let id: farm_coordinator::ids::MatrixId = format!("m-{seq:012x}").parse().expect("a matrix id");
    let cell = |i: u32| farm_proto::Cell {
        index: i,
        name: format!("c{i}"),
        kernel: "debian:6.1.0-57-amd64".into(),
        ..Default::default()
    };
    let cell = |i: u32| farm_coordinator::cell::Cell::try_from(&cell(i)).expect("a valid cell");
    let runs: Vec<RunRecord> = (0..cells * 3)
        .map(|i| RunRecord {
            run_id: farm_coordinator::ids::RunId::new(id, CellIndex::new(i % cells), i / cells),
            matrix_id: id,
            cell: CellIndex::new(i % cells),
            repetition: i / cells,
            seq: u64::from(i),
            state: RunState::Finished,
            attempt: 1,
            agent_id: Some("a-000000000001".parse().expect("an agent id")),
            result: Some(RunResult {
                ok: true,
                metrics: vec![Metric {
                    name: "wall_s".into(),
                    value: 1.0 + (seq % 7) as f64 / 100.0,
                    unit: "s".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        })
        .collect();
    let points = (0..cells)
        .map(|i| {
            (
                format!("series-{i}").into_bytes(),
                Point {
                    matrix_id: id,
                    matrix_seq: seq,
                    cell: farm_coordinator::ids::CellIndex::new(i),
                    submitted_ms: seq,
                    kernel: "debian:6.12".into(),
                    medians: vec![Median {
                        name: "wall_s".into(),
                        unit: "s".into(),
                        value: 1.0,
                    }],
                },
            )
        })
        .collect();
    ArchivedMatrix {
        record: MatrixRecord {
            id,
            seq,
            name: "bench".into(),
            file_name: "bench.toml".into(),
            source: String::new(),
            submitted_ms: seq,
            timeout_s: 60,
            cancelled: false,
            cells: (0..cells).map(cell).collect(),
            execution: None,
        },
        runs,
        status: MatrixStatus {
            matrix_id: id.to_string(),
            state: MatrixState::Done as i32,
            ..Default::default()
        },
        summary: GetResultsResponse::default(),
        points,
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let at = if args.archive.starts_with("postgres") {
        Location::parse_url(&args.archive)?
    } else {
        Location::Sqlite(args.archive.clone().into())
    };
    let mut a = at.open()?;
    let t = Instant::now();
    for seq in 1..=args.matrices {
        a.put(&matrix(seq, args.cells))?;
    }
    let filled = t.elapsed();
    let mut times = Vec::with_capacity(args.lookups);
    for _ in 0..args.lookups {
        let t = Instant::now();
        let points = a.series(b"series-0", HISTORY_POINTS)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        ensure!(
            points.len() as u64 == args.matrices.min(HISTORY_POINTS as u64),
            "{} points",
            points.len()
        );
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{}: {} matrices x {} cells archived in {:.1} s ({:.1} ms each); \
         series of {} points: median {:.2} ms, worst {:.2} ms over {} lookups",
        at.describe(),
        args.matrices,
        args.cells,
        filled.as_secs_f64(),
        filled.as_secs_f64() * 1e3 / args.matrices as f64,
        args.matrices.min(HISTORY_POINTS as u64),
        times[times.len() / 2],
        times[times.len() - 1],
        args.lookups
    );
    Ok(())
}
