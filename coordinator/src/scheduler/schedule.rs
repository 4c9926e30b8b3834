//! Continuous matrices on the scheduler thread: schedules are made at
//! submission, executed when the cron driver says an instant is due or when
//! an agent's catalogue shows a new kernel, listed and cancelled. When they
//! run is decided by the pure functions of `crate::schedule`.

use std::collections::{BTreeMap, HashMap};

use farm_proto::{
    Capabilities, CellSummary, ExecutionSummary, MatrixState, ScheduleInfo, SubmitMatrixResponse,
    Verdict,
};
use tokio::sync::watch;
use tracing::{info, warn};

use super::{Error, MatrixMem, Reply, Scheduler, now_ms};
use crate::cell::Cell;
use crate::ids::{MatrixId, ScheduleId};
use crate::matrix::{self, Matrix};
use crate::results;
use crate::schedule;
use crate::store::{Execution, Op, ScheduleRecord};

/// The most executions kernel triggers may start for one schedule in any
/// hour (cron executions are bounded by their own rule: none while one
/// runs). Each is a whole matrix on the fleet, and any agent can make its
/// catalogue list new kernels: a release lands a handful of kernels at
/// once, not thousands. A kernel refused for this stays unseen, so a later
/// catalogue change (any agent's, or a reconnect) starts it once there is
/// room; `farm_schedule_executions_skipped_total{reason="rate_limit"}`
/// counts each refusal.
pub const MAX_TRIGGERED_EXECUTIONS_PER_HOUR: usize = 8;
const HOUR_MS: u64 = 3_600_000;

/// What the schedule feature is asked.
pub enum ScheduleEvent {
    /// The cron driver: `at_ms` is due for this schedule.
    CronDue {
        schedule_id: ScheduleId,
        at_ms: u64,
    },
    List {
        reply: Reply<Vec<ScheduleInfo>>,
    },
    Cancel {
        schedule_id: ScheduleId,
        reply: Reply<()>,
    },
}

/// The schedule feature's state. Its fields are this module's: the rest
/// of the scheduler tells it of executions through the methods below and
/// applies the store operations they return.
pub(super) struct Schedules {
    by_id: BTreeMap<ScheduleId, ScheduleMem>,
    /// A schedule was made, cancelled or executed in this batch: the cron
    /// driver hears of it after the commit.
    changed: bool,
    crons: watch::Sender<Vec<CronEntry>>,
}

impl Schedules {
    pub(super) fn new() -> Schedules {
        Schedules {
            by_id: BTreeMap::new(),
            changed: false,
            crons: watch::channel(Vec::new()).0,
        }
    }

    /// What the cron driver waits on (`crate::cron`).
    pub(super) fn crons(&self) -> watch::Receiver<Vec<CronEntry>> {
        self.crons.subscribe()
    }

    /// A stored schedule, at recovery.
    pub(super) fn recovered(&mut self, rec: ScheduleRecord) {
        self.by_id.insert(rec.id, ScheduleMem::new(rec));
        self.changed = true;
    }

    /// A stored execution of `schedule_id`, at recovery: matrices load in
    /// submission order, so executions stay in order.
    pub(super) fn execution_recovered(&mut self, schedule_id: &ScheduleId, matrix_id: &MatrixId) {
        if let Some(s) = self.by_id.get_mut(schedule_id) {
            s.executions.push(*matrix_id);
        }
    }

    /// Tells the cron driver of the batch's changes, if any: after the
    /// commit, before the replies, so that whoever made a schedule finds
    /// the driver already told.
    pub(super) fn publish(&mut self) {
        if std::mem::take(&mut self.changed) {
            self.crons.send_replace(self.cron_entries());
        }
    }

    /// The latest execution of `schedule_id`.
    pub(super) fn latest_execution(&self, schedule_id: &ScheduleId) -> Option<MatrixId> {
        self.by_id
            .get(schedule_id)
            .and_then(|s| s.executions.last())
            .copied()
    }

