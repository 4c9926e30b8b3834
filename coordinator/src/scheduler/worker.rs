//! The results worker: a thread of its own that summarises matrices and
//! writes ended ones into the archive, off the scheduler thread.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use farm_proto::{GetResultsResponse, MatrixStatus};
use tokio::sync::mpsc;
use tracing::{error, warn};

use super::state::results::{Cache, RESULTS_QUEUE_CAPACITY, Results, ResultsEvent};
use crate::archive;
use crate::cell::Cell;
use crate::ids::MatrixId;
use crate::metrics::{Ended, ResultsGauges, series};
use crate::results::{self, Point};
use crate::scheduler::event::Event;
use crate::scheduler::reply::Reply;
use crate::store::RunRecord;

/// Everything a matrix's summaries are computed from, at one version.
pub(in crate::scheduler) struct Snapshot {
    pub(in crate::scheduler) matrix_id: MatrixId,
    pub(in crate::scheduler) version: u64,
    pub(in crate::scheduler) cells: Vec<Cell>,
    /// The ended runs, in dispatch order.
    pub(in crate::scheduler) runs: Vec<RunRecord>,
    /// Each cell's series key and its live points (`None` for a cell whose
    /// series an earlier cell has); the archived points are read by the
    /// worker.
    pub(in crate::scheduler) series: Vec<Option<(Vec<u8>, Vec<Point>)>>,
    /// Set when the matrix has just ended (its seq): the results gauges
    /// take its samples, and the scheduler its schedule's verdicts.
    pub(in crate::scheduler) ended: Option<u64>,
}

/// A job of the worker's that needs the archive (see [`Job::Archive`]).
pub(in crate::scheduler) type ArchiveWork =
    dyn FnOnce(&mut Archivist, &mpsc::WeakSender<Event>) + Send;

pub(in crate::scheduler) enum Job {
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
pub(in crate::scheduler) struct Worker {
    pub(in crate::scheduler) tx: mpsc::Sender<Job>,
    pub(in crate::scheduler) cache: Cache,
    /// Ended matrices whose snapshot found the queue full, by id: sent at a
    /// later batch. At most one entry per matrix in memory.
    pub(in crate::scheduler) pending: BTreeSet<MatrixId>,
    /// Ended matrices whose summaries failed (the archive was unreachable):
    /// summarised again at a later tick.
    pub(in crate::scheduler) retry: BTreeSet<MatrixId>,
    /// Not before then: an unreachable archive may hold the worker for its
    /// whole timeout at each attempt, with `GetResults` queued behind.
    pub(in crate::scheduler) retry_at: Option<Instant>,
    /// The counter behind matrices' versions.
    pub(in crate::scheduler) generation: u64,
}

impl Worker {
    /// A fresh version: some input of a matrix's summaries changed.
    pub(in crate::scheduler) fn next_version(&mut self) -> u64 {
        self.generation += 1;
        self.generation
    }

    /// A slot in the worker's queue, if it has room now (the scheduler
    /// thread never waits for one).
    pub(in crate::scheduler) fn slot(&self) -> Option<mpsc::OwnedPermit<Job>> {
        self.tx.clone().try_reserve_owned().ok()
    }

    /// Whether the summaries of `matrix_id`'s end are made: none wait for
    /// room in the queue or for another try.
    pub(in crate::scheduler) fn settled(&self, matrix_id: &MatrixId) -> bool {
        !self.pending.contains(matrix_id) && !self.retry.contains(matrix_id)
    }

    /// `matrix_id` left for the archive: nothing of it is kept or sent.
    pub(in crate::scheduler) fn forget(&mut self, matrix_id: &MatrixId) {
        self.cache.remove(matrix_id);
        self.pending.remove(matrix_id);
    }

    /// Ended matrices whose summaries are made again at the next batch
    /// (recovery: the gauges and the schedules' verdicts need them).
    pub(in crate::scheduler) fn again(&mut self, ids: impl IntoIterator<Item = MatrixId>) {
        self.pending.extend(ids);
    }

    /// Starts the worker thread. It tells the scheduler of each ended
    /// matrix's summaries through `events`, weakly: the worker never keeps
    /// the scheduler alive, and it stops once the scheduler drops its end.
    pub(in crate::scheduler) fn spawn(
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
pub(in crate::scheduler) fn summarise(
    cells: &[Cell],
    runs: &[&RunRecord],
    series: &[Vec<Point>],
) -> GetResultsResponse {
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
pub(in crate::scheduler) fn ended(
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
pub(in crate::scheduler) struct Archivist {
    pub(in crate::scheduler) location: archive::Location,
    pub(in crate::scheduler) conn: Option<Box<dyn archive::Archive>>,
}

impl Archivist {
    pub(in crate::scheduler) fn new(location: archive::Location) -> Archivist {
        Archivist {
            location,
            conn: None,
        }
    }

    pub(in crate::scheduler) fn with<T>(
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
    pub(in crate::scheduler) fn series(
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
pub(in crate::scheduler) fn summarise_snapshot(
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
pub(in crate::scheduler) fn partial(
    snap: &Snapshot,
    runs: &[&RunRecord],
    error: &str,
) -> GetResultsResponse {
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
pub(in crate::scheduler) fn summary_of(
    snap: &Snapshot,
    archivist: &mut Archivist,
) -> archive::Result<GetResultsResponse> {
    let runs: Vec<&RunRecord> = snap.runs.iter().collect();
    let series = archivist.series(&snap.series)?;
    let mut s = summarise(&snap.cells, &runs, &series);
    s.runs.clear();
    Ok(s)
}
