//! Messages to agents: what a batch has for each agent is delivered after
//! its commit, into the agent's stream of [`AGENT_OUTBOX_CAPACITY`]
//! messages, without ever waiting for room.
//!
//! Before the commit, an agent whose stream has no room for its share of
//! the batch, plus one slot for the reason it is closed, is too slow (or
//! does not read at all): its session is closed as when its lease expires,
//! its run re-queued in this same batch, and
//! `farm_agent_sessions_closed_total{reason="too_slow"}` counts it. The
//! scheduler is the only sender of a stream and its reader only makes room,
//! so the room seen before the commit is there after it: delivery never
//! fails for want of room, and the last slot is always free for the
//! reason of a close (here or at a lease's expiry).

use std::collections::HashMap;

use tracing::warn;

use super::{AGENT_OUTBOX_CAPACITY, Error, Scheduler};
use crate::ids::AgentId;

/// Why a session was closed by the coordinator, as the metric names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Closed {
    LeaseExpired,
    TooSlow,
}

impl Closed {
    pub(super) fn reason(self) -> &'static str {
        match self {
            Closed::LeaseExpired => "lease_expired",
            Closed::TooSlow => "too_slow",
        }
    }
}

impl Scheduler {
    /// Closes the sessions of agents that cannot take this batch's messages.
    pub(super) fn close_slow_sessions(&mut self) {
        let mut wanted: HashMap<AgentId, usize> = HashMap::new();
        for (agent_id, _) in &self.outbox {
            *wanted.entry(*agent_id).or_default() += 1;
        }
        let slow: Vec<(AgentId, usize)> = wanted
            .into_iter()
            .filter_map(|(id, n)| {
                let (_, tx) = self.agents.get(&id)?.session.as_ref()?;
                // One slot stays free for the reason of a close.
                (tx.capacity() < n + 1).then(|| (id, AGENT_OUTBOX_CAPACITY - tx.capacity()))
            })
            .collect();
        for (id, unread) in slow {
            warn!(agent = %id, unread, limit = AGENT_OUTBOX_CAPACITY, "agent does not read its stream; closing it");
            self.close_session(&id, Closed::TooSlow, Error::TooSlow(unread));
        }
    }

    /// Ends an agent's stream with `why` and takes its run back: the agent
    /// reconnects (and may be given the run again if it still holds it).
    pub(super) fn close_session(&mut self, agent_id: &AgentId, closed: Closed, why: Error) {
        let Some(a) = self.agents.get_mut(agent_id) else {
            return;
        };
        if let Some((_, tx)) = a.session.take() {
            // The free slot takes it (see the top of this file).
            let _ = tx.try_send(Err(why));
            self.fleet_changed = true;
            self.metrics.session_closed(closed.reason());
        }
        if let Some(run) = a.current.take() {
            let why = match closed {
                Closed::LeaseExpired => "its agent's lease expired",
                Closed::TooSlow => "its agent did not read its stream",
            };
            self.requeue(agent_id, &run.run, why);
        }
        self.idle.remove(agent_id);
    }

    /// After the commit: each message into its agent's stream. A stream
    /// that is gone is fine: the agent's next Hello reconciles.
    pub(super) fn deliver(&mut self) {
        for (agent_id, msg) in self.outbox.drain(..) {
            if let Some((_, tx)) = self.agents.get(&agent_id).and_then(|a| a.session.as_ref()) {
                let _ = tx.try_send(Ok(msg));
            }
        }
    }
}
