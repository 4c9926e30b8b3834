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

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use farm_proto::{GetResultsResponse, MatrixStatus};
use tokio::sync::mpsc;
use tracing::{error, warn};

use super::{Error, Event, MatrixMem, Reply, Scheduler};
use crate::archive;
use crate::cell::Cell;
use crate::ids::{CellIndex, MatrixId};
use crate::metrics::{Ended, ResultsGauges, series};
use crate::results::{self, Point};
use crate::store::RunRecord;

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
pub(super) struct Versions {
    /// The state its summaries are of: a new value of `Worker::next_version`
    /// each time one of their inputs changes.
    version: u64,
    /// The version of the last snapshot sent to the worker.
    requested: u64,
    /// Whether the results gauges have had the matrix's end (the worker
    /// said `Summarised`, or recovery gave it to them): until then the
    /// archive cannot know whether the gauges show it.
    gauged: bool,
}

impl Versions {
    pub(super) fn new(version: u64) -> Versions {
        Versions {
            version,
            requested: 0,
            gauged: false,
        }
    }

    /// Whether the results gauges show the matrix's end.
    pub(super) fn gauged(&self) -> bool {
        self.gauged
    }

    /// Recovery gave the gauges every ended matrix (`ended`) they will
    /// ever show.
    pub(super) fn recovered(&mut self, ended: bool) {
        self.gauged = ended;
    }
}

/// The summaries of each matrix, by id, with the version they reflect:
/// written by the worker (and by the scheduler thread at start-up), read
/// by the scheduler thread.
#[derive(Clone, Default)]
pub(super) struct Cache(Arc<RwLock<HashMap<MatrixId, Versioned>>>);

/// A summary and the version of the matrix it reflects.
type Versioned = (u64, Arc<GetResultsResponse>);

impl Cache {
    /// The summaries of `matrix_id` if they reflect `version` or later.
    pub(super) fn get(
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
    pub(super) fn remove(&self, matrix_id: &MatrixId) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        map.remove(matrix_id);
    }

    /// Keeps `summary` unless the cache has a later version already.
    pub(super) fn put(&self, matrix_id: &MatrixId, version: u64, summary: Arc<GetResultsResponse>) {
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        match map.get(matrix_id) {
            Some((v, _)) if *v >= version => {}
            _ => {
                map.insert(*matrix_id, (version, summary));
            }
        }
    }
}

/// Everything a matrix's summaries are computed from, at one version.
pub(super) struct Snapshot {
    matrix_id: MatrixId,
    version: u64,
    cells: Vec<Cell>,
    /// The ended runs, in dispatch order.
    runs: Vec<RunRecord>,
    /// Each cell's series key and its live points (`None` for a cell whose
    /// series an earlier cell has); the archived points are read by the
    /// worker.
    series: Vec<Option<(Vec<u8>, Vec<Point>)>>,
    /// Set when the matrix has just ended (its seq): the results gauges
    /// take its samples, and the scheduler its schedule's verdicts.
    ended: Option<u64>,
}

/// A job of the worker's that needs the archive (see [`Job::Archive`]).
pub(super) type ArchiveWork = dyn FnOnce(&mut Archivist, &mpsc::WeakSender<Event>) + Send;

pub(super) enum Job {
    Summarise(Box<Snapshot>),
    /// Work that needs the archive, such as archiving an ended matrix
    /// (`archive`): run in order with the summaries, with the worker's
    /// connection to the archive and its way back to the scheduler.
    Archive(Box<ArchiveWork>),
    /// Answer `GetResults` from the summary of `version`.
    Wait {
        matrix_id: MatrixId,
        version: u64,
        status: Option<MatrixStatus>,
        reply: Reply<Results>,
    },
}

/// The scheduler's end of the results worker.
pub(super) struct Worker {
    tx: mpsc::Sender<Job>,
    cache: Cache,
    /// Ended matrices whose snapshot found the queue full, by id: sent at a
    /// later batch. At most one entry per matrix in memory.
    pending: BTreeSet<MatrixId>,
    /// Ended matrices whose summaries failed (the archive was unreachable):
    /// summarised again at a later tick.
    retry: BTreeSet<MatrixId>,
    /// Not before then: an unreachable archive may hold the worker for its
    /// whole timeout at each attempt, with `GetResults` queued behind.
    retry_at: Option<Instant>,
    /// The counter behind matrices' versions.
    generation: u64,
}

