//! Agents and their sessions: registration, catalogue changes, the stream
//! opening (and what the agent says it holds), adoption of a run an agent
//! reports, the idle set, and the listing.
//!
//! Invariant: an agent is in `idle` exactly when it has an open stream and
//! no current run; only agents in `idle` are offered runs.

use std::time::Instant;

use farm_proto::{
    AgentInfo, Capabilities, CoordinatorMessage, Hello, RunRef, agent_message, coordinator_message,
};
use tracing::{info, warn};

use super::provenance;
use super::state::provenance::Rejection;
use super::{Agent, AgentTx, Error, Scheduler, now_ms};
use crate::identity::Name;
use crate::ids::{AgentId, Attempt, RunId};
use crate::store::{AgentRecord, Op, RunState};

impl Scheduler {
    /// A stream closed: the agent is no longer connected, unless the
    /// stream is an old one that a newer session already replaced.
    pub(super) fn session_closed(&mut self, agent_id: &AgentId, session: u64) {
        if let Some(a) = self.agents.get_mut(agent_id)
            && a.session.as_ref().is_some_and(|(s, _)| *s == session)
        {
            info!(agent = %agent_id, "agent stream closed");
            a.session = None;
            self.fleet_changed = true;
            self.idle.remove(agent_id);
        }
    }

    pub(super) fn register(
        &mut self,
        capabilities: Capabilities,
        resume: Option<AgentId>,
        identity: Option<Name>,
    ) -> Result<AgentId, Error> {
        let now = now_ms();
        // With a certificate, the id is the one bound to it, or a new one
        // bound to it now, whatever the caller asks to resume (an agent
        // that lost its state directory gets its id back); without one, the
        // id asked for, if it exists and is not a certificate's.
        let bound = identity.as_ref().and_then(|name| {
            self.agents
                .iter()
                .find(|(_, a)| a.identity.as_ref() == Some(name))
                .map(|(id, _)| *id)
        });
        let wanted = match identity {
            Some(_) => bound,
            None => resume,
        };
        let known = wanted.filter(|w| self.agents.contains_key(w));
        if let Some(wanted) = known
            && let Some(a) = self.agents.get(&wanted)
        {
            if a.identity != identity {
                let refusal = not_yours(&wanted, a.identity.as_ref(), identity.as_ref());
                self.reject(&wanted, Rejection::IdentityMismatch, "");
                return Err(refusal);
            }
            // A live session is never replaced: the caller is another
            // process (its own stream would have closed first), and taking
            // the id over would hand it the victim's run.
            if a.session.is_some() {
                self.reject(&wanted, Rejection::Takeover, "");
                return Err(Error::AgentInUse(wanted.to_string()));
            }
        }
        let id = known.unwrap_or_else(AgentId::random);
        info!(agent = %id, host = %capabilities.hostname, arch = %capabilities.arch,
              kernel = %capabilities.kernel_release, cpus = capabilities.cpus_online, "agent registered");
        let lease = self.lease();
        let a = self.agents.entry(id).or_insert_with(|| Agent {
            capabilities: Capabilities::default(),
            identity: identity.clone(),
            registered_ms: now,
            session: None,
            current: None,
            lease_until: Instant::now() + lease,
            last_seen_ms: now,
        });
        a.capabilities = capabilities;
        a.last_seen_ms = now;
        self.fleet_changed = true;
        self.ops.push(Op::PutAgent(Box::new(AgentRecord {
            agent_id: id,
            capabilities: a.capabilities.clone(),
            registered_ms: a.registered_ms,
            identity: a.identity.clone(),
        })));
        let caps = a.capabilities.clone();
        self.catalogue_changed(&caps);
        Ok(id)
    }

    /// An agent's catalogue changed while it was connected (a kernel
    /// appeared, KVM found to work): placement and triggers see it at once.
    /// Only the catalogue is taken; what the agent registered as (arch,
    /// CPUs, ...) was checked at `Register` and stays.
    pub(super) fn capabilities_changed(&mut self, agent_id: &AgentId, fresh: Capabilities) {
        let Some(a) = self.agents.get_mut(agent_id) else {
            return;
        };
        let mut caps = a.capabilities.clone();
        caps.guest_kernels = fresh.guest_kernels;
        caps.guest_accelerators = fresh.guest_accelerators;
        caps.executors = fresh.executors;
        info!(agent = %agent_id, guest_kernels = caps.guest_kernels.len(),
              executors = ?caps.executors, "agent catalogue changed");
        a.capabilities = caps.clone();
        self.fleet_changed = true;
        self.ops.push(Op::PutAgent(Box::new(AgentRecord {
            agent_id: *agent_id,
            capabilities: caps.clone(),
            registered_ms: a.registered_ms,
            identity: a.identity.clone(),
        })));
        self.catalogue_changed(&caps);
    }

