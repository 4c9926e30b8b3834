//! The archive: ended matrices, out of live state and memory.
//!
//! When a matrix has ended, the results worker (`scheduler::results`)
//! writes it here whole — its record and cells, its ended runs with their
//! results, its final status and summaries, and one point per cell for the
//! cell's series — in one transaction; only then does the scheduler delete
//! it from the live store and from memory. A crash between the two leaves
//! it in both, and the next leader archives it again: [`Archive::put`] of a
//! matrix already there changes nothing. So nothing is lost, and nothing is
//! counted twice.
//!
//! Histories read a series here by its index (the SHA-256 of the series'
//! identity, `scheduler::histories::series_key`, then the matrix's
//! submission order), never by scanning matrices, and merge the points of
//! matrices still live (`results::merge`): the coordinator's memory is
//! bounded by its live matrices, however long the farm has run.
//!
//! Two implementations pass one suite (`coordinator/tests/archive.rs`): the
//! embedded SQLite file, beside the live tables (the default), and
//! PostgreSQL for a highly available farm (`--archive postgres://…`,
//! feature `ha`), whose schema is versioned by migrations.
//!
//! # What stays live, and why nothing is lost or doubled
//!
//! A matrix that has ended (every run ended, the end published) leaves live
//! state (`scheduler::archive`). Three kinds stay:
//! - the done matrices the results gauges show (each series' latest, within
//!   `--metrics-series-limit` samples a family), which a restart shows them
//!   from. A matrix waits until the gauges have had its end (`gauged`, set
//!   by the worker's `Summarised`), for until then nobody knows whether they
//!   show it;
//! - a schedule's latest execution, for `farmctl schedules`;
//! - a schedule's executions of the last hour, for the trigger's hourly limit.
//!
//! Live memory is therefore bounded by the unfinished matrices and what the
//! gauges can show, not by history nor by the number of series a farm has
//! ever run (BENCHMARKS, "The coordinator's memory over 2,000 ended
//! matrices"). After a restart the gauges are shown at once from live points,
//! and the worker summarises those matrices again with the archive's past, so
//! that a history's change (`found_by="history"`) comes back too. The
//! argument that nothing is lost or doubled:
//!
//! 1. **Archived before forgotten.** At a tick the scheduler sends up to
//!    `ARCHIVE_IN_FLIGHT` ended matrices to the results worker, which computes
//!    their summaries (histories with the archive's past) and writes matrix,
//!    cells, runs with results, final status, summaries and one point per
//!    cell into the archive in **one transaction** (`archive::Archive::put`).
//!    Only when that returned does the scheduler delete the matrix from the
//!    live store (`Op::ForgetMatrix`, in a batch like any other, with the
//!    schedule's `archived_executions` count) and from memory.
//! 2. **Idempotent.** A crash between the archive's commit and the live delete
//!    leaves the matrix in both; the next leader archives it again, and `put`
//!    of an id already there changes nothing (`INSERT … ON CONFLICT DO
//!    NOTHING` on the matrix row, in the same transaction as the rest).
//! 3. **The archive down.** `put` fails, the matrix stays live, archiving
//!    pauses `ARCHIVE_RETRY` (5 s) and resumes by itself (PostgreSQL's
//!    connection is remade at the next call, each call bounded by 10 s);
//!    `farm_archive_backlog_matrices` and `farm_archive_failures_total` show
//!    it. A summary whose histories cannot read their past is given to
//!    `GetResults` with a note in every cell, never cached and never shown to
//!    the gauges; the matrix waits too (counted the same way), and is
//!    summarised again `ARCHIVE_RETRY` later.
//! 4. **Histories by index.** A series is the SHA-256 of its identity
//!    (`histories::series_key`); `series_points` has the primary key (series,
//!    matrix seq, cell), so a history is one range scan for the latest
//!    `policy::HISTORY_POINTS` (1,000) points, merged with the live points
//!    of the same series in memory (`results::merge`: by (seq, cell), once
//!    each). Seqs never fall below the clock in µs, so they keep ordering the
//!    archive after live state has emptied and a coordinator restarts.
//! 5. **Lookups.** `GetMatrix`, `WatchMatrix` (its final status, once),
//!    `GetResults` and `CancelMatrix` (0 runs) of a matrix the scheduler does
//!    not have read the archive (`archive::Shared`, on a blocking thread).
//!
//! Embedded, the archive is tables of the coordinator's SQLite file, through a
//! connection of its own (WAL; both connections wait for each other's
//! transactions, `BUSY_TIMEOUT`). With etcd it is PostgreSQL (`--archive
//! postgres://…`, required), whose schema is `archive/postgres.rs`'s
//! `MIGRATIONS`, applied in order under an advisory lock. One suite,
//! `coordinator/tests/archive.rs`, runs on both.