    /// An execution ended and was summarised: what it found is kept for
    /// `farmctl schedules`. Whether its schedule bisects what regressed.
    pub(super) fn execution_summarised(
        &mut self,
        schedule_id: &ScheduleId,
        matrix_id: &MatrixId,
        verdicts: Verdicts,
    ) -> bool {
        let Some(s) = self.by_id.get_mut(schedule_id) else {
            return false;
        };
        s.verdicts.insert(*matrix_id, verdicts);
        s.bisect
    }

    /// An execution left for the archive: forgotten here and counted in
    /// the schedule's record, which is returned to be stored.
    pub(super) fn execution_archived(
        &mut self,
        schedule_id: &ScheduleId,
        matrix_id: &MatrixId,
    ) -> Option<Op> {
        let s = self.by_id.get_mut(schedule_id)?;
        s.executions.retain(|id| id != matrix_id);
        s.verdicts.remove(matrix_id);
        s.rec.archived_executions += 1;
        Some(Op::PutSchedule(Box::new(s.rec.clone())))
    }

    /// Makes a schedule of a matrix file with a `[schedule]`, and the
    /// record to store. Kernels the agents' `catalogues` already offer
    /// count as seen: the trigger is for kernels that come later.
    pub(super) fn create<'a>(
        &mut self,
        matrix: &Matrix,
        file_name: String,
        source: String,
        catalogues: impl Iterator<Item = &'a Capabilities>,
        now: u64,
    ) -> (SubmitMatrixResponse, Op) {
        let spec = matrix.schedule.clone().unwrap_or(matrix::Schedule {
            cron: String::new(),
            on_new_kernel: String::new(),
            bisect: false,
        });
        let mut rec = ScheduleRecord {
            id: ScheduleId::random(),
            name: matrix.name.clone(),
            file_name,
            source,
            cron: spec.cron,
            on_new_kernel: spec.on_new_kernel,
            created_ms: now,
            last_cron_ms: now,
            seen_kernels: Vec::new(),
            cancelled: false,
            archived_executions: 0,
        };
        let mem = ScheduleMem::new(rec.clone());
        if let Some(g) = &mem.glob {
            for caps in catalogues {
                let cat = schedule::catalogue(caps);
                let fresh = schedule::new_kernels(g, &cat, &rec.seen_kernels);
                rec.seen_kernels.extend(fresh);
            }
        }
        let next = mem
            .cron
            .as_ref()
            .and_then(|c| schedule::next_after(c, now))
            .unwrap_or(0);
        info!(schedule = %rec.id, name = %rec.name, cron = %rec.cron,
              on_new_kernel = %rec.on_new_kernel, seen = rec.seen_kernels.len(), "schedule made");
        let response = SubmitMatrixResponse {
            matrix_id: String::new(),
            cells: matrix.cells.len() as u32,
            runs: matrix::runs(matrix).len() as u32,
            schedule_id: rec.id.to_string(),
            next_unix_ms: next,
        };
        let op = Op::PutSchedule(Box::new(rec.clone()));
        self.by_id.insert(rec.id, ScheduleMem { rec, ..mem });
        self.changed = true;
        (response, op)
    }

    /// A cron instant of `id`: the record, moved on to it, to store; `None`
    /// when the instant is to be ignored (stale or repeated after a restart
    /// or a cancel racing the timer: none is executed twice).
    pub(super) fn cron_instant(&mut self, id: &ScheduleId, at_ms: u64) -> Option<Op> {
        let s = self.by_id.get_mut(id)?;
        if s.rec.cancelled || s.cron.is_none() || at_ms <= s.rec.last_cron_ms {
            return None;
        }
        s.rec.last_cron_ms = at_ms;
        self.changed = true;
        Some(Op::PutSchedule(Box::new(s.rec.clone())))
    }

    /// The executions of `id` still live, oldest first.
    pub(super) fn executions(&self, id: &ScheduleId) -> &[MatrixId] {
        self.by_id.get(id).map_or(&[], |s| &s.executions)
    }

    /// The kernels of an agent's catalogue that schedules with a trigger
    /// have not seen, by schedule.
    pub(super) fn fresh_kernels(&self, caps: &Capabilities) -> Vec<(ScheduleId, String)> {
        let cat = schedule::catalogue(caps);
        let mut due = Vec::new();
        for (id, s) in &self.by_id {
            let Some(g) = &s.glob else { continue };
            if s.rec.cancelled {
                continue;
            }
            let fresh = schedule::new_kernels(g, &cat, &s.rec.seen_kernels);
            due.extend(fresh.into_iter().map(|k| (*id, k)));
        }
        due
    }

    /// A trigger's kernel was executed: seen from now on; the record to store.
    pub(super) fn kernel_seen(&mut self, id: &ScheduleId, kernel: String) -> Option<Op> {
        let s = self.by_id.get_mut(id)?;
        s.rec.seen_kernels.push(kernel);
        Some(Op::PutSchedule(Box::new(s.rec.clone())))
    }

    /// The matrix of one execution of `id`, from the schedule's file; `None`
    /// when the file refuses it. The file was valid when submitted; a
    /// kernel a trigger found may not be (its name, or an executor that
    /// does not suit it). A cron instant is spent all the same.
    pub(super) fn execution(
        &self,
        id: &ScheduleId,
        at_ms: u64,
        kernel: Option<String>,
    ) -> Option<ExecutionMatrix> {
        let s = self.by_id.get(id)?;
        let parsed = matrix::parse_execution(&s.rec.file_name, &s.rec.source, kernel.as_deref());
        let matrix = parsed
            .map_err(|e| warn!(schedule = %id, kernel = ?kernel, "execution refused: {e}"))
            .ok()?;
        Some(ExecutionMatrix {
            matrix,
            file_name: s.rec.file_name.clone(),
            source: s.rec.source.clone(),
            execution: Execution {
                schedule_id: *id,
                at_ms,
                kernel: kernel.unwrap_or_default(),
            },
        })
    }

    /// An execution of `id` was submitted as `matrix`.
    pub(super) fn executed(&mut self, id: &ScheduleId, matrix: MatrixId) {
        if let Some(s) = self.by_id.get_mut(id) {
            s.executions.push(matrix);
        }
    }

    /// Cancels `id`; the record to store when it was not cancelled yet.
    pub(super) fn cancel(&mut self, id: &ScheduleId) -> Result<Option<Op>, Error> {
        let s = self
            .by_id
            .get_mut(id)
            .ok_or_else(|| Error::UnknownSchedule(id.to_string()))?;
        if s.rec.cancelled {
            return Ok(None);
        }
        s.rec.cancelled = true;
        self.changed = true;
        info!(schedule = %id, "schedule cancelled");
        Ok(Some(Op::PutSchedule(Box::new(s.rec.clone()))))
    }

    /// Every schedule that is not cancelled, oldest first; `last` says what
    /// a live execution found, given the verdicts kept of it.
    pub(super) fn list(
        &self,
        now: u64,
        last: impl Fn(&MatrixId, Option<&Verdicts>) -> Option<ExecutionSummary>,
    ) -> Vec<ScheduleInfo> {
        let mut out: Vec<ScheduleInfo> = self
            .by_id
            .values()
            .filter(|s| !s.rec.cancelled)
            .map(|s| ScheduleInfo {
                schedule_id: s.rec.id.to_string(),
                name: s.rec.name.clone(),
                file_name: s.rec.file_name.clone(),
                cron: s.rec.cron.clone(),
                on_new_kernel: s.rec.on_new_kernel.clone(),
                created_unix_ms: s.rec.created_ms,
                next_unix_ms: s
                    .cron
                    .as_ref()
                    .and_then(|c| schedule::next_after(c, s.rec.last_cron_ms.max(now)))
                    .unwrap_or(0),
                executions: (s.executions.len() as u64 + s.rec.archived_executions) as u32,
                bisect: s.bisect,
                last: s.executions.last().and_then(|m| last(m, s.verdicts.get(m))),
            })
            .collect();
        out.sort_by_key(|s| (s.created_unix_ms, s.schedule_id.clone()));
        out
    }

    /// What the cron driver waits for: active schedules with a cron.
    fn cron_entries(&self) -> Vec<CronEntry> {
        self.by_id
            .values()
            .filter(|s| !s.rec.cancelled && s.cron.is_some())
            .map(|s| CronEntry {
                schedule_id: s.rec.id,
                cron: s.rec.cron.clone(),
                last_ms: s.rec.last_cron_ms,
            })
            .collect()
    }
}

