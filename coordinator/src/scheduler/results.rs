//! Summaries off the scheduler thread. A matrix's summaries — verdicts,
//! intervals, histories with their change points, diagnoses: what
//! `GetResults` gives — are computed by the results worker, a thread of
//! its own, from a snapshot of the matrix's ended runs and its cells'
//! series, once per change of the matrix, and cached per matrix with the
//! version of the state they reflect. `GetResults` and the results gauges
//! read the cache; the scheduler thread only counts versions and copies
//! snapshots, so summarising a large matrix never holds up dispatch or
//! commits.
//!
//! Why an answer is never stale (the invariant of this file):
//! - A matrix's `version` is set, on the scheduler thread, to a fresh value
//!   of one counter whenever an input of its summaries changes: one of its
//!   runs ends, or a run ends in a cell of a series that one of its cells is
//!   on (its histories show that cell). Nothing else enters the summaries:
//!   cells never change, and runs that have not ended are not summarised.
//! - A snapshot is copied on the scheduler thread together with the version
//!   it reflects. The cache keeps a summary only over an older one, so a
//!   slow computation of an old snapshot never replaces a newer summary.
//! - `GetResults` answers from the cache only when the cached version is the
//!   matrix's version now. Otherwise it sends the worker a snapshot (unless
//!   one of this version is already on its way) and then a wait for this
//!   version, both on the one channel that the single worker reads in order:
//!   when the worker reads the wait, the summary of that version is in the
//!   cache, and no newer one can be (its snapshot was sent after the wait).
//!   So the answer is the matrix as it was when the request was handled, as
//!   when it was computed on the spot, and its status (computed on the
//!   scheduler thread then, since it also depends on the agents) is of that
//!   same moment.
//! - Snapshots and waits leave after the batch's commit, like every reply:
//!   nobody is shown what is not on disk.
//!
//! The worker's channel holds [`RESULTS_QUEUE_CAPACITY`] jobs. The
//! scheduler thread never waits for room (see the top of `scheduler`): it
//! reserves the slots of a `GetResults` when it handles it, and refuses it
//! ([`Error::Busy`]) when there are none; an ended matrix that finds no
//! room is kept in `Worker::pending` and sent at a later batch (its
//! `requested` is set only once its snapshot is on its way, so a
//! `GetResults` meanwhile sends one of its own).

use std::sync::Arc;
use std::time::Instant;

use farm_proto::GetResultsResponse;
use tokio::sync::mpsc;

use super::state::results::{RESULTS_QUEUE_CAPACITY, Results, ResultsEvent};
use super::worker::{Job, Snapshot, ended, summarise};
use super::{Error, MatrixMem, Reply, Scheduler};
use crate::ids::{CellIndex, MatrixId};
use crate::metrics::Ended;
use crate::results::Point;

impl Scheduler {
    pub(super) fn on_results(&mut self, ev: ResultsEvent) {
        match ev {
            ResultsEvent::Get { matrix_id, reply } => self.results(&matrix_id, reply),
            ResultsEvent::Summarised { matrix_id, summary } => {
                self.summarised(&matrix_id, &summary)
            }
            ResultsEvent::Failed {
                matrix_id,
                version,
                ended,
                error,
            } => self.summary_failed(&matrix_id, version, ended, &error),
        }
    }

    /// `GetResults`: from the cache when it has this version of the
    /// matrix, else from the worker once it has computed it (see the top of
    /// this file for why the answer is never stale).
    pub(super) fn results(&mut self, matrix_id: &MatrixId, reply: Reply<Results>) {
        let Some(m) = self.matrices.get(matrix_id) else {
            let e = self.unknown_matrix(matrix_id);
            self.reply(reply, Err(e));
            return;
        };
        let version = m.results.version;
        let status = self.status(matrix_id);
        if let Some(summary) = self.summaries.cache.get(matrix_id, version) {
            self.reply(reply, Ok(Results { status, summary }));
            return;
        }
        // The slots are taken now, so that what is decided here (a
        // snapshot on its way or not) is what happens after the commit.
        let needs_snapshot = m.results.requested != version;
        let Some((snapshot_slot, wait_slot)) = self.reserve(needs_snapshot) else {
            let busy = Error::Busy {
                what: "results queue",
                limit: "RESULTS_QUEUE_CAPACITY",
                capacity: RESULTS_QUEUE_CAPACITY,
            };
            self.reply(reply, Err(busy));
            return;
        };
        let snapshot = snapshot_slot.map(|slot| (slot, Box::new(self.snapshot(m, false))));
        if let Some(m) = self.matrices.get_mut(matrix_id) {
            m.results.requested = version;
        }
        let matrix_id = *matrix_id;
        self.after_commit.push(Box::new(move || {
            if let Some((slot, s)) = snapshot {
                slot.send(Job::Summarise(s));
            }
            wait_slot.send(Job::Wait {
                matrix_id,
                version,
                status,
                reply,
            });
        }));
    }

    /// Slots for a wait, and for a snapshot first when `snapshot`; none
    /// when the queue has not room for all.
    #[allow(clippy::type_complexity)]
    fn reserve(
        &self,
        snapshot: bool,
    ) -> Option<(Option<mpsc::OwnedPermit<Job>>, mpsc::OwnedPermit<Job>)> {
        let first = if snapshot {
            Some(self.summaries.slot()?)
        } else {
            None
        };
        let wait = self.summaries.slot()?;
        Some((first, wait))
    }

