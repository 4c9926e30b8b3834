//! Why an agent's message was dropped ([`Rejection`]), logged once per
//! agent and reason ([`Rejections`]), and the limits a result must hold;
//! driven by `scheduler::provenance`.

use std::collections::HashSet;
use std::time::Duration;

use crate::ids::AgentId;

/// The most distinct (agent, reason) pairs remembered for logging once;
/// past it the set starts again, so a storm of new agent ids cannot grow it.
pub(in crate::scheduler) const MAX_LOGGED_REJECTIONS: usize = 10_000;
/// The largest value any metric may have. Larger ones are not measurements
/// (a 10-minute run on 10,000 CPUs makes 6e6 CPU-seconds, a billion events
/// per second for a day 1e14), and they would overflow the statistics.
pub const MAX_METRIC_VALUE: f64 = 1e15;
/// What a wall time may exceed the time since the coordinator leased the
/// attempt by: clocks of agents and coordinator tick apart, and a result
/// waits in the agent's outbox while it reconnects.
pub(in crate::scheduler) const WALL_TIME_SLACK: Duration = Duration::from_secs(120);
/// The most metrics one result may carry: a workload reports a dozen or
/// two, and every one becomes a series in summaries and on `/metrics`.
pub const MAX_METRICS_PER_RESULT: usize = 256;

/// Why a message of an agent was dropped: the `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(in crate::scheduler) enum Rejection {
    /// A result for a run this coordinator does not have.
    UnknownRun,
    /// A result for an attempt that was never leased to the sender.
    ResultNotLeased,
    /// A progress report for an attempt the sender does not hold.
    ProgressNotLeased,
    /// A progress report of the holder with figures no build has
    /// (`farm_spec::progress`).
    BadProgress,
    /// A `Hello` claiming to run an attempt never leased to the sender.
    ClaimNotLeased,
    /// A `Register` or `Hello` for an agent id whose session is live.
    Takeover,
    /// A `Register` or `Hello` for an agent id bound to another identity.
    IdentityMismatch,
    /// Commits for a listing never asked of the sender.
    UnaskedCommits,
}

impl Rejection {
    pub(in crate::scheduler) fn reason(self) -> &'static str {
        match self {
            Rejection::UnknownRun => "unknown_run",
            Rejection::ResultNotLeased => "result_not_leased",
            Rejection::ProgressNotLeased => "progress_not_leased",
            Rejection::BadProgress => "bad_progress",
            Rejection::ClaimNotLeased => "claim_not_leased",
            Rejection::Takeover => "session_takeover",
            Rejection::IdentityMismatch => "identity_mismatch",
            Rejection::UnaskedCommits => "unasked_commits",
        }
    }
}

/// Once-per-(agent, reason) logging.
#[derive(Default)]
pub(in crate::scheduler) struct Rejections {
    pub(in crate::scheduler) logged: HashSet<(AgentId, Rejection)>,
}
