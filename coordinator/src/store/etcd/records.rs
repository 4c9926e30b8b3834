//! The records as etcd values: protobuf messages (prost), one per key, so
//! that a value written by one version of the coordinator is read by the
//! next (fields are added, never renumbered).

use prost::Message;

use super::super::backend::{
    AgentRecord, Error, Execution, MatrixRecord, Result, RunRecord, RunState, ScheduleRecord,
};

#[derive(Clone, PartialEq, Message)]
pub struct StoredMatrix {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(uint64, tag = "2")]
    pub seq: u64,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub file_name: String,
    #[prost(string, tag = "5")]
    pub source: String,
    #[prost(uint64, tag = "6")]
    pub submitted_ms: u64,
    #[prost(uint32, tag = "7")]
    pub timeout_s: u32,
    // Tag 8 is not used: each cell is a key of its own (a matrix's cells
    // may be far larger than one etcd request).
    #[prost(message, optional, tag = "9")]
    pub execution: Option<StoredExecution>,
}

#[derive(Clone, PartialEq, Message)]
pub struct StoredExecution {
    #[prost(string, tag = "1")]
    pub schedule_id: String,
    #[prost(uint64, tag = "2")]
    pub at_ms: u64,
    #[prost(string, tag = "3")]
    pub kernel: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct StoredRun {
    #[prost(string, tag = "1")]
    pub run_id: String,
    #[prost(string, tag = "2")]
    pub matrix_id: String,
    #[prost(uint32, tag = "3")]
    pub cell: u32,
    #[prost(uint32, tag = "4")]
    pub repetition: u32,
    #[prost(uint64, tag = "5")]
    pub seq: u64,
    #[prost(int64, tag = "6")]
    pub state: i64,
    #[prost(uint32, tag = "7")]
    pub attempt: u32,
    #[prost(string, tag = "8")]
    pub agent_id: String,
    #[prost(message, optional, tag = "9")]
    pub result: Option<farm_proto::RunResult>,
}

#[derive(Clone, PartialEq, Message)]
pub struct StoredAgent {
    #[prost(string, tag = "1")]
    pub agent_id: String,
    #[prost(message, optional, tag = "2")]
    pub capabilities: Option<farm_proto::Capabilities>,
    #[prost(uint64, tag = "3")]
    pub registered_ms: u64,
    /// Empty: bound to no certificate.
    #[prost(string, tag = "4")]
    pub identity: String,
}

#[derive(Clone, PartialEq, Message)]
pub struct StoredSchedule {
    #[prost(string, tag = "1")]
    pub id: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub file_name: String,
    #[prost(string, tag = "4")]
    pub source: String,
    #[prost(string, tag = "5")]
    pub cron: String,
    #[prost(string, tag = "6")]
    pub on_new_kernel: String,
    #[prost(uint64, tag = "7")]
    pub created_ms: u64,
    #[prost(uint64, tag = "8")]
    pub last_cron_ms: u64,
    #[prost(string, repeated, tag = "9")]
    pub seen_kernels: Vec<String>,
    #[prost(bool, tag = "10")]
    pub cancelled: bool,
    #[prost(uint64, tag = "11")]
    pub archived_executions: u64,
}

pub fn matrix(m: &MatrixRecord) -> Vec<u8> {
    StoredMatrix {
        id: m.id.to_string(),
        seq: m.seq,
        name: m.name.clone(),
        file_name: m.file_name.clone(),
        source: m.source.clone(),
        submitted_ms: m.submitted_ms,
        timeout_s: m.timeout_s,
        execution: m.execution.as_ref().map(|e| StoredExecution {
            schedule_id: e.schedule_id.to_string(),
            at_ms: e.at_ms,
            kernel: e.kernel.clone(),
        }),
    }
    .encode_to_vec()
}

/// A matrix's record without its cells, which are keys of their own, as
/// `cancelled` is (a cancel is one put, not a read and a rewrite of the
/// whole matrix).
pub fn matrix_of(bytes: &[u8], cancelled: bool) -> Result<MatrixRecord> {
    let m = decode::<StoredMatrix>(bytes, "a matrix")?;
    Ok(MatrixRecord {
        id: m.id.parse()?,
        seq: m.seq,
        name: m.name,
        file_name: m.file_name,
        source: m.source,
        submitted_ms: m.submitted_ms,
        timeout_s: m.timeout_s,
        cancelled,
        cells: Vec::new(),
        execution: m
            .execution
            .map(|e| -> Result<Execution> {
                Ok(Execution {
                    schedule_id: e.schedule_id.parse()?,
                    at_ms: e.at_ms,
                    kernel: e.kernel,
                })
            })
            .transpose()?,
    })
}

pub fn run(r: &RunRecord) -> Vec<u8> {
    StoredRun {
        run_id: r.run_id.to_string(),
        matrix_id: r.matrix_id.to_string(),
        cell: r.cell.get(),
        repetition: r.repetition,
        seq: r.seq,
        state: r.state as i64,
        attempt: r.attempt,
        agent_id: r.agent_id.map(|a| a.to_string()).unwrap_or_default(),
        result: r.result.clone(),
    }
    .encode_to_vec()
}

pub fn run_of(bytes: &[u8]) -> Result<RunRecord> {
    let r = decode::<StoredRun>(bytes, "a run")?;
    Ok(RunRecord {
        state: RunState::from_i64(r.state)?,
        run_id: r.run_id.parse()?,
        matrix_id: r.matrix_id.parse()?,
        cell: crate::ids::CellIndex::new(r.cell),
        repetition: r.repetition,
        seq: r.seq,
        attempt: r.attempt,
        agent_id: super::super::backend::run_agent(&r.agent_id)?,
        result: r.result,
    })
}

pub fn agent(a: &AgentRecord) -> Vec<u8> {
    StoredAgent {
        agent_id: a.agent_id.to_string(),
        capabilities: Some(a.capabilities.clone()),
        registered_ms: a.registered_ms,
        identity: a
            .identity
            .as_ref()
            .map(|n| n.to_string())
            .unwrap_or_default(),
    }
    .encode_to_vec()
}

pub fn agent_of(bytes: &[u8]) -> Result<AgentRecord> {
    let a = decode::<StoredAgent>(bytes, "an agent")?;
    let identity = match a.identity.as_str() {
        "" => None,
        name => Some(
            crate::identity::Name::parse(name).map_err(|source| Error::BadIdentity {
                agent: a.agent_id.clone(),
                source,
            })?,
        ),
    };
    Ok(AgentRecord {
        agent_id: a.agent_id.parse()?,
        capabilities: a.capabilities.unwrap_or_default(),
        registered_ms: a.registered_ms,
        identity,
    })
}

pub fn schedule(s: &ScheduleRecord) -> Vec<u8> {
    StoredSchedule {
        id: s.id.to_string(),
        name: s.name.clone(),
        file_name: s.file_name.clone(),
        source: s.source.clone(),
        cron: s.cron.clone(),
        on_new_kernel: s.on_new_kernel.clone(),
        created_ms: s.created_ms,
        last_cron_ms: s.last_cron_ms,
        seen_kernels: s.seen_kernels.clone(),
        cancelled: s.cancelled,
        archived_executions: s.archived_executions,
    }
    .encode_to_vec()
}

pub fn schedule_of(bytes: &[u8]) -> Result<ScheduleRecord> {
    let s = decode::<StoredSchedule>(bytes, "a schedule")?;
    Ok(ScheduleRecord {
        id: s.id.parse()?,
        name: s.name,
        file_name: s.file_name,
        source: s.source,
        cron: s.cron,
        on_new_kernel: s.on_new_kernel,
        created_ms: s.created_ms,
        last_cron_ms: s.last_cron_ms,
        seen_kernels: s.seen_kernels,
        cancelled: s.cancelled,
        archived_executions: s.archived_executions,
    })
}

pub fn cell_of(bytes: &[u8]) -> Result<farm_proto::Cell> {
    decode(bytes, "a cell")
}

fn decode<M: Message + Default>(bytes: &[u8], what: &str) -> Result<M> {
    M::decode(bytes).map_err(|source| Error::Decode {
        what: what.to_owned(),
        source,
    })
}
