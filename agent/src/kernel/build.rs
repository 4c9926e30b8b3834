//! Building a guest kernel from a commit: a throwaway tree from `git
//! archive`, the `[build]`'s patches applied (`git apply`), its base
//! configuration (`tinyconfig` unless it says otherwise) with its fragment
//! and what the runner needs merged in, and `make bzImage` with ccache, as
//! the build user, with no network.
//!
//! Built images are kept in `<cache>/builds/<key>/` where the key hashes
//! everything the image depends on: the commit, the base configuration's
//! text, the fragment, the patches' contents, the arch and the compiler's
//! version. Runs that want the same build wait for one (`flock` on
//! `<key>.lock`), and then find it done. A build that fails for what it was
//! given (a patch that does not apply, an option Kconfig drops, a compiler
//! error) fails the same way every time: its failure is kept beside it
//! (`<key>.failed`), so the other runs of the cell fail at once with the
//! same message rather than building again. A work directory left by a
//! killed agent is removed by the next build of its key, under its lock.
//! A build reports its step as it goes ([`progress`]).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::files::{self, Kind};
use super::{BuildUser, Commit, Repo, Trees, command, trees};
use farm_spec::progress::{BuildProgress, BuildStep};
use farm_spec::{BaseConfig, GitKernel, KernelBuild};
use progress::Tracker;

pub mod progress;

/// The longest a build may take: a cold build of the farm's small guest
/// kernel is about 6 minutes on 2 cores; a distribution-sized one is far
/// longer and is no guest kernel.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(3600);

/// How often a run waiting for another run's build of its key looks
/// whether it was cancelled.
const LOCK_POLL: Duration = Duration::from_millis(100);

/// Lines of the build's output a failure quotes.
const FAILURE_LINES: usize = 30;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Tree(#[from] trees::Error),
    #[error("build of {kernel}: {source}")]
    File {
        kernel: String,
        source: files::Error,
    },
    #[error("build of {kernel} ({commit}): {step}: {source}")]
    Io {
        kernel: String,
        commit: String,
        step: &'static str,
        source: std::io::Error,
    },
    #[error("build of {kernel} ({commit}): {step} failed:\n{tail}")]
    Failed {
        kernel: String,
        commit: String,
        step: &'static str,
        tail: String,
    },
    #[error("build of {kernel}: cancelled (during {step})")]
    Cancelled { kernel: String, step: &'static str },
    #[error("build of {kernel} ({commit}): {step} did not end within {BUILD_TIMEOUT:?}")]
    TimedOut {
        kernel: String,
        commit: String,
        step: &'static str,
    },
    #[error("build of {kernel} ({commit}): patch `{patch}` does not apply:\n{tail}")]
    Patch {
        kernel: String,
        commit: String,
        patch: String,
        tail: String,
    },
    #[error(
        "build of {kernel} ({commit}): the configuration does not hold {missing}: the kernel \
         rejected or lacks them"
    )]
    Rejected {
        kernel: String,
        commit: String,
        missing: String,
    },
    /// A failure of this very build before, as it was then.
    #[error("{message}\n(kept from the first try of this build: remove {} to try again)", kept.display())]
    Kept { message: String, kept: PathBuf },
}

impl Error {
    /// Whether the build fails this way whatever the moment: for what it
    /// was given, not for the machine's state (I/O, a timeout).
    fn lasting(&self) -> bool {
        matches!(
            self,
            Error::Failed { .. } | Error::Patch { .. } | Error::Rejected { .. }
        )
    }
}

/// A built kernel.
#[derive(Debug, Clone)]
pub struct Built {
    pub commit: Commit,
    /// The image (`bzImage`).
    pub image: PathBuf,
    /// sha256 of the `.config` it was built with.
    pub config_sha256: String,
    /// Whether this call built it (false: it was in the cache).
    pub built: bool,
    pub took: Duration,
}

/// The options of `required` that `config` (a `.config`) does not hold.
pub fn not_held(required: &[farm_spec::ConfigOption], config: &str) -> Vec<String> {
    required
        .iter()
        .filter(|o| !o.held_by(config))
        .map(ToString::to_string)
        .collect()
}

/// sha256 of `bytes`, in hex.
fn sha256(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A `[build]` with its operator's files read.
struct Inputs {
    /// A named base configuration's text.
    base: Option<Vec<u8>>,
    /// Each patch's name and text, in order.
    patches: Vec<(String, Vec<u8>)>,
}

/// One build: what to build, from where.
#[derive(Clone, Copy)]
struct Job<'a> {
    repo: &'a Repo,
    /// `git:<repo>@<ref>`, as errors name it.
    name: &'a str,
    commit: &'a Commit,
    spec: &'a KernelBuild,
    inputs: &'a Inputs,
}

