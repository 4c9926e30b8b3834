//! Result ingestion: an agent's result ends its run (once: late and
//! repeated deliveries are acknowledged and dropped), frees the agent, stops
//! any other copy of the run, and may call for more runs.
//!
//! Invariant: every result is acknowledged, and only after the batch that
//! recorded it is committed; a run counts its first result only.

use farm_proto::trace::TARGET;
use farm_proto::{RunRef, RunResult};
use tracing::{Span, debug, info_span, warn};

use super::Scheduler;
use super::agents::{ack_msg, cancel_msg};
use crate::store::{Op, RunState};

impl Scheduler {
    pub(super) fn result(&mut self, agent_id: &str, res: RunResult) {
        let Some(rref) = res.run.clone() else {
            warn!(agent = %agent_id, "result without a run reference dropped");
            return;
        };
        let ack = (agent_id.to_string(), ack_msg(rref.clone()));
        if let Some(a) = self.agents.get_mut(agent_id)
            && a.current.as_ref() == Some(&rref)
        {
            a.current = None;
        }
        self.refresh_idle(agent_id);
        let Some(run) = self.runs.get_mut(&rref.run_id) else {
            warn!(agent = %agent_id, run = %rref.run_id, "result for an unknown run dropped");
            self.outbox.push(ack);
            return;
        };
        if run.rec.state.is_terminal() {
            // A late or repeated delivery: the run already counts once.
            debug!(agent = %agent_id, run = %rref.run_id, attempt = rref.attempt, "duplicate result dropped");
            self.outbox.push(ack);
            return;
        }
        if run.rec.state == RunState::Queued
            && let Some(q) = self.queues.get_mut(&(run.matrix_seq, run.rec.cell))
        {
            q.remove(&run.rec.seq);
        }
        // Another agent may be running a later attempt: stop it.
        // Another copy may be running — elsewhere, or a later attempt on this
        // very agent: stop it.
        let other = (run.rec.state == RunState::Assigned
            && (run.rec.agent_id != agent_id || run.rec.attempt != rref.attempt))
            .then(|| (run.rec.agent_id.clone(), run.rec.attempt));
        run.rec.state = if res.ok {
            RunState::Finished
        } else {
            RunState::Failed
        };
        run.rec.agent_id = agent_id.to_string();
        run.rec.attempt = rref.attempt;
        if !res.ok {
            warn!(agent = %agent_id, run = %rref.run_id, error = %res.error, "run failed");
        }
        let duration = res.finished_unix_ms.saturating_sub(res.started_unix_ms) as f64 / 1e3;
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
        let matrix_id = run.rec.matrix_id.clone();
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
            }
        }
        self.outbox.push(ack);
        self.results_changed(&matrix_id, cell);
        self.rerun_if_inconclusive(&matrix_id, cell);
    }
}