/// One execution of a schedule, to submit.
pub(super) struct ExecutionMatrix {
    pub(super) matrix: Matrix,
    pub(super) file_name: String,
    pub(super) source: String,
    pub(super) execution: Execution,
}

/// A schedule in memory: its record, parsed once.
struct ScheduleMem {
    rec: ScheduleRecord,
    cron: Option<croner::Cron>,
    glob: Option<glob::Pattern>,
    /// Its executions' matrix ids, oldest first.
    executions: Vec<MatrixId>,
    /// What the executions that ended since the coordinator started found
    /// (from the summaries the results worker made when each ended).
    verdicts: HashMap<MatrixId, Verdicts>,
    /// `[schedule] bisect`, read from the file when the record is loaded.
    bisect: bool,
}

/// An ended execution's verdicts, for `farmctl schedules`.
#[derive(Debug, Clone, Default)]
pub(super) struct Verdicts {
    regressions: u32,
    improvements: u32,
    change_regressions: Vec<String>,
}

/// Counts the cells' verdicts against their baselines and lists the
/// histories that now end in a worse regime or drift the wrong way.
pub(super) fn verdicts_of(cells: &[Cell], summaries: &[CellSummary]) -> Verdicts {
    let mut v = Verdicts::default();
    for c in summaries {
        let Some(cell) = cells.get(c.cell_index as usize) else {
            continue;
        };
        match Verdict::try_from(c.verdict) {
            Ok(Verdict::Regression) => v.regressions += 1,
            Ok(Verdict::Improvement) => v.improvements += 1,
            _ => {}
        }
        for ch in results::change_regressions(cell, c) {
            v.change_regressions.push(format!(
                "{}: {} ×{:.3} since {} ({})",
                c.cell_name, ch.metric, ch.ratio, ch.kernel, ch.matrix_id
            ));
        }
        for ch in results::drift_regressions(cell, c) {
            v.change_regressions.push(format!(
                "{}: {} drifts ×{:.3} over its drift window, since {} ({})",
                c.cell_name, ch.metric, ch.ratio, ch.kernel, ch.matrix_id
            ));
        }
    }
    v
}