/// What a build's key hashes. The default build's text is what it was
/// before `[build]` existed, so its kept builds stay valid.
fn key_text(commit: &Commit, spec: &KernelBuild, inputs: &Inputs, toolchain: &str) -> String {
    let base = match (&spec.base, &inputs.base) {
        (BaseConfig::File(n), Some(text)) => format!("file {n} {}", sha256(text)),
        (b, _) => b.to_string(),
    };
    let mut text = format!(
        "farm kernel build 1\ncommit {commit}\narch x86_64\nbase {base}\n\
         toolchain {toolchain}\n{}",
        spec.merged_fragment()
    );
    for (name, body) in &inputs.patches {
        text.push_str(&format!("patch {name} {}\n", sha256(body)));
    }
    text
}

impl Trees {
    /// The image of `kernel` built as `spec` says, from the cache or built
    /// now.
    pub fn build(
        &self,
        kernel: &GitKernel,
        spec: &KernelBuild,
        cache: &Path,
    ) -> Result<Built, Error> {
        self.build_unless(kernel, spec, cache, &|| false)
    }

    /// [`Trees::build`], given up as soon as `cancelled` says so: while it
    /// waits for another run's build of the same key, and during any of
    /// its commands (whose process group is killed).
    pub fn build_unless(
        &self,
        kernel: &GitKernel,
        spec: &KernelBuild,
        cache: &Path,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Built, Error> {
        self.build_reporting(kernel, spec, cache, cancelled, &|_| {})
    }

    /// [`Trees::build_unless`], telling `report` its step as it goes
    /// (`progress::Tracker`: at each step, every `PROGRESS_EVERY`, and
    /// `None` once over); a build found kept reports nothing. A build it
    /// made is timed for the next one's estimate.
    pub fn build_reporting(
        &self,
        kernel: &GitKernel,
        spec: &KernelBuild,
        cache: &Path,
        cancelled: &dyn Fn() -> bool,
        report: &dyn Fn(Option<BuildProgress>),
    ) -> Result<Built, Error> {
        let tracker = Tracker::new(report, progress::estimate(cache));
        // Polled every 20 ms of a command and 100 ms of a wait.
        let polled = || {
            tracker.tick();
            cancelled()
        };
        let b = self.build_tracked(kernel, spec, cache, &polled, &tracker);
        if let Ok(b) = &b
            && b.built
        {
            progress::record(cache, tracker.estimate().warm, b.took);
        }
        tracker.finish();
        b
    }

    fn build_tracked(
        &self,
        kernel: &GitKernel,
        spec: &KernelBuild,
        cache: &Path,
        cancelled: &dyn Fn() -> bool,
        tracker: &Tracker<'_>,
    ) -> Result<Built, Error> {
        let t = Instant::now();
        let commit = self.resolve(kernel)?;
        let name = kernel.to_string();
        let file = |source| Error::File {
            kernel: name.clone(),
            source,
        };
        let inputs = Inputs {
            base: match &spec.base {
                BaseConfig::File(n) => Some(self.files.read(Kind::Config, n).map_err(file)?),
                _ => None,
            },
            patches: spec
                .patches
                .iter()
                .map(|p| {
                    Ok((
                        p.to_string(),
                        self.files.read(Kind::Patch, p).map_err(file)?,
                    ))
                })
                .collect::<Result<_, Error>>()?,
        };
        let io = |step: &'static str| {
            let (kernel, commit) = (name.clone(), commit.to_string());
            move |source| Error::Io {
                kernel,
                commit,
                step,
                source,
            }
        };
        let key = sha256(key_text(&commit, spec, &inputs, &compiler_version()).as_bytes());
        let builds = cache.join("builds");
        fs::create_dir_all(&builds).map_err(io("create the builds directory"))?;
        // The build user reaches its work directory and ccache through these.
        for d in [cache, builds.as_path()] {
            super::reach::traversable(d).map_err(io("open the builds directory for traversal"))?;
        }
        let done = builds.join(&key);
        let mut lock = fs::File::create(builds.join(format!("{key}.lock"))).map_err(io("lock"))?;
        // Runs of the same build wait here for the one that builds it, and
        // may be cancelled while they wait.
        let _held = loop {
            use nix::fcntl::{Flock, FlockArg};
            match Flock::lock(lock, FlockArg::LockExclusiveNonblock) {
                Ok(held) => break held,
                Err((file, nix::errno::Errno::EWOULDBLOCK)) => {
                    tracker.step(BuildStep::Waiting);
                    if cancelled() {
                        return Err(Error::Cancelled {
                            kernel: name,
                            step: "waiting for the same build",
                        });
                    }
                    lock = file;
                    std::thread::sleep(LOCK_POLL);
                }
                Err((_, e)) => return Err(io("lock")(e.into())),
            }
        };
        let asked = farm_spec::build::catalogue_name(kernel, spec);
        if let Some(b) = found(&done, &commit) {
            // Used now: the guest cache evicts builds least recently used.
            crate::cache::touch(&done);
            remember(&done, &asked);
            return Ok(Built {
                took: t.elapsed(),
                ..b
            });
        }
        let failed = builds.join(format!("{key}.failed"));
        if let Ok(message) = fs::read_to_string(&failed) {
            return Err(Error::Kept {
                message,
                kept: failed,
            });
        }
        remove_stale_work(&builds, &key);
        tracing::info!(kernel = %name, %commit, build = %spec, "building a kernel");
        tracker.step(BuildStep::Source);
        let work = tempfile::Builder::new()
            .prefix(&format!("work-{key}-"))
            .tempdir_in(&builds)
            .map_err(io("create a work directory"))?;
        let repo = self.repo(kernel)?;
        let job = Job {
            repo,
            name: &name,
            commit: &commit,
            spec,
            inputs: &inputs,
        };
        let b = self.build_in(&job, work.path(), cache, cancelled, tracker);
        let b = match b {
            Ok(b) => b,
            Err(e) => {
                if e.lasting() {
                    // Whole, then renamed, as a build is.
                    let staged = work.path().join("failed");
                    if fs::write(&staged, e.to_string())
                        .and_then(|()| fs::rename(&staged, &failed))
                        .is_err()
                    {
                        tracing::warn!(kernel = %name, "could not keep a build's failure");
                    }
                }
                return Err(e);
            }
        };
        // Whole, then renamed: a reader never finds half a build.
        fs::rename(&b, &done).map_err(io("keep the build"))?;
        let b = found(&done, &commit).ok_or_else(|| {
            io("keep the build")(std::io::Error::other("the kept build cannot be read"))
        })?;
        remember(&done, &asked);
        tracing::info!(kernel = %name, %commit, took = ?t.elapsed(), "kernel built");
        Ok(Built {
            built: true,
            took: t.elapsed(),
            ..b
        })
    }

