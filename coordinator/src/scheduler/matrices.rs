//! Matrices: submission, cancellation, status, and publishing statuses to
//! watchers.
//!
//! Invariant: a matrix's status is computed from its runs in memory, and
//! watchers are only sent a status after the batch it reflects is
//! committed (`publish` runs after the commit).

use std::collections::HashMap;
use std::time::Instant;

use farm_proto::{
    Capabilities, CellStatus, MatrixState, MatrixStatus, RunCounts, RunRef, SubmitMatrixResponse,
};
use farm_runtime::trace::{self, TARGET};
use tokio::sync::watch;
use tracing::{Span, info, info_span};

use super::agents::cancel_msg;
use super::{Error, MatrixMem, PUBLISH_EVERY, RunMem, Scheduler, now_ms};
use crate::eligibility::{self, Requirement};
use crate::ids::{MatrixId, RunId};
use crate::matrix::Matrix;
use crate::store::{self, MatrixRecord, Op, RunRecord, RunState};

impl Scheduler {
    /// A matrix file without a `[schedule]` runs now; one with a schedule
    /// makes it (`schedule`).
    pub(super) fn submit(
        &mut self,
        matrix: Matrix,
        file_name: String,
        source: String,
        traceparent: &str,
    ) -> SubmitMatrixResponse {
        if matrix.schedule.is_some() {
            self.create_schedule(matrix, file_name, source)
        } else {
            self.submit_matrix(matrix, file_name, source, traceparent, None)
                .1
        }
    }

    /// Whether every record of `matrix` fits the store's records (a matrix
    /// without its cells, each cell): a batch holding a larger one would
    /// fail whole, so the submission is refused here, naming the part.
    pub(super) fn fits_store(
        &self,
        matrix: &Matrix,
        file_name: &str,
        source: &str,
    ) -> Result<(), Error> {
        use prost::Message;
        let limit = self.store.max_value_bytes();
        // The names and numbers beside the file: generous.
        let head = source.len() + file_name.len() + matrix.name.len() + 512;
        let too_large = |what: String, bytes: usize| Error::TooLargeForStore { what, bytes, limit };
        if head > limit {
            return Err(too_large(format!("matrix file {file_name}"), head));
        }
        for c in &matrix.cells {
            let bytes = farm_proto::Cell::from(c).encoded_len() + 64;
            if bytes > limit {
                return Err(too_large(format!("cell {} ({})", c.index, c.name), bytes));
            }
        }
        Ok(())
    }

    /// A new watcher of a matrix. Statuses go out only after the batch is
    /// committed; the new watcher gets a fresh one then, whatever the
    /// throttle says.
    pub(super) fn watch(
        &mut self,
        matrix_id: &MatrixId,
    ) -> Result<watch::Receiver<MatrixStatus>, Error> {
        match self.matrices.get_mut(matrix_id) {
            Some(m) => {
                m.dirty = true;
                m.published = None;
                Ok(m.status.subscribe())
            }
            None => Err(Error::UnknownMatrix(matrix_id.to_string())),
        }
    }

    /// Submits a matrix: its new id, and what its submitter is told.
    pub(super) fn submit_matrix(
        &mut self,
        matrix: Matrix,
        file_name: String,
        source: String,
        traceparent: &str,
        execution: Option<store::Execution>,
    ) -> (MatrixId, SubmitMatrixResponse) {
        let id = MatrixId::random();
        // Never below the clock (in µs): once every matrix has left for the
        // archive, a restart recovers no seq to continue from, and the
        // archive's histories are ordered by seq. (A leader whose clock is
        // behind the last one's by more than the gap would order its first
        // matrices before the last archived ones: keep clocks in sync.)
        let seq = self.next_seq.max(now_ms().saturating_mul(1000));
        self.next_seq = seq + 1;
        let runs: Vec<RunRecord> = crate::matrix::runs(&matrix)
            .into_iter()
            .map(|r| RunRecord {
                run_id: RunId::new(id, r.cell_index, r.repetition),
                matrix_id: id,
                cell: r.cell_index,
                repetition: r.repetition,
                seq: r.seq,
                state: RunState::Queued,
                attempt: 0,
                agent_id: None,
                result: None,
            })
            .collect();
        let rec = MatrixRecord {
            id,
            seq,
            name: matrix.name,
            file_name,
            source,
            submitted_ms: now_ms(),
            timeout_s: matrix.timeout_s,
            cancelled: false,
            cells: matrix.cells,
            execution,
        };
        let response = SubmitMatrixResponse {
            matrix_id: id.to_string(),
            cells: rec.cells.len() as u32,
            runs: runs.len() as u32,
            ..Default::default()
        };
        info!(matrix = %id, name = %rec.name, cells = response.cells, runs = response.runs, "matrix submitted");
        self.ops
            .push(Op::PutMatrix(Box::new(rec.clone()), runs.clone()));
        self.insert_matrix(rec);
        if let Some(m) = self.matrices.get_mut(&id) {
            let span = info_span!(target: TARGET, "matrix", matrix = %id, name = %m.rec.name,
                cells = response.cells, runs = response.runs, state = tracing::field::Empty);
            trace::set_parent(&span, traceparent);
            m.span = span;
        }
        for r in runs {
            self.queues
                .entry((seq, r.cell))
                .or_default()
                .insert(r.seq, r.run_id.clone());
            if let Some(m) = self.matrices.get_mut(&id) {
                m.runs.push(r.run_id.clone());
                if let Some(c) = m.by_cell.get_mut(r.cell.at()) {
                    c.push(r.run_id.clone());
                }
            }
            self.runs.insert(
                r.run_id.clone(),
                RunMem {
                    holders: Vec::new(),
                    rec: r,
                    matrix_seq: seq,
                    assigned_at: None,
                    queued_at: Instant::now(),
                    span: Span::none(),
                    activity: None,
                },
            );
        }
        (id, response)
    }

