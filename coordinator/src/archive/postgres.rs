//! The archive of a highly available farm: PostgreSQL (`--archive
//! postgres://…`), through tokio-postgres.
//!
//! Each connection runs on a runtime of its own (one thread, driven only
//! while a call waits), so the archive is called like the SQLite one from
//! the plain threads that use it. It connects at first use and again after
//! any failure: PostgreSQL down only delays archiving, and every call is
//! bounded by [`TIMEOUT`], so a stopped server cannot hold a caller.
//!
//! The schema is versioned: [`MIGRATIONS`] are applied in order, each
//! once, under a transaction-scoped advisory lock, so coordinators
//! starting together never race, and a coordinator never writes to a
//! schema newer than it knows.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use tokio_postgres::{Client, Config, NoTls};

use super::backend::{Archive, Archived, ArchivedMatrix, Error, Result, series_digest};
use super::records::{self, int};
use crate::ids::MatrixId;
use crate::results::Point;
use crate::store::RunState;

/// The longest one call (connecting and migrating included) may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// The key of the advisory lock migrations hold ("farm" in ASCII).
const MIGRATION_LOCK: i64 = 0x6661_726d;

/// The schema, version by version (version N is `MIGRATIONS[N-1]`); a
/// migration is never edited once released, only followed by another.
pub const MIGRATIONS: &[&str] = &["
CREATE TABLE archived_matrices (
    id text PRIMARY KEY,
    seq bigint NOT NULL,
    name text NOT NULL,
    file_name text NOT NULL,
    source text NOT NULL,
    submitted_ms bigint NOT NULL,
    cancelled boolean NOT NULL,
    schedule_id text,
    cells bytea NOT NULL,
    status bytea NOT NULL,
    summary bytea NOT NULL,
    archived_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX archived_matrices_by_schedule ON archived_matrices (schedule_id, seq)
    WHERE schedule_id IS NOT NULL;
CREATE TABLE archived_runs (
    matrix_id text NOT NULL REFERENCES archived_matrices (id) ON DELETE CASCADE,
    seq bigint NOT NULL,
    run_id text NOT NULL,
    cell_idx bigint NOT NULL,
    repetition bigint NOT NULL,
    state smallint NOT NULL,
    attempt bigint NOT NULL,
    agent_id text NOT NULL,
    result bytea,
    PRIMARY KEY (matrix_id, seq)
);
-- The series index: a history is one range scan of the primary key.
CREATE TABLE series_points (
    series bytea NOT NULL,
    matrix_seq bigint NOT NULL,
    cell_idx bigint NOT NULL,
    matrix_id text NOT NULL REFERENCES archived_matrices (id) ON DELETE CASCADE,
    submitted_ms bigint NOT NULL,
    kernel text NOT NULL,
    medians bytea NOT NULL,
    PRIMARY KEY (series, matrix_seq, cell_idx)
);
CREATE INDEX series_points_by_matrix ON series_points (matrix_id);
"];

/// A PostgreSQL connection string (`postgres://user@host:port/db`, or
/// `postgresql://…`), checked where it enters.
#[derive(Debug, Clone)]
pub struct PostgresUrl {
    config: Config,
}

#[derive(Debug, thiserror::Error)]
pub enum UrlError {
    #[error("expected postgres://… or postgresql://…, got {0:?}")]
    Scheme(String),
    #[error("not a PostgreSQL connection string: {0}")]
    Invalid(String),
}

impl FromStr for PostgresUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> std::result::Result<PostgresUrl, UrlError> {
        let prefix: String = s.chars().take(24).collect();
        if !(s.starts_with("postgres://") || s.starts_with("postgresql://")) {
            return Err(UrlError::Scheme(prefix));
        }
        let config = Config::from_str(s).map_err(|e| UrlError::Invalid(e.to_string()))?;
        if config.get_hosts().is_empty() {
            return Err(UrlError::Invalid(format!("no host in {prefix:?}…")));
        }
        Ok(PostgresUrl { config })
    }
}

impl PostgresUrl {
    /// host:port/db as user, never the password.
    pub fn describe(&self) -> String {
        let hosts: Vec<String> = self
            .config
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let host = match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
                };
                let port = self.config.get_ports().get(i).copied().unwrap_or(5432);
                format!("{host}:{port}")
            })
            .collect();
        format!(
            "{}/{} (user {})",
            hosts.join(","),
            self.config.get_dbname().unwrap_or(""),
            self.config.get_user().unwrap_or("")
        )
    }
}

pub struct Postgres {
    url: Arc<PostgresUrl>,
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
}

impl Postgres {
    /// Connects at first use.
    pub fn new(url: Arc<PostgresUrl>) -> Postgres {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a one-thread runtime for the archive's connection");
        Postgres {
            url,
            rt,
            client: None,
        }
    }

    fn err(&self, message: String) -> Error {
        Error::Postgres {
            at: self.url.describe(),
            message,
        }
    }

