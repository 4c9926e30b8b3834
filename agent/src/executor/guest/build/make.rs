//! Building a guest kernel from a commit: a throwaway tree from `git
//! archive`, `tinyconfig` with what the runner needs merged in, and `make
//! bzImage` with ccache, as the build user, with no network.
//!
//! Built images are kept in `<cache>/builds/<key>/` where the key hashes
//! everything the image depends on: the commit, the configuration's text,
//! the arch and the compiler's version. Runs that want the same build wait
//! for one (`flock` on `<key>.lock`), and then find it done.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::{BuildUser, Commit, Trees, command};
use farm_spec::GitKernel;

/// The longest a build may take: a cold build of the farm's small guest
/// kernel is about 6 minutes on 2 cores; a distribution-sized one is far
/// longer and is no guest kernel.
pub const BUILD_TIMEOUT: Duration = Duration::from_secs(3600);

/// Lines of the build's output a failure quotes.
const FAILURE_LINES: usize = 30;

/// What the guest runner needs of a kernel, merged into every build's
/// configuration and checked in the result: a serial console and a second
/// serial port for the report, an initramfs, /proc, /sys and devtmpfs,
/// NUMA with ACPI's SRAT (QEMU's nodes), CPU hotplug, the scheduler's debug
/// and statistics files, cgroups with the CPU controller and cpusets,
/// autogroup, perf events, sockets (workloads use them), and PCI with ACPI
/// so that the guest can power off (without it `poweroff -f` only halts,
/// see `qemu::ending`).
pub const RUNNER_NEEDS: &[(&str, &str)] = &[
    ("CONFIG_64BIT", "y"),
    ("CONFIG_SMP", "y"),
    ("CONFIG_NUMA", "y"),
    ("CONFIG_ACPI", "y"),
    ("CONFIG_ACPI_NUMA", "y"),
    ("CONFIG_PCI", "y"),
    ("CONFIG_HOTPLUG_CPU", "y"),
    ("CONFIG_TTY", "y"),
    ("CONFIG_SERIAL_8250", "y"),
    ("CONFIG_SERIAL_8250_CONSOLE", "y"),
    ("CONFIG_PRINTK", "y"),
    ("CONFIG_BLK_DEV_INITRD", "y"),
    ("CONFIG_RD_GZIP", "y"),
    ("CONFIG_BINFMT_ELF", "y"),
    ("CONFIG_BINFMT_SCRIPT", "y"),
    ("CONFIG_PROC_FS", "y"),
    ("CONFIG_SYSFS", "y"),
    ("CONFIG_DEVTMPFS", "y"),
    ("CONFIG_DEBUG_FS", "y"),
    ("CONFIG_SCHED_DEBUG", "y"),
    ("CONFIG_SCHEDSTATS", "y"),
    ("CONFIG_CGROUPS", "y"),
    ("CONFIG_CGROUP_SCHED", "y"),
    ("CONFIG_FAIR_GROUP_SCHED", "y"),
    ("CONFIG_CPUSETS", "y"),
    ("CONFIG_SCHED_AUTOGROUP", "y"),
    ("CONFIG_PERF_EVENTS", "y"),
    ("CONFIG_FUTEX", "y"),
    ("CONFIG_EPOLL", "y"),
    ("CONFIG_SHMEM", "y"),
    ("CONFIG_NET", "y"),
    ("CONFIG_UNIX", "y"),
    ("CONFIG_INET", "y"),
];

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Tree(#[from] super::Error),
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
    #[error(
        "build of {kernel} ({commit}): the configuration does not hold {missing}: the kernel \
         rejected or lacks them"
    )]
    Rejected {
        kernel: String,
        commit: String,
        missing: String,
    },
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