    pub(super) fn cancel(&mut self, matrix_id: &MatrixId) -> Result<u32, Error> {
        let m = self
            .matrices
            .get(matrix_id)
            .ok_or_else(|| Error::UnknownMatrix(matrix_id.to_string()))?;
        if !self.has_unended_runs(m) {
            // An ended matrix stays as it ended.
            return Ok(0);
        }
        let m = self
            .matrices
            .get_mut(matrix_id)
            .expect("looked up just above");
        m.rec.cancelled = true;
        m.dirty = true;
        let seq = m.rec.seq;
        let ids = m.runs.clone();
        self.ops.push(Op::CancelMatrix(*matrix_id));
        let mut n = 0;
        for id in ids {
            let Some(run) = self.runs.get_mut(&id) else {
                continue;
            };
            match run.rec.state {
                RunState::Queued => {}
                RunState::Assigned => {
                    let r = RunRef {
                        run_id: id.to_string(),
                        attempt: run.rec.attempt,
                    };
                    if let Some(agent) = run.rec.agent_id {
                        self.outbox.push((agent, cancel_msg(r)));
                    }
                }
                _ => continue,
            }
            run.rec.state = RunState::Cancelled;
            run.span.record("outcome", "cancelled");
            run.span = Span::none();
            self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
            n += 1;
        }
        self.queues.retain(|(mseq, _), _| *mseq != seq);
        info!(matrix = %matrix_id, runs = n, "matrix cancelled");
        self.bisection_round_cancelled(matrix_id);
        Ok(n)
    }

    pub(super) fn status(&self, matrix_id: &MatrixId) -> Option<MatrixStatus> {
        let m = self.matrices.get(matrix_id)?;
        let mut cells: Vec<CellStatus> = m
            .rec
            .cells
            .iter()
            .map(|c| CellStatus {
                cell: Some(farm_proto::Cell::from(c)),
                counts: Some(RunCounts::default()),
                waiting_reason: String::new(),
                activities: Vec::new(),
            })
            .collect();
        let mut total = RunCounts::default();
        for id in &m.runs {
            let Some(run) = self.runs.get(id) else {
                continue;
            };
            let Some(c) = cells
                .get_mut(run.rec.cell.at())
                .and_then(|c| c.counts.as_mut())
            else {
                continue;
            };
            for counts in [c, &mut total] {
                counts.total += 1;
                match run.rec.state {
                    RunState::Queued => counts.queued += 1,
                    RunState::Assigned => counts.running += 1,
                    RunState::Finished => counts.finished += 1,
                    RunState::Failed => counts.failed += 1,
                    RunState::Cancelled => counts.cancelled += 1,
                }
            }
        }
        let connected: Vec<&Capabilities> = self
            .agents
            .values()
            .filter(|a| a.session.is_some())
            .map(|a| &a.capabilities)
            .collect();
        // Many cells share requirements; explain each distinct set once.
        let mut reasons: HashMap<&[Requirement], Option<String>> = HashMap::new();
        for (i, c) in cells.iter_mut().enumerate() {
            if c.counts.as_ref().is_some_and(|k| k.queued > 0) {
                let reqs = m.reqs[i].as_slice();
                let reason = reasons.entry(reqs).or_insert_with(|| {
                    eligibility::waiting_reason(reqs, connected.iter().copied())
                });
                c.waiting_reason = reason.clone().unwrap_or_default();
            }
        }
        self.cell_activities(m, &mut cells);
        let builds_pending = self.builds_pending(m, &cells);
        let state = if m.rec.cancelled {
            MatrixState::Cancelled
        } else if total.queued + total.running == 0 {
            MatrixState::Done
        } else {
            MatrixState::Running
        };
        Some(MatrixStatus {
            matrix_id: m.rec.id.to_string(),
            name: m.rec.name.clone(),
            state: state as i32,
            counts: Some(total),
            cells,
            submitted_unix_ms: m.rec.submitted_ms,
            median_run_seconds: farm_analysis::median(&m.durations_s).unwrap_or(0.0),
            builds_pending,
            median_build_seconds: farm_analysis::median(&m.build_durations_s).unwrap_or(0.0),
            schedule_id: m
                .rec
                .execution
                .as_ref()
                .map(|e| e.schedule_id.to_string())
                .unwrap_or_default(),
        })
    }

