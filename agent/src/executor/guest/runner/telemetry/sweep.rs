//! What the runner's lines accumulate into before metrics are built: a
//! reading before and after the workload ([`Around`]), and each sweep of
//! the guest's tasks and CPUs ([`Sweep`]).

use std::collections::BTreeMap;

use super::error::{BuildError, Reason, cut};
use crate::telemetry::procstat::CpuTimes;
use crate::telemetry::runqueue;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    Before,
    After,
}

impl Phase {
    pub(super) fn parse(s: &str) -> Result<Phase, Reason> {
        match s {
            "before" => Ok(Phase::Before),
            "after" => Ok(Phase::After),
            _ => Err(Reason::Phase(cut(s))),
        }
    }
}

/// A reading taken before and after the workload.
#[derive(Debug, Clone, Default)]
pub(super) struct Around<T> {
    pub(super) before: Option<T>,
    pub(super) after: Option<T>,
}

impl<T> Around<T> {
    pub(super) fn set(&mut self, phase: Phase, value: T) -> Result<(), Reason> {
        let slot = match phase {
            Phase::Before => &mut self.before,
            Phase::After => &mut self.after,
        };
        if slot.is_some() {
            return Err(Reason::SecondReading);
        }
        *slot = Some(value);
        Ok(())
    }

    /// Both readings, none, or an error naming `what` when only one came.
    pub(super) fn pair(&self, what: &'static str) -> Result<Option<(&T, &T)>, BuildError> {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => Ok(Some((b, a))),
            (None, None) => Ok(None),
            (Some(_), None) => Err(BuildError::BeforeOnly(what)),
            (None, Some(_)) => Err(BuildError::AfterOnly(what)),
        }
    }
}

/// One task of one sweep, as much of it as telemetry needs.
#[derive(Debug, Clone)]
pub(super) struct Task {
    pub(super) tid: u32,
    /// Field 6.
    pub(super) session: u32,
    pub(super) state: char,
    pub(super) cpu: u32,
    /// The instance its name makes it, see [`crate::telemetry::sampler::instance_of`].
    pub(super) instance: Option<u32>,
}

/// The most migrations a task can have had: a counter beyond it is garbage.
pub(super) const MAX_MIGRATIONS: u64 = 1 << 48;

/// One `sample` line and the `task` and `cpu` lines after it.
#[derive(Debug, Clone)]
pub(super) struct Sweep {
    pub(super) uptime_ms: u64,
    /// The `sample` line, for errors about the sweep as a whole.
    pub(super) line: String,
    pub(super) tasks: Vec<Task>,
    /// The tids of `tasks`, to refuse a repeated one in constant time.
    pub(super) tids: std::collections::HashSet<u32>,
    /// `se.nr_migrations` by tid.
    pub(super) migrations: BTreeMap<u32, u64>,
    /// `schedstat` by tid.
    pub(super) schedstat: BTreeMap<u32, runqueue::SchedInfo>,
    pub(super) total: Option<CpuTimes>,
    pub(super) per_cpu: BTreeMap<u32, CpuTimes>,
}
