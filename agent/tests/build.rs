//! Builds a guest kernel from a git repository made from Debian's
//! `linux-source-6.1`, as an unprivileged user with ccache, boots it under
//! QEMU TCG with the agent's runner, and checks that a second request of
//! the same commit comes from the cache.
//!
//! Needs root (builds switch to the user `nobody`), the Debian packages
//! linux-source-6.1, flex, bison, bc, libelf-dev, ccache, gcc, make, git,
//! qemu-system-x86 and busybox-static: scripts/test.sh installs them. A
//! missing one fails the test; it never skips. A cold build takes about 6
//! minutes on 2 cores; ccache (in target/guest-cache, which the end-to-end test shares) makes the next ones
//! faster.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use farm_agent::executor::guest::build::{BuildUser, Repo, Trees, make};
use farm_agent::executor::guest::image::initramfs;
use farm_agent::executor::guest::machine::qemu;
use farm_agent::executor::guest::runner as job;

const SOURCE: &str = "/usr/src/linux-source-6.1.tar.xz";

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("target")
}

fn git(dir: &Path, args: &[&str]) -> String {
    // No automatic gc: packing the whole tree after its first commit takes
    // minutes and nothing here needs it.
    let out = Command::new("git")
        .args(["-c", "gc.auto=0", "-c", "maintenance.auto=false", "-C"])
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "farm")
        .env("GIT_AUTHOR_EMAIL", "farm@localhost")
        .env("GIT_COMMITTER_NAME", "farm")
        .env("GIT_COMMITTER_EMAIL", "farm@localhost")
        .env("GIT_AUTHOR_DATE", "2026-12-03T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-12-03T00:00:00Z")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The repository the tests build from: `scripts/kernel-tree.sh`'s, made
/// once in target/kernel-tree.
fn tree() -> PathBuf {
    assert!(
        nix::unistd::geteuid().is_root(),
        "builds switch to the user nobody: run as root (scripts/test.sh does)"
    );
    assert!(
        Path::new(SOURCE).is_file(),
        "{SOURCE} is missing: scripts/test.sh installs linux-source-6.1"
    );
    let script = target().with_file_name("scripts").join("kernel-tree.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(target().join("kernel-tree"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// The tree as the repository `linux`, built as `nobody`.
fn trees(repo: &Path) -> Trees {
    Trees::new(
        vec![Repo {
            name: "linux".into(),
            path: repo.to_path_buf(),
        }],
        BuildUser::lookup("nobody").unwrap(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_kernel_built_from_a_tree_boots_with_the_runner_and_is_cached() {
    let repo = tree();
    let trees = trees(&repo);
    let cache = target().join("guest-cache");
    let kernel = match "git:linux@v6.1".parse::<farm_spec::Kernel>().unwrap() {
        farm_spec::Kernel::Git(g) => g,
        other => panic!("{other}"),
    };
    let t = Instant::now();
    let built = trees
        .build(&kernel, &cache)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("build (built now: {}): {:.1?}", built.built, t.elapsed());
    assert_eq!(built.commit.to_string(), git(&repo, &["rev-parse", "v6.1"]));
    let config = std::fs::read_to_string(built.image.with_file_name("config")).unwrap();
    assert_eq!(
        make::not_held(make::RUNNER_NEEDS, &config),
        Vec::<String>::new()
    );
    // The same commit again: from the cache, the same image.
    let again = trees.build(&kernel, &cache).unwrap();
    assert!(!again.built);
    assert_eq!(again.image, built.image);
    assert_eq!(again.config_sha256, built.config_sha256);

    // It boots with the runner, reports, and powers off (it has ACPI).
    let guest_cache = target().join("guest-cache");
    let init = "#!/bin/sh\nexport PATH=/bin:/sbin:/usr/bin:/usr/sbin\n\
                mount -t proc proc /proc\nmount -t devtmpfs devtmpfs /dev\n\
                stty -F /dev/ttyS1 raw -echo\n\
                printf 'farm-job 2\\nrelease %s\\nexit 0\\nwall_s 0.10\\ndone\\n' \"$(uname -r)\" > /dev/ttyS1\n\
                poweroff -f\n";
    let initrd = initramfs::build_with(
        &guest_cache,
        Path::new(initramfs::BUSYBOX),
        initramfs::Applets::Listed,
        init,
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let run = job::run(
        &qemu::Machine::default(),
        &built.image,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let makefile = std::fs::read_to_string(repo.join("Makefile")).unwrap();
    let field = |k: &str| {
        makefile
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim_start_matches([' ', '=']).trim().to_owned())
            .unwrap()
    };
    let release = format!(
        "{}.{}.{}",
        field("VERSION"),
        field("PATCHLEVEL"),
        field("SUBLEVEL")
    );
    assert_eq!(run.release, release);
    assert_eq!((run.exit_code, run.wall_s), (0, 0.1));
}

/// A git range as bisection asks for it: v6.1, then the seven commits of
/// scripts/kernel-tree.sh oldest first, each with its subject, listed as
/// `nobody`; the refusals name what is wrong.
#[test]
fn a_git_range_lists_first_parent_commits_oldest_first() {
    use farm_agent::executor::guest::build::range::RangeError;
    let repo = tree();
    let trees = trees(&repo);
    let kernel = |s: &str| match s.parse::<farm_spec::Kernel>().unwrap() {
        farm_spec::Kernel::Git(g) => g,
        k => panic!("{k}"),
    };
    let listed = trees
        .first_parent_range(&kernel("git:linux@v6.1"), &kernel("git:linux@bisect-bad"))
        .unwrap();
    // v6.1, then what `git rev-list` gives for the range, oldest first.
    let mut expected = vec![git(&repo, &["rev-parse", "v6.1"])];
    expected.extend(
        git(&repo, &["rev-list", "--reverse", "v6.1..bisect-bad"])
            .lines()
            .map(str::to_owned),
    );
    let ids: Vec<String> = listed.iter().map(|l| l.commit.to_string()).collect();
    assert_eq!(ids.len(), 8);
    assert_eq!(ids, expected);
    assert_eq!(listed[0].subject, "Linux 6.1 (Debian's linux-source-6.1)");
    assert_eq!(
        listed[5].subject,
        "sched/core: Delay finish_task_switch() by 50us"
    );
    assert_eq!(
        listed[7].subject,
        "Documentation: scheduler: Say what bisection should find"
    );

    let err = trees
        .first_parent_range(&kernel("git:linux@bisect-bad"), &kernel("git:linux@v6.1"))
        .unwrap_err();
    assert!(matches!(err, RangeError::NotAncestor { .. }), "{err}");
    assert!(err.to_string().starts_with("`bisect-bad` ("), "{err}");
    assert!(
        err.to_string().contains("is not an ancestor of `v6.1`"),
        "{err}"
    );
    let err = trees
        .first_parent_range(&kernel("git:linux@v6.1"), &kernel("git:linux@v6.1"))
        .unwrap_err();
    assert!(matches!(err, RangeError::Empty { .. }), "{err}");
    let err = trees
        .first_parent_range(&kernel("git:linux@v6.1"), &kernel("git:linux@no-such-tag"))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "kernel `git:linux@no-such-tag`: `no-such-tag` is no commit, tag or branch of repository `linux`"
    );
    let err = trees
        .first_parent_range(&kernel("git:linux@v6.1"), &kernel("git:tip@master"))
        .unwrap_err();
    assert!(matches!(err, RangeError::TwoRepos { .. }), "{err}");
}
