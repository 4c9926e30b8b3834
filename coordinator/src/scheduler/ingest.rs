//! Result ingestion: an agent's result ends its run (once: late and
//! repeated deliveries are acknowledged and dropped), frees the agent, stops
//! any other copy of the run, and may call for more runs.
//!
//! Invariant: every result is acknowledged, and only after the batch that
//! recorded it is committed; a run counts its first result only, and only
//! a result of an attempt leased to its sender (`provenance`).

use farm_proto::{RunRef, RunResult};
use farm_runtime::trace::TARGET;
use tracing::{Span, debug, info_span, warn};

use super::agents::{ack_msg, cancel_msg};
use super::provenance;
use super::state::provenance::Rejection;
use super::{Scheduler, activity};
use crate::ids::{AgentId, RunId};
use crate::store::{Op, RunState};

impl Scheduler {
    pub(super) fn result(&mut self, agent_id: &AgentId, res: RunResult) {
        let Some(rref) = res.run.clone() else {
            warn!(agent = %agent_id, "result without a run reference dropped");
            return;
        };
        // Acknowledged whatever becomes of it, so that the sender forgets
        // it rather than sending it again on every reconnect.
        let ack = (*agent_id, ack_msg(rref.clone()));
        let id = rref.run_id.parse::<RunId>().ok();
        let Some((id, run)) = id.and_then(|id| self.runs.get(&id).map(|run| (id, run))) else {
            self.reject(agent_id, Rejection::UnknownRun, &rref.run_id);
            self.outbox.push(ack);
            return;
        };
        if !provenance::was_leased(run, agent_id, rref.attempt) {
            // Another agent's attempt, or one nobody was given: the run and
            // whoever holds it are left alone.
            self.reject(agent_id, Rejection::ResultNotLeased, &rref.run_id);
            self.outbox.push(ack);
            return;
        }
        if let Some(a) = self.agents.get_mut(agent_id)
            && a.current
                .as_ref()
                .is_some_and(|a| a.run == id && a.attempt == rref.attempt)
        {
            a.current = None;
        }
        self.refresh_idle(agent_id);
        let Some(run) = self.runs.get_mut(&id) else {
            return;
        };
        if run.rec.state.is_terminal() {
            // A late or repeated delivery: the run already counts once.
            debug!(agent = %agent_id, run = %rref.run_id, attempt = rref.attempt, "duplicate result dropped");
            self.outbox.push(ack);
            return;
        }
        let leased_for = provenance::holds(run, agent_id, rref.attempt)
            .then_some(run.assigned_at)
            .flatten()
            .map(|t| t.elapsed());
        let res = match res
            .ok
            .then(|| provenance::bad_value(&res, leased_for))
            .flatten()
        {
            Some(why) => {
                warn!(agent = %agent_id, run = %rref.run_id, "{why}: the run fails");
                provenance::refused(res, why)
            }
            None => res,
        };
        let res = provenance::within(res, self.store.max_value_bytes());
        if run.rec.state == RunState::Queued
            && let Some(q) = self.queues.get_mut(&(run.matrix_seq, run.rec.cell))
        {
            q.remove(&run.rec.seq);
        }
        // Another copy may be running — elsewhere, or a later attempt on this
        // very agent: stop it.
        let other = (run.rec.state == RunState::Assigned
            && (run.rec.agent_id != Some(*agent_id) || run.rec.attempt != rref.attempt))
            .then_some(run.rec.agent_id)
            .flatten()
            .map(|other| (other, run.rec.attempt));
        run.rec.state = if res.ok {
            RunState::Finished
        } else {
            RunState::Failed
        };
        run.rec.agent_id = Some(*agent_id);
        run.rec.attempt = rref.attempt;
        if !res.ok {
            warn!(agent = %agent_id, run = %rref.run_id, error = %res.error, "run failed");
        }
        let (duration, build) = (activity::run_seconds(&res), activity::build_seconds(&res));
        run.rec.result = Some(res);
        self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
        // The attempt's span ends once its result is on disk; the store
        // phase is the wait for that commit.
        let span = std::mem::replace(&mut run.span, Span::none());
        span.record(
            "outcome",
            if run.rec.state == RunState::Finished {
                "ok"
            } else {
                "failed"
            },
        );
        let store = info_span!(target: TARGET, parent: &span, "store");
        self.after_commit
            .push(Box::new(move || drop((store, span))));
        let matrix_id = run.rec.matrix_id;
        let finished = run.rec.state == RunState::Finished;
        self.metrics
            .run_ended(finished, run.assigned_at.map(|t| t.elapsed()));
        if let Some((other, attempt)) = other {
            self.outbox.push((
                other,
                cancel_msg(RunRef {
                    run_id: rref.run_id.clone(),
                    attempt,
                }),
            ));
        }
        let cell = run.rec.cell;
        if let Some(m) = self.matrices.get_mut(&matrix_id) {
            m.dirty = true;
            if finished {
                m.durations_s.push(duration);
                m.build_durations_s.extend(build);
            }
        }
        self.outbox.push(ack);
        self.results_changed(&matrix_id, cell);
        self.rerun_if_inconclusive(&matrix_id, cell);
    }
}