impl Worker {
    /// A fresh version: some input of a matrix's summaries changed.
    pub(super) fn next_version(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// A slot in the worker's queue, if it has room now (the scheduler
    /// thread never waits for one).
    pub(super) fn slot(&self) -> Option<mpsc::OwnedPermit<Job>> {
        self.tx.clone().try_reserve_owned().ok()
    }

    /// Whether the summaries of `matrix_id`'s end are made: none wait for
    /// room in the queue or for another try.
    pub(super) fn settled(&self, matrix_id: &MatrixId) -> bool {
        !self.pending.contains(matrix_id) && !self.retry.contains(matrix_id)
    }

    /// `matrix_id` left for the archive: nothing of it is kept or sent.
    pub(super) fn forget(&mut self, matrix_id: &MatrixId) {
        self.cache.remove(matrix_id);
        self.pending.remove(matrix_id);
    }

    /// Ended matrices whose summaries are made again at the next batch
    /// (recovery: the gauges and the schedules' verdicts need them).
    pub(super) fn again(&mut self, ids: impl IntoIterator<Item = MatrixId>) {
        self.pending.extend(ids);
    }

    /// Starts the worker thread. It tells the scheduler of each ended
    /// matrix's summaries through `events`, weakly: the worker never keeps
    /// the scheduler alive, and it stops once the scheduler drops its end.
    pub(super) fn spawn(
        gauges: ResultsGauges,
        events: mpsc::WeakSender<Event>,
        archive: archive::Location,
    ) -> Worker {
        let (tx, mut rx) = mpsc::channel(RESULTS_QUEUE_CAPACITY);
        let cache = Cache::default();
        let shared = cache.clone();
        std::thread::Builder::new()
            .name("results".into())
            .spawn(move || {
                let mut archivist = Archivist::new(archive);
                // The partial summaries of each matrix's latest failure, for
                // the waits of its version.
                let mut failed: HashMap<MatrixId, (u64, Arc<GetResultsResponse>)> =
                    HashMap::new();
                // A plain thread: it may block on the channel.
                while let Some(job) = rx.blocking_recv() {
                    match job {
                        Job::Summarise(snap) => {
                            let (id, version) = (snap.matrix_id, snap.version);
                            let r = summarise_snapshot(*snap, &shared, &gauges, &events, &mut archivist);
                            match r {
                                Ok(()) => {
                                    failed.remove(&id);
                                }
                                Err(e) => {
                                    failed.insert(id, (version, e));
                                }
                            }
                        }
                        Job::Archive(work) => work(&mut archivist, &events),
                        Job::Wait {
                            matrix_id,
                            version,
                            status,
                            reply,
                        } => match shared.get(&matrix_id, version) {
                            Some(summary) => {
                                let _ = reply.send(Ok(Results { status, summary }));
                            }
                            None => match failed.get(&matrix_id) {
                                Some((v, partial)) if *v == version => {
                                    let summary = partial.clone();
                                    let _ = reply.send(Ok(Results { status, summary }));
                                }
                                // Its snapshot was read first (one channel,
                                // in order): this cannot happen.
                                _ => error!(matrix = %matrix_id, version, "no summary to answer with"),
                            },
                        },
                    }
                }
            })
            .expect("spawning the results thread");
        Worker {
            tx,
            cache,
            pending: BTreeSet::new(),
            retry: BTreeSet::new(),
            retry_at: None,
            generation: 0,
        }
    }
}

/// A matrix's summaries as `GetResults` gives them, but its status: each
/// cell's summary with its history, and the ended runs. `series[i]` is cell
/// i's series, oldest first.
fn summarise(cells: &[Cell], runs: &[&RunRecord], series: &[Vec<Point>]) -> GetResultsResponse {
    let histories = series
        .iter()
        .zip(cells)
        .map(|(s, cell)| {
            results::histories(s, crate::policy::drift_window(&crate::policy::of(cell)))
        })
        .collect();
    GetResultsResponse {
        status: None,
        cells: results::summarise(cells, runs, histories),
        runs: runs
            .iter()
            .map(|r| farm_proto::RunRecord {
                run_id: r.run_id.to_string(),
                cell_index: r.cell.get(),
                repetition: r.repetition,
                agent_id: r.agent_id.map(|a| a.to_string()).unwrap_or_default(),
                result: r.result.clone(),
            })
            .collect(),
    }
}

/// The samples the results gauges take of an ended matrix.
fn ended(
    seq: u64,
    matrix_id: &MatrixId,
    cells: &[Cell],
    summary: &GetResultsResponse,
    runs: &[&RunRecord],
) -> Ended {
    Ended {
        seq,
        matrix_id: matrix_id.to_string(),
        samples: series::samples(cells, &summary.cells),
        placement: series::placement(cells, &summary.cells, runs),
    }
}

/// The archive as the worker uses it: opened at first use, and again after
/// a failure (a PostgreSQL connection reconnects by itself; a failed
/// SQLite open is retried).
pub(super) struct Archivist {
    location: archive::Location,
    conn: Option<Box<dyn archive::Archive>>,
}

impl Archivist {
    fn new(location: archive::Location) -> Archivist {
        Archivist {
            location,
            conn: None,
        }
    }

