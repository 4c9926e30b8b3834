//! Ended matrices leave live state and memory for the archive
//! (`crate::archive`).
//!
//! At each tick the scheduler picks the ended matrices (every run ended,
//! the end published to watchers), oldest first, at most
//! [`ARCHIVE_IN_FLIGHT`] at once, and sends each to the results worker as
//! an [`ArchiveJob`]: a copy of the matrix, its runs and its final status.
//! The worker computes its summaries with the histories' archived past,
//! writes it all to the archive in one transaction, and reports back
//! ([`ArchiveEvent::Archived`]). Only then does the scheduler forget the matrix
//! (`matrices`' `forget_matrix`, which tells each feature that kept some of it):
//! it deletes it from the live store (`Op::ForgetMatrix`) and from memory.
//!
//! Why nothing is lost: the matrix stays live until the archive has it
//! durably; a crash after the archive's commit and before the live delete
//! leaves it in both, and the next leader archives it again, which the
//! archive's idempotent `put` turns into nothing. When the archive is
//! unreachable the job fails, the matrix stays live, and archiving pauses
//! for [`ARCHIVE_RETRY`] before it is tried again (the backlog is on
//! `/metrics`).
//!
//! A done matrix stays live while the results gauges show it (the latest
//! of a series, within `--metrics-series-limit` samples a family), so that
//! a restart shows the gauges again; it waits until the gauges have had
//! its end, for until then nobody knows whether they show it. Memory is
//! then bounded by the unended matrices and what the gauges show, not by
//! history nor by the number of series. A schedule's latest execution and
//! its executions of the last hour stay live too: `farmctl schedules`
//! shows the latest's verdicts, and the kernel trigger's hourly limit
//! counts the hour's. The count of a schedule's
//! archived executions is kept on its record, so a restart forgets none.

use std::time::Instant;

use farm_proto::{MatrixState, MatrixStatus};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::state::archive::{ARCHIVE_IN_FLIGHT, ArchiveEvent, KEEP_EXECUTIONS_MS};
use super::worker::{Archivist, Job, Snapshot, summary_of};
use super::{Event, MatrixMem, Scheduler, now_ms};
use crate::archive::ARCHIVE_RETRY;
use crate::archive::ArchivedMatrix;
use crate::ids::{CellIndex, MatrixId};
use crate::results;
use crate::store::{MatrixRecord, RunRecord};

/// An ended matrix on its way to the archive.
struct ArchiveJob {
    snapshot: Snapshot,
    record: MatrixRecord,
    runs: Vec<RunRecord>,
    status: MatrixStatus,
    series_keys: Vec<Vec<u8>>,
}

/// The worker's part: summarise with the archive's past, then archive.
fn run(job: ArchiveJob, archivist: &mut Archivist, events: &mpsc::WeakSender<Event>) {
    let matrix_id = job.record.id;
    let outcome = summary_of(&job.snapshot, archivist).and_then(|summary| {
        let m = archived(job, summary);
        archivist.with(|a| a.put(&m))
    });
    if let Some(tx) = events.upgrade() {
        // Waits for room: the scheduler never waits for this thread.
        let _ = tx.blocking_send(Event::Archive(ArchiveEvent::Archived {
            matrix_id,
            outcome,
        }));
    }
}

/// What the archive keeps of a job: one point per cell with a finished
/// run, under its series' key.
fn archived(job: ArchiveJob, summary: farm_proto::GetResultsResponse) -> ArchivedMatrix {
    let r = &job.record;
    // By cell once: a 10,000-cell matrix's runs are not scanned per cell.
    let mut by_cell: std::collections::HashMap<CellIndex, Vec<&RunRecord>> = Default::default();
    for run in &job.runs {
        by_cell.entry(run.cell).or_default().push(run);
    }
    let points = r
        .cells
        .iter()
        .zip(&job.series_keys)
        .filter_map(|(cell, key)| {
            let runs = by_cell.get(&cell.index).map_or(&[][..], Vec::as_slice);
            let medians = results::medians(runs);
            (!medians.is_empty()).then(|| {
                let point = results::Point {
                    matrix_id: r.id,
                    matrix_seq: r.seq,
                    cell: cell.index,
                    submitted_ms: r.submitted_ms,
                    kernel: cell.kernel.to_string(),
                    medians,
                };
                (key.clone(), point)
            })
        })
        .collect();
    ArchivedMatrix {
        record: job.record,
        runs: job.runs,
        status: job.status,
        summary,
        points,
    }
}