use std::path::PathBuf;
use std::sync::Arc;

use crate::ids::MatrixId;

mod backend;
#[cfg(feature = "ha")]
mod postgres;
mod records;
pub(crate) mod sqlite;

pub use backend::{Archive, Archived, ArchivedMatrix, Error, Result, series_digest};

#[cfg(feature = "ha")]
pub use postgres::{Postgres, PostgresUrl, UrlError};
pub use sqlite::Sqlite;

/// How long archiving (and summarising an ended matrix, which reads the
/// archive's past) pauses after the archive failed a job: an unreachable
/// archive may hold the results worker for its whole timeout at each try.
pub const ARCHIVE_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// Where the archive is: how each thread that needs it opens its own
/// connection (the results worker writes and reads series, the gRPC
/// handlers read archived matrices).
#[derive(Debug, Clone)]
pub enum Location {
    /// The embedded store's file.
    Sqlite(PathBuf),
    #[cfg(feature = "ha")]
    Postgres(Arc<PostgresUrl>),
}

/// Why `--archive` names no archive this coordinator can use.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[cfg(feature = "ha")]
    #[error(transparent)]
    Url(#[from] UrlError),
    #[cfg(not(feature = "ha"))]
    #[error(
        "an archive in PostgreSQL needs a coordinator built with the `ha` feature \
         (cargo build --features farm-coordinator/ha)"
    )]
    NoHa,
}

impl Location {
    /// `--archive`: a PostgreSQL connection string (`postgres://…`).
    pub fn parse_url(s: &str) -> std::result::Result<Location, LocationError> {
        #[cfg(feature = "ha")]
        {
            Ok(Location::Postgres(Arc::new(s.parse::<PostgresUrl>()?)))
        }
        #[cfg(not(feature = "ha"))]
        {
            let _ = s;
            Err(LocationError::NoHa)
        }
    }

    /// A connection of its own. PostgreSQL connects on first use, and
    /// again after it was lost: an archive down at start-up or later only
    /// delays archiving.
    pub fn open(&self) -> Result<Box<dyn Archive>> {
        Ok(match self {
            Location::Sqlite(path) => Box::new(Sqlite::open(path)?),
            #[cfg(feature = "ha")]
            Location::Postgres(url) => Box::new(Postgres::new(url.clone())),
        })
    }

    /// What the archive is, for logs and errors (never a password).
    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(path) => format!("SQLite {}", path.display()),
            #[cfg(feature = "ha")]
            Location::Postgres(url) => format!("PostgreSQL {}", url.describe()),
        }
    }
}

/// An archive shared by the gRPC handlers, opened at first use.
#[derive(Clone)]
pub struct Shared {
    location: Location,
    conn: Arc<std::sync::Mutex<Option<Box<dyn Archive>>>>,
}

impl Shared {
    pub fn new(location: Location) -> Shared {
        Shared {
            location,
            conn: Arc::default(),
        }
    }

    /// The archived matrix, looked up on a blocking thread.
    pub async fn matrix(&self, matrix_id: MatrixId) -> Result<Option<Archived>> {
        let this = self.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = this.conn.lock().unwrap_or_else(|e| e.into_inner());
            if guard.is_none() {
                *guard = Some(this.location.open()?);
            }
            let conn = guard.as_mut().expect("opened above");
            conn.matrix(matrix_id)
        })
        .await
        .unwrap_or_else(|e| {
            Err(Error::Lookup {
                at: self.location.describe(),
                message: e.to_string(),
            })
        })
    }
}
