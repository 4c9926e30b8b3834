//! What archiving keeps (the matrices on their way to the archive, the
//! pause after a failure) and the worker's answer ([`ArchiveEvent`]);
//! driven by `scheduler::archive`.

use std::time::Instant;

use crate::ids::MatrixId;

/// Matrices being archived at once, at most: each job holds a copy of a
/// matrix (up to a few MiB), and the worker's queue
/// (`RESULTS_QUEUE_CAPACITY`) keeps the rest of its room for `GetResults`.
pub const ARCHIVE_IN_FLIGHT: usize = 8;
/// A schedule's executions submitted within this long stay live.
pub(in crate::scheduler) const KEEP_EXECUTIONS_MS: u64 = 3_600_000;

/// What the scheduler knows of archiving.
#[derive(Default)]
pub(in crate::scheduler) struct State {
    pub(in crate::scheduler) in_flight: std::collections::BTreeSet<MatrixId>,
    /// Archiving pauses until then after a failure.
    pub(in crate::scheduler) retry_at: Option<Instant>,
    /// The archive failed the last job: said once, until one succeeds.
    pub(in crate::scheduler) failing: bool,
}

/// What the results worker tells of a matrix's move to the archive.
pub enum ArchiveEvent {
    /// `matrix_id` is in the archive (`Ok(false)`: it was already), or the
    /// archive failed it.
    Archived {
        matrix_id: MatrixId,
        outcome: crate::archive::Result<bool>,
    },
}
