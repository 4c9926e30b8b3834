//! What the scheduler answers: each caller's [`Reply`], the [`Error`]s it
//! refuses with or stops for, and the stream an agent is sent its messages
//! on ([`AgentTx`]).

use tokio::sync::{mpsc, oneshot};

use farm_proto::CoordinatorMessage;

use crate::store;

/// The sending half of an agent's stream, of [`AGENT_OUTBOX_CAPACITY`]
/// (`outbox`).
///
/// The stream ends with an [`Error`] when the coordinator drops the agent.
pub type AgentTx = mpsc::Sender<Result<CoordinatorMessage, Error>>;

pub(in crate::scheduler) type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// The messages waiting in one agent's stream, at most: a few per run
/// (assignment, ack, cancel), so an agent that has this many unread is
/// stuck or hostile, and is dropped (`outbox`).
pub const AGENT_OUTBOX_CAPACITY: usize = 64;
/// What the scheduler refuses a caller, or why it stopped. Replies and
/// agents' streams carry the refusals; the thread ends with `Store`. Only
/// `crate::service` turns them into gRPC statuses.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no matrix {0}")]
    UnknownMatrix(String),
    /// A stored matrix whose cells this coordinator cannot read.
    #[error("matrix {matrix_id} failed: the store holds it, but {why}; it is left there as it is")]
    Unreadable { matrix_id: String, why: String },
    #[error("no schedule {0}")]
    UnknownSchedule(String),
    #[error("no bisection {0}")]
    UnknownBisection(String),
    /// A bisection request that cannot be bisected (the reason says why).
    #[error("bisection refused: {0}")]
    Bisection(String),
    /// A `ListRange` that cannot be listed (the reason says why).
    #[error("git range refused: {0}")]
    Range(String),
    /// An agent asked on a caller's behalf did not answer in time.
    #[error("{0}")]
    Unanswered(String),
    #[error("unknown agent id {0}; call Register first")]
    UnknownAgent(String),
    /// Another caller asked for the id of an agent whose stream is open.
    #[error("agent {0} has a live session; another one may not take it over")]
    AgentInUse(String),
    /// The agent id is bound to another certificate (or to none, or the
    /// caller has none): one identity never speaks for another's agent.
    #[error("agent {agent} is bound to {bound}; {caller} may not speak for it")]
    NotYourAgent {
        agent: String,
        bound: String,
        caller: String,
    },
    /// The agent's stream is closed: it was silent longer than its lease.
    #[error("lease expired: no heartbeat")]
    LeaseExpired,
    /// The agent did not read its stream: it had this many messages unread.
    #[error(
        "agent stream closed: {0} messages unread; the limit (AGENT_OUTBOX_CAPACITY) is {AGENT_OUTBOX_CAPACITY}"
    )]
    TooSlow(usize),
    /// A queue between threads is full; the caller may try again.
    #[error("{what} is full; the limit ({limit}) is {capacity}, try again")]
    Busy {
        what: &'static str,
        limit: &'static str,
        capacity: usize,
    },
    /// A record of the submission would be larger than the store keeps
    /// in one (etcd's request limit).
    #[error("{what} is {bytes} bytes; the store keeps at most {limit} in one record")]
    TooLargeForStore {
        what: String,
        bytes: usize,
        limit: usize,
    },
    /// The scheduler thread is gone (stopping, or stopped by an error).
    #[error("coordinator is shutting down")]
    ShuttingDown,
    /// The scheduler stopped for this reason ([`Handle::stopping_because`]):
    /// "leadership lost: …" when a leader's term ended.
    #[error("{0}")]
    Stopped(String),
    /// The store failed a commit: fatal, the thread stops.
    #[error(transparent)]
    Store(#[from] store::Error),
}