    /// An input of the summaries of the matrix's `cell` changed (a run of
    /// it ended): that matrix and every matrix with a cell on the same
    /// series (their histories show this cell) get a new version.
    pub(super) fn results_changed(&mut self, matrix_id: &MatrixId, cell: CellIndex) {
        let g = self.summaries.next_version();
        let Some(m) = self.matrices.get_mut(matrix_id) else {
            return;
        };
        m.results.version = g;
        let Some(key) = m.series_keys.get(cell.at()) else {
            return;
        };
        let seqs: Vec<u64> = self.series.cells(key).map(|(seq, _)| seq).collect();
        for seq in seqs {
            if let Some(m) = self
                .by_seq
                .get(&seq)
                .and_then(|id| self.matrices.get_mut(id))
            {
                m.results.version = g;
            }
        }
    }

    /// A matrix just ended with every run done: the worker summarises it
    /// for the gauges and the cache now, not at the first `GetResults`.
    /// Called after the commit.
    pub(super) fn summarise_ended(&mut self, matrix_id: &MatrixId) {
        let Some(m) = self.matrices.get(matrix_id) else {
            self.summaries.pending.remove(matrix_id);
            return;
        };
        let Some(slot) = self.summaries.slot() else {
            self.summaries.pending.insert(*matrix_id);
            return;
        };
        self.summaries.pending.remove(matrix_id);
        slot.send(Job::Summarise(Box::new(self.snapshot(m, true))));
        let version = m.results.version;
        if let Some(m) = self.matrices.get_mut(matrix_id) {
            m.results.requested = version;
        }
    }

    /// After each batch: the ended matrices that found the queue full, while
    /// it has room.
    pub(super) fn summarise_pending(&mut self) {
        let pending: Vec<MatrixId> = self.summaries.pending.iter().copied().collect();
        for id in pending {
            self.summarise_ended(&id);
            if self.summaries.pending.contains(&id) {
                break;
            }
        }
    }

    /// The worker computed an ended matrix's summaries: an execution of a
    /// schedule keeps what `farmctl schedules` shows of it.
    pub(super) fn summarised(&mut self, matrix_id: &MatrixId, summary: &GetResultsResponse) {
        let Some(m) = self.matrices.get_mut(matrix_id) else {
            return;
        };
        m.results.gauged = true;
        let mut bisect = false;
        if let Some(e) = &m.rec.execution {
            let verdicts = super::state::schedule::verdicts_of(&m.rec.cells, &summary.cells);
            bisect = self
                .schedules
                .execution_summarised(&e.schedule_id, matrix_id, verdicts);
        }
        if bisect {
            self.bisect_regressions(matrix_id, summary);
        }
    }

    /// The summaries of `m` now, computed on this thread when the cache
    /// does not have them: for start-up, and the rare listing of a schedule
    /// whose execution ended before it.
    pub(super) fn summary_now(&self, m: &MatrixMem) -> Arc<GetResultsResponse> {
        if let Some(s) = self.summaries.cache.get(&m.rec.id, m.results.version) {
            return s;
        }
        // Live points only: this thread never waits for the archive. Not
        // cached, so `GetResults` computes it again with the past.
        let runs = self.ended_runs(m);
        let series: Vec<Vec<Point>> = self
            .series_of(m)
            .into_iter()
            .map(|s| s.map(|(_, live)| live.iter().map(|p| p.point()).collect()))
            .map(Option::unwrap_or_default)
            .collect();
        Arc::new(summarise(&m.rec.cells, &runs, &series))
    }

    /// The samples of an ended matrix for the results gauges, from its
    /// summaries now (start-up).
    pub(super) fn ended_now(&self, m: &MatrixMem) -> Ended {
        let summary = self.summary_now(m);
        ended(
            m.rec.seq,
            &m.rec.id,
            &m.rec.cells,
            &summary,
            &self.ended_runs(m),
        )
    }

    pub(super) fn snapshot(&self, m: &MatrixMem, ended: bool) -> Snapshot {
        let series = self
            .series_of(m)
            .into_iter()
            .map(|s| s.map(|(key, live)| (key.to_vec(), live.iter().map(|p| p.point()).collect())))
            .collect();
        Snapshot {
            matrix_id: m.rec.id,
            version: m.results.version,
            cells: m.rec.cells.clone(),
            runs: self.ended_runs(m).into_iter().cloned().collect(),
            series,
            ended: ended.then_some(m.rec.seq),
        }
    }

    /// The worker could not summarise `version` of a matrix (the archive):
    /// the next `GetResults` sends a snapshot again, and an ended matrix is
    /// summarised again at a later tick.
    pub(super) fn summary_failed(
        &mut self,
        matrix_id: &MatrixId,
        version: u64,
        ended: bool,
        error: &str,
    ) {
        let Some(m) = self.matrices.get_mut(matrix_id) else {
            return;
        };
        if m.results.requested == version {
            m.results.requested = NONE_REQUESTED;
        }
        if ended {
            self.summaries.retry.insert(*matrix_id);
            self.summaries.retry_at = Some(Instant::now() + crate::archive::ARCHIVE_RETRY);
            // It cannot leave without its summaries: the archive failed it.
            self.archive_failed(matrix_id, error);
        }
    }

    /// At a tick: the ended matrices whose summaries failed, once the
    /// pause after the last failure is over.
    pub(super) fn summarise_retries(&mut self) {
        if self.summaries.retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        for id in std::mem::take(&mut self.summaries.retry) {
            self.summarise_ended(&id);
        }
    }
}

/// `MatrixMem::requested` when no snapshot of any version is on its way.
const NONE_REQUESTED: u64 = u64::MAX;
