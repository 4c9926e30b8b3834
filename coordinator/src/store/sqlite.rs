//! The embedded backend: SQLite in WAL mode, `synchronous=FULL`, one
//! transaction per batch.

use std::path::Path;

use prost::Message;
use rusqlite::{Connection, params};

use super::backend::{
    AgentRecord, Backend, Error, Execution, MatrixRecord, Op, Result, RunRecord, RunState,
    ScheduleRecord, Snapshot,
};

/// How long a write to the embedded SQLite file waits for another
/// connection's transaction to end (the live store's batch, or the
/// archive's, which shares the file): both are a batch's worth,
/// milliseconds.
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub struct Sqlite {
    conn: Connection,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS matrices (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    file_name TEXT NOT NULL,
    source TEXT NOT NULL,
    submitted_ms INTEGER NOT NULL,
    timeout_s INTEGER NOT NULL,
    cancelled INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS cells (
    matrix_id TEXT NOT NULL,
    idx INTEGER NOT NULL,
    cell BLOB NOT NULL,
    PRIMARY KEY (matrix_id, idx)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    matrix_id TEXT NOT NULL,
    cell_idx INTEGER NOT NULL,
    repetition INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    state INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    agent_id TEXT NOT NULL,
    result BLOB
);
CREATE INDEX IF NOT EXISTS runs_by_matrix ON runs (matrix_id, seq);
CREATE TABLE IF NOT EXISTS agents (
    agent_id TEXT PRIMARY KEY,
    capabilities BLOB NOT NULL,
    registered_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS schedules (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    file_name TEXT NOT NULL,
    source TEXT NOT NULL,
    cron TEXT NOT NULL,
    on_new_kernel TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    last_cron_ms INTEGER NOT NULL,
    seen_kernels TEXT NOT NULL,
    cancelled INTEGER NOT NULL
);
-- Which certificate each agent id is bound to (mutual TLS); a table of its
-- own so that stores made before identities existed open unchanged. An
-- identity binds one agent id, an agent id one identity.
-- Each bisection as its farm.v1.Bisection record: the coordinator reads it
-- whole and writes it whole at every round.
CREATE TABLE IF NOT EXISTS bisections (
    id TEXT PRIMARY KEY,
    created_ms INTEGER NOT NULL,
    record BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_identities (
    agent_id TEXT PRIMARY KEY,
    identity TEXT NOT NULL UNIQUE
);
-- A table of its own rather than columns of `matrices`: stores made before
-- schedules existed open unchanged.
CREATE TABLE IF NOT EXISTS executions (
    matrix_id TEXT PRIMARY KEY,
    schedule_id TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    kernel TEXT NOT NULL
);
-- How many of each schedule's executions left for the archive; a table of
-- its own, like the ones above.
CREATE TABLE IF NOT EXISTS schedule_archived (
    schedule_id TEXT PRIMARY KEY,
    executions INTEGER NOT NULL
);
";

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite> {
        let conn = Connection::open(path)?;
        // WAL lets readers (none yet) run beside the writer; FULL makes each
        // commit durable before it returns, which acknowledgements rely on.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        // The archive writes to this file through a connection of its own:
        // a commit waits for its transaction rather than failing.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.execute_batch(SCHEMA)?;
        Ok(Sqlite { conn })
    }
}

impl Backend for Sqlite {
    fn apply(&mut self, ops: &[Op]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let tx = self.conn.transaction()?;
        for op in ops {
            match op {
                Op::PutMatrix(m, runs) => {
                    tx.execute(
                        "INSERT INTO matrices (id, seq, name, file_name, source, submitted_ms, timeout_s, cancelled)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        params![m.id.to_string(), m.seq as i64, m.name, m.file_name, m.source, m.submitted_ms as i64, m.timeout_s, m.cancelled],
                    )?;
                    let mut cell_stmt = tx.prepare_cached(
                        "INSERT INTO cells (matrix_id, idx, cell) VALUES (?1, ?2, ?3)",
                    )?;
                    for c in &m.cells {
                        cell_stmt.execute(params![
                            m.id.to_string(),
                            c.index.get(),
                            farm_proto::Cell::from(c).encode_to_vec()
                        ])?;
                    }
                    for r in runs {
                        put_run(&tx, r)?;
                    }
                    if let Some(e) = &m.execution {
                        tx.execute(
                            "INSERT INTO executions (matrix_id, schedule_id, at_ms, kernel) VALUES (?1, ?2, ?3, ?4)",
                            params![m.id.to_string(), e.schedule_id.to_string(), e.at_ms as i64, e.kernel],
                        )?;
                    }
                }
                Op::PutSchedule(s) => {
                    // Kernel names hold no newline (the matrix refuses whitespace).
                    tx.execute(
                        "INSERT OR REPLACE INTO schedules (id, name, file_name, source, cron, on_new_kernel, created_ms, last_cron_ms, seen_kernels, cancelled)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                        params![s.id.to_string(), s.name, s.file_name, s.source, s.cron, s.on_new_kernel, s.created_ms as i64,
                                s.last_cron_ms as i64, s.seen_kernels.join("\n"), s.cancelled],
                    )?;
                    tx.execute(
                        "INSERT OR REPLACE INTO schedule_archived (schedule_id, executions) VALUES (?1, ?2)",
                        params![s.id.to_string(), s.archived_executions as i64],
                    )?;
                }
                Op::PutBisection(b) => {
                    tx.execute(
                        "INSERT OR REPLACE INTO bisections (id, created_ms, record) VALUES (?1, ?2, ?3)",
                        params![b.bisection_id, b.created_ms as i64, b.encode_to_vec()],
                    )?;
                }
                Op::ForgetMatrix { id, .. } => {
                    let id = id.to_string();
                    for table in ["runs", "cells", "executions"] {
                        tx.execute(
                            &format!("DELETE FROM {table} WHERE matrix_id = ?1"),
                            params![id],
                        )?;
                    }
                    tx.execute("DELETE FROM matrices WHERE id = ?1", params![id])?;
                }
                Op::PutRun(r) => put_run(&tx, r)?,
                Op::CancelMatrix(id) => {
                    tx.execute(
                        "UPDATE matrices SET cancelled = 1 WHERE id = ?1",
                        params![id.to_string()],
                    )?;
                }
                Op::PutAgent(a) => {
                    tx.execute(
                        "INSERT OR REPLACE INTO agents (agent_id, capabilities, registered_ms) VALUES (?1, ?2, ?3)",
                        params![a.agent_id.to_string(), a.capabilities.encode_to_vec(), a.registered_ms as i64],
                    )?;
                    if let Some(identity) = &a.identity {
                        // Insert, never replace: a binding lasts as long as
                        // its agent. Only a put of the same agent again is
                        // let be; a second agent for one identity breaks
                        // UNIQUE and fails the batch, never unbinds quietly.
                        tx.execute(
                            "INSERT INTO agent_identities (agent_id, identity) VALUES (?1, ?2)
                             ON CONFLICT(agent_id) DO NOTHING",
                            params![a.agent_id.to_string(), identity.as_str()],
                        )?;
                    }
                }
                Op::ForgetAgent(id) => {
                    let id = id.to_string();
                    tx.execute("DELETE FROM agents WHERE agent_id = ?1", params![id])?;
                    tx.execute(
                        "DELETE FROM agent_identities WHERE agent_id = ?1",
                        params![id],
                    )?;
                }
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn load(&mut self) -> Result<Snapshot> {
        let mut snap = Snapshot::default();
        let mut stmt = self.conn.prepare(
            "SELECT id, seq, name, file_name, source, submitted_ms, timeout_s, cancelled FROM matrices ORDER BY seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)? as u64,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get::<_, i64>(5)? as u64,
                r.get(6)?,
                r.get(7)?,
            ))
        })?;
        let mut records = Vec::new();
        for m in rows {
            let (id, seq, name, file_name, source, submitted_ms, timeout_s, cancelled) = m?;
            records.push(MatrixRecord {
                id: id.parse()?,
                seq,
                name,
                file_name,
                source,
                submitted_ms,
                timeout_s,
                cancelled,
                cells: Vec::new(),
                execution: None,
            });
        }
        let mut stmt = self
            .conn
            .prepare("SELECT matrix_id, schedule_id, at_ms, kernel FROM executions")?;
        let rows: Vec<(String, String, i64, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
            .collect::<Result<_, _>>()?;
        let mut executions = std::collections::HashMap::new();
        for (matrix, schedule, at_ms, kernel) in rows {
            let e = Execution {
                schedule_id: schedule.parse()?,
                at_ms: at_ms as u64,
                kernel,
            };
            // A row no matrix id names belongs to no matrix loaded: left
            // out, as a row of an unknown matrix is.
            if let Ok(matrix) = matrix.parse::<crate::ids::MatrixId>() {
                executions.insert(matrix, e);
            }
        }
        for m in &mut records {
            m.execution = executions.remove(&m.id);
        }
        let mut stmt = self.conn.prepare(
            "SELECT s.id, s.name, s.file_name, s.source, s.cron, s.on_new_kernel, s.created_ms, s.last_cron_ms,
                    s.seen_kernels, s.cancelled, a.executions
             FROM schedules s LEFT JOIN schedule_archived a ON a.schedule_id = s.id
             ORDER BY s.created_ms, s.id",
        )?;
        // The row, then its id parsed, then the rest of the row.
        let rows = stmt.query_map([], |r| {
            let id = r.get::<_, String>(0)?;
            let record = |id| -> rusqlite::Result<ScheduleRecord> {
                Ok(ScheduleRecord {
                    id,
                    name: r.get(1)?,
                    file_name: r.get(2)?,
                    source: r.get(3)?,
                    cron: r.get(4)?,
                    on_new_kernel: r.get(5)?,
                    created_ms: r.get::<_, i64>(6)? as u64,
                    last_cron_ms: r.get::<_, i64>(7)? as u64,
                    seen_kernels: r
                        .get::<_, String>(8)?
                        .split('\n')
                        .filter(|k| !k.is_empty())
                        .map(str::to_owned)
                        .collect(),
                    cancelled: r.get(9)?,
                    archived_executions: r.get::<_, Option<i64>>(10)?.unwrap_or(0) as u64,
                })
            };
            Ok(id.parse().map(record))
        })?;
        for s in rows {
            snap.schedules.push(s???);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT id, record FROM bisections ORDER BY created_ms, id")?;
        let rows = stmt.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (id, bytes) = row?;
            let b = farm_proto::Bisection::decode(bytes.as_slice()).map_err(|source| {
                Error::Decode {
                    what: format!("bisection {id}"),
                    source,
                }
            })?;
            snap.bisections.push(b);
        }
        let mut cells = self
            .conn
            .prepare("SELECT cell FROM cells WHERE matrix_id = ?1 ORDER BY idx")?;
        for m in records {
            let blobs = cells.query_map(params![m.id.to_string()], |r| r.get::<_, Vec<u8>>(0))?;
            let mut wire: Vec<farm_proto::Cell> = Vec::new();
            for b in blobs {
                wire.push(decode(&b?, || format!("cell of matrix {}", m.id))?);
            }
            super::backend::typed(m, &wire, &mut snap);
        }
        let mut stmt = self.conn.prepare(
            "SELECT run_id, matrix_id, cell_idx, repetition, seq, state, attempt, agent_id, result FROM runs",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, u32>(2)?,
                r.get::<_, u32>(3)?,
                r.get::<_, i64>(4)? as u64,
                r.get::<_, i64>(5)?,
                r.get::<_, u32>(6)?,
                r.get::<_, String>(7)?,
                r.get::<_, Option<Vec<u8>>>(8)?,
            ))
        })?;
        for row in rows {
            let (run_id, matrix_id, cell, repetition, seq, state, attempt, agent_id, result) = row?;
            let result = match result {
                Some(b) => Some(decode(&b, || format!("result of run {run_id}"))?),
                None => None,
            };
            snap.runs.push(RunRecord {
                run_id: run_id.parse()?,
                matrix_id: matrix_id.parse()?,
                cell: crate::ids::CellIndex::new(cell),
                repetition,
                seq,
                state: RunState::from_i64(state)?,
                attempt,
                agent_id: super::backend::run_agent(&agent_id)?,
                result,
            });
        }
        let mut stmt = self.conn.prepare(
            "SELECT a.agent_id, a.capabilities, a.registered_ms, i.identity FROM agents a
                 LEFT JOIN agent_identities i ON i.agent_id = a.agent_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Vec<u8>>(1)?,
                r.get::<_, i64>(2)? as u64,
                r.get::<_, Option<String>>(3)?,
            ))
        })?;
        for row in rows {
            let (agent_id, caps, registered_ms, identity) = row?;
            let capabilities = decode(&caps, || format!("capabilities of agent {agent_id}"))?;
            let identity =
                match identity {
                    Some(i) => Some(crate::identity::Name::parse(&i).map_err(|source| {
                        Error::BadIdentity {
                            agent: agent_id.clone(),
                            source,
                        }
                    })?),
                    None => None,
                };
            snap.agents.push(AgentRecord {
                agent_id: agent_id.parse()?,
                capabilities,
                registered_ms,
                identity,
            });
        }
        Ok(snap)
    }
}

fn put_run(tx: &rusqlite::Transaction<'_>, r: &RunRecord) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT OR REPLACE INTO runs (run_id, matrix_id, cell_idx, repetition, seq, state, attempt, agent_id, result)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    stmt.execute(params![
        r.run_id.to_string(),
        r.matrix_id.to_string(),
        r.cell.get(),
        r.repetition,
        r.seq as i64,
        r.state as i64,
        r.attempt,
        r.agent_id.map(|a| a.to_string()).unwrap_or_default(),
        r.result.as_ref().map(|x| x.encode_to_vec()),
    ])?;
    Ok(())
}

fn decode<M: Message + Default>(bytes: &[u8], what: impl FnOnce() -> String) -> Result<M> {
    M::decode(bytes).map_err(|source| Error::Decode {
        what: what(),
        source,
    })
}