    pub(super) fn session_open(
        &mut self,
        id: AgentId,
        hello: Hello,
        identity: Option<&Name>,
        session: u64,
        tx: AgentTx,
    ) -> Result<(), Error> {
        let lease = self.lease();
        let Some(a) = self.agents.get_mut(&id) else {
            return Err(Error::UnknownAgent(id.to_string()));
        };
        if a.identity.as_ref() != identity {
            let refusal = not_yours(&id, a.identity.as_ref(), identity);
            self.reject(&id, Rejection::IdentityMismatch, "");
            return Err(refusal);
        }
        if a.session.is_some() {
            self.reject(&id, Rejection::Takeover, "");
            return Err(Error::AgentInUse(id.to_string()));
        }
        a.session = Some((session, tx));
        a.lease_until = Instant::now() + lease;
        self.fleet_changed = true;
        a.last_seen_ms = now_ms();
        let previous = a.current.take();
        let running = hello.running.filter(|r| !r.run_id.is_empty());
        if let Some(prev) = previous {
            // The wire's spelling of an id is the canonical one, so the
            // wire forms compare as the ids do.
            let wire = RunRef::from(&prev);
            let still_running = running.as_ref() == Some(&wire);
            let pending = hello.pending_results.contains(&wire);
            if pending && running.is_none() {
                // Its result comes right after this hello; until it is in,
                // the agent stays busy and the lease still guards the run.
                if let Some(a) = self.agents.get_mut(&id) {
                    a.current = Some(prev);
                }
            } else if !still_running && !pending {
                // Lost with the agent's previous process: run it elsewhere now.
                info!(agent = %id, run = %prev.run, "agent no longer holds its run; re-queueing");
                self.requeue(&id, &prev.run, "its agent restarted");
            }
        }
        if let Some(r) = running {
            self.adopt(&id, r);
        }
        info!(agent = %id, "agent stream open");
        self.refresh_idle(&id);
        Ok(())
    }

    /// An agent says it is executing `r`: if that attempt was leased to it,
    /// it is busy with it whatever we think; if not, it is told to stop and
    /// the run is left to whoever holds it.
    pub(super) fn adopt(&mut self, agent_id: &AgentId, r: RunRef) {
        let id = r.run_id.parse::<RunId>().ok();
        let leased = id
            .as_ref()
            .and_then(|id| self.runs.get(id))
            .map(|run| provenance::was_leased(run, agent_id, r.attempt));
        match leased {
            None => {
                self.outbox.push((*agent_id, cancel_msg(r)));
                return;
            }
            Some(false) => {
                self.reject(agent_id, Rejection::ClaimNotLeased, &r.run_id);
                self.outbox.push((*agent_id, cancel_msg(r)));
                return;
            }
            Some(true) => {}
        }
        let Some(id) = id else {
            return;
        };
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.current = Some(Attempt {
                run: id.clone(),
                attempt: r.attempt,
            });
        }
        let Some(run) = self.runs.get_mut(&id) else {
            return;
        };
        match run.rec.state {
            RunState::Queued => {
                // It was re-queued while the agent was away; it is back, so
                // let it finish rather than start the run again elsewhere.
                if let Some(q) = self.queues.get_mut(&(run.matrix_seq, run.rec.cell)) {
                    q.remove(&run.rec.seq);
                }
                run.rec.state = RunState::Assigned;
                run.rec.agent_id = Some(*agent_id);
                // The attempt the agent runs, so cancels and results match it.
                run.rec.attempt = r.attempt;
                self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
            }
            RunState::Assigned => {}
            RunState::Finished | RunState::Failed | RunState::Cancelled => {
                self.outbox.push((*agent_id, cancel_msg(r)));
            }
        }
    }

    pub(super) fn refresh_idle(&mut self, agent_id: &AgentId) {
        match self.agents.get(agent_id) {
            Some(a) if a.session.is_some() && a.current.is_none() => {
                self.idle.insert(*agent_id);
            }
            _ => {
                self.idle.remove(agent_id);
            }
        }
    }

    pub(super) fn on_agent_message(&mut self, agent_id: &AgentId, msg: agent_message::Msg) {
        let lease = self.lease();
        let Some(a) = self.agents.get_mut(agent_id) else {
            return;
        };
        a.lease_until = Instant::now() + lease;
        a.last_seen_ms = now_ms();
        match msg {
            agent_message::Msg::Hello(_) => {
                warn!(agent = %agent_id, "second hello on a stream ignored");
            }
            agent_message::Msg::Heartbeat(_) => {}
            agent_message::Msg::Progress(p) => self.progress(agent_id, p),
            agent_message::Msg::Result(res) => self.result(agent_id, res),
            agent_message::Msg::Capabilities(caps) => self.capabilities_changed(agent_id, caps),
            agent_message::Msg::Commits(c) => self.commits_listed(agent_id, c),
        }
    }

    pub(super) fn list_agents(&self) -> Vec<AgentInfo> {
        let mut out: Vec<AgentInfo> = self
            .agents
            .iter()
            .map(|(id, a)| AgentInfo {
                agent_id: id.to_string(),
                capabilities: Some(a.capabilities.clone()),
                connected: a.session.is_some(),
                current_run: a
                    .current
                    .as_ref()
                    .map(|a| a.run.to_string())
                    .unwrap_or_default(),
                last_seen_unix_ms: a.last_seen_ms,
                identity: a
                    .identity
                    .as_ref()
                    .map(|n| n.to_string())
                    .unwrap_or_default(),
                activity: a
                    .current
                    .as_ref()
                    .and_then(|a| self.activity(&a.run))
                    .filter(|x| x.agent_id == id.to_string()),
            })
            .collect();
        out.sort_by(|a, b| a.agent_id.cmp(&b.agent_id));
        out
    }
}

/// The refusal of `caller` for an agent id bound to `bound`.
fn not_yours(agent: &AgentId, bound: Option<&Name>, caller: Option<&Name>) -> Error {
    let who = |n: Option<&Name>, none: &str| match n {
        Some(n) => format!("certificate {n}"),
        None => none.to_owned(),
    };
    Error::NotYourAgent {
        agent: agent.to_string(),
        bound: who(bound, "no certificate (it registered with a token)"),
        caller: who(caller, "a caller without a certificate"),
    }
}

pub(super) fn ack_msg(r: RunRef) -> CoordinatorMessage {
    CoordinatorMessage {
        msg: Some(coordinator_message::Msg::Ack(r)),
    }
}

pub(super) fn cancel_msg(r: RunRef) -> CoordinatorMessage {
    CoordinatorMessage {
        msg: Some(coordinator_message::Msg::Cancel(r)),
    }
}