    /// Sends fresh statuses to watchers of changed matrices, at most every
    /// [`PUBLISH_EVERY`] while a matrix runs, and at once when it ends.
    pub(super) fn publish(&mut self, tick: bool) {
        let mut just_done = Vec::new();
        let dirty: Vec<MatrixId> = self
            .matrices
            .iter()
            .filter(|(_, m)| m.dirty)
            .map(|(id, _)| *id)
            .collect();
        for id in dirty {
            let Some(st) = self.status(&id) else { continue };
            let Some(m) = self.matrices.get_mut(&id) else {
                continue;
            };
            let ended = st.state != MatrixState::Running as i32;
            if ended || tick || m.published.is_none_or(|t| t.elapsed() >= PUBLISH_EVERY) {
                if ended && m.status.borrow().state == MatrixState::Running as i32 {
                    info!(matrix = %id, state = ?MatrixState::try_from(st.state).ok(), "matrix ended");
                }
                if ended {
                    let state = if m.rec.cancelled { "cancelled" } else { "done" };
                    m.span.record("state", state);
                    m.span = Span::none();
                }
                let done = MatrixState::Done as i32;
                if st.state == done && m.status.borrow().state != done {
                    just_done.push(id);
                }
                self.metrics
                    .run_counts_changed(m.status.borrow().counts.as_ref(), st.counts.as_ref());
                m.status.send_replace(st);
                m.dirty = false;
                m.published = Some(Instant::now());
            }
        }
        // After the statuses: a watcher is not kept waiting for the summaries.
        for id in just_done {
            self.matrix_done(&id);
        }
    }

    /// Whether any of the matrix's runs is still queued, assigned or running.
    pub(super) fn has_unended_runs(&self, m: &MatrixMem) -> bool {
        m.runs
            .iter()
            .filter_map(|id| self.runs.get(id))
            .any(|r| !r.rec.state.is_terminal())
    }

    /// The matrix's runs that have a result (finished or failed).
    pub(super) fn ended_runs(&self, m: &MatrixMem) -> Vec<&RunRecord> {
        m.runs
            .iter()
            .filter_map(|id| self.runs.get(id))
            .map(|r| &r.rec)
            .filter(|r| matches!(r.state, RunState::Finished | RunState::Failed))
            .collect()
    }

    /// Deletes an archived matrix from the live store and from memory,
    /// and tells each feature that kept something of it.
    pub(super) fn forget_matrix(&mut self, matrix_id: &MatrixId, written: bool) {
        let Some(m) = self.matrices.remove(matrix_id) else {
            return;
        };
        self.by_seq.remove(&m.rec.seq);
        for id in &m.runs {
            self.runs.remove(id);
        }
        let seq = m.rec.seq;
        self.queues.retain(|(s, _), _| *s != seq);
        self.series.forget(&m.series_keys, seq);
        self.summaries.forget(matrix_id);
        if let Some(e) = &m.rec.execution
            && let Some(op) = self.schedules.execution_archived(&e.schedule_id, matrix_id)
        {
            self.ops.push(op);
        }
        self.ops.push(Op::ForgetMatrix {
            id: m.rec.id,
            cells: m.rec.cells.len() as u32,
            runs: m.runs.clone(),
        });
        self.metrics.matrix_archived();
        tracing::debug!(matrix = %matrix_id, runs = m.runs.len(), written, "matrix archived");
    }
}