    /// Builds in `work` and gives the directory holding the image, its
    /// `.config` and its commit, ready to be renamed into the cache.
    fn build_in(
        &self,
        job: &Job<'_>,
        work: &Path,
        cache: &Path,
        cancelled: &dyn Fn() -> bool,
        tracker: &Tracker<'_>,
    ) -> Result<PathBuf, Error> {
        let Job {
            repo,
            name,
            commit,
            spec,
            inputs,
        } = *job;
        let io = |step: &'static str| {
            let (kernel, commit) = (name.to_owned(), commit.to_string());
            move |source| Error::Io {
                kernel,
                commit,
                step,
                source,
            }
        };
        let ccache = cache.join("ccache");
        fs::create_dir_all(&ccache).map_err(io("create the ccache directory"))?;
        for d in [work, &ccache] {
            nix::unistd::chown(
                d,
                Some(nix::unistd::Uid::from_raw(self.user.uid)),
                Some(nix::unistd::Gid::from_raw(self.user.gid)),
            )
            .map_err(|e| io("chown to the build user")(e.into()))?;
        }
        let src = work.join("src");
        let out = work.join("out");
        let fail = |step: &'static str, tail: String| Error::Failed {
            kernel: name.to_owned(),
            commit: commit.to_string(),
            step,
            tail,
        };
        let tar = work.join("src.tar");
        self.git_unless(
            repo,
            &[
                "archive",
                "--format=tar",
                "-o",
                &tar.to_string_lossy(),
                commit.as_str(),
            ],
            cancelled,
        )
        .map_err(|e| {
            if cancelled() {
                Error::Cancelled {
                    kernel: name.to_owned(),
                    step: "git archive",
                }
            } else {
                // The commit resolved already: what fails here is the
                // machine (a directory the build user cannot write, a full
                // disk), not the build, so it is not kept as a lasting
                // failure that would fail every later try.
                io("git archive")(std::io::Error::other(e))
            }
        })?;
        // A command as the build user: its output's last lines when it fails.
        let marker = tracker.marker();
        let run = |what: &'static str, program: &str, args: &[&str], cwd: &Path| {
            let mut cmd = as_builder(&self.user, program, &ccache);
            // `git apply` outside a repository patches the directory it runs
            // in; it never looks for one above the work directory.
            cmd.args(args)
                .current_dir(cwd)
                .env("GIT_CEILING_DIRECTORIES", work);
            match command::run_marking(&mut cmd, BUILD_TIMEOUT, cancelled, Some(&marker)) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(Error::Cancelled {
                    kernel: name.to_owned(),
                    step: what,
                }),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Err(Error::TimedOut {
                    kernel: name.to_owned(),
                    commit: commit.to_string(),
                    step: what,
                }),
                Err(e) => Err(fail(what, e.to_string())),
                Ok(r) if r.status.success() => Ok(()),
                Ok(r) => Err(last_lines(
                    &format!(
                        "{}{}",
                        String::from_utf8_lossy(&r.stdout),
                        String::from_utf8_lossy(&r.stderr)
                    ),
                    FAILURE_LINES,
                ))
                .map_err(|tail| fail(what, tail)),
            }
        };
        run("mkdir", "/bin/mkdir", &["src", "out", "inputs"], work)?;
        run("tar", "/bin/tar", &["-xf", "src.tar", "-C", "src"], work)?;
        let _ = fs::remove_file(&tar);
        // The inputs, copied for the build user to read.
        let input = |file: &str, body: &[u8]| -> Result<String, Error> {
            let path = work.join("inputs").join(file);
            fs::write(&path, body)
                .and_then(|()| fs::set_permissions(&path, fs::Permissions::from_mode(0o644)))
                .map_err(io("write the build's inputs"))?;
            Ok(format!("../inputs/{file}"))
        };
        for (i, (patch, body)) in inputs.patches.iter().enumerate() {
            let path = input(&format!("{i:03}-{patch}"), body)?;
            run(
                "git apply",
                "/usr/bin/git",
                &["apply", "-p1", "--whitespace=nowarn", &path],
                &src,
            )
            .map_err(|e| match e {
                Error::Failed { tail, .. } => Error::Patch {
                    kernel: name.to_owned(),
                    commit: commit.to_string(),
                    patch: patch.clone(),
                    tail,
                },
                e => e,
            })?;
        }
        let o = "O=../out";
        tracker.step(BuildStep::Configure);
        match (&spec.base, &inputs.base) {
            (BaseConfig::File(_), Some(text)) => {
                let path = input("base.config", text)?;
                run(
                    "copy the base configuration",
                    "/bin/cp",
                    &[&path, "../out/.config"],
                    &src,
                )?;
            }
            (BaseConfig::Defconfig, _) => {
                run("make defconfig", "/usr/bin/make", &[o, "defconfig"], &src)?
            }
            _ => run("make tinyconfig", "/usr/bin/make", &[o, "tinyconfig"], &src)?,
        }
        let frag = input("farm.config", spec.merged_fragment().as_bytes())?;
        run(
            "merge the fragment",
            "/bin/sh",
            &[
                "scripts/kconfig/merge_config.sh",
                "-m",
                "-O",
                "../out",
                "../out/.config",
                &frag,
            ],
            &src,
        )?;
        run(
            "make olddefconfig",
            "/usr/bin/make",
            &[o, "olddefconfig"],
            &src,
        )?;
        let config = fs::read_to_string(out.join(".config")).map_err(io("read .config"))?;
        let missing = not_held(&spec.required(), &config);
        if !missing.is_empty() {
            return Err(Error::Rejected {
                kernel: name.to_owned(),
                commit: commit.to_string(),
                missing: missing.join(", "),
            });
        }
        let jobs = format!(
            "-j{}",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        tracker.step(BuildStep::Compile);
        run(
            "make bzImage",
            "/usr/bin/make",
            &[o, &jobs, "CC=ccache gcc", "bzImage"],
            &src,
        )?;
        let staged = work.join("done");
        fs::create_dir(&staged).map_err(io("keep the image"))?;
        fs::copy(out.join("arch/x86/boot/bzImage"), staged.join("bzImage"))
            .map_err(io("keep the image"))?;
        fs::write(staged.join("config"), &config).map_err(io("keep the config"))?;
        fs::write(staged.join("commit"), format!("{commit}\n")).map_err(io("keep the commit"))?;
        Ok(staged)
    }
}