impl Scheduler {
    pub(super) fn on_archive(&mut self, ev: ArchiveEvent) {
        match ev {
            ArchiveEvent::Archived { matrix_id, outcome } => self.archived(&matrix_id, outcome),
        }
    }

    /// At a tick: the ended matrices that may leave, to the worker.
    pub(super) fn archive_ended(&mut self) {
        let now = now_ms();
        let mut ended: Vec<&MatrixMem> = self
            .matrices
            .values()
            .filter(|m| m.status.borrow().state != MatrixState::Running as i32)
            .filter(|m| !self.has_unended_runs(m) && !self.kept_live(m, now))
            .collect();
        if !ended.is_empty() {
            // What the results gauges show stays: a restart recovers them
            // from live state.
            let shown = self.metrics.shown_matrices();
            ended.retain(|m| !shown.contains(&m.rec.seq));
        }
        // Those on their way included, and those whose summaries wait.
        self.metrics.archive_backlog(ended.len());
        if self.archiving.retry_at.is_some_and(|t| Instant::now() < t) {
            return;
        }
        ended.retain(|m| {
            !self.archiving.in_flight.contains(&m.rec.id)
                // Its end's summaries (gauges, verdicts) first: until the
                // gauges have had them, nobody knows whether they show it.
                // A cancelled matrix never shows in them.
                && (m.results.gauged() || m.rec.cancelled)
                && self.summaries.settled(&m.rec.id)
        });
        ended.sort_by_key(|m| m.rec.seq);
        let room = ARCHIVE_IN_FLIGHT.saturating_sub(self.archiving.in_flight.len());
        let mut jobs = Vec::new();
        for m in ended.into_iter().take(room) {
            let Some(slot) = self.summaries.slot() else {
                break;
            };
            let Some(status) = self.status(&m.rec.id) else {
                continue;
            };
            let job = ArchiveJob {
                snapshot: self.snapshot(m, false),
                record: m.rec.clone(),
                runs: m
                    .runs
                    .iter()
                    .filter_map(|id| self.runs.get(id))
                    .map(|r| r.rec.clone())
                    .collect(),
                status,
                series_keys: m.series_keys.clone(),
            };
            jobs.push((slot, m.rec.id, job));
        }
        for (slot, id, job) in jobs {
            self.archiving.in_flight.insert(id);
            // After the commit, like everything the batch decided.
            self.after_commit.push(Box::new(move || {
                slot.send(Job::Archive(Box::new(move |archivist, events| {
                    run(job, archivist, events)
                })));
            }));
        }
    }

    /// A schedule's latest execution, and its executions of the last hour.
    fn kept_live(&self, m: &MatrixMem, now: u64) -> bool {
        let Some(e) = &m.rec.execution else {
            return false;
        };
        let latest = self.schedules.latest_execution(&e.schedule_id) == Some(m.rec.id);
        latest || m.rec.submitted_ms.saturating_add(KEEP_EXECUTIONS_MS) > now
    }

    /// The worker archived a matrix (or failed to): it leaves, or waits.
    pub(super) fn archived(&mut self, matrix_id: &MatrixId, outcome: crate::archive::Result<bool>) {
        self.archiving.in_flight.remove(matrix_id);
        match outcome {
            Err(e) => {
                self.archiving.retry_at = Some(Instant::now() + ARCHIVE_RETRY);
                self.archive_failed(matrix_id, &e.to_string());
            }
            Ok(written) => {
                if std::mem::replace(&mut self.archiving.failing, false) {
                    info!("the archive takes ended matrices again");
                }
                self.archiving.retry_at = None;
                self.forget_matrix(matrix_id, written);
            }
        }
    }

    /// The archive failed a matrix's put or its summaries' past: said once
    /// until a put succeeds, and counted.
    pub(super) fn archive_failed(&mut self, matrix_id: &MatrixId, error: &str) {
        if !std::mem::replace(&mut self.archiving.failing, true) {
            warn!(matrix = %matrix_id, retry_s = ARCHIVE_RETRY.as_secs(),
                  "ended matrices wait in live state: {error}");
        }
        self.metrics.archive_failed();
    }
}
