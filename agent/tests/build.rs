//! Builds a guest kernel from a git repository made from Debian's
//! `linux-source-6.1`, as an unprivileged user with ccache, boots it under
//! QEMU TCG with the agent's runner, and checks that a second request of
//! the same commit comes from the cache.
//!
//! Needs root (builds switch to the user `nobody`), the Debian packages
//! linux-source-6.1, flex, bison, bc, libelf-dev, ccache, gcc, make, git,
//! qemu-system-x86 and busybox-static: scripts/test.sh installs them. A
//! missing one fails the test; it never skips. A cold build takes about 6
//! minutes on 2 cores; ccache (in the default guest cache, /var/cache/farm/guests as root, which the end-to-end test shares) makes the next ones
//! faster.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use farm_agent::executor::guest::image::initramfs;
use farm_agent::executor::guest::machine::qemu;
use farm_agent::executor::guest::runner as job;
use farm_agent::kernel::{BuildUser, Repo, Trees, build};

const SOURCE: &str = "/usr/src/linux-source-6.1.tar.xz";

fn target() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("target")
}

/// The agent's default cache, as README's commands use it: shared with the
/// end-to-end bisection, which finds these builds there.
fn cache() -> PathBuf {
    farm_agent::executor::guest::default_cache().expect("no HOME for the default guest cache")
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
    let cache = cache();
    let kernel = match "git:linux@v6.1".parse::<farm_spec::Kernel>().unwrap() {
        farm_spec::Kernel::Git(g) => g,
        other => panic!("{other}"),
    };
    let t = Instant::now();
    let built = trees
        .build(&kernel, &default(), &cache)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("build (built now: {}): {:.1?}", built.built, t.elapsed());
    assert_eq!(built.commit.to_string(), git(&repo, &["rev-parse", "v6.1"]));
    let config = std::fs::read_to_string(built.image.with_file_name("config")).unwrap();
    assert_eq!(
        build::not_held(&default().required(), &config),
        Vec::<String>::new()
    );
    // The same commit again: from the cache, the same image.
    let again = trees.build(&kernel, &default(), &cache).unwrap();
    assert!(!again.built);
    assert_eq!(again.image, built.image);
    assert_eq!(again.config_sha256, built.config_sha256);

    // It boots with the runner, reports, and powers off (it has ACPI).
    let run = boot(&built.image);
    assert_eq!(run.release, release(&repo));
    assert_eq!((run.exit_code, run.wall_s), (0, 0.1));
}

fn default() -> farm_spec::KernelBuild {
    farm_spec::KernelBuild::default()
}

