//! The embedded archive: tables of the coordinator's own SQLite file,
//! beside the live ones, through a connection of its own (WAL: readers
//! never wait for the writer; writers wait for each other up to
//! [`BUSY_TIMEOUT`]).

use std::path::Path;

use prost::Message;
use rusqlite::{Connection, OptionalExtension, params};

use super::backend::{Archive, Archived, ArchivedMatrix, Result, series_digest};
use super::records::{self, int};
use crate::ids::MatrixId;
use crate::results::Point;
use crate::store::RunState;

pub use crate::store::BUSY_TIMEOUT;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS archived_matrices (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    file_name TEXT NOT NULL,
    source TEXT NOT NULL,
    submitted_ms INTEGER NOT NULL,
    cancelled INTEGER NOT NULL,
    schedule_id TEXT,
    cells BLOB NOT NULL,
    status BLOB NOT NULL,
    summary BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS archived_runs (
    matrix_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    cell_idx INTEGER NOT NULL,
    repetition INTEGER NOT NULL,
    state INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    result BLOB,
    PRIMARY KEY (matrix_id, seq)
) WITHOUT ROWID;
-- The series index: a history is one range of it, latest first.
CREATE TABLE IF NOT EXISTS series_points (
    series BLOB NOT NULL,
    matrix_seq INTEGER NOT NULL,
    cell_idx INTEGER NOT NULL,
    matrix_id TEXT NOT NULL,
    submitted_ms INTEGER NOT NULL,
    kernel TEXT NOT NULL,
    medians BLOB NOT NULL,
    PRIMARY KEY (series, matrix_seq, cell_idx)
) WITHOUT ROWID;
";

pub struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.execute_batch(SCHEMA)?;
        Ok(Sqlite { conn })
    }
}

impl Archive for Sqlite {
    fn put(&mut self, m: &ArchivedMatrix) -> Result<bool> {
        let r = &m.record;
        let tx = self.conn.transaction()?;
        let inserted = tx.execute(
            "INSERT OR IGNORE INTO archived_matrices
                 (id, seq, name, file_name, source, submitted_ms, cancelled, schedule_id, cells, status, summary)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                r.id.to_string(),
                int("a matrix's seq", r.seq)?,
                r.name,
                r.file_name,
                r.source,
                int("a submission time", r.submitted_ms)?,
                r.cancelled,
                r.execution.as_ref().map(|e| e.schedule_id.to_string()),
                records::cells(&r.cells),
                m.status.encode_to_vec(),
                m.summary.encode_to_vec(),
            ],
        )?;
        if inserted == 0 {
            // Archived before (a crash between the archive's commit and the
            // live store's delete): all of it, in that one transaction.
            return Ok(false);
        }
        {
            let mut run = tx.prepare_cached(
                "INSERT INTO archived_runs
                     (matrix_id, seq, run_id, cell_idx, repetition, state, attempt, agent_id, result)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?;
            for x in &m.runs {
                run.execute(params![
                    x.matrix_id.to_string(),
                    int("a run's seq", x.seq)?,
                    x.run_id.to_string(),
                    x.cell.get(),
                    x.repetition,
                    x.state as i64,
                    x.attempt,
                    x.agent_id.map(|a| a.to_string()).unwrap_or_default(),
                    x.result.as_ref().map(|res| res.encode_to_vec()),
                ])?;
            }
            let mut point = tx.prepare_cached(
                "INSERT OR IGNORE INTO series_points
                     (series, matrix_seq, cell_idx, matrix_id, submitted_ms, kernel, medians)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (key, p) in &m.points {
                point.execute(params![
                    series_digest(key).to_vec(),
                    int("a matrix's seq", p.matrix_seq)?,
                    p.cell.get(),
                    p.matrix_id.to_string(),
                    int("a submission time", p.submitted_ms)?,
                    p.kernel,
                    records::medians(&p.medians),
                ])?;
            }
        }
        tx.commit()?;
        Ok(true)
    }

    fn series(&mut self, key: &[u8], limit: usize) -> Result<Vec<Point>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT matrix_seq, cell_idx, matrix_id, submitted_ms, kernel, medians
             FROM series_points WHERE series = ?1
             ORDER BY matrix_seq DESC, cell_idx DESC LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![series_digest(key).to_vec(), limit as i64], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, u32>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, Vec<u8>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, cell, matrix_id, submitted_ms, kernel, medians) = row?;
            out.push(Point {
                matrix_id: matrix_id.parse()?,
                matrix_seq: seq as u64,
                cell: crate::ids::CellIndex::new(cell),
                submitted_ms: submitted_ms as u64,
                kernel,
                medians: records::medians_of(&medians)?,
            });
        }
        out.reverse();
        Ok(out)
    }

    fn matrix(&mut self, matrix_id: MatrixId) -> Result<Option<Archived>> {
        let matrix_id = matrix_id.to_string();
        let row = self
            .conn
            .query_row(
                "SELECT cells, status, summary FROM archived_matrices WHERE id = ?1",
                params![matrix_id],
                |row| {
                    Ok((
                        row.get::<_, Vec<u8>>(0)?,
                        row.get::<_, Vec<u8>>(1)?,
                        row.get::<_, Vec<u8>>(2)?,
                    ))
                },
            )
            .optional()?;
        let Some((cells, status, summary)) = row else {
            return Ok(None);
        };
        let mut stmt = self.conn.prepare_cached(
            "SELECT run_id, cell_idx, repetition, agent_id, result FROM archived_runs
             WHERE matrix_id = ?1 AND state IN (?2, ?3) ORDER BY seq",
        )?;
        let rows = stmt.query_map(
            params![
                matrix_id,
                RunState::Finished as i64,
                RunState::Failed as i64
            ],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, u32>(1)?,
                    row.get::<_, u32>(2)?,
                    row.get::<_, String>(3)?,
                    row.get::<_, Option<Vec<u8>>>(4)?,
                ))
            },
        )?;
        let mut runs = Vec::new();
        for row in rows {
            let (run_id, cell_index, repetition, agent_id, result) = row?;
            runs.push(records::run(
                run_id, cell_index, repetition, agent_id, result,
            )?);
        }
        records::archived(&cells, &status, &summary, runs).map(Some)
    }
}