/// The configuration fragment every build merges: [`RUNNER_NEEDS`].
pub fn fragment() -> String {
    RUNNER_NEEDS
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

/// The options of `fragment` that `config` (a `.config`) does not hold.
pub fn not_held(fragment: &[(&str, &str)], config: &str) -> Vec<String> {
    fragment
        .iter()
        .filter(|(k, v)| {
            let set = format!("{k}={v}");
            if *v == "n" {
                config.lines().any(|l| l.starts_with(&format!("{k}=")))
            } else {
                !config.lines().any(|l| l == set)
            }
        })
        .map(|(k, v)| format!("{k}={v}"))
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

impl Trees {
    /// The image of `kernel`, from the cache or built now.
    pub fn build(&self, kernel: &GitKernel, cache: &Path) -> Result<Built, Error> {
        let t = Instant::now();
        let commit = self.resolve(kernel)?;
        let name = format!("git:{}@{}", kernel.repo(), kernel.rev());
        let io = |step: &'static str| {
            let (kernel, commit) = (name.clone(), commit.to_string());
            move |source| Error::Io {
                kernel,
                commit,
                step,
                source,
            }
        };
        let fragment = fragment();
        let toolchain = compiler_version();
        let key = sha256(
            format!(
                "farm kernel build 1\ncommit {commit}\narch x86_64\nbase tinyconfig\n\
                 toolchain {toolchain}\n{fragment}"
            )
            .as_bytes(),
        );
        let builds = cache.join("builds");
        fs::create_dir_all(&builds).map_err(io("create the builds directory"))?;
        let done = builds.join(&key);
        let lock = fs::File::create(builds.join(format!("{key}.lock"))).map_err(io("lock"))?;
        // Runs of the same build wait here for the one that builds it.
        let _held = nix::fcntl::Flock::lock(lock, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| io("lock")(e.into()))?;
        if let Some(b) = found(&done, &commit) {
            return Ok(Built {
                took: t.elapsed(),
                ..b
            });
        }
        tracing::info!(kernel = %name, %commit, "building a kernel");
        let work = tempfile::Builder::new()
            .prefix("work-")
            .tempdir_in(&builds)
            .map_err(io("create a work directory"))?;
        let ccache = cache.join("ccache");
        fs::create_dir_all(&ccache).map_err(io("create the ccache directory"))?;
        for d in [work.path(), &ccache] {
            nix::unistd::chown(
                d,
                Some(nix::unistd::Uid::from_raw(self.user.uid)),
                Some(nix::unistd::Gid::from_raw(self.user.gid)),
            )
            .map_err(|e| io("chown to the build user")(e.into()))?;
        }
        let src = work.path().join("src");
        let out = work.path().join("out");
        let repo = self.repo(kernel)?;
        let fail = |step: &'static str, tail: String| Error::Failed {
            kernel: name.clone(),
            commit: commit.to_string(),
            step,
            tail,
        };
        let tar = work.path().join("src.tar");
        self.git(
            repo,
            &[
                "archive",
                "--format=tar",
                "-o",
                &tar.to_string_lossy(),
                commit.as_str(),
            ],
        )
        .map_err(|e| fail("git archive", e))?;
        let step = |what: &'static str, program: &str, args: &[&str], cwd: &Path| {
            let mut cmd = as_builder(&self.user, program, &ccache);
            cmd.args(args).current_dir(cwd);
            let r = command::run(&mut cmd, BUILD_TIMEOUT).map_err(|e| fail(what, e.to_string()))?;
            if r.status.success() {
                Ok(())
            } else {
                let text = format!(
                    "{}{}",
                    String::from_utf8_lossy(&r.stdout),
                    String::from_utf8_lossy(&r.stderr)
                );
                Err(fail(what, last_lines(&text, FAILURE_LINES)))
            }
        };
        step("mkdir", "/bin/mkdir", &["src", "out"], work.path())?;
        step(
            "tar",
            "/bin/tar",
            &["-xf", "src.tar", "-C", "src"],
            work.path(),
        )?;
        let _ = fs::remove_file(&tar);
        let o = "O=../out";
        step("make tinyconfig", "/usr/bin/make", &[o, "tinyconfig"], &src)?;
        let frag = work.path().join("farm.config");
        fs::File::create(&frag)
            .and_then(|mut f| f.write_all(fragment.as_bytes()))
            .map_err(io("write the fragment"))?;
        fs::set_permissions(&frag, fs::Permissions::from_mode(0o644))
            .map_err(io("write the fragment"))?;
        step(
            "merge the fragment",
            "/bin/sh",
            &[
                "scripts/kconfig/merge_config.sh",
                "-m",
                "-O",
                "../out",
                "../out/.config",
                "../farm.config",
            ],
            &src,
        )?;
        step(
            "make olddefconfig",
            "/usr/bin/make",
            &[o, "olddefconfig"],
            &src,
        )?;
        let config = fs::read_to_string(out.join(".config")).map_err(io("read .config"))?;
        let missing = not_held(RUNNER_NEEDS, &config);
        if !missing.is_empty() {
            return Err(Error::Rejected {
                kernel: name,
                commit: commit.to_string(),
                missing: missing.join(", "),
            });
        }
        let jobs = format!(
            "-j{}",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        );
        step(
            "make bzImage",
            "/usr/bin/make",
            &[o, &jobs, "CC=ccache gcc", "bzImage"],
            &src,
        )?;
        // Whole, then renamed: a reader never finds half a build.
        let staged = work.path().join("done");
        fs::create_dir(&staged).map_err(io("keep the image"))?;
        fs::copy(out.join("arch/x86/boot/bzImage"), staged.join("bzImage"))
            .map_err(io("keep the image"))?;
        fs::write(staged.join("config"), &config).map_err(io("keep the config"))?;
        fs::write(staged.join("commit"), format!("{commit}\n")).map_err(io("keep the commit"))?;
        fs::rename(&staged, &done).map_err(io("keep the build"))?;
        let b = found(&done, &commit).ok_or_else(|| {
            io("keep the build")(std::io::Error::other("the kept build cannot be read"))
        })?;
        tracing::info!(kernel = %name, %commit, took = ?t.elapsed(), "kernel built");
        Ok(Built {
            built: true,
            took: t.elapsed(),
            ..b
        })
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
mod tests {
    use super::*;

    #[test]
    fn a_configuration_holds_a_fragment_only_as_set() {
        let config = "CONFIG_SMP=y\nCONFIG_NUMA=m\n# CONFIG_PCI is not set\nCONFIG_HZ=250\n";
        let frag = [
            ("CONFIG_SMP", "y"),
            ("CONFIG_NUMA", "y"),
            ("CONFIG_PCI", "n"),
            ("CONFIG_HZ", "250"),
            ("CONFIG_ACPI", "y"),
        ];
        assert_eq!(not_held(&frag, config), ["CONFIG_NUMA=y", "CONFIG_ACPI=y"]);
        assert_eq!(not_held(&[("CONFIG_SMP", "n")], config), ["CONFIG_SMP=n"]);
        assert!(fragment().starts_with("CONFIG_64BIT=y\nCONFIG_SMP=y\n"));
    }
}
