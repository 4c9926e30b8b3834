//! The trees kernels are built from: `git:<repo>@<ref>` kernels of a
//! matrix.
//!
//! The agent's operator names the repositories the agent may build from
//! (`--kernel-repo NAME=PATH`, an allow-list like `--kernel-dir`): a matrix
//! names a repository by that name and never gives a path or a URL. Every
//! git and make command runs as a dedicated unprivileged user
//! (`--build-user`), with a cleared environment and no configuration but
//! the repository's own, so that nothing a matrix names runs as root. A
//! ref reaches git as one argument after `--end-of-options`, and the
//! grammar of `farm_spec::GitKernel` leaves it no way to be an option, a
//! range or a revision expression.
//!
//! This file holds the repositories and the build user, and resolves refs
//! to commits. [`Commit`] is the one type a resolved ref has: the build's
//! cache key, the result's provenance and bisection's steps all use it.
//! The build itself is [`super::build`]; a range of commits
//! [`super::range`].

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::Duration;

use farm_spec::GitKernel;

use super::user::BuildUser;
use super::{command, files, reach};

/// How long one git command (a ref's resolution, a log) may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most of a command's stderr an error quotes.
const STDERR_TAIL: usize = 400;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "--kernel-repo `{0}`: expected NAME=PATH, NAME of at most {max} letters, digits, _ and -, \
         PATH absolute",
        max = GitKernel::MAX_REPO_LEN
    )]
    RepoArg(String),
    #[error("--kernel-repo {name}: named twice")]
    RepoTwice { name: String },
    #[error("--kernel-repo {name}={}: not a git repository the build user {user} can read: {why}", path.display())]
    NotARepo {
        name: String,
        path: PathBuf,
        user: String,
        why: String,
    },
    #[error(
        "kernel `{kernel}`: this agent has no repository `{repo}` (its --kernel-repo: {known})"
    )]
    UnknownRepo {
        kernel: String,
        repo: String,
        known: String,
    },
    #[error("kernel `{kernel}`: `{rev}` is no commit, tag or branch of repository `{repo}`")]
    Unresolved {
        kernel: String,
        repo: String,
        rev: String,
    },
    #[error("git {what} in repository `{repo}`: {why}")]
    Git {
        what: &'static str,
        repo: String,
        why: String,
    },
}

/// Why a git command gave no output: it did not run to its end (it could
/// not start, timed out or was cancelled), or it failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git: {0}")]
    Run(std::io::Error),
    /// Its exit status and its stderr's tail ([`failure`]).
    #[error("{0}")]
    Failed(Failure),
}

/// A failed command's exit status and its stderr's tail.
#[derive(Debug, thiserror::Error)]
#[error("{status}: {tail}")]
pub struct Failure {
    status: std::process::ExitStatus,
    tail: String,
}

/// A repository the operator allowed, by its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub name: String,
    pub path: PathBuf,
}

impl FromStr for Repo {
    type Err = Error;

    /// `NAME=PATH`, as `--kernel-repo` takes it.
    fn from_str(arg: &str) -> Result<Repo, Error> {
        let bad = || Error::RepoArg(farm_spec::excerpt(arg));
        let (name, path) = arg.split_once('=').ok_or_else(bad)?;
        let path = Path::new(path);
        if !GitKernel::valid_repo(name) || !path.is_absolute() {
            return Err(bad());
        }
        Ok(Repo {
            name: name.to_owned(),
            path: path.to_owned(),
        })
    }
}

/// A resolved ref: one type for the farm's commits (`farm_spec`).
pub use farm_spec::CommitId as Commit;

/// The repositories and the user that builds from them.
#[derive(Debug, Clone)]
pub struct Trees {
    repos: Vec<Repo>,
    pub(super) user: BuildUser,
    /// The operator's base configurations and patches.
    pub(super) files: files::Files,
}