    pub(super) fn with<T>(
        &mut self,
        f: impl FnOnce(&mut dyn archive::Archive) -> archive::Result<T>,
    ) -> archive::Result<T> {
        if self.conn.is_none() {
            self.conn = Some(self.location.open()?);
        }
        let conn = self.conn.as_mut().expect("opened above");
        f(conn.as_mut())
    }

    /// Each cell's whole series: its archived points and the live ones.
    pub(super) fn series(
        &mut self,
        series: &[Option<(Vec<u8>, Vec<Point>)>],
    ) -> archive::Result<Vec<Vec<Point>>> {
        let mut out = Vec::with_capacity(series.len());
        for s in series {
            out.push(match s {
                None => Vec::new(),
                Some((key, live)) => {
                    let archived = self.with(|a| a.series(key, crate::policy::HISTORY_POINTS))?;
                    results::merge(archived, live.clone())
                }
            });
        }
        Ok(out)
    }
}

/// The worker's job: the summaries of a snapshot, into the cache; for an
/// ended matrix, the results gauges first, so that whoever reads these
/// summaries finds the gauges already showing them. Fails when the archive
/// cannot give the histories' past: the scheduler hears of it (and sends
/// the snapshot again later), and waits of this version get the
/// [`partial`] summaries.
fn summarise_snapshot(
    snap: Snapshot,
    cache: &Cache,
    gauges: &ResultsGauges,
    events: &mpsc::WeakSender<Event>,
    archivist: &mut Archivist,
) -> Result<(), Arc<GetResultsResponse>> {
    let t = Instant::now();
    let runs: Vec<&RunRecord> = snap.runs.iter().collect();
    // A `GetResults` of this very version may have come first.
    let summary = match cache.get(&snap.matrix_id, snap.version) {
        Some(s) => s,
        None => match archivist.series(&snap.series) {
            Ok(series) => Arc::new(summarise(&snap.cells, &runs, &series)),
            Err(e) => {
                let e = e.to_string();
                warn!(matrix = %snap.matrix_id, "histories without their archived past: {e}");
                if let Some(tx) = events.upgrade() {
                    let _ = tx.blocking_send(Event::Results(ResultsEvent::Failed {
                        matrix_id: snap.matrix_id,
                        version: snap.version,
                        ended: snap.ended.is_some(),
                        error: e.clone(),
                    }));
                }
                return Err(Arc::new(partial(&snap, &runs, &e)));
            }
        },
    };
    if let Some(seq) = snap.ended {
        gauges.matrix_ended(ended(seq, &snap.matrix_id, &snap.cells, &summary, &runs));
        gauges.refreshed(t.elapsed());
        if let Some(tx) = events.upgrade() {
            // Waits for room: the scheduler never waits for this thread.
            let _ = tx.blocking_send(Event::Results(ResultsEvent::Summarised {
                matrix_id: snap.matrix_id,
                summary: summary.clone(),
            }));
        }
    }
    cache.put(&snap.matrix_id, snap.version, summary);
    Ok(())
}

/// The summaries of a snapshot whose histories' archived past could not be
/// read: everything but that past, and a note in each cell saying so. Never
/// cached, never given to the gauges: the matrix is summarised again.
fn partial(snap: &Snapshot, runs: &[&RunRecord], error: &str) -> GetResultsResponse {
    let live: Vec<Vec<Point>> = snap
        .series
        .iter()
        .map(|s| s.as_ref().map(|(_, live)| live.clone()).unwrap_or_default())
        .collect();
    let mut s = summarise(&snap.cells, runs, &live);
    for c in &mut s.cells {
        c.notes.push(format!(
            "history without its archived past, which could not be read: {error}"
        ));
    }
    s
}

/// A snapshot's summaries, computed now with the archive's past: what an
/// archived matrix keeps.
pub(super) fn summary_of(
    snap: &Snapshot,
    archivist: &mut Archivist,
) -> archive::Result<GetResultsResponse> {
    let runs: Vec<&RunRecord> = snap.runs.iter().collect();
    let series = archivist.series(&snap.series)?;
    let mut s = summarise(&snap.cells, &runs, &series);
    s.runs.clear();
    Ok(s)
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
            let verdicts = super::schedule::verdicts_of(&m.rec.cells, &summary.cells);
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