/// What the cron driver needs of a schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronEntry {
    pub schedule_id: ScheduleId,
    pub cron: String,
    /// The latest instant executed; the next is after it.
    pub last_ms: u64,
}

impl ScheduleMem {
    /// A cron or glob this coordinator cannot parse (a newer one wrote the
    /// record) is logged, and that half of the schedule never runs; the
    /// record is kept as it is.
    fn new(rec: ScheduleRecord) -> ScheduleMem {
        let cron = (!rec.cron.is_empty())
            .then(|| schedule::cron(&rec.cron))
            .transpose()
            .map_err(|e| warn!(schedule = %rec.id, "cron {e}; it will not run"))
            .ok()
            .flatten();
        let glob = (!rec.on_new_kernel.is_empty())
            .then(|| schedule::kernel_glob(&rec.on_new_kernel))
            .transpose()
            .map_err(|e| warn!(schedule = %rec.id, "on_new_kernel {e}; it will not run"))
            .ok()
            .flatten();
        // Not a column of its own: the file says it, and was valid when
        // the schedule was made.
        let bisect = matrix::parse(&rec.file_name, &rec.source)
            .ok()
            .and_then(|m| m.schedule)
            .is_some_and(|s| s.bisect);
        ScheduleMem {
            rec,
            cron,
            glob,
            executions: Vec::new(),
            verdicts: HashMap::new(),
            bisect,
        }
    }
}

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
