//! Activities: what a running attempt does before its workload (its
//! kernel's build), as the agent holding it reports it, shown in
//! `ListAgents` and in matrix statuses; and the times ETAs are made of,
//! with builds kept apart from runs.
//!
//! Invariants: a report counts only from the agent that holds the attempt
//! now (`provenance::holds`) and only with figures a build can have
//! (`farm_spec::progress`, checked once at this edge); an activity is shown
//! only while its reporter still holds the attempt, so a re-queued or ended
//! run shows none, whoever forgets to clear it. Activities live in memory
//! only: after a failover the next report (within the agent's
//! `PROGRESS_EVERY`, 10 s) brings them back.

use std::collections::BTreeSet;

use farm_proto::{CellStatus, RunActivity, RunProgress, RunResult};
use farm_spec::progress::BuildProgress;
use tracing::debug;

use super::provenance;
use super::state::activity::Activity;
use super::state::provenance::Rejection;
use super::{MatrixMem, RunMem, Scheduler};
use crate::ids::{AgentId, RunId};

impl Scheduler {
    /// A `RunProgress` from `agent_id`: kept when it holds the attempt and
    /// the figures are a build's; watchers hear of a change.
    pub(super) fn progress(&mut self, agent_id: &AgentId, p: RunProgress) {
        let r = p.run.unwrap_or_default();
        let id = r.run_id.parse::<RunId>().ok();
        let held = id
            .as_ref()
            .and_then(|id| self.runs.get(id))
            .is_some_and(|run| provenance::holds(run, agent_id, r.attempt));
        if !held {
            self.reject(agent_id, Rejection::ProgressNotLeased, &r.run_id);
            return;
        }
        let build = match p.build.as_ref().map(BuildProgress::try_from).transpose() {
            Ok(b) => b,
            Err(e) => {
                debug!(agent = %agent_id, run = %r.run_id, "progress refused: {e}");
                self.reject(agent_id, Rejection::BadProgress, &r.run_id);
                return;
            }
        };
        let Some(run) = id.and_then(|id| self.runs.get_mut(&id)) else {
            return;
        };
        let activity = build.map(|build| Activity {
            agent_id: *agent_id,
            attempt: r.attempt,
            build,
        });
        if run.activity != activity {
            run.activity = activity;
            if let Some(m) = self.matrices.get_mut(&run.rec.matrix_id) {
                m.dirty = true;
            }
        }
    }

    /// What `run_id` is doing, while the agent that said so holds it.
    pub(super) fn activity(&self, run_id: &RunId) -> Option<RunActivity> {
        let run = self.runs.get(run_id)?;
        let a = current(run)?;
        let cell = self
            .matrices
            .get(&run.rec.matrix_id)?
            .rec
            .cells
            .get(run.rec.cell.at())?;
        Some(RunActivity {
            run_id: run_id.to_string(),
            agent_id: a.agent_id.to_string(),
            kernel: cell.kernel.to_string(),
            build: Some((&a.build).into()),
        })
    }

    /// Each cell's activities, into its status.
    pub(super) fn cell_activities(&self, m: &MatrixMem, cells: &mut [CellStatus]) {
        for (cell, ids) in cells.iter_mut().zip(&m.by_cell) {
            if cell.counts.is_none_or(|c| c.running == 0) {
                continue;
            }
            cell.activities = ids.iter().filter_map(|id| self.activity(id)).collect();
        }
    }

    /// The builds still ahead of the matrix: the distinct builds of cells
    /// with queued runs that no connected agent keeps and no run of is
    /// assigned (an assigned run builds it now, reporting, or is past it).
    pub(super) fn builds_pending(&self, m: &MatrixMem, cells: &[CellStatus]) -> u32 {
        let mut queued: BTreeSet<&str> = BTreeSet::new();
        let mut under_way: BTreeSet<&str> = BTreeSet::new();
        for (cell, built) in cells.iter().zip(&m.built) {
            let (Some(name), Some(c)) = (built, &cell.counts) else {
                continue;
            };
            if c.running > 0 {
                under_way.insert(name);
            }
            if c.queued > 0 {
                queued.insert(name);
            }
        }
        let kept = |name: &str| {
            self.agents.values().any(|a| {
                a.session.is_some() && a.capabilities.built_kernels.iter().any(|k| k == name)
            })
        };
        queued
            .into_iter()
            .filter(|n| !under_way.contains(n) && !kept(n))
            .count() as u32
    }
}

/// The run's activity, if its reporter holds the attempt still.
fn current(run: &RunMem) -> Option<&Activity> {
    run.activity
        .as_ref()
        .filter(|a| provenance::holds(run, &a.agent_id, a.attempt))
}

/// A finished run's time for ETAs: started..finished less its kernel's
/// build (a cold build is minutes; the median of runs that include one
/// would stretch every later ETA).
pub(super) fn run_seconds(res: &RunResult) -> f64 {
    let total = res.finished_unix_ms.saturating_sub(res.started_unix_ms);
    total.saturating_sub(res.kernel_build_ms) as f64 / 1e3
}

/// The time of the build a run's attempt made, if it made one: within the
/// run's own time and `MAX_BUILD_SECONDS`, so that one agent's odd figure
/// cannot stretch every ETA the median of builds feeds.
pub(super) fn build_seconds(res: &RunResult) -> Option<f64> {
    let total = res.finished_unix_ms.saturating_sub(res.started_unix_ms);
    let most = u64::from(farm_spec::progress::MAX_BUILD_SECONDS) * 1000;
    res.kernel_built
        .then_some(res.kernel_build_ms.min(total).min(most) as f64 / 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_time_leaves_its_build_out() {
        let res = RunResult {
            started_unix_ms: 1_000,
            finished_unix_ms: 1_000 + 451_500,
            kernel_build_ms: 420_000,
            kernel_built: true,
            ..Default::default()
        };
        assert_eq!(run_seconds(&res), 31.5);
        assert_eq!(build_seconds(&res), Some(420.0));
        // Found kept: its few milliseconds are still no run time.
        let kept = RunResult {
            kernel_build_ms: 12,
            kernel_built: false,
            ..res.clone()
        };
        assert_eq!(run_seconds(&kept), 451.488);
        assert_eq!(build_seconds(&kept), None);
        // A build said to be longer than the run counts as all of it.
        let odd = RunResult {
            kernel_build_ms: 10_000_000,
            ..res
        };
        assert_eq!(run_seconds(&odd), 0.0);
        assert_eq!(build_seconds(&odd), Some(451.5));
        // Nor longer than a day, whatever the run's times say.
        let week = RunResult {
            finished_unix_ms: 1_000 + 7 * 86_400_000,
            kernel_build_ms: 7 * 86_400_000,
            ..odd
        };
        assert_eq!(build_seconds(&week), Some(86_400.0));
    }
}