/// Boots `image` with a runner that reports its `uname -r` and powers off.
fn boot(image: &Path) -> job::GuestRun {
    let guest_cache = cache();
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
    job::run(
        &qemu::Machine::default(),
        image,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The release the tree's Makefile gives: VERSION.PATCHLEVEL.SUBLEVEL.
fn release(repo: &Path) -> String {
    let makefile = std::fs::read_to_string(repo.join("Makefile")).unwrap();
    let field = |k: &str| {
        makefile
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim_start_matches([' ', '=']).trim().to_owned())
            .unwrap()
    };
    format!(
        "{}.{}.{}",
        field("VERSION"),
        field("PATCHLEVEL"),
        field("SUBLEVEL")
    )
}

/// A matrix's `[build]` as the agent gets it: a named base configuration
/// (the default build's own `.config`), a fragment setting
/// `CONFIG_LOCALVERSION` and a patch setting the Makefile's `EXTRAVERSION`
/// change the booted kernel's `uname -r` to exactly what they say. A patch
/// that does not apply and an option Kconfig drops fail naming them, and
/// the second try of either fails at once with the kept message.
#[test]
fn a_builds_base_fragment_and_patch_make_the_kernel_and_bad_ones_are_named() {
    use farm_agent::kernel::files::Files;
    let repo = tree();
    let cache = cache();
    let kernel = match "git:linux@v6.1".parse::<farm_spec::Kernel>().unwrap() {
        farm_spec::Kernel::Git(g) => g,
        other => panic!("{other}"),
    };
    let base = trees(&repo)
        .build(&kernel, &default(), &cache)
        .unwrap_or_else(|e| panic!("{e}"));
    // Failures kept by an earlier run of this test: each is made afresh.
    for e in std::fs::read_dir(cache.join("builds")).unwrap().flatten() {
        if e.path().extension().is_some_and(|x| x == "failed") {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    let files = tempfile::tempdir().unwrap();
    let (configs, patches) = (files.path().join("configs"), files.path().join("patches"));
    std::fs::create_dir_all(&configs).unwrap();
    std::fs::create_dir_all(&patches).unwrap();
    std::fs::copy(
        base.image.with_file_name("config"),
        configs.join("farm-tiny.config"),
    )
    .unwrap();
    let makefile = std::fs::read_to_string(repo.join("Makefile")).unwrap();
    let line = makefile
        .lines()
        .position(|l| l.starts_with("EXTRAVERSION ="))
        .unwrap();
    assert_eq!(makefile.lines().nth(line), Some("EXTRAVERSION ="));
    let hunk = |from: &str, to: &str| {
        let lines: Vec<&str> = makefile.lines().collect();
        format!(
            "--- a/Makefile\n+++ b/Makefile\n@@ -{n},3 +{n},3 @@\n {}\n-{from}\n+{to}\n {}\n",
            lines[line - 1],
            lines[line + 1],
            n = line
        )
    };
    std::fs::write(
        patches.join("extraversion.patch"),
        hunk("EXTRAVERSION =", "EXTRAVERSION = -patched"),
    )
    .unwrap();
    std::fs::write(
        patches.join("stale.patch"),
        hunk("EXTRAVERSION = -rc1", "EXTRAVERSION = -rc2"),
    )
    .unwrap();
    let trees = trees(&repo).with_files(Files::new(Some(configs), Some(patches)).unwrap());
    use farm_agent::kernel::files::Kind;
    assert_eq!(trees.file_names(Kind::Config), ["farm-tiny.config"]);
    assert_eq!(
        trees.file_names(Kind::Patch),
        ["extraversion.patch", "stale.patch"]
    );

    let spec =
        |f: &[&str], p: &[&str]| farm_spec::KernelBuild::parse("farm-tiny.config", f, p).unwrap();
    let t = Instant::now();
    let built = trees
        .build(
            &kernel,
            &spec(&["CONFIG_LOCALVERSION=\"-farm\""], &["extraversion.patch"]),
            &cache,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("build (built now: {}): {:.1?}", built.built, t.elapsed());
    assert_eq!(built.commit, base.commit);
    assert_ne!(built.config_sha256, base.config_sha256);
    let config = std::fs::read_to_string(built.image.with_file_name("config")).unwrap();
    assert!(config.lines().any(|l| l == "CONFIG_LOCALVERSION=\"-farm\""));
    let run = boot(&built.image);
    assert_eq!(run.release, format!("{}-patched-farm", release(&repo)));
    // Both builds are in the catalogue by the names placement looks for.
    let kept = build::kept(&cache);
    for name in [
        "git:linux@v6.1 tinyconfig",
        "git:linux@v6.1 farm-tiny.config CONFIG_LOCALVERSION=\"-farm\" +extraversion.patch",
    ] {
        assert!(kept.iter().any(|k| k == name), "{name} not in {kept:?}");
    }

    let commit = base.commit.to_string();
    let err = trees
        .build(
            &kernel,
            &spec(&[], &["extraversion.patch", "stale.patch"]),
            &cache,
        )
        .unwrap_err()
        .to_string();
    let first = format!(
        "build of git:linux@v6.1 ({commit}): patch `stale.patch` does not apply:\n\
         error: patch failed: Makefile:{}\nerror: Makefile: patch does not apply",
        line
    );
    assert_eq!(err, first);
    let t = Instant::now();
    let again = trees
        .build(
            &kernel,
            &spec(&[], &["extraversion.patch", "stale.patch"]),
            &cache,
        )
        .unwrap_err()
        .to_string();
    assert!(t.elapsed().as_secs() < 5, "{:?}", t.elapsed());
    assert!(
        again.starts_with(&format!(
            "{first}\n(kept from the first try of this build: remove "
        )),
        "{again}"
    );

    let err = trees
        .build(&kernel, &spec(&["CONFIG_NO_SUCH_OPTION=y"], &[]), &cache)
        .unwrap_err()
        .to_string();
    let first = format!(
        "build of git:linux@v6.1 ({commit}): the configuration does not hold \
         CONFIG_NO_SUCH_OPTION=y: the kernel rejected or lacks them"
    );
    assert_eq!(err, first);
}

/// A git range as bisection asks for it: v6.1, then the seven commits of
/// scripts/kernel-tree.sh oldest first, each with its subject, listed as
/// `nobody`; the refusals name what is wrong.
#[test]
fn a_git_range_lists_first_parent_commits_oldest_first() {
    use farm_agent::kernel::range::RangeError;
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

/// A build whose run is cancelled stops at once, not at its end: its
/// commands' process group is killed, nothing is kept (neither a build
/// nor a failure), and its work directory goes.
#[test]
fn a_cancelled_build_stops_at_once_and_keeps_nothing() {
    let repo = tree();
    let cache = cache();
    let kernel = match "git:linux@v6.1".parse::<farm_spec::Kernel>().unwrap() {
        farm_spec::Kernel::Git(g) => g,
        other => panic!("{other}"),
    };
    // A build no test ever finishes: its key is new each time.
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let spec = farm_spec::KernelBuild::parse(
        "",
        &[format!("CONFIG_LOCALVERSION=\"-cancelled-{nonce}\"")],
        &[] as &[&str],
    )
    .unwrap();
    let t = Instant::now();
    let err = trees(&repo)
        .build_unless(&kernel, &spec, &cache, &|| {
            t.elapsed() > std::time::Duration::from_secs(3)
        })
        .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(err, build::Error::Cancelled { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("build of git:linux@v6.1: cancelled (during "),
        "{err}"
    );
    assert!(took < std::time::Duration::from_secs(10), "{took:?}");
    // Neither its work directory (whose fragment names the nonce) nor a
    // kept build answering to its name is left.
    let ours = format!("-cancelled-{nonce}");
    for e in std::fs::read_dir(cache.join("builds")).unwrap().flatten() {
        for file in ["inputs/farm.config", "asked"] {
            let text = std::fs::read_to_string(e.path().join(file)).unwrap_or_default();
            assert!(!text.contains(&ours), "{} holds {ours}", e.path().display());
        }
    }
}