/// The most names one kept build answers to (refs and tags of one commit).
const MAX_NAMES_PER_BUILD: usize = 16;

/// ccache's own bound on its directory under the guest cache, which it
/// keeps by evicting its oldest objects; the guest cache's budget does not
/// count it. A small guest configuration's objects are about 150 MB per
/// tree; 5 GB (ccache's default, written out so that it is ours) holds
/// every commit of a long bisection's neighbourhood.
pub const CCACHE_MAX_SIZE: &str = "5G";

/// The most kept builds the catalogue lists.
pub const MAX_BUILT_LISTED: usize = 1000;

/// Notes that the kept build in `dir` is what `name` asks for (the caller
/// holds its lock), so that the catalogue lists it by that name.
fn remember(dir: &Path, name: &str) {
    let path = dir.join("asked");
    let mut names = fs::read_to_string(&path).unwrap_or_default();
    let count = names.lines().count();
    if names.lines().any(|l| l == name) || count >= MAX_NAMES_PER_BUILD {
        return;
    }
    names.push_str(name);
    names.push('\n');
    // Whole, then renamed: the catalogue never reads half of it.
    let staged = dir.join("asked.new");
    if fs::write(&staged, names)
        .and_then(|()| fs::rename(&staged, &path))
        .is_err()
    {
        tracing::warn!(dir = %dir.display(), "could not note a build's name");
    }
}

