//! The embedded store: SQLite in WAL mode, `synchronous=FULL`.
//!
//! Every change goes through [`Store::apply`], one transaction per batch of
//! [`Op`]s: the scheduler commits a batch before it sends any acknowledgement
//! or assignment that depends on it, which is what makes a SIGKILL at any
//! instant lose nothing. Batching is also what makes it fast: one fsync covers
//! every result that arrived while the previous batch was being written.
//!
//! The operations are puts and deletes of whole records under a key, the shape
//! of an etcd transaction, so that control state can move to etcd later
//! without changing the scheduler.

use std::path::Path;

use prost::Message;
use rusqlite::{Connection, OptionalExtension, params};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store: corrupt record {what}: {source}")]
    Decode {
        what: String,
        source: prost::DecodeError,
    },
    #[error("store: unknown run state {0} in the database")]
    BadState(i64),
    #[error("store: agent {agent}: {source}")]
    BadIdentity {
        agent: String,
        source: crate::identity::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a run is in its life. Stored as an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunState {
    Queued = 0,
    Assigned = 1,
    Finished = 2,
    Failed = 3,
    Cancelled = 4,
}

impl RunState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Finished | RunState::Failed | RunState::Cancelled
        )
    }

    fn from_i64(v: i64) -> Result<RunState> {
        Ok(match v {
            0 => RunState::Queued,
            1 => RunState::Assigned,
            2 => RunState::Finished,
            3 => RunState::Failed,
            4 => RunState::Cancelled,
            other => return Err(Error::BadState(other)),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRecord {
    pub id: String,
    /// Submission order; older matrices are served first.
    pub seq: u64,
    pub name: String,
    pub file_name: String,
    pub source: String,
    pub submitted_ms: u64,
    pub timeout_s: u32,
    pub cancelled: bool,
    pub cells: Vec<farm_proto::Cell>,
    /// Set when the matrix is an execution of a schedule.
    pub execution: Option<Execution>,
}

/// What made a schedule run a matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub schedule_id: String,
    /// The cron instant, or when the trigger saw the kernel (unix ms).
    pub at_ms: u64,
    /// The kernel a trigger ran it for; empty for a cron instant.
    pub kernel: String,
}

/// A continuous matrix: its file, when it runs, what it has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    pub id: String,
    pub name: String,
    pub file_name: String,
    pub source: String,
    /// Five-field cron, UTC; empty: none.
    pub cron: String,
    /// Kernel glob; empty: no trigger.
    pub on_new_kernel: String,
    pub created_ms: u64,
    /// The latest cron instant executed (at creation: the creation time),
    /// so that a restart neither repeats nor forgets one.
    pub last_cron_ms: u64,
    /// Kernels the trigger has executed for, or that were there already
    /// when the schedule was made.
    pub seen_kernels: Vec<String>,
    pub cancelled: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    pub matrix_id: String,
    pub cell: u32,
    pub repetition: u32,
    /// Dispatch order within the matrix.
    pub seq: u64,
    pub state: RunState,
    /// How many times the run has been assigned.
    pub attempt: u32,
    pub agent_id: String,
    pub result: Option<farm_proto::RunResult>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    pub agent_id: String,
    pub capabilities: farm_proto::Capabilities,
    pub registered_ms: u64,
    /// The certificate name the agent id is bound to (mutual TLS).
    pub identity: Option<crate::identity::Name>,
}

/// One change; a slice of them is applied atomically.
#[derive(Debug, Clone)]
pub enum Op {
    PutMatrix(Box<MatrixRecord>, Vec<RunRecord>),
    PutRun(Box<RunRecord>),
    CancelMatrix(String),
    PutAgent(Box<AgentRecord>),
    /// An agent absent past its expiry is forgotten.
    ForgetAgent(String),
    PutSchedule(Box<ScheduleRecord>),
}

/// Everything the scheduler needs to resume after a restart.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub matrices: Vec<MatrixRecord>,
    pub runs: Vec<RunRecord>,
    pub agents: Vec<AgentRecord>,
    pub schedules: Vec<ScheduleRecord>,
}

pub struct Store {
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
";

impl Store {
    pub fn open(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        // WAL lets readers (none yet) run beside the writer; FULL makes each
        // commit durable before it returns, which acknowledgements rely on.
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store { conn })
    }