impl Trees {
    /// Checks each repository as the build user would read it: a start
    /// with a repository it cannot read fails, naming it, rather than every
    /// run of it later.
    pub fn new(mut repos: Vec<Repo>, user: BuildUser) -> Result<Trees, Error> {
        for r in &mut repos {
            // As git names it: `safe.directory` matches that path exactly.
            r.path = std::fs::canonicalize(&r.path).map_err(|e| Error::NotARepo {
                name: r.name.clone(),
                path: r.path.clone(),
                user: user.name.clone(),
                why: e.to_string(),
            })?;
        }
        for (i, r) in repos.iter().enumerate() {
            if repos[..i].iter().any(|o| o.name == r.name) {
                return Err(Error::RepoTwice {
                    name: r.name.clone(),
                });
            }
        }
        let trees = Trees {
            repos,
            user,
            files: files::Files::default(),
        };
        for r in &trees.repos {
            trees
                .git(r, &["rev-parse", "--git-dir"])
                .map_err(|why| Error::NotARepo {
                    name: r.name.clone(),
                    path: r.path.clone(),
                    user: trees.user.name.clone(),
                    why: why.to_string(),
                })?;
        }
        Ok(trees)
    }

    /// With the operator's base configurations and patches.
    pub fn with_files(self, files: files::Files) -> Trees {
        Trees { files, ..self }
    }

    /// Makes the builds' directory under `cache` and checks that the build
    /// user can reach it: a start whose builds could never run fails here,
    /// naming the directory in the way, rather than every build later.
    pub fn check_cache(&self, cache: &Path) -> Result<(), reach::Error> {
        reach::check(cache, &self.user)
    }

    /// The names of the operator's files of `kind`, as the capabilities
    /// list them.
    pub fn file_names(&self, kind: files::Kind) -> Vec<String> {
        self.files.names(kind)
    }

    /// The repositories' names, as the agent's capabilities list them.
    pub fn names(&self) -> Vec<String> {
        self.repos.iter().map(|r| r.name.clone()).collect()
    }

    pub(super) fn repo(&self, kernel: &GitKernel) -> Result<&Repo, Error> {
        self.repos
            .iter()
            .find(|r| r.name == kernel.repo())
            .ok_or_else(|| Error::UnknownRepo {
                kernel: kernel.to_string(),
                repo: kernel.repo().to_owned(),
                known: self.names().join(", "),
            })
    }

    /// The commit `kernel`'s ref names in its repository now.
    pub fn resolve(&self, kernel: &GitKernel) -> Result<Commit, Error> {
        let repo = self.repo(kernel)?;
        let spec = format!("{}^{{commit}}", kernel.rev());
        let unresolved = || Error::Unresolved {
            kernel: kernel.to_string(),
            repo: repo.name.clone(),
            rev: kernel.rev().to_owned(),
        };
        let out = self
            .git(
                repo,
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    &spec,
                ],
            )
            .map_err(|_| unresolved())?;
        out.trim()
            .parse()
            .map_err(|why: farm_spec::commit::NotACommit| Error::Git {
                what: "rev-parse",
                repo: repo.name.clone(),
                why: why.to_string(),
            })
    }

    /// Runs git in `repo` as the build user and returns its stdout, or its
    /// stderr's tail when it fails.
    pub(super) fn git(&self, repo: &Repo, args: &[&str]) -> Result<String, GitError> {
        self.git_unless(repo, args, &|| false)
    }

    /// [`Trees::git`], killed as soon as `cancelled` says so.
    pub(super) fn git_unless(
        &self,
        repo: &Repo,
        args: &[&str],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<String, GitError> {
        let out = self.git_output(repo, args, cancelled)?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(GitError::Failed(failure(&out)))
        }
    }

    /// [`Trees::git`]'s command, whatever its exit status.
    pub(super) fn git_output(
        &self,
        repo: &Repo,
        args: &[&str],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<command::Output, GitError> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("git");
        // The repository is the operator's, owned by someone else: git reads
        // it only when told it is safe, and on the command line, which a
        // repository's own configuration cannot override.
        cmd.arg("-c")
            .arg(format!("safe.directory={}", repo.path.display()))
            .arg("-C")
            .arg(&repo.path)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.user.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_TERMINAL_PROMPT", "0")
            .stdin(Stdio::null())
            .uid(self.user.uid)
            .gid(self.user.gid);
        command::run_unless(&mut cmd, GIT_TIMEOUT, cancelled).map_err(GitError::Run)
    }
}

/// A failed command's status and its stderr's tail.
pub(super) fn failure(out: &command::Output) -> Failure {
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: String = err
        .chars()
        .rev()
        .take(STDERR_TAIL)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Failure {
        status: out.status,
        tail: tail.trim().to_owned(),
    }
}

#[cfg(test)]
mod tests;
