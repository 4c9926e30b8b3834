//! What a store is — the records the scheduler keeps, the changes to them
//! ([`Op`]), what a restart reads back ([`Snapshot`]), the [`Backend`]
//! trait and its errors — apart from the backends that implement it: each
//! backend imports this, never `store.rs`, which re-exports it.

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("store: corrupt record {what}: {source}")]
    Decode {
        what: String,
        source: prost::DecodeError,
    },
    #[error("store: {0}")]
    BadRunId(#[from] crate::ids::BadRunId),
    #[error("store: {0}")]
    BadMatrixId(#[from] crate::ids::BadMatrixId),
    #[error("store: {0}")]
    BadAgentId(#[from] crate::ids::BadAgentId),
    #[error("store: {0}")]
    BadBisectionId(#[from] crate::ids::BadBisectionId),
    #[error("store: {0}")]
    BadScheduleId(#[from] crate::ids::BadScheduleId),
    #[error("store: unknown run state {0} in the database")]
    BadState(i64),
    #[error("store: agent {agent}: {source}")]
    BadIdentity {
        agent: String,
        source: crate::identity::Error,
    },
    #[error("store: etcd: {0}")]
    Etcd(String),
    /// etcd did not answer a request for as long as it is retried
    /// (`etcd::RETRY_FOR`): whether the batch was written is not known.
    #[error("store: etcd unreachable: {0}")]
    Unreachable(String),
    /// The leader's term ended (why) while a request was being retried:
    /// whether the batch was written is not known.
    #[error("store: the leader's term ended: {0}")]
    TermEnded(String),
    /// The leader key is gone or another's: this coordinator no longer
    /// leads, and wrote nothing.
    #[error("store: this coordinator is no longer the leader; nothing was written")]
    NotLeader,
    #[error("store: {what} is {bytes} bytes; one etcd request holds at most {limit}")]
    TooLarge {
        what: String,
        bytes: usize,
        limit: usize,
    },
    #[error("store: matrix {0} exists already")]
    Exists(crate::ids::MatrixId),
    #[error("store: identity {identity} is bound to agent {agent} already")]
    IdentityTaken { identity: String, agent: String },
    #[error("store: unknown key {0:?} under the prefix")]
    UnknownKey(String),
    #[error("store: {0}, which is not stored")]
    Orphan(String),
}

impl Error {
    /// Why a leader's term ends on this failure of a write, or `None` if
    /// it does not mean that: its writes can no longer be known to hold.
    pub fn lost_leadership(&self) -> Option<String> {
        match self {
            Error::NotLeader => Some("the leader key is gone or another coordinator's".into()),
            Error::Unreachable(why) => Some(format!("etcd unreachable ({why})")),
            Error::TermEnded(why) => Some(why.clone()),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a run is in its life. Stored as an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunState {
    Queued = 0,
    Assigned = 1,
    Finished = 2,
    Failed = 3,
    Cancelled = 4,
}

impl RunState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunState::Finished | RunState::Failed | RunState::Cancelled
        )
    }

    pub(crate) fn from_i64(v: i64) -> Result<RunState> {
        Ok(match v {
            0 => RunState::Queued,
            1 => RunState::Assigned,
            2 => RunState::Finished,
            3 => RunState::Failed,
            4 => RunState::Cancelled,
            other => return Err(Error::BadState(other)),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct MatrixRecord {
    /// Parsed as the store loads it.
    pub id: crate::ids::MatrixId,
    /// Submission order; older matrices are served first.
    pub seq: u64,
    pub name: String,
    pub file_name: String,
    pub source: String,
    pub submitted_ms: u64,
    pub timeout_s: u32,
    pub cancelled: bool,
    /// Typed: converted from the stored wire form once, by [`typed`], as
    /// the store loads them.
    pub cells: Vec<crate::cell::Cell>,
    /// Set when the matrix is an execution of a schedule.
    pub execution: Option<Execution>,
}

/// What made a schedule run a matrix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Execution {
    pub schedule_id: crate::ids::ScheduleId,
    /// The cron instant, or when the trigger saw the kernel (unix ms).
    pub at_ms: u64,
    /// The kernel a trigger ran it for; empty for a cron instant.
    pub kernel: String,
}

/// A continuous matrix: its file, when it runs, what it has run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    pub id: crate::ids::ScheduleId,
    pub name: String,
    pub file_name: String,
    pub source: String,
    /// Five-field cron, UTC; empty: none.
    pub cron: String,
    /// Kernel glob; empty: no trigger.
    pub on_new_kernel: String,
    pub created_ms: u64,
    /// The latest cron instant executed (at creation: the creation time),
    /// so that a restart neither repeats nor forgets one.
    pub last_cron_ms: u64,
    /// Kernels the trigger has executed for, or that were there already
    /// when the schedule was made.
    pub seen_kernels: Vec<String>,
    pub cancelled: bool,
    /// Its executions that ended and left live state for the archive.
    pub archived_executions: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Parsed as the store loads it; its matrix, cell and repetition are
    /// the fields beside it.
    pub run_id: crate::ids::RunId,
    pub matrix_id: crate::ids::MatrixId,
    pub cell: crate::ids::CellIndex,
    pub repetition: u32,
    /// Dispatch order within the matrix.
    pub seq: u64,
    pub state: RunState,
    /// How many times the run has been assigned.
    pub attempt: u32,
    /// Its agent since it was first assigned (stored as an empty string
    /// before).
    pub agent_id: Option<crate::ids::AgentId>,
    pub result: Option<farm_proto::RunResult>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    pub agent_id: crate::ids::AgentId,
    pub capabilities: farm_proto::Capabilities,
    pub registered_ms: u64,
    /// The certificate name the agent id is bound to (mutual TLS).
    pub identity: Option<crate::identity::Name>,
}

/// A stored run's agent: none before its first assignment, stored empty.
pub(super) fn run_agent(stored: &str) -> Result<Option<crate::ids::AgentId>> {
    match stored {
        "" => Ok(None),
        id => Ok(Some(id.parse()?)),
    }
}

/// One change; a slice of them is applied atomically.
#[derive(Debug, Clone)]
pub enum Op {
    PutMatrix(Box<MatrixRecord>, Vec<RunRecord>),
    PutRun(Box<RunRecord>),
    CancelMatrix(crate::ids::MatrixId),
    PutAgent(Box<AgentRecord>),
    /// An agent absent past its expiry is forgotten.
    ForgetAgent(crate::ids::AgentId),
    PutSchedule(Box<ScheduleRecord>),
    /// A bisection, created or advanced (`crate::bisection`).
    PutBisection(Box<farm_proto::Bisection>),
    /// An ended matrix is in the archive: it leaves live state, with its
    /// `cells` cells and these runs.
    ForgetMatrix {
        id: crate::ids::MatrixId,
        cells: u32,
        runs: Vec<crate::ids::RunId>,
    },
}

/// A stored matrix whose cells no longer convert (a damaged store, or one
/// written by a build that knew values this one does not). It stays in the
/// store as it is — nothing is lost — and the scheduler shows it failed
/// with the reason, and serves every other matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    /// Without its cells.
    pub record: MatrixRecord,
    pub error: crate::cell::Error,
}

/// A matrix as a backend reads it back (`record` without its cells, and
/// its stored cells in index order) into `snap`: its cells converted, or,
/// when one does not convert, among the unreadable ones.
pub(super) fn typed(mut record: MatrixRecord, cells: &[farm_proto::Cell], snap: &mut Snapshot) {
    match crate::cell::all(cells) {
        Ok(cells) => {
            record.cells = cells;
            snap.matrices.push(record);
        }
        Err(error) => snap.unreadable.push(Unreadable { record, error }),
    }
}

/// Everything the scheduler needs to resume after a restart.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub matrices: Vec<MatrixRecord>,
    /// Matrices whose cells did not convert, by submission order.
    pub unreadable: Vec<Unreadable>,
    pub runs: Vec<RunRecord>,
    pub agents: Vec<AgentRecord>,
    pub schedules: Vec<ScheduleRecord>,
    /// By creation time.
    pub bisections: Vec<farm_proto::Bisection>,
}

/// Where the scheduler's records live.
///
/// `apply` is all or nothing, and durable when it returns: a batch that
/// fails leaves the store as it was. `PutMatrix` creates: a matrix id that
/// exists already fails its batch. `load` gives back every record as the
/// last successful batch left it.
pub trait Backend: Send {
    fn apply(&mut self, ops: &[Op]) -> Result<()>;
    /// Everything, and what the backend checks batches against from now on.
    fn load(&mut self) -> Result<Snapshot>;
    /// The largest one record (a run with its result, a matrix without its
    /// cells, a cell) may be: callers refuse larger ones where they enter,
    /// since a batch holding one would fail whole.
    fn max_value_bytes(&self) -> usize {
        usize::MAX
    }
}
