//! Leases: an agent that stays silent past its lease loses its stream and
//! its run; a lost run is queued again, or fails once it has used its
//! attempts.
//!
//! Invariant: a run is taken from an agent only while that agent still
//! holds it (assigned to it); a run meanwhile given to another is left alone.

use std::time::{Duration, Instant};

use farm_proto::{RunRef, RunResult};
use tracing::{Span, warn};

use super::outbox::Closed;
use super::{Error, Scheduler};
use crate::ids::{AgentId, RunId};
use crate::store::{Op, RunState};

impl Scheduler {
    pub(super) fn lease(&self) -> Duration {
        Duration::from_millis(u64::from(self.config.lease_ms))
    }

    /// Puts a run that `agent_id` lost back in its queue, or fails it when it
    /// has used its attempts. A run meanwhile assigned to another agent is
    /// that agent's and is left alone.
    pub(super) fn requeue(&mut self, agent_id: &AgentId, run_id: &RunId, why: &str) {
        let max = self.config.max_attempts;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.rec.state != RunState::Assigned || run.rec.agent_id != Some(*agent_id) {
            return;
        }
        if run.rec.attempt >= max {
            run.rec.state = RunState::Failed;
            run.rec.result = Some(RunResult {
                run: Some(RunRef {
                    run_id: run_id.to_string(),
                    attempt: run.rec.attempt,
                }),
                ok: false,
                error: format!("lost {} times ({why}); giving up", run.rec.attempt),
                ..Default::default()
            });
            self.metrics.run_ended(false, None);
        } else {
            run.rec.state = RunState::Queued;
            run.queued_at = Instant::now();
            self.queues
                .entry((run.matrix_seq, run.rec.cell))
                .or_default()
                .insert(run.rec.seq, run_id.clone());
        }
        run.rec.agent_id = None;
        run.assigned_at = None;
        run.span.record("outcome", "lost");
        run.span = Span::none();
        self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
        let (matrix_id, cell, failed) = (
            run.rec.matrix_id,
            run.rec.cell,
            run.rec.state == RunState::Failed,
        );
        if let Some(m) = self.matrices.get_mut(&matrix_id) {
            m.dirty = true;
        }
        if failed {
            // A run that ended is in the summaries.
            self.results_changed(&matrix_id, cell);
        }
    }

    pub(super) fn expire_leases(&mut self) {
        let now = Instant::now();
        let expired: Vec<AgentId> = self
            .agents
            .iter()
            .filter(|(_, a)| a.lease_until < now && (a.current.is_some() || a.session.is_some()))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            let Some(a) = self.agents.get(&id) else {
                continue;
            };
            warn!(agent = %id, run = ?a.current, "agent lease expired");
            self.close_session(&id, Closed::LeaseExpired, Error::LeaseExpired);
        }
    }

    /// Forgets agents that have had neither a stream nor a run for
    /// `agent_expiry_ms`.
    pub(super) fn forget_absent_agents(&mut self) {
        let now = super::now_ms();
        let expiry = self.config.agent_expiry_ms;
        let absent: Vec<AgentId> = self
            .agents
            .iter()
            .filter(|(_, a)| {
                a.session.is_none()
                    && a.current.is_none()
                    && now.saturating_sub(a.last_seen_ms) > expiry
            })
            .map(|(id, _)| *id)
            .collect();
        for id in absent {
            tracing::info!(agent = %id, expiry_ms = expiry, "absent agent forgotten");
            self.agents.remove(&id);
            self.idle.remove(&id);
            self.ops.push(Op::ForgetAgent(id));
            self.fleet_changed = true;
        }
    }
}