    /// Runs `f` on a connection (made, and the schema migrated, if there
    /// is none), within [`TIMEOUT`]; any failure drops the connection, so
    /// the next call starts afresh.
    fn call<T>(
        &mut self,
        f: impl AsyncFnOnce(&mut Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T> {
        let url = self.url.clone();
        let mut client = self.client.take();
        let r = self.rt.block_on(async {
            tokio::time::timeout(TIMEOUT, async {
                if client.is_none() || client.as_ref().is_some_and(|c| c.is_closed()) {
                    client = Some(connect(&url).await?);
                }
                let c = client.as_mut().expect("connected above");
                f(c).await.map_err(Failure::Db)
            })
            .await
        });
        match r {
            Ok(Ok(v)) => {
                self.client = client;
                Ok(v)
            }
            Ok(Err(m)) => Err(self.err(m.to_string())),
            Err(_) => Err(self.err(format!("no answer within {}s", TIMEOUT.as_secs()))),
        }
    }
}

/// Why connecting (the schema migrated) or a call failed, before
/// [`Postgres::err`] says at which archive.
#[derive(Debug, thiserror::Error)]
enum Failure {
    /// What went wrong, as the server said it when it did ([`message`]).
    #[error("{}", message(.0))]
    Db(tokio_postgres::Error),
    #[error("the archive's schema is version {at}; this coordinator knows versions up to {known}")]
    NewerSchema { at: usize, known: usize },
}

/// What went wrong, as the server said it when it did.
fn message(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(inner) = source {
                s.push_str(&format!(": {inner}"));
                source = inner.source();
            }
            s
        }
    }
}

async fn connect(url: &PostgresUrl) -> Result<Client, Failure> {
    let (mut client, conn) = url.config.connect(NoTls).await.map_err(Failure::Db)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("archive connection closed: {e}");
        }
    });
    migrate(&mut client).await?;
    Ok(client)
}

