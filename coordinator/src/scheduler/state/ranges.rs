//! The git ranges asked of agents ([`Listings`]), who waits for each
//! ([`Starter`]), and the checks of a range's ends and of an agent's
//! answer; driven by `scheduler::ranges`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use farm_proto::{CommitInfo, ListRangeResponse, MAX_COMMIT_SUBJECT_BYTES, MAX_RANGE_COMMITS};
use farm_spec::Kernel;
use farm_spec::kernel::GitKernel;

use crate::ids::AgentId;
use crate::ids::{CellIndex, MatrixId};
use crate::scheduler::reply::{Error, Reply};

/// Who waits for a bisection to start: a `StartBisection` call, or a
/// schedule's execution that found a regression (`[schedule] bisect`),
/// whose outcome goes to the log. Here, not in `bisection`, because a
/// git range's listing (`ranges`) holds it while the agent lists, and
/// bisections build on ranges, not the other way round.
pub(in crate::scheduler) enum Starter {
    Rpc(Reply<farm_proto::Bisection>),
    Schedule {
        matrix_id: MatrixId,
        cell: CellIndex,
    },
}

/// How long an agent may take to list a git range: a `git log` of
/// thousands of commits takes well under a second.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(60);

/// The most git ranges being listed at once.
pub const MAX_PENDING_LISTINGS: usize = 16;

/// Who waits for a listed range.
pub(in crate::scheduler) enum Then {
    /// A git-range bisection, created from the range.
    Bisect {
        request: farm_proto::StartBisectionRequest,
        starter: Starter,
    },
    /// A `ListRange` call.
    Reply(Reply<ListRangeResponse>),
}

/// The git ranges asked of agents and not yet answered, by request id:
/// the ranges feature's state.
#[derive(Default)]
pub(in crate::scheduler) struct Listings(pub(in crate::scheduler) HashMap<String, Listing>);

/// A git range asked of an agent.
pub(in crate::scheduler) struct Listing {
    pub(in crate::scheduler) agent_id: AgentId,
    pub(in crate::scheduler) repo: String,
    pub(in crate::scheduler) then: Then,
    pub(in crate::scheduler) deadline: Instant,
}

/// Why `kernel` (a kernel's name, or what a caller gave as one) cannot be
/// an end of a git range.
pub(in crate::scheduler) fn not_git(kernel: &str) -> Error {
    Error::Bisection(format!(
        "a git range needs git:REPO@REF kernels at both ends; this one is {:?}",
        kernel.chars().take(40).collect::<String>()
    ))
}

/// A `ListRange` refused for an end that is no kernel (`service` parses
/// them), in the words of one that is no git kernel.
pub(crate) fn range_refusal(kernel: &str) -> Error {
    as_range(not_git(kernel))
}

/// Both ends as git kernels of one repository.
pub(in crate::scheduler) fn git_ends(
    good: &Kernel,
    bad: &Kernel,
) -> Result<(GitKernel, GitKernel), Error> {
    let git = |k: &Kernel| match k {
        Kernel::Git(g) => Ok(g.clone()),
        _ => Err(not_git(&k.to_string())),
    };
    let (good, bad) = (git(good)?, git(bad)?);
    if good.repo() != bad.repo() {
        return Err(Error::Bisection(format!(
            "the ends are in two repositories, `{}` and `{}`",
            good.repo(),
            bad.repo()
        )));
    }
    Ok((good, bad))
}

/// An agent's listing of `repo`, checked: at least both ends, at most
/// [`MAX_RANGE_COMMITS`] after good, each a full commit id with a subject
/// within [`MAX_COMMIT_SUBJECT_BYTES`]; the commits as the kernels a
/// bisection measures (`git:{repo}@{commit}`), converted once here, where
/// the agent's answer enters.
pub(in crate::scheduler) fn check_listed(
    agent_id: &AgentId,
    repo: &str,
    commits: &[CommitInfo],
) -> Result<Vec<Kernel>, Error> {
    if commits.len() < 2 || commits.len() > MAX_RANGE_COMMITS + 1 {
        return Err(Error::Bisection(format!(
            "agent {agent_id} listed {} commits for the range",
            commits.len()
        )));
    }
    let malformed = || Error::Bisection(format!("agent {agent_id} listed a malformed commit"));
    commits
        .iter()
        .map(|c| {
            if c.commit.parse::<farm_spec::CommitId>().is_err()
                || c.subject.len() > MAX_COMMIT_SUBJECT_BYTES
            {
                return Err(malformed());
            }
            format!("git:{repo}@{}", c.commit)
                .parse::<Kernel>()
                .map_err(|_| malformed())
        })
        .collect()
}

/// A refusal as a `ListRange` caller is told it: the range refused, not a
/// bisection (the checks are the same).
pub(in crate::scheduler) fn as_range(e: Error) -> Error {
    match e {
        Error::Bisection(why) => Error::Range(why),
        e => e,
    }
}