    pub fn apply(&mut self, ops: &[Op]) -> Result<()> {
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
                        params![m.id, m.seq as i64, m.name, m.file_name, m.source, m.submitted_ms as i64, m.timeout_s, m.cancelled],
                    )?;
                    let mut cell_stmt = tx.prepare_cached(
                        "INSERT INTO cells (matrix_id, idx, cell) VALUES (?1, ?2, ?3)",
                    )?;
                    for c in &m.cells {
                        cell_stmt.execute(params![m.id, c.index, c.encode_to_vec()])?;
                    }
                    for r in runs {
                        put_run(&tx, r)?;
                    }
                    if let Some(e) = &m.execution {
                        tx.execute(
                            "INSERT INTO executions (matrix_id, schedule_id, at_ms, kernel) VALUES (?1, ?2, ?3, ?4)",
                            params![m.id, e.schedule_id, e.at_ms as i64, e.kernel],
                        )?;
                    }
                }
                Op::PutSchedule(s) => {
                    // Kernel names hold no newline (the matrix refuses whitespace).
                    tx.execute(
                        "INSERT OR REPLACE INTO schedules (id, name, file_name, source, cron, on_new_kernel, created_ms, last_cron_ms, seen_kernels, cancelled)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                        params![s.id, s.name, s.file_name, s.source, s.cron, s.on_new_kernel, s.created_ms as i64,
                                s.last_cron_ms as i64, s.seen_kernels.join("\n"), s.cancelled],
                    )?;
                }
                Op::PutRun(r) => put_run(&tx, r)?,
                Op::CancelMatrix(id) => {
                    tx.execute(
                        "UPDATE matrices SET cancelled = 1 WHERE id = ?1",
                        params![id],
                    )?;
                }
                Op::PutAgent(a) => {
                    tx.execute(
                        "INSERT OR REPLACE INTO agents (agent_id, capabilities, registered_ms) VALUES (?1, ?2, ?3)",
                        params![a.agent_id, a.capabilities.encode_to_vec(), a.registered_ms as i64],
                    )?;
                    if let Some(identity) = &a.identity {
                        // Insert, never replace: a binding lasts as long as
                        // its agent. Only a put of the same agent again is
                        // let be; a second agent for one identity breaks
                        // UNIQUE and fails the batch, never unbinds quietly.
                        tx.execute(
                            "INSERT INTO agent_identities (agent_id, identity) VALUES (?1, ?2)
                             ON CONFLICT(agent_id) DO NOTHING",
                            params![a.agent_id, identity.as_str()],
                        )?;
                    }
                }
                Op::ForgetAgent(id) => {
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

    pub fn load(&self) -> Result<Snapshot> {
        let mut snap = Snapshot::default();
        let mut stmt = self.conn.prepare(
            "SELECT id, seq, name, file_name, source, submitted_ms, timeout_s, cancelled FROM matrices ORDER BY seq",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(MatrixRecord {
                id: r.get(0)?,
                seq: r.get::<_, i64>(1)? as u64,
                name: r.get(2)?,
                file_name: r.get(3)?,
                source: r.get(4)?,
                submitted_ms: r.get::<_, i64>(5)? as u64,
                timeout_s: r.get(6)?,
                cancelled: r.get(7)?,
                cells: Vec::new(),
                execution: None,
            })
        })?;
        for m in rows {
            snap.matrices.push(m?);
        }
        let mut stmt = self
            .conn
            .prepare("SELECT matrix_id, schedule_id, at_ms, kernel FROM executions")?;
        let mut executions: std::collections::HashMap<String, Execution> = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    Execution {
                        schedule_id: r.get(1)?,
                        at_ms: r.get::<_, i64>(2)? as u64,
                        kernel: r.get(3)?,
                    },
                ))
            })?
            .collect::<Result<_, _>>()?;
        for m in &mut snap.matrices {
            m.execution = executions.remove(&m.id);
        }
        let mut stmt = self.conn.prepare(
            "SELECT id, name, file_name, source, cron, on_new_kernel, created_ms, last_cron_ms, seen_kernels, cancelled
             FROM schedules ORDER BY created_ms, id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(ScheduleRecord {
                id: r.get(0)?,
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
            })
        })?;
        for s in rows {
            snap.schedules.push(s?);
        }
        let mut cells = self
            .conn
            .prepare("SELECT cell FROM cells WHERE matrix_id = ?1 ORDER BY idx")?;
        for m in &mut snap.matrices {
            let blobs = cells.query_map(params![m.id], |r| r.get::<_, Vec<u8>>(0))?;
            for b in blobs {
                m.cells
                    .push(decode(&b?, || format!("cell of matrix {}", m.id))?);
            }
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
                run_id,
                matrix_id,
                cell,
                repetition,
                seq,
                state: RunState::from_i64(state)?,
                attempt,
                agent_id,
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
                agent_id,
                capabilities,
                registered_ms,
                identity,
            });
        }
        Ok(snap)
    }

    /// The highest matrix sequence number in use, so new ones sort after it.
    pub fn max_matrix_seq(&self) -> Result<u64> {
        Ok(self
            .conn
            .query_row("SELECT MAX(seq) FROM matrices", [], |r| {
                r.get::<_, Option<i64>>(0)
            })
            .optional()?
            .flatten()
            .unwrap_or(0) as u64)
    }
}