/// Brings the schema to the latest of [`MIGRATIONS`].
async fn migrate(client: &mut Client) -> Result<(), Failure> {
    let e = Failure::Db;
    let tx = client.transaction().await.map_err(e)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(e)?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS farm_schema_migrations (
             version integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .map_err(e)?;
    let at: Option<i32> = tx
        .query_one("SELECT max(version) FROM farm_schema_migrations", &[])
        .await
        .map_err(e)?
        .get(0);
    let at = at.unwrap_or(0) as usize;
    if at > MIGRATIONS.len() {
        return Err(Failure::NewerSchema {
            at,
            known: MIGRATIONS.len(),
        });
    }
    for (i, m) in MIGRATIONS.iter().enumerate().skip(at) {
        tx.batch_execute(m).await.map_err(e)?;
        tx.execute(
            "INSERT INTO farm_schema_migrations (version) VALUES ($1)",
            &[&(i as i32 + 1)],
        )
        .await
        .map_err(e)?;
        tracing::info!(version = i + 1, "archive schema migrated");
    }
    tx.commit().await.map_err(e)
}

/// The rows of an archived matrix's runs and points, as columns.
struct Columns {
    seq: Vec<i64>,
    run_id: Vec<String>,
    cell: Vec<i64>,
    repetition: Vec<i64>,
    state: Vec<i16>,
    attempt: Vec<i64>,
    agent: Vec<String>,
    result: Vec<Option<Vec<u8>>>,
    p_series: Vec<Vec<u8>>,
    p_seq: Vec<i64>,
    p_cell: Vec<i64>,
    p_submitted: Vec<i64>,
    p_kernel: Vec<String>,
    p_medians: Vec<Vec<u8>>,
}

fn columns(m: &ArchivedMatrix) -> Result<Columns> {
    let mut c = Columns {
        seq: Vec::new(),
        run_id: Vec::new(),
        cell: Vec::new(),
        repetition: Vec::new(),
        state: Vec::new(),
        attempt: Vec::new(),
        agent: Vec::new(),
        result: Vec::new(),
        p_series: Vec::new(),
        p_seq: Vec::new(),
        p_cell: Vec::new(),
        p_submitted: Vec::new(),
        p_kernel: Vec::new(),
        p_medians: Vec::new(),
    };
    for r in &m.runs {
        c.seq.push(int("a run's seq", r.seq)?);
        c.run_id.push(r.run_id.to_string());
        c.cell.push(i64::from(r.cell.get()));
        c.repetition.push(i64::from(r.repetition));
        c.state.push(r.state as i16);
        c.attempt.push(i64::from(r.attempt));
        c.agent
            .push(r.agent_id.map(|a| a.to_string()).unwrap_or_default());
        c.result.push(r.result.as_ref().map(|x| x.encode_to_vec()));
    }
    for (key, p) in &m.points {
        c.p_series.push(series_digest(key).to_vec());
        c.p_seq.push(int("a matrix's seq", p.matrix_seq)?);
        c.p_cell.push(i64::from(p.cell.get()));
        c.p_submitted
            .push(int("a submission time", p.submitted_ms)?);
        c.p_kernel.push(p.kernel.clone());
        c.p_medians.push(records::medians(&p.medians));
    }
    Ok(c)
}

impl Archive for Postgres {
    fn put(&mut self, m: &ArchivedMatrix) -> Result<bool> {
        let r = &m.record;
        let (seq, submitted) = (
            int("a matrix's seq", r.seq)?,
            int("a submission time", r.submitted_ms)?,
        );
        let id = r.id.to_string();
        let schedule = r.execution.as_ref().map(|e| e.schedule_id.to_string());
        let (cells, status, summary) = (
            records::cells(&r.cells),
            m.status.encode_to_vec(),
            m.summary.encode_to_vec(),
        );
        let c = columns(m)?;
        self.call(async |client| {
            let tx = client.transaction().await?;
            let inserted = tx
                .execute(
                    "INSERT INTO archived_matrices
                         (id, seq, name, file_name, source, submitted_ms, cancelled, schedule_id,
                          cells, status, summary)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        &id,
                        &seq,
                        &r.name,
                        &r.file_name,
                        &r.source,
                        &submitted,
                        &r.cancelled,
                        &schedule,
                        &cells,
                        &status,
                        &summary,
                    ],
                )
                .await?;
            if inserted == 0 {
                // Archived whole before, in one transaction like this one.
                tx.rollback().await?;
                return Ok(false);
            }
            // One statement per table, whatever the matrix's size: arrays
            // unnested server-side, not a round trip per row.
            tx.execute(
                "INSERT INTO archived_runs
                     (matrix_id, seq, run_id, cell_idx, repetition, state, attempt, agent_id, result)
                 SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::bigint[], $5::bigint[],
                                          $6::smallint[], $7::bigint[], $8::text[], $9::bytea[])",
                &[
                    &id,
                    &c.seq,
                    &c.run_id,
                    &c.cell,
                    &c.repetition,
                    &c.state,
                    &c.attempt,
                    &c.agent,
                    &c.result,
                ],
            )
            .await?;
            tx.execute(
                "INSERT INTO series_points
                     (matrix_id, series, matrix_seq, cell_idx, submitted_ms, kernel, medians)
                 SELECT $1, * FROM UNNEST($2::bytea[], $3::bigint[], $4::bigint[], $5::bigint[],
                                          $6::text[], $7::bytea[])
                 ON CONFLICT DO NOTHING",
                &[
                    &id,
                    &c.p_series,
                    &c.p_seq,
                    &c.p_cell,
                    &c.p_submitted,
                    &c.p_kernel,
                    &c.p_medians,
                ],
            )
            .await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    fn series(&mut self, key: &[u8], limit: usize) -> Result<Vec<Point>> {
        let digest = series_digest(key).to_vec();
        let limit = limit as i64;
        let rows = self.call(async |client| {
            client
                .query(
                    "SELECT matrix_seq, cell_idx, matrix_id, submitted_ms, kernel, medians
                     FROM series_points WHERE series = $1
                     ORDER BY matrix_seq DESC, cell_idx DESC LIMIT $2",
                    &[&digest, &limit],
                )
                .await
        })?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows.iter().rev() {
            out.push(Point {
                matrix_seq: row.get::<_, i64>(0) as u64,
                cell: crate::ids::CellIndex::new(row.get::<_, i64>(1) as u32),
                matrix_id: row.get::<_, &str>(2).parse()?,
                submitted_ms: row.get::<_, i64>(3) as u64,
                kernel: row.get(4),
                medians: records::medians_of(row.get(5))?,
            });
        }
        Ok(out)
    }

    fn matrix(&mut self, matrix_id: MatrixId) -> Result<Option<Archived>> {
        let id = matrix_id.to_string();
        let (finished, failed) = (RunState::Finished as i16, RunState::Failed as i16);
        let found = self.call(async |client| {
            let Some(m) = client
                .query_opt(
                    "SELECT cells, status, summary FROM archived_matrices WHERE id = $1",
                    &[&id],
                )
                .await?
            else {
                return Ok(None);
            };
            let runs = client
                .query(
                    "SELECT run_id, cell_idx, repetition, agent_id, result FROM archived_runs
                     WHERE matrix_id = $1 AND state IN ($2, $3) ORDER BY seq",
                    &[&id, &finished, &failed],
                )
                .await?;
            Ok(Some((m, runs)))
        })?;
        let Some((m, rows)) = found else {
            return Ok(None);
        };
        let mut runs = Vec::with_capacity(rows.len());
        for row in &rows {
            runs.push(records::run(
                row.get(0),
                row.get::<_, i64>(1) as u32,
                row.get::<_, i64>(2) as u32,
                row.get(3),
                row.get(4),
            )?);
        }
        records::archived(m.get(0), m.get(1), m.get(2), runs).map(Some)
    }
}
