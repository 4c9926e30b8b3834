//! A git range for bisection: the first-parent commits from a good ref to
//! a bad one, as `git bisect --first-parent` would walk them, listed as the
//! build user with the same hardened git as ref resolution.

use farm_proto::{MAX_COMMIT_SUBJECT_BYTES, MAX_RANGE_COMMITS};
use farm_spec::GitKernel;

use super::trees::{Error, failure};
use super::{Commit, Trees};

/// One commit of a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub commit: Commit,
    /// The subject line, cut to `MAX_COMMIT_SUBJECT_BYTES` on a character
    /// boundary, control characters dropped.
    pub subject: String,
}

#[derive(Debug, thiserror::Error)]
pub enum RangeError {
    #[error(transparent)]
    Tree(#[from] Error),
    #[error("a range is within one repository; good is in `{good}`, bad in `{bad}`")]
    TwoRepos { good: String, bad: String },
    #[error(
        "`{good}` ({good_commit}) is not an ancestor of `{bad}` ({bad_commit}) in repository `{repo}`"
    )]
    NotAncestor {
        repo: String,
        good: String,
        bad: String,
        good_commit: String,
        bad_commit: String,
    },
    #[error("`{good}` and `{bad}` are the same commit: there is nothing between them")]
    Empty { good: String, bad: String },
    #[error("the range has more than {MAX_RANGE_COMMITS} first-parent commits (MAX_RANGE_COMMITS)")]
    TooLong,
    #[error("git log in repository `{repo}`: {why}")]
    Log { repo: String, why: String },
}

impl Trees {
    /// `good`'s commit, then the first-parent commits after it up to `bad`'s
    /// (included), oldest first. `good` must be an ancestor of `bad`.
    pub fn first_parent_range(
        &self,
        good: &GitKernel,
        bad: &GitKernel,
    ) -> Result<Vec<Listed>, RangeError> {
        if good.repo() != bad.repo() {
            return Err(RangeError::TwoRepos {
                good: good.repo().to_owned(),
                bad: bad.repo().to_owned(),
            });
        }
        let repo = self.repo(good)?;
        let (g, b) = (self.resolve(good)?, self.resolve(bad)?);
        if g == b {
            return Err(RangeError::Empty {
                good: good.rev().to_owned(),
                bad: bad.rev().to_owned(),
            });
        }
        let log = |why: String| RangeError::Log {
            repo: repo.name.clone(),
            why,
        };
        // Exit 1 is "not an ancestor"; anything else but 0 is git failing.
        let out = self
            .git_output(
                repo,
                &["merge-base", "--is-ancestor", g.as_str(), b.as_str()],
                &|| false,
            )
            .map_err(|e| log(e.to_string()))?;
        match out.status.code() {
            Some(0) => {}
            Some(1) => {
                return Err(RangeError::NotAncestor {
                    repo: repo.name.clone(),
                    good: good.rev().to_owned(),
                    bad: bad.rev().to_owned(),
                    good_commit: g.short().to_owned(),
                    bad_commit: b.short().to_owned(),
                });
            }
            _ => return Err(log(failure(&out).to_string())),
        }
        // Newest first, one more than the limit, so that a longer range is
        // refused rather than cut (`--reverse` applies after the count).
        let range = format!("{}..{}", g.as_str(), b.as_str());
        let max = format!("--max-count={}", MAX_RANGE_COMMITS + 1);
        let text = self
            .git(
                repo,
                &[
                    "log",
                    "--first-parent",
                    "--no-decorate",
                    &max,
                    "--format=%H %s",
                    &range,
                ],
            )
            .map_err(|e| log(e.to_string()))?;
        let mut listed: Vec<Listed> = Vec::new();
        for line in text.lines() {
            let (id, subject) = line.split_once(' ').unwrap_or((line, ""));
            let commit: Commit = id
                .parse()
                .map_err(|e: farm_spec::commit::NotACommit| log(e.to_string()))?;
            listed.push(Listed {
                commit,
                subject: subject_of(subject),
            });
        }
        if listed.len() > MAX_RANGE_COMMITS {
            return Err(RangeError::TooLong);
        }
        if listed.first().map(|l| &l.commit) != Some(&b) {
            return Err(log(format!("the log does not start at {}", b.short())));
        }
        let good_subject = self
            .git(
                repo,
                &["log", "-1", "--no-decorate", "--format=%s", g.as_str()],
            )
            .map_err(|e| log(e.to_string()))?;
        listed.push(Listed {
            commit: g,
            subject: subject_of(good_subject.trim_end()),
        });
        listed.reverse();
        Ok(listed)
    }
}

/// Why a `ListCommits` is not answered.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("this agent builds no kernels from trees (no --kernel-repo)")]
    NoTrees,
    #[error("`{}` is not a git ref", farm_spec::excerpt(.0))]
    NotGit(String),
    #[error(transparent)]
    Kernel(#[from] farm_spec::kernel::KernelError),
    #[error(transparent)]
    Range(#[from] RangeError),
}

/// A `ListCommits` answered from the agent's trees: the refs are parsed as
/// a git kernel's, so nothing reaches git that the kernels axis would not
/// pass.
pub fn answer(
    trees: Option<&Trees>,
    l: &farm_proto::ListCommits,
) -> Result<Vec<farm_proto::CommitInfo>, AnswerError> {
    let trees = trees.ok_or(AnswerError::NoTrees)?;
    let kernel = |rev: &str| -> Result<farm_spec::GitKernel, AnswerError> {
        match format!("git:{}@{rev}", l.repo).parse::<farm_spec::Kernel>()? {
            farm_spec::Kernel::Git(g) => Ok(g),
            _ => Err(AnswerError::NotGit(rev.to_owned())),
        }
    };
    let listed = trees.first_parent_range(&kernel(&l.good)?, &kernel(&l.bad)?)?;
    Ok(listed
        .into_iter()
        .map(|c| farm_proto::CommitInfo {
            commit: c.commit.to_string(),
            subject: c.subject,
        })
        .collect())
}

fn subject_of(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().filter(|c| !c.is_control()) {
        if out.len() + c.len_utf8() > MAX_COMMIT_SUBJECT_BYTES {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::subject_of;

    #[test]
    fn subjects_are_cut_on_a_character_boundary_without_controls() {
        assert_eq!(subject_of("sched/core: a\tb"), "sched/core: ab");
        let long = "é".repeat(200);
        let s = subject_of(&long);
        assert_eq!(s.len(), 160);
        assert_eq!(s.chars().count(), 80);
    }
}
