//! What a running attempt last reported doing (its kernel's build), kept
//! per run and driven by `scheduler::activity`.

use farm_spec::progress::BuildProgress;

use crate::ids::AgentId;

/// The latest report of an attempt's build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::scheduler) struct Activity {
    pub(in crate::scheduler) agent_id: AgentId,
    pub(in crate::scheduler) attempt: u32,
    pub(in crate::scheduler) build: BuildProgress,
}
