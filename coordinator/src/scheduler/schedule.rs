//! Continuous matrices on the scheduler thread: schedules are made at
//! submission, executed when the cron driver says an instant is due or when
//! an agent's catalogue shows a new kernel, listed and cancelled. When they
//! run is decided by the pure functions of `crate::schedule`.

use std::collections::HashMap;

use farm_proto::{Capabilities, ExecutionSummary, MatrixState, ScheduleInfo, SubmitMatrixResponse};
use tracing::{info, warn};

use super::state::schedule::{
    HOUR_MS, MAX_TRIGGERED_EXECUTIONS_PER_HOUR, ScheduleEvent, Verdicts, verdicts_of,
};
use super::{MatrixMem, Scheduler, now_ms};
use crate::ids::ScheduleId;
use crate::matrix::Matrix;

impl Scheduler {
    pub(super) fn on_schedule(&mut self, ev: ScheduleEvent) {
        match ev {
            ScheduleEvent::CronDue { schedule_id, at_ms } => self.cron_due(&schedule_id, at_ms),
            ScheduleEvent::List { reply } => {
                let r = self.list_schedules();
                self.reply(reply, Ok(r));
            }
            ScheduleEvent::Cancel { schedule_id, reply } => {
                let r = self.schedules.cancel(&schedule_id).map(|op| {
                    self.ops.extend(op);
                });
                self.reply(reply, r);
            }
        }
    }

    /// A matrix file with a `[schedule]`: the schedule is made; nothing runs
    /// until its first instant or new kernel.
    pub(super) fn create_schedule(
        &mut self,
        matrix: Matrix,
        file_name: String,
        source: String,
    ) -> SubmitMatrixResponse {
        let catalogues = self.agents.values().map(|a| &a.capabilities);
        let (response, op) =
            self.schedules
                .create(&matrix, file_name, source, catalogues, now_ms());
        self.ops.push(op);
        response
    }

    /// The cron driver says `at_ms` is due for `id`. An instant that finds
    /// the previous execution still running is skipped: two executions
    /// would compete for the same machines, and a schedule slower than its
    /// period would queue without end.
    pub(super) fn cron_due(&mut self, id: &ScheduleId, at_ms: u64) {
        let Some(op) = self.schedules.cron_instant(id, at_ms) else {
            return;
        };
        self.ops.push(op);
        // Any of its executions: a trigger's may have ended after a cron
        // one that still runs.
        let previous_running = self.schedules.executions(id).iter().rev().any(|m| {
            self.matrices
                .get(m)
                .is_some_and(|mm| !mm.rec.cancelled && self.has_unended_runs(mm))
        });
        if previous_running {
            warn!(schedule = %id, at_ms, "the previous execution is still running; \
                  this instant is skipped");
            self.metrics.execution_skipped("previous_running", 1);
            return;
        }
        self.execute(id, at_ms, None);
    }

    /// An agent's catalogue as it registered or changed: each schedule with
    /// a trigger runs once for every matching kernel it has not seen.
    pub(super) fn catalogue_changed(&mut self, caps: &Capabilities) {
        let due = self.schedules.fresh_kernels(caps);
        let now = now_ms();
        let mut skipped: HashMap<ScheduleId, u64> = HashMap::new();
        for (id, kernel) in due {
            if self.triggered_within_hour(&id, now) >= MAX_TRIGGERED_EXECUTIONS_PER_HOUR {
                *skipped.entry(id).or_default() += 1;
                continue;
            }
            info!(schedule = %id, %kernel, "new kernel in an agent's catalogue");
            // Seen once submitted, in the same batch; a kernel the matrix
            // refuses stays unseen and is tried again when a catalogue
            // changes (its refusal logged each time).
            if self.execute(&id, now, Some(kernel.clone())) {
                self.ops.extend(self.schedules.kernel_seen(&id, kernel));
            }
        }
        // Once per schedule, not per kernel: a catalogue may list thousands.
        for (id, n) in skipped {
            warn!(schedule = %id, kernels = n, limit = MAX_TRIGGERED_EXECUTIONS_PER_HOUR,
                  "new kernels not executed: the schedule started its limit \
                   (MAX_TRIGGERED_EXECUTIONS_PER_HOUR) in the last hour; they run at a \
                   later catalogue change");
            self.metrics.execution_skipped("rate_limit", n);
        }
    }

    /// How many executions kernel triggers started for `id` in the hour
    /// before `now_ms`, from its executions' matrices (so a restart
    /// forgets none).
    fn triggered_within_hour(&self, id: &ScheduleId, now_ms: u64) -> usize {
        self.schedules
            .executions(id)
            .iter()
            .rev()
            .filter_map(|m| self.matrices.get(m))
            .take_while(|m| m.rec.submitted_ms.saturating_add(HOUR_MS) > now_ms)
            .filter(|m| {
                m.rec
                    .execution
                    .as_ref()
                    .is_some_and(|e| !e.kernel.is_empty())
            })
            .count()
    }

    /// Submits one execution of a schedule as a matrix of its own; false
    /// when the matrix refuses it (nothing is then submitted).
    fn execute(&mut self, id: &ScheduleId, at_ms: u64, kernel: Option<String>) -> bool {
        let Some(e) = self.schedules.execution(id, at_ms, kernel) else {
            return false;
        };
        let (matrix, _) =
            self.submit_matrix(e.matrix, e.file_name, e.source, "", Some(e.execution));
        info!(schedule = %id, matrix = %matrix, at_ms, "schedule executed");
        self.schedules.executed(id, matrix);
        true
    }

    /// Every schedule that is not cancelled, oldest first, with what its
    /// latest execution found.
    pub(super) fn list_schedules(&self) -> Vec<ScheduleInfo> {
        self.schedules.list(now_ms(), |m, verdicts| {
            let m = self.matrices.get(m)?;
            Some(self.execution_summary(verdicts, m))
        })
    }

    fn execution_summary(&self, verdicts: Option<&Verdicts>, m: &MatrixMem) -> ExecutionSummary {
        let state = self
            .status(&m.rec.id)
            .map_or(m.status.borrow().state, |st| st.state);
        let mut summary = ExecutionSummary {
            matrix_id: m.rec.id.to_string(),
            at_unix_ms: m.rec.execution.as_ref().map_or(0, |e| e.at_ms),
            kernel: m
                .rec
                .execution
                .as_ref()
                .map(|e| e.kernel.clone())
                .unwrap_or_default(),
            state,
            ..Default::default()
        };
        if state != MatrixState::Done as i32 {
            return summary;
        }
        // Computed when it ended; until the worker's summaries are back, and
        // after a restart, here (from the cache when it has them).
        let v = match verdicts {
            Some(v) => v.clone(),
            None => verdicts_of(&m.rec.cells, &self.summary_now(m).cells),
        };
        summary.regressions = v.regressions;
        summary.improvements = v.improvements;
        summary.change_regressions = v.change_regressions;
        summary.bisections = self.bisections.briefs_of(&m.rec.id);
        summary
    }
}

#[cfg(test)]
mod tests;
