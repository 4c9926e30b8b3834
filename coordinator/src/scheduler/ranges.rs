//! Git ranges listed by an agent with the repository: the kernels a
//! git-range bisection searches, and `ListRange`'s answer. The coordinator
//! has no repository of its own; it asks one connected agent that lists
//! the repository, takes the answer only from that agent, checks it, and
//! gives up after [`LISTING_TIMEOUT`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use farm_proto::{
    CommitInfo, Commits, CoordinatorMessage, ListCommits, ListRangeResponse,
    MAX_COMMIT_SUBJECT_BYTES, MAX_RANGE_COMMITS, coordinator_message,
};
use farm_spec::Kernel;
use farm_spec::kernel::GitKernel;
use tracing::{info, warn};

use super::provenance::Rejection;
use super::{Error, Reply, Scheduler, Starter, random_id};
use crate::ids::AgentId;

/// How long an agent may take to list a git range: a `git log` of
/// thousands of commits takes well under a second.
pub const LISTING_TIMEOUT: Duration = Duration::from_secs(60);

/// The most git ranges being listed at once.
pub const MAX_PENDING_LISTINGS: usize = 16;

/// Who waits for a listed range.
pub(super) enum Then {
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
pub(super) struct Listings(HashMap<String, Listing>);

/// A git range asked of an agent.
struct Listing {
    agent_id: AgentId,
    repo: String,
    then: Then,
    deadline: Instant,
}

/// Why `kernel` (a kernel's name, or what a caller gave as one) cannot be
/// an end of a git range.
fn not_git(kernel: &str) -> Error {
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
pub(super) fn git_ends(good: &Kernel, bad: &Kernel) -> Result<(GitKernel, GitKernel), Error> {
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
pub(super) fn check_listed(
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
fn as_range(e: Error) -> Error {
    match e {
        Error::Bisection(why) => Error::Range(why),
        e => e,
    }
}

impl Scheduler {
    /// `ListRange`: the range between two git kernels, as an agent lists it.
    pub(super) fn list_range(
        &mut self,
        good: &Kernel,
        bad: &Kernel,
        reply: Reply<ListRangeResponse>,
    ) {
        self.request_range(good, bad, Then::Reply(reply));
    }

    /// Asks an agent with the ends' repository for the commits between;
    /// `then` gets the answer, or the refusal at once.
    pub(super) fn request_range(&mut self, good: &Kernel, bad: &Kernel, then: Then) {
        let checked = (|| {
            if self.listings.0.len() >= MAX_PENDING_LISTINGS {
                return Err(Error::Busy {
                    what: "the git ranges being listed",
                    limit: "MAX_PENDING_LISTINGS",
                    capacity: MAX_PENDING_LISTINGS,
                });
            }
            let (good, bad) = git_ends(good, bad)?;
            let repo = good.repo().to_owned();
            let agent_id = self
                .agents
                .iter()
                .find(|(_, a)| a.session.is_some() && a.capabilities.kernel_repos.contains(&repo))
                .map(|(id, _)| *id)
                .ok_or_else(|| {
                    Error::Bisection(format!(
                        "no connected agent has repository `{repo}` (--kernel-repo)"
                    ))
                })?;
            Ok((good, bad, repo, agent_id))
        })();
        let (good, bad, repo, agent_id) = match checked {
            Ok(c) => c,
            Err(e) => return self.listed(then, e),
        };
        let request_id = random_id("l");
        info!(agent = %agent_id, repo = %repo, request = %request_id, "listing a git range");
        self.outbox.push((
            agent_id,
            CoordinatorMessage {
                msg: Some(coordinator_message::Msg::ListCommits(ListCommits {
                    request_id: request_id.clone(),
                    repo: repo.clone(),
                    good: good.rev().to_owned(),
                    bad: bad.rev().to_owned(),
                })),
            },
        ));
        self.listings.0.insert(
            request_id,
            Listing {
                agent_id,
                repo,
                then,
                deadline: Instant::now() + LISTING_TIMEOUT,
            },
        );
    }

    /// An agent's answer to a `ListCommits`: taken only from the agent it
    /// was asked of.
    pub(super) fn commits_listed(&mut self, agent_id: &AgentId, c: Commits) {
        let ours = self
            .listings
            .0
            .get(&c.request_id)
            .is_some_and(|l| l.agent_id == *agent_id);
        if !ours {
            self.reject(agent_id, Rejection::UnaskedCommits, &c.request_id);
            return;
        }
        let Some(l) = self.listings.0.remove(&c.request_id) else {
            return;
        };
        let r = if c.error.is_empty() {
            check_listed(agent_id, &l.repo, &c.commits).map(|kernels| (kernels, c.commits))
        } else {
            Err(Error::Bisection(format!(
                "agent {agent_id}: {}",
                c.error.chars().take(400).collect::<String>()
            )))
        };
        match (l.then, r) {
            (Then::Reply(reply), r) => {
                let r = r
                    .map(|(_, commits)| ListRangeResponse {
                        agent_id: agent_id.to_string(),
                        commits,
                    })
                    .map_err(as_range);
                self.reply(reply, r);
            }
            (Then::Bisect { request, starter }, Ok((kernels, commits))) => {
                let r = self.range_bisection(&request, &kernels, &commits);
                self.started(starter, r);
            }
            (Then::Bisect { starter, .. }, Err(e)) => self.started(starter, Err(e)),
        }
    }

    /// Whoever waits for a listing that failed.
    fn listed(&mut self, then: Then, e: Error) {
        match then {
            Then::Reply(reply) => self.reply(reply, Err(as_range(e))),
            Then::Bisect { starter, .. } => self.started(starter, Err(e)),
        }
    }

    /// Listings whose agent did not answer in time fail their request.
    pub(super) fn expire_listings(&mut self) {
        let now = Instant::now();
        let late: Vec<String> = self
            .listings
            .0
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for id in late {
            if let Some(l) = self.listings.0.remove(&id) {
                warn!(agent = %l.agent_id, request = %id, "git range not listed in time");
                let e = Error::Unanswered(format!(
                    "agent {} did not list the git range of repository `{}` within {} s",
                    l.agent_id,
                    l.repo,
                    LISTING_TIMEOUT.as_secs()
                ));
                self.listed(l.then, e);
            }
        }
    }
}
