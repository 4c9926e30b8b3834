//! What the scheduler thread is sent: every [`Event`] a caller, an agent's
//! stream, the ticker, the cron driver or the results worker gives it.

use farm_proto::{
    AgentInfo, Capabilities, Hello, MatrixStatus, SubmitMatrixResponse, agent_message,
};
use tokio::sync::watch;

use super::reply::{AgentTx, Reply};
use super::state::archive::ArchiveEvent;
use super::state::bisection::BisectionEvent;
use super::state::results::ResultsEvent;
use super::state::schedule::ScheduleEvent;
use crate::identity::Name;
use crate::ids::{AgentId, MatrixId};
use crate::matrix::Matrix;

pub enum Event {
    /// This coordinator no longer leads: the thread ends after the batch,
    /// its agents' streams with it (they find the new leader).
    StepDown,
    Register {
        capabilities: Box<Capabilities>,
        /// The id the caller asks to resume, if it is one.
        resume_agent_id: Option<AgentId>,
        /// The caller's certificate name (mutual TLS), `None` with a token.
        identity: Option<Name>,
        reply: Reply<AgentId>,
    },
    SessionOpen {
        /// `hello`'s, parsed where it entered (`service`).
        agent_id: AgentId,
        hello: Hello,
        identity: Option<Name>,
        session: u64,
        tx: AgentTx,
        reply: Reply<()>,
    },
    FromAgent {
        agent_id: AgentId,
        msg: Box<agent_message::Msg>,
        /// The message's share of the bytes agents may have waiting for the
        /// scheduler (`service::MAX_AGENT_BYTES_IN_FLIGHT`), given back once
        /// it is handled; `None` where nothing is bounded (tests).
        permit: Option<tokio::sync::OwnedSemaphorePermit>,
    },
    SessionClosed {
        agent_id: AgentId,
        session: u64,
    },
    Submit {
        matrix: Box<Matrix>,
        file_name: String,
        source: String,
        /// The submitter's span (W3C), parent of the matrix's; may be empty.
        traceparent: String,
        reply: Reply<SubmitMatrixResponse>,
    },
    Status {
        matrix_id: MatrixId,
        reply: Reply<MatrixStatus>,
    },
    Watch {
        matrix_id: MatrixId,
        reply: Reply<watch::Receiver<MatrixStatus>>,
    },
    ListAgents {
        reply: Reply<Vec<AgentInfo>>,
    },
    Cancel {
        matrix_id: MatrixId,
        reply: Reply<u32>,
    },
    /// Summaries: asked by callers, made by the results worker.
    Results(ResultsEvent),
    /// From the results worker: how a matrix's move to the archive went.
    Archive(ArchiveEvent),
    Schedule(ScheduleEvent),
    Bisection(BisectionEvent),
    Tick,
}
