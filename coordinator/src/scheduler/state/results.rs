//! Each matrix's summary versions ([`Versions`]), the cache `GetResults`
//! reads ([`Cache`]) and the results events; driven by `scheduler::results`,
//! computed by `scheduler::worker`.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use farm_proto::{GetResultsResponse, MatrixStatus};

use crate::ids::MatrixId;
use crate::scheduler::reply::Reply;

/// The jobs waiting for the results worker, at most: each holds a snapshot
/// of a matrix's ended runs (up to a few MiB for a large one), and a job
/// takes from milliseconds to seconds, so a longer queue would only hold
/// memory and make the last caller wait longer than it would to try again.
pub const RESULTS_QUEUE_CAPACITY: usize = 64;

/// What `GetResults` answers: the matrix's status when the request was
/// handled, and its summaries as the cache shares them.
#[derive(Debug, Clone)]
pub struct Results {
    pub status: Option<MatrixStatus>,
    /// The response but its status.
    pub summary: Arc<GetResultsResponse>,
}

impl Results {
    /// The response as the wire has it.
    pub fn into_response(self) -> GetResultsResponse {
        let mut r = Arc::unwrap_or_clone(self.summary);
        r.status = self.status;
        r
    }
}

/// What the results feature keeps of each matrix, in its `MatrixMem`.
pub(in crate::scheduler) struct Versions {
    /// The state its summaries are of: a new value of `Worker::next_version`
    /// each time one of their inputs changes.
    pub(in crate::scheduler) version: u64,
    /// The version of the last snapshot sent to the worker.
    pub(in crate::scheduler) requested: u64,
    /// Whether the results gauges have had the matrix's end (the worker
    /// said `Summarised`, or recovery gave it to them): until then the
    /// archive cannot know whether the gauges show it.
    pub(in crate::scheduler) gauged: bool,
}

impl Versions {
    pub(in crate::scheduler) fn new(version: u64) -> Versions {
        Versions {
            version,
            requested: 0,
            gauged: false,
        }
    }

    /// Whether the results gauges show the matrix's end.
    pub(in crate::scheduler) fn gauged(&self) -> bool {
        self.gauged
    }

    /// Recovery gave the gauges every ended matrix (`ended`) they will
    /// ever show.
    pub(in crate::scheduler) fn recovered(&mut self, ended: bool) {
        self.gauged = ended;
    }
}

/// The summaries of each matrix, by id, with the version they reflect:
/// written by the worker (and by the scheduler thread at start-up), read
/// by the scheduler thread.
#[derive(Clone, Default)]
pub(in crate::scheduler) struct Cache(
    pub(in crate::scheduler) Arc<RwLock<HashMap<MatrixId, Versioned>>>,
);

/// A summary and the version of the matrix it reflects.
pub(in crate::scheduler) type Versioned = (u64, Arc<GetResultsResponse>);

impl Cache {
    /// The summaries of `matrix_id` if they reflect `version` or later.
    pub(in crate::scheduler) fn get(
        &self,
        matrix_id: &MatrixId,
        version: u64,
    ) -> Option<Arc<GetResultsResponse>> {
        // Entries are replaced whole: a poisoned lock still holds whole ones.
        let map = self.0.read().unwrap_or_else(|e| e.into_inner());
        map.get(matrix_id)
            .filter(|(v, _)| *v >= version)
            .map(|(_, s)| s.clone())
    }

    /// An archived matrix leaves the cache with the rest of memory.
    pub(in crate::scheduler) fn remove(&self, matrix_id: &MatrixId) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.remove(matrix_id);
    }

    /// Keeps `summary` unless the cache has a later version already.
    pub(in crate::scheduler) fn put(
        &self,
        matrix_id: &MatrixId,
        version: u64,
        summary: Arc<GetResultsResponse>,
    ) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        match map.get(matrix_id) {
            Some((v, _)) if *v >= version => {}
            _ => {
                map.insert(*matrix_id, (version, summary));
            }
        }
    }
}

/// What the results feature is asked, and told by its worker.
pub enum ResultsEvent {
    Get {
        matrix_id: MatrixId,
        reply: Reply<Results>,
    },
    /// From the worker: the summaries of `version` could not be computed
    /// (the archive failed the histories' past).
    Failed {
        matrix_id: MatrixId,
        version: u64,
        ended: bool,
        /// Why the archive could not give the histories' past.
        error: String,
    },
    /// From the worker: an ended matrix's summaries.
    Summarised {
        matrix_id: MatrixId,
        summary: Arc<GetResultsResponse>,
    },
}
