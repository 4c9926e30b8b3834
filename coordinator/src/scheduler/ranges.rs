//! Git ranges listed by an agent with the repository: the kernels a
//! git-range bisection searches, and `ListRange`'s answer. The coordinator
//! has no repository of its own; it asks one connected agent that lists
//! the repository, takes the answer only from that agent, checks it, and
//! gives up after [`LISTING_TIMEOUT`].

use std::time::Instant;

use farm_proto::{
    Commits, CoordinatorMessage, ListCommits, ListRangeResponse, coordinator_message,
};
use farm_spec::Kernel;
use tracing::{info, warn};

use super::state::provenance::Rejection;
use super::state::ranges::{
    LISTING_TIMEOUT, Listing, MAX_PENDING_LISTINGS, Then, as_range, check_listed, git_ends,
};
use super::{Error, Reply, Scheduler};
use crate::ids::AgentId;

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

fn random_id(prefix: &str) -> String {
    let mut b = [0u8; 6];
    rand::fill(&mut b);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{prefix}-{hex}")
}