/// The names of the builds kept in `cache` (`farm_spec::build::
/// catalogue_name`), sorted, at most [`MAX_BUILT_LISTED`].
pub fn kept(cache: &Path) -> Vec<String> {
    let mut out: Vec<String> = fs::read_dir(cache.join("builds"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| fs::read_to_string(e.path().join("asked")).ok())
        .flat_map(|s| s.lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    out.sort();
    out.dedup();
    out.truncate(MAX_BUILT_LISTED);
    out
}

/// Removes the work directories of `key` that a killed agent left (the
/// caller holds the key's lock, so no build of it is under way).
fn remove_stale_work(builds: &Path, key: &str) {
    let prefix = format!("work-{key}-");
    for e in fs::read_dir(builds).into_iter().flatten().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            tracing::info!(dir = %e.path().display(), "removing a killed build's work directory");
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// A kept build of `commit` in `dir`, if it is whole.
fn found(dir: &Path, commit: &Commit) -> Option<Built> {
    let image = dir.join("bzImage");
    let config = fs::read(dir.join("config")).ok()?;
    let kept = fs::read_to_string(dir.join("commit")).ok()?;
    (image.is_file() && kept.trim() == commit.as_str()).then(|| Built {
        commit: commit.clone(),
        image,
        config_sha256: sha256(&config),
        built: false,
        took: Duration::ZERO,
    })
}

/// `program` as the build user: in a network namespace of its own (a
/// build needs no network), with a cleared environment.
fn as_builder(user: &BuildUser, program: &str, ccache: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &user.home)
        .env("CCACHE_DIR", ccache)
        .env("CCACHE_MAXSIZE", CCACHE_MAX_SIZE)
        // Every build has a work directory of its own, freshly extracted:
        // paths under the builds directory are hashed as relative ones, and
        // headers newer than the compile do not forbid caching, so that a
        // commit beside a built one recompiles only what it changed.
        .env("CCACHE_BASEDIR", ccache.with_file_name("builds"))
        .env("CCACHE_NOHASHDIR", "1")
        .env("CCACHE_SLOPPINESS", "include_file_ctime,include_file_mtime")
        .env("KBUILD_BUILD_USER", "farm")
        .env("KBUILD_BUILD_HOST", "farm")
        .env("LANG", "C");
    let (uid, gid) = (user.uid, user.gid);
    // SAFETY: between fork and exec only system calls are made. The
    // namespace first, while still root; the credentials after it.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)?;
            nix::unistd::setgroups(&[])?;
            nix::unistd::setgid(nix::unistd::Gid::from_raw(gid))?;
            nix::unistd::setuid(nix::unistd::Uid::from_raw(uid))?;
            Ok(())
        });
    }
    cmd
}

/// The compiler's version line: part of a build's key.
fn compiler_version() -> String {
    Command::new("gcc")
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_owned))
        .unwrap_or_default()
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests;