fn put_run(tx: &rusqlite::Transaction<'_>, r: &RunRecord) -> Result<()> {
    let mut stmt = tx.prepare_cached(
        "INSERT OR REPLACE INTO runs (run_id, matrix_id, cell_idx, repetition, seq, state, attempt, agent_id, result)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    )?;
    stmt.execute(params![
        r.run_id,
        r.matrix_id,
        r.cell,
        r.repetition,
        r.seq as i64,
        r.state as i64,
        r.attempt,
        r.agent_id,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, state: RunState) -> RunRecord {
        RunRecord {
            run_id: id.into(),
            matrix_id: "m".into(),
            cell: 0,
            repetition: 0,
            seq: 0,
            state,
            attempt: 0,
            agent_id: String::new(),
            result: None,
        }
    }

    #[test]
    fn apply_then_reopen_sees_everything() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("farm.db");
        let matrix = MatrixRecord {
            id: "m".into(),
            seq: 7,
            name: "n".into(),
            file_name: "f.toml".into(),
            source: "name = \"n\"".into(),
            submitted_ms: 1,
            timeout_s: 60,
            cancelled: false,
            cells: vec![farm_proto::Cell {
                index: 0,
                name: "c0".into(),
                ..Default::default()
            }],
            execution: Some(Execution {
                schedule_id: "s".into(),
                at_ms: 3_600_000,
                kernel: "file:/k/v6.13".into(),
            }),
        };
        let schedule = ScheduleRecord {
            id: "s".into(),
            name: "nightly".into(),
            file_name: "n.toml".into(),
            source: "name = \"nightly\"".into(),
            cron: "0 3 * * *".into(),
            on_new_kernel: "file:/k/*".into(),
            created_ms: 5,
            last_cron_ms: 3_600_000,
            seen_kernels: vec!["file:/k/v6.12".into(), "file:/k/v6.13".into()],
            cancelled: false,
        };
        {
            let mut s = Store::open(&path).unwrap();
            s.apply(&[
                Op::PutSchedule(Box::new(schedule.clone())),
                Op::PutMatrix(Box::new(matrix.clone()), vec![run("r0", RunState::Queued)]),
            ])
            .unwrap();
            let mut done = run("r0", RunState::Finished);
            done.attempt = 2;
            done.result = Some(farm_proto::RunResult {
                ok: true,
                ..Default::default()
            });
            s.apply(&[Op::PutRun(Box::new(done)), Op::CancelMatrix("m".into())])
                .unwrap();
        }
        let s = Store::open(&path).unwrap();
        let snap = s.load().unwrap();
        assert_eq!(snap.matrices.len(), 1);
        assert!(snap.matrices[0].cancelled);
        assert_eq!(snap.matrices[0].cells, matrix.cells);
        assert_eq!(snap.matrices[0].execution, matrix.execution);
        assert_eq!(snap.schedules, vec![schedule]);
        assert_eq!(snap.runs.len(), 1);
        assert_eq!(snap.runs[0].state, RunState::Finished);
        assert_eq!(snap.runs[0].attempt, 2);
        assert!(snap.runs[0].result.as_ref().unwrap().ok);
        assert_eq!(s.max_matrix_seq().unwrap(), 7);
    }

    #[test]
    fn identities_are_kept_bound_and_forgotten_with_their_agent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("farm.db");
        let agent = |id: &str, identity: Option<&str>| {
            Op::PutAgent(Box::new(AgentRecord {
                agent_id: id.into(),
                capabilities: Default::default(),
                registered_ms: 1,
                identity: identity.map(|n| crate::identity::Name::parse(n).unwrap()),
            }))
        };
        let bound = |s: &Store| -> Vec<(String, Option<String>)> {
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
        let mut s = Store::open(&path).unwrap();
        s.apply(&[agent("a1", Some("n1")), agent("a2", None)])
            .unwrap();
        // Put again (a catalogue change): the binding stays as it was.
        s.apply(&[agent("a1", Some("n1"))]).unwrap();
        drop(s);
        let mut s = Store::open(&path).unwrap();
        assert_eq!(
            bound(&s),
            vec![("a1".into(), Some("n1".into())), ("a2".into(), None)]
        );
        s.apply(&[Op::ForgetAgent("a1".into())]).unwrap();
        // Forgotten with its agent, so the name can bind a new id.
        s.apply(&[agent("a3", Some("n1"))]).unwrap();
        assert_eq!(
            bound(&s),
            vec![("a2".into(), None), ("a3".into(), Some("n1".into()))]
        );
    }

    #[test]
    fn a_failing_batch_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(&dir.path().join("farm.db")).unwrap();
        let m = MatrixRecord {
            id: "m".into(),
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
            Op::PutRun(Box::new(run("r1", RunState::Queued))),
            Op::PutMatrix(Box::new(m), vec![]),
        ]);
        assert!(err.is_err());
        assert!(s.load().unwrap().runs.is_empty());
    }
}
