use super::*;

/// Builds switch to an unprivileged user, which only root can do.
fn require_root() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests run git as another user: run them as root (scripts/test.sh does)"
    );
}

/// `nobody`: unprivileged, and on every Debian machine.
fn nobody() -> BuildUser {
    BuildUser::lookup("nobody").unwrap()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@t")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@t")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A repository of three commits, tagged `v1` and `v2`, with a branch
/// `sched/slow` at the third; readable by others, as an operator's clone is.
fn repository() -> (tempfile::TempDir, PathBuf, Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let repo = dir.path().join("linux");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "master"]);
    let mut commits = Vec::new();
    for (i, subject) in [
        "sched: base",
        "sched: faster",
        "sched: slow down on purpose",
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(repo.join("fair.c"), format!("int x = {i};\n")).unwrap();
        git(&repo, &["add", "fair.c"]);
        git(&repo, &["commit", "-q", "-m", subject]);
        commits.push(git(&repo, &["rev-parse", "HEAD"]));
    }
    git(&repo, &["tag", "v1", &commits[0]]);
    git(&repo, &["tag", "-a", "-m", "v2", "v2", &commits[1]]);
    git(&repo, &["branch", "sched/slow", &commits[2]]);
    (dir, repo, commits)
}

fn kernel(name: &str) -> GitKernel {
    match name.parse::<farm_spec::Kernel>().unwrap() {
        farm_spec::Kernel::Git(g) => g,
        other => panic!("{other} is no git kernel"),
    }
}

#[test]
fn kernel_repo_arguments() {
    assert_eq!(
        "linux=/srv/linux".parse::<Repo>().unwrap(),
        Repo {
            name: "linux".into(),
            path: "/srv/linux".into()
        }
    );
    let msg = "expected NAME=PATH, NAME of at most 64 letters, digits, _ and -, PATH absolute";
    for bad in [
        "linux",
        "/srv/x=/srv/linux",
        "linux=srv/linux",
        "=/srv/linux",
        "a b=/x",
    ] {
        let e = bad.parse::<Repo>().unwrap_err().to_string();
        assert_eq!(e, format!("--kernel-repo `{bad}`: {msg}"));
    }
}

#[test]
fn the_build_user_is_an_unprivileged_user_of_this_machine() {
    assert_eq!(
        BuildUser::lookup("root").unwrap_err().to_string(),
        "--build-user root: is root; builds run unprivileged"
    );
    assert_eq!(
        BuildUser::lookup("farm-no-such-user")
            .unwrap_err()
            .to_string(),
        "--build-user farm-no-such-user: no such user (create one, e.g. `useradd --system farm-build`)"
    );
    assert_ne!(nobody().uid, 0);
}

#[test]
fn refs_resolve_to_commits_as_the_build_user() {
    require_root();
    let (_dir, repo, commits) = repository();
    let trees = Trees::new(
        vec![Repo {
            name: "linux".into(),
            path: repo.clone(),
        }],
        nobody(),
    )
    .unwrap();
    assert_eq!(trees.names(), ["linux"]);
    let resolve = |k: &str| trees.resolve(&kernel(k)).map(|c| c.to_string());
    assert_eq!(resolve("git:linux@v1").unwrap(), commits[0]);
    // An annotated tag names its commit, not itself.
    assert_eq!(resolve("git:linux@v2").unwrap(), commits[1]);
    assert_eq!(resolve("git:linux@sched/slow").unwrap(), commits[2]);
    assert_eq!(resolve("git:linux@master").unwrap(), commits[2]);
    assert_eq!(
        resolve(&format!("git:linux@{}", &commits[1][..7])).unwrap(),
        commits[1]
    );
    assert_eq!(
        resolve("git:linux@v3").unwrap_err().to_string(),
        "kernel `git:linux@v3`: `v3` is no commit, tag or branch of repository `linux`"
    );
    assert_eq!(
        resolve("git:tip@v1").unwrap_err().to_string(),
        "kernel `git:tip@v1`: this agent has no repository `tip` (its --kernel-repo: linux)"
    );
    let c: Commit = commits[2].parse().unwrap();
    assert_eq!(c.short(), &commits[2][..12]);
}

#[test]
fn a_repository_the_build_user_cannot_read_is_refused_at_start() {
    require_root();
    let (dir, repo, _) = repository();
    let missing = dir.path().join("missing");
    let e = Trees::new(
        vec![Repo {
            name: "gone".into(),
            path: missing.clone(),
        }],
        nobody(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with(&format!(
            "--kernel-repo gone={}: not a git repository the build user nobody can read: ",
            missing.display()
        )),
        "{e}"
    );
    let twice = vec![
        Repo {
            name: "linux".into(),
            path: repo.clone(),
        },
        Repo {
            name: "linux".into(),
            path: repo,
        },
    ];
    assert_eq!(
        Trees::new(twice, nobody()).unwrap_err().to_string(),
        "--kernel-repo linux: named twice"
    );
}
