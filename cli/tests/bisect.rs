//! `farmctl bisect` on real builds and real guests, first by README's
//! command (`farmctl run examples/bisect.toml --bisect`, as root, with the
//! agent's default cache): the example matrix finds the regression between
//! `v6.1` and `bisect-bad` of scripts/kernel-tree.sh's tree, and the
//! bisection names the commit that slows every context switch
//! ("sched/core: Delay finish_task_switch() by 50us"), confirmed, in
//! ceil(log2(7)) = 3 steps, exiting 0, with both reports. Then the same found
//! without a matrix first: `farmctl bisect --good --bad --workload …` over
//! the three commits around it (their builds kept from the first).

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::process::{Command, Stdio};

use common::{Farm, browser, git, kernel_tree, serial};

#[test]
fn a_regression_between_two_commits_is_bisected_to_the_slowed_one() {
    // Its report is rendered in Chromium: missing, it fails at once.
    common::browser::chromium();
    let _g = serial();
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let repo = kernel_tree();
    // The first-parent commits after v6.1 up to bisect-bad, oldest first;
    // the last is bisect-bad itself, the matrix's bad kernel.
    let commits: Vec<String> = git(
        &repo,
        &[
            "rev-list",
            "--first-parent",
            "--reverse",
            "v6.1..bisect-bad",
        ],
    )
    .lines()
    .map(str::to_owned)
    .collect();
    assert_eq!(commits.len(), 7);
    let culprit = git(
        &repo,
        &["rev-parse", ":/sched/core: Delay finish_task_switch"],
    );
    assert_eq!(commits.iter().position(|c| *c == culprit), Some(4));

    assert!(
        nix::unistd::geteuid().is_root(),
        "README's bisect commands run as root, and so does this test (scripts/test.sh does)"
    );
    // README's command, as README writes it: as root, the agent's default
    // cache (nothing moves it), the repository and the build user nobody
    // by flags; the matrix, then the bisection of its regressed cell, and
    // both reports. (The farm after it takes them from the environment.)
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let ends_report = dir.path().join("ends.html");
    // bisect-bad is built by this run whatever an earlier run kept (on a
    // fresh machine it is anyway), so that its progress is always seen.
    let bad_commit = git(&repo, &["rev-parse", "bisect-bad"]);
    let builds = common::guest_cache().join("builds");
    for e in std::fs::read_dir(&builds).into_iter().flatten().flatten() {
        let kept = std::fs::read_to_string(e.path().join("commit")).unwrap_or_default();
        if kept.trim() == bad_commit {
            std::fs::remove_dir_all(e.path()).unwrap();
        }
    }
    let env = [
        ("FARM_KERNEL_REPOS", format!("linux={repo}")),
        ("FARM_BUILD_USER", "nobody".to_string()),
    ];
    let out = Command::new(common::farmctl_bin())
        .arg("run")
        .arg(root.join("examples/bisect.toml"))
        .args([
            "--bisect",
            "--metric",
            "tps",
            "--runs",
            "5",
            "--max-runs",
            "10",
        ])
        .arg("--kernel-repo")
        .arg(format!("linux={repo}"))
        .args(["--build-user", "nobody", "--json"])
        .arg("--report")
        .arg(&ends_report)
        .arg("--data-dir")
        .arg(&data)
        .env_remove("FARM_GUEST_CACHE")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("FARM_KERNEL_REPOS")
        .env_remove("FARM_BUILD_USER")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{err}");
    // 0: the culprit was confirmed.
    assert_eq!(out.status.code(), Some(0), "run --bisect: {err}");
    let both: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The build said what it was doing: bisect-bad's compile (minutes
    // long, so a progress line always catches it), and every build line
    // in one form.
    let building: Vec<&str> = err
        .lines()
        .filter_map(|l| l.split_once(" · building ").map(|(_, b)| b))
        .collect();
    let short = &bad_commit[..12];
    assert!(
        building
            .iter()
            .any(|b| b.starts_with(&format!("git:linux@{short} (compile, "))
                || b.starts_with("git:linux@bisect-bad (compile, ")),
        "{err}"
    );
    for b in &building {
        let (_, step) = b.split_once(" (").unwrap_or_else(|| panic!("{b}"));
        assert!(
            [
                "waiting for the same build, ",
                "source, ",
                "configure, ",
                "compile, ",
                "link, "
            ]
            .iter()
            .any(|s| step.starts_with(s)),
            "{b}"
        );
    }
    let results = both["results"]["results"].as_array().unwrap();
    let built: Vec<&serde_json::Value> = results
        .iter()
        .filter(|r| r["kernel_built"] == true)
        .collect();
    assert!(!built.is_empty(), "bisect-bad was built: {both}");
    for r in results {
        let took = r["kernel_build_ms"].as_u64().unwrap();
        let run = r["finished_unix_ms"].as_u64().unwrap() - r["started_unix_ms"].as_u64().unwrap();
        assert!(took <= run, "a build longer than its run: {r}");
    }
    let cell = both["results"]["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["index"] == 1)
        .unwrap()
        .clone();
    assert_eq!(cell["verdict"], "regression", "{cell}");
    let bisections = both["bisections"].as_array().unwrap();
    assert_eq!(bisections.len(), 1, "{both}");
    let b = bisections[0].clone();
    let bisection_id = b["bisection_id"].as_str().unwrap().to_owned();
    assert!(
        std::fs::read_to_string(&ends_report)
            .unwrap()
            .contains("<!DOCTYPE html>")
    );
    // The bisection's report beside the matrix's, named by its id.
    let page_path = dir.path().join(format!("ends.{bisection_id}.html"));
    assert!(
        err.lines()
            .any(|l| l == format!("bisection report: {}", page_path.display())),
        "{err}"
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    // Read again from the kept store, with no coordinator started by hand.
    let again = dir.path().join("again.html");
    let out = Command::new(common::farmctl_bin())
        .args(["report", "--data-dir"])
        .arg(&data)
        .arg(&bisection_id)
        .arg("-o")
        .arg(&again)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&again).unwrap(), page);

    // The farm of the rest of the test keeps that store.
    let farm = Farm::with_guests_in(dir, &env);

    // Bad requests are refused before any run, naming what is wrong: on a
    // matrix of this coordinator's (the run's has ended and been archived
    // with the embedded coordinator; a bisection starts from a live one).
    let shape = farm.write(
        "shape.toml",
        r#"
name = "shape"
repetitions = 1
timeout_s = 60
[[workloads]]
name = "cpu-hog"
params = { threads = [1, 2], seconds = 0.2 }
[baseline]
threads = 1
"#,
    );
    let id = farm.submit(&shape);
    common::wait_for(
        std::time::Duration::from_secs(120),
        "the shape matrix to finish",
        || farm.results(&id)["state"] == "done",
    );
    let refused = |args: &[&str], says: &str| {
        let out = farm.farmctl(args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    };
    refused(
        &["bisect", &id, "--cell", "0", "--git-range"],
        "cell 0 has no baseline",
    );
    refused(
        &["bisect", &id, "--cell", "7", "--git-range"],
        "there is no cell 7",
    );
    refused(
        &[
            "bisect",
            &id,
            "--cell",
            "1",
            "--metric",
            "wall_s",
            "--between",
            "git:linux@a..b",
        ],
        "kernel 1 of the bisection (\"git:linux@a..b\")",
    );
    refused(
        &[
            "bisect",
            &id,
            "--cell",
            "1",
            "--between-file",
            "/nonexistent/commits.txt",
        ],
        "/nonexistent/commits.txt",
    );
    refused(
        &["bisect", "m-nosuchmatrix", "--cell", "1", "--git-range"],
        "no matrix m-nosuchmatrix",
    );

    // The kernels between are the agent's listing of v6.1..bisect-bad.
    eprintln!("{b:#}");
    assert_eq!(b["metric"], "tps", "{b}");
    let o = &b["outcome"];
    assert_eq!(o["kind"], "culprit", "{b}");
    assert_eq!(o["confirmed"], true, "{b}");
    // Kernels: v6.1, the six commits before bisect-bad, bisect-bad.
    assert_eq!(o["first_bad"], 5, "{b}");
    assert_eq!(o["first_bad_kernel"], format!("git:linux@{culprit}"), "{b}");
    assert_eq!(
        o["first_bad_subject"], "sched/core: Delay finish_task_switch() by 50us",
        "{b}"
    );
    let kernels = b["kernels"].as_array().unwrap();
    assert_eq!(kernels.len(), 8, "{b}");
    assert_eq!(kernels[0], "git:linux@v6.1");
    assert_eq!(kernels[7], "git:linux@bisect-bad");
    assert_eq!(kernels[1], format!("git:linux@{}", commits[0]).as_str());
    assert_eq!(
        o["last_good_kernel"],
        format!("git:linux@{}", commits[3]),
        "{b}"
    );
    let steps = b["steps"].as_array().unwrap();
    let calls: Vec<(u64, &str)> = steps
        .iter()
        .map(|s| (s["kernel"].as_u64().unwrap(), s["call"].as_str().unwrap()))
        .collect();
    // 0..7: the middle 3 is good, then 5 bad, then 4 good.
    assert_eq!(
        calls,
        [(3, "same_as_good"), (5, "same_as_bad"), (4, "same_as_good")],
        "{b}"
    );

    // The confirmation's diagnosis: what moved between the neighbours.
    // Slower switches, fewer of them: 76,053 → 18,464 in one run here.
    let diagnosis = o["diagnosis"].as_array().unwrap();
    // When it is missing, what the confirmation measured of them says why.
    let switches = || {
        let m = o["matrix_ids"].as_array().unwrap().last().unwrap();
        let v = farm.results(m.as_str().unwrap());
        let mut seen = Vec::new();
        for c in v["cells"].as_array().unwrap() {
            for s in c["metrics"].as_array().into_iter().flatten() {
                if s["name"] == "context_switches" {
                    seen.push(format!("{}: {s}", c["name"]));
                }
            }
        }
        seen.join("\n")
    };
    assert!(
        diagnosis
            .iter()
            .any(|d| d.as_str().unwrap().starts_with("context-switches ×0.")),
        "{b}\n{}",
        switches()
    );

    // Shown again, as text, by its id.
    let id = bisection_id.as_str();
    let out = farm.farmctl(&["bisection", id]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{text}");
    assert!(out.status.success(), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("step 1: kernel 3 of 0..7 git:linux@"),
        "{text}"
    );
    assert!(
        lines[1].contains("(\"sched/core: Delay finish_task_switch() by 50us\") same_as_bad"),
        "{text}"
    );
    assert!(
        lines[3].starts_with(&format!(
            "first bad: git:linux@{culprit} (\"sched/core: Delay finish_task_switch() by 50us\"), kernel 5; last good: git:linux@{}",
            commits[3]
        )),
        "{text}"
    );
    assert!(lines[3].contains("; confirmed: tps x0."), "{text}");

    // `farmctl watch` follows a bisection as it follows a matrix.
    let out = farm.farmctl(&["watch", id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), text);

    // Its report, as `run --bisect --report` wrote it, draws the three
    // steps by their calls and the culprit's boundary.
    assert_eq!(
        page.matches(r#"<circle class="step good""#).count(),
        2,
        "{page}"
    );
    assert_eq!(
        page.matches(r#"<circle class="step bad""#).count(),
        1,
        "{page}"
    );
    assert_eq!(
        page.matches(r#"<line class="culprit""#).count(),
        1,
        "{page}"
    );
    assert!(
        page.contains("<td>sched/core: Delay finish_task_switch() by 50us</td>"),
        "{page}"
    );
    // As a browser draws it: no console message (a NaN in the plot, a
    // blocked load), the same marks in its DOM, and not a blank picture.
    let dir = page_path.parent().unwrap();
    let b = browser::browse(dir, &["--dump-dom".into(), browser::file_url(&page_path)]);
    let errors = browser::console(&b.stderr);
    assert!(errors.is_empty(), "the page logged:\n{}", errors.join("\n"));
    for (mark, n) in [
        (r#"<circle class="step good""#, 2),
        (r#"<circle class="step bad""#, 1),
        (r#"<line class="culprit""#, 1),
    ] {
        assert_eq!(b.stdout.matches(mark).count(), n, "{mark}: {}", b.stdout);
    }
    let (w, h, size) = browser::screenshot(dir, &browser::file_url(&page_path), &dir.join("b.png"));
    assert_eq!((w, h), browser::WINDOW);
    let (_, _, blank) = browser::screenshot(dir, "about:blank", &dir.join("blank.png"));
    assert!(
        size > 2 * blank,
        "the bisection's page ({size} bytes) looks blank ({blank})"
    );

    // Without a matrix: the ends named by flags, refused before any run
    // where the range or the flags are wrong.
    let explicit = |good: &str, bad: &str, extra: &[&str]| {
        let mut args: Vec<String> = [
            "bisect",
            "--good",
            good,
            "--bad",
            bad,
            "--workload",
            "oltp",
            "--param",
            "threads=2",
            "--param",
            "seconds=1",
            "--param",
            "tables=4",
            "--guest",
            "cpus=2",
            "--guest",
            "numa_nodes=2",
            "--guest",
            "memory_mib=512",
            "--timeout-s",
            "900",
            "--min-effect-pct",
            "5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        farm.farmctl(&args)
    };
    let refused_early = |good: &str, bad: &str, extra: &[&str], says: &str| {
        let out = explicit(good, bad, extra);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(!err.contains("measuring the ends"), "{err}");
    };
    refused_early(
        "git:linux@bisect-bad",
        "git:linux@v6.1",
        &["--git-range"],
        "`bisect-bad` (",
    );
    refused_early(
        "git:linux@bisect-bad",
        "git:linux@v6.1",
        &["--git-range"],
        "is not an ancestor of `v6.1` (",
    );
    refused_early(
        "git:linux@v6.1",
        "git:linux@no-such-tag",
        &["--git-range"],
        "`no-such-tag` is no commit, tag or branch of repository `linux`",
    );
    refused_early(
        "git:nosuch@v6.1",
        "git:nosuch@bisect-bad",
        &["--git-range"],
        "error: git range refused: no connected agent has repository `nosuch` (--kernel-repo)",
    );
    refused_early(
        "git:linux@v6.1",
        "git:linux@bisect-bad",
        &["--git-range", "--param", "nosuch=1"],
        "workloads[0].params.nosuch",
    );
    refused_early(
        "git:linux@v6.1",
        "git:linux@bisect-bad",
        &["--git-range", "--state", "autogroup"],
        "--state `autogroup`: KEY=VALUE",
    );

    // commits[3] good, commits[5] bad: one kernel between, the culprit.
    let (good, bad) = (
        format!("git:linux@{}", commits[3]),
        format!("git:linux@{}", commits[5]),
    );
    let out = explicit(
        &good,
        &bad,
        &[
            "--git-range",
            "--metric",
            "tps",
            "--runs",
            "5",
            "--max-runs",
            "10",
            "--json",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{err}");
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "2 commits after {good} up to {bad} (listed by agent "
        )),
        "{err}"
    );
    let b: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let o = &b["outcome"];
    assert_eq!(o["kind"], "culprit", "{b}");
    assert_eq!(o["confirmed"], true, "{b}");
    assert_eq!(o["first_bad"], 1, "{b}");
    assert_eq!(o["first_bad_kernel"], format!("git:linux@{culprit}"), "{b}");
    assert_eq!(
        o["first_bad_subject"], "sched/core: Delay finish_task_switch() by 50us",
        "{b}"
    );
    assert_eq!(o["last_good_kernel"], good.as_str(), "{b}");
    // The ends' matrix is the bisection's: its cell 1 is bad beside good.
    let ends = b["matrix_id"].as_str().unwrap();
    assert_eq!(b["cell"], 1, "{b}");
    let v = farm.results(ends);
    let names: Vec<&str> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{v}");
    // "oltp seconds=1 tables=4 threads=2 | kernel=git:linux@…"
    let kernel_of = |name: &str| {
        name.split(" | ")
            .find_map(|p| p.strip_prefix("kernel="))
            .map(str::to_owned)
    };
    assert_eq!(kernel_of(names[0]), Some(good.clone()), "{v}");
    assert_eq!(kernel_of(names[1]), Some(bad.clone()), "{v}");
}
