//! The schedules with their executions and crons ([`Schedules`]), and
//! their events; driven by `scheduler::schedule`.

use std::collections::{BTreeMap, HashMap};

use farm_proto::{
    Capabilities, CellSummary, ExecutionSummary, ScheduleInfo, SubmitMatrixResponse, Verdict,
};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::cell::Cell;
use crate::ids::{MatrixId, ScheduleId};
use crate::matrix::{self, Matrix};
use crate::results;
use crate::schedule;
use crate::scheduler::reply::{Error, Reply};
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
pub(in crate::scheduler) const HOUR_MS: u64 = 3_600_000;

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
pub(in crate::scheduler) struct Schedules {
    pub(in crate::scheduler) by_id: BTreeMap<ScheduleId, ScheduleMem>,
    /// A schedule was made, cancelled or executed in this batch: the cron
    /// driver hears of it after the commit.
    pub(in crate::scheduler) changed: bool,
    pub(in crate::scheduler) crons: watch::Sender<Vec<CronEntry>>,
}

impl Schedules {
    pub(in crate::scheduler) fn new() -> Schedules {
        Schedules {
            by_id: BTreeMap::new(),
            changed: false,
            crons: watch::channel(Vec::new()).0,
        }
    }

    /// What the cron driver waits on (`crate::cron`).
    pub(in crate::scheduler) fn crons(&self) -> watch::Receiver<Vec<CronEntry>> {
        self.crons.subscribe()
    }

    /// A stored schedule, at recovery.
    pub(in crate::scheduler) fn recovered(&mut self, rec: ScheduleRecord) {
        self.by_id.insert(rec.id, ScheduleMem::new(rec));
        self.changed = true;
    }

    /// A stored execution of `schedule_id`, at recovery: matrices load in
    /// submission order, so executions stay in order.
    pub(in crate::scheduler) fn execution_recovered(
        &mut self,
        schedule_id: &ScheduleId,
        matrix_id: &MatrixId,
    ) {
        if let Some(s) = self.by_id.get_mut(schedule_id) {
            s.executions.push(*matrix_id);
        }
    }

    /// Tells the cron driver of the batch's changes, if any: after the
    /// commit, before the replies, so that whoever made a schedule finds
    /// the driver already told.
    pub(in crate::scheduler) fn publish(&mut self) {
        if std::mem::take(&mut self.changed) {
            self.crons.send_replace(self.cron_entries());
        }
    }

    /// The latest execution of `schedule_id`.
    pub(in crate::scheduler) fn latest_execution(
        &self,
        schedule_id: &ScheduleId,
    ) -> Option<MatrixId> {
        self.by_id
            .get(schedule_id)
            .and_then(|s| s.executions.last())
            .copied()
    }

    /// An execution ended and was summarised: what it found is kept for
    /// `farmctl schedules`. Whether its schedule bisects what regressed.
    pub(in crate::scheduler) fn execution_summarised(
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
    pub(in crate::scheduler) fn execution_archived(
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
    pub(in crate::scheduler) fn create<'a>(
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
    pub(in crate::scheduler) fn cron_instant(&mut self, id: &ScheduleId, at_ms: u64) -> Option<Op> {
        let s = self.by_id.get_mut(id)?;
        if s.rec.cancelled || s.cron.is_none() || at_ms <= s.rec.last_cron_ms {
            return None;
        }
        s.rec.last_cron_ms = at_ms;
        self.changed = true;
        Some(Op::PutSchedule(Box::new(s.rec.clone())))
    }

    /// The executions of `id` still live, oldest first.
    pub(in crate::scheduler) fn executions(&self, id: &ScheduleId) -> &[MatrixId] {
        self.by_id.get(id).map_or(&[], |s| &s.executions)
    }

    /// The kernels of an agent's catalogue that schedules with a trigger
    /// have not seen, by schedule.
    pub(in crate::scheduler) fn fresh_kernels(
        &self,
        caps: &Capabilities,
    ) -> Vec<(ScheduleId, String)> {
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
    pub(in crate::scheduler) fn kernel_seen(
        &mut self,
        id: &ScheduleId,
        kernel: String,
    ) -> Option<Op> {
        let s = self.by_id.get_mut(id)?;
        s.rec.seen_kernels.push(kernel);
        Some(Op::PutSchedule(Box::new(s.rec.clone())))
    }

    /// The matrix of one execution of `id`, from the schedule's file; `None`
    /// when the file refuses it. The file was valid when submitted; a
    /// kernel a trigger found may not be (its name, or an executor that
    /// does not suit it). A cron instant is spent all the same.
    pub(in crate::scheduler) fn execution(
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
    pub(in crate::scheduler) fn executed(&mut self, id: &ScheduleId, matrix: MatrixId) {
        if let Some(s) = self.by_id.get_mut(id) {
            s.executions.push(matrix);
        }
    }

    /// Cancels `id`; the record to store when it was not cancelled yet.
    pub(in crate::scheduler) fn cancel(&mut self, id: &ScheduleId) -> Result<Option<Op>, Error> {
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
    pub(in crate::scheduler) fn list(
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
    pub(in crate::scheduler) fn cron_entries(&self) -> Vec<CronEntry> {
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
pub(in crate::scheduler) struct ExecutionMatrix {
    pub(in crate::scheduler) matrix: Matrix,
    pub(in crate::scheduler) file_name: String,
    pub(in crate::scheduler) source: String,
    pub(in crate::scheduler) execution: Execution,
}

/// A schedule in memory: its record, parsed once.
pub(in crate::scheduler) struct ScheduleMem {
    pub(in crate::scheduler) rec: ScheduleRecord,
    pub(in crate::scheduler) cron: Option<croner::Cron>,
    pub(in crate::scheduler) glob: Option<glob::Pattern>,
    /// Its executions' matrix ids, oldest first.
    pub(in crate::scheduler) executions: Vec<MatrixId>,
    /// What the executions that ended since the coordinator started found
    /// (from the summaries the results worker made when each ended).
    pub(in crate::scheduler) verdicts: HashMap<MatrixId, Verdicts>,
    /// `[schedule] bisect`, read from the file when the record is loaded.
    pub(in crate::scheduler) bisect: bool,
}

/// An ended execution's verdicts, for `farmctl schedules`.
#[derive(Debug, Clone, Default)]
pub(in crate::scheduler) struct Verdicts {
    pub(in crate::scheduler) regressions: u32,
    pub(in crate::scheduler) improvements: u32,
    pub(in crate::scheduler) change_regressions: Vec<String>,
}

/// Counts the cells' verdicts against their baselines and lists the
/// histories that now end in a worse regime or drift the wrong way.
pub(in crate::scheduler) fn verdicts_of(cells: &[Cell], summaries: &[CellSummary]) -> Verdicts {
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
    pub(in crate::scheduler) fn new(rec: ScheduleRecord) -> ScheduleMem {
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
