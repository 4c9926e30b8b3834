//! What an archive is — the [`Archive`] trait, what it keeps and answers,
//! its errors — apart from the backends that implement it and from
//! `archive.rs`, which opens them: each backend imports this, never its
//! parent.

use farm_proto::{Cell, GetResultsResponse, MatrixStatus};

use crate::ids::MatrixId;
use crate::results::Point;
use crate::store::{MatrixRecord, RunRecord};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("archive (SQLite): {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("archive (PostgreSQL at {at}): {message}")]
    Postgres { at: String, message: String },
    #[error("archive: corrupt {what}: {source}")]
    Decode {
        what: String,
        source: prost::DecodeError,
    },
    /// The blocking task of a lookup ended without an answer (a panic).
    #[error("archive ({at}): the lookup did not finish: {message}")]
    Lookup { at: String, message: String },
    #[error("archive: {0}")]
    BadMatrixId(#[from] crate::ids::BadMatrixId),
    #[error("archive: {what} is {value}, beyond what the archive stores")]
    OutOfRange { what: &'static str, value: u64 },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An ended matrix, everything the archive keeps of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedMatrix {
    /// With its cells and its execution, if a schedule ran it.
    pub record: MatrixRecord,
    /// Every run, in dispatch order: finished and failed ones with their
    /// results, cancelled ones without.
    pub runs: Vec<RunRecord>,
    /// Its status when it was archived (done or cancelled).
    pub status: MatrixStatus,
    /// Its cells' summaries, histories included, as `GetResults` gave them
    /// when it was archived (without status and runs, stored apart).
    pub summary: GetResultsResponse,
    /// One point per cell with a finished run: (series identity, point).
    pub points: Vec<(Vec<u8>, Point)>,
}

/// What `GetMatrix`, `WatchMatrix` and `GetResults` answer for an
/// archived matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Archived {
    pub status: MatrixStatus,
    /// With its status and its ended runs (finished and failed), as a live
    /// matrix's `GetResults` has them.
    pub results: GetResultsResponse,
    pub cells: Vec<Cell>,
}

/// Where ended matrices go.
///
/// `put` is all or nothing, durable when it returns, and idempotent: a
/// matrix archived already is left as it is (and `Ok(false)` says so).
pub trait Archive: Send {
    fn put(&mut self, m: &ArchivedMatrix) -> Result<bool>;
    /// The latest `limit` points of the series `key` (its identity, not its
    /// digest), oldest first: by matrix submission order, then cell.
    fn series(&mut self, key: &[u8], limit: usize) -> Result<Vec<Point>>;
    fn matrix(&mut self, matrix_id: MatrixId) -> Result<Option<Archived>>;
}

/// The index a series is found by: its identity's SHA-256, fixed-size
/// whatever the workload's parameters and states hold.
pub fn series_digest(key: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, key);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}
