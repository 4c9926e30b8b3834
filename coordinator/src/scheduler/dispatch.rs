//! Dispatch: idle agents get the oldest queued run they can serve.
//!
//! Invariant: matrices are served in submission order, and within a matrix
//! runs in the repetition-major order of the expansion; a run is handed to
//! exactly one agent, and the agent leaves the idle set when it gets it.

use std::time::Instant;

use farm_proto::{CoordinatorMessage, RunAssignment, RunRef, coordinator_message};
use farm_runtime::trace::{self, TARGET};
use tracing::{debug, info_span};

use super::Scheduler;
use crate::eligibility;
use crate::ids::{AgentId, Attempt, CellIndex, RunId};
use crate::store::{Op, RunState};

impl Scheduler {
    pub(super) fn dispatch(&mut self) {
        if self.queues.is_empty() || self.idle.is_empty() {
            return;
        }
        let idle: Vec<AgentId> = self.idle.iter().copied().collect();
        for agent_id in idle {
            if self.queues.is_empty() {
                break;
            }
            let Some(run_id) = self.pick(&agent_id) else {
                continue;
            };
            self.assign(&agent_id, &run_id);
        }
    }

    /// The oldest queued run that this agent can serve, of the oldest
    /// matrix it can serve; within that matrix, a run of a build it keeps
    /// first (`built_kernels`), so that each agent goes on with the kernels
    /// it built and no two build the same one.
    pub(super) fn pick(&mut self, agent_id: &AgentId) -> Option<RunId> {
        let caps = &self.agents.get(agent_id)?.capabilities;
        let mut best: Option<((u64, CellIndex), u64)> = None;
        let mut best_built: Option<((u64, CellIndex), u64)> = None;
        for (&(mseq, cell), q) in &self.queues {
            if let Some(((bseq, _), _)) = best
                && bseq != mseq
            {
                break;
            }
            let Some((&rseq, _)) = q.first_key_value() else {
                continue;
            };
            let m = self
                .by_seq
                .get(&mseq)
                .and_then(|id| self.matrices.get(id))?;
            let reqs = m.reqs.get(cell.at())?;
            if !eligibility::satisfies(reqs, caps) {
                continue;
            }
            if best.is_none_or(|(_, s)| rseq < s) {
                best = Some(((mseq, cell), rseq));
            }
            let kept = m
                .built
                .get(cell.at())
                .and_then(Option::as_ref)
                .is_some_and(|n| caps.built_kernels.contains(n));
            if kept && best_built.is_none_or(|(_, s)| rseq < s) {
                best_built = Some(((mseq, cell), rseq));
            }
        }
        let (key, _) = best_built.or(best)?;
        let q = self.queues.get_mut(&key)?;
        let (_, run_id) = q.pop_first()?;
        if q.is_empty() {
            self.queues.remove(&key);
        }
        Some(run_id)
    }

    pub(super) fn assign(&mut self, agent_id: &AgentId, run_id: &RunId) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(m) = self.matrices.get_mut(&run.rec.matrix_id) else {
            return;
        };
        let Some(cell) = m.rec.cells.get(run.rec.cell.at()) else {
            return;
        };
        run.rec.state = RunState::Assigned;
        run.rec.attempt += 1;
        run.holders.push((*agent_id, run.rec.attempt));
        run.rec.agent_id = Some(*agent_id);
        run.assigned_at = Some(Instant::now());
        let queued = run.queued_at.elapsed();
        self.metrics.run_assigned(queued);
        run.span = info_span!(target: TARGET, parent: &m.span, "run", run = %run_id,
            attempt = run.rec.attempt, cell = run.rec.cell.get(), agent = %agent_id,
            outcome = tracing::field::Empty);
        // Placement is decided by the time the span exists: the phase
        // records who got it and how long the run waited in the queue.
        drop(
            info_span!(target: TARGET, parent: &run.span, "placement", agent = %agent_id,
            queued_ms = queued.as_millis() as u64),
        );
        let msg = CoordinatorMessage {
            msg: Some(coordinator_message::Msg::Assign(RunAssignment {
                run: Some(RunRef {
                    run_id: run_id.to_string(),
                    attempt: run.rec.attempt,
                }),
                matrix_id: m.rec.id.to_string(),
                cell_index: run.rec.cell.get(),
                repetition: run.rec.repetition,
                kernel: cell.kernel.to_string(),
                workload: cell.workload.clone(),
                state: cell.state.as_ref().map(farm_proto::MachineState::from),
                executor: cell
                    .host
                    .as_ref()
                    .and_then(|h| h.executor)
                    .map(|e| e.to_string())
                    .unwrap_or_default(),
                timeout_s: m.rec.timeout_s,
                loads: cell.loads.clone(),
                guest: cell.guest.as_ref().map(farm_proto::GuestShape::from),
                build: cell.build.as_ref().map(farm_proto::KernelBuild::from),
                traceparent: trace::traceparent(&run.span),
            })),
        };
        m.dirty = true;
        debug!(agent = %agent_id, run = %run_id, attempt = run.rec.attempt, "assigned");
        self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
        self.outbox.push((*agent_id, msg));
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.current = Some(Attempt {
                run: run_id.clone(),
                attempt: run.rec.attempt,
            });
        }
        self.idle.remove(agent_id);
    }
}
