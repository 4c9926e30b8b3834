//! `farmctl run`, `watch` and `results` say by their exit code whether every
//! run of a matrix finished, and `farmctl run --report` writes the report a
//! user opens: one self-contained HTML file naming every cell.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::process::Command;

use common::{Farm, serial};
use serde_json::Value;

/// Two runs that outlive their one-second timeout: both fail, for real.
const FAILING: &str = r#"
name = "fails"
repetitions = 2
timeout_s = 1

[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = 30 }
"#;

/// The runs' failures in the JSON of `results`, one per run.
fn errors(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert_eq!(r["ok"], false, "{r}");
            r["error"].as_str().unwrap().to_string()
        })
        .collect()
}

const TIMED_OUT: &str = "timed out after 1 s";

#[test]
fn failed_runs_make_run_watch_and_results_exit_1() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fails.toml");
    std::fs::write(&file, FAILING).unwrap();

    // In one process.
    let out = Command::new(common::farmctl_bin())
        .args(["run", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "run: {err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "done", "{v}");
    assert_eq!(
        (
            v["counts"]["total"].as_u64(),
            v["counts"]["failed"].as_u64()
        ),
        (Some(2), Some(2)),
        "{v}"
    );
    for e in errors(&v) {
        assert!(e.contains(TIMED_OUT), "{e}");
    }

    // Through a coordinator: `watch` and `results` say the same.
    let mut farm = Farm::start(&[]);
    farm.start_agent();
    farm.wait_agents(1);
    let file = farm.write("fails.toml", FAILING);
    let id = farm.submit(&file);
    let watch = farm.farmctl(&["watch", &id]);
    assert_eq!(
        watch.status.code(),
        Some(1),
        "watch: {}",
        String::from_utf8_lossy(&watch.stderr)
    );
    let results = farm.farmctl(&["results", &id, "--json"]);
    assert_eq!(
        results.status.code(),
        Some(1),
        "results: {}",
        String::from_utf8_lossy(&results.stderr)
    );
    let v: Value = serde_json::from_slice(&results.stdout).unwrap();
    assert_eq!(v["counts"]["failed"].as_u64(), Some(2), "{v}");
    for e in errors(&v) {
        assert!(e.contains(TIMED_OUT), "{e}");
    }
}

/// Two cells, the second compared with the first; no adaptive reruns, so
/// that the report's counts are known.
const PAIR: &str = r#"
name = "report-run"
repetitions = 3
timeout_s = 60

[[workloads]]
name = "cpu-hog"
params = { threads = [1, 2], seconds = 0.2 }

[baseline]
threads = 1

[verdict]
max_runs = 3
"#;

#[test]
fn run_with_report_writes_a_self_contained_html_report_naming_its_cells() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("pair.toml");
    std::fs::write(&file, PAIR).unwrap();
    let report = dir.path().join("out.html");
    let out = Command::new(common::farmctl_bin())
        .args(["run", file.to_str().unwrap(), "--json", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "run: {err}");
    assert!(
        err.lines()
            .any(|l| l == format!("report: {}", report.display())),
        "{err}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["matrix_id"].as_str().unwrap();
    let (one, two) = (
        "cpu-hog threads=1 seconds=0.2",
        "cpu-hog threads=2 seconds=0.2",
    );
    let names: Vec<&str> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [one, two]);

    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>\n"), "{html}");
    assert!(html.ends_with("</main>\n</body>\n</html>\n"), "{html}");
    for needle in [
        format!("<title>report-run · {id} — farm report</title>"),
        format!(r#"<header><h1>report-run <span class="id">{id}</span></h1>"#),
        " · 2 cells · 6 runs: 6 finished".to_string(),
        format!(
            r#"<section class="cell" id="cell-0"><h2><span class="badge v-baseline">baseline</span> {one}</h2><p class="meta">baseline · 3 finished runs</p>"#
        ),
        r#"<section class="cell" id="cell-1"><h2><span class="badge "#.to_string(),
        format!(
            r#"</span> {two}</h2><p class="meta">compared with <a href="{}">{one}</a> · "#,
            "#cell-0"
        ),
    ] {
        assert!(html.contains(&needle), "`{needle}` missing from the report");
    }
    // Self-contained: nothing fetched from anywhere, no script.
    for banned in [
        "<script",
        "<link",
        "src=\"http",
        "href=\"http",
        "url(http",
        "@import",
    ] {
        assert!(!html.contains(banned), "`{banned}` in the report");
    }
}

/// One cell and no baseline: nothing is judged, so nothing regressed.
const ALONE: &str = r#"
name = "alone"
repetitions = 1
timeout_s = 60

[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = 0.2 }
"#;

/// `run --bisect` exits 0 only for a confirmed culprit (cli/tests/bisect.rs):
/// 1 when nothing regressed, 2 on bad input before anything runs. A store
/// kept by `--data-dir` gives its report again with no coordinator started
/// by hand.
#[test]
fn run_bisect_exits_1_when_nothing_regressed_2_on_bad_input_and_its_store_reports_again() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("alone.toml");
    std::fs::write(&file, ALONE).unwrap();
    let data = dir.path().join("data");
    let out = Command::new(common::farmctl_bin())
        .args(["run", file.to_str().unwrap(), "--bisect", "--data-dir"])
        .arg(&data)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "run --bisect: {err}");
    assert!(
        err.lines()
            .any(|l| l == "no cell regressed: nothing to bisect"),
        "{err}"
    );
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("matrix "))
        .and_then(|l| l.split(':').next())
        .unwrap_or_else(|| panic!("no matrix id in {err}"))
        .to_owned();
    assert!(
        err.lines().any(|l| l
            == format!(
                "kept in {}: `farmctl report --data-dir {} ID` writes any of its reports again",
                data.display(),
                data.display()
            )),
        "{err}"
    );

    let page = dir.path().join("again.html");
    let out = Command::new(common::farmctl_bin())
        .args(["report", "--data-dir"])
        .arg(&data)
        .arg(&id)
        .arg("-o")
        .arg(&page)
        // No coordinator anywhere: the store is all it reads.
        .env("FARM_COORDINATOR", "http://127.0.0.1:9")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("cpu-hog threads=1 seconds=0.2"), "{html}");
    assert!(html.contains(&id), "{html}");

    // Bad input: exit 2, naming it, before anything runs.
    let bad = |args: &[&str], says: &str| {
        let out = Command::new(common::farmctl_bin())
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("matrix m-"), "{args:?} ran: {err}");
    };
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "name = \"x\"\nrepetitions = 0\n").unwrap();
    bad(
        &["run", broken.to_str().unwrap(), "--bisect"],
        "broken.toml",
    );
    bad(
        &[
            "run",
            file.to_str().unwrap(),
            "--bisect",
            "--kernel-repo",
            "linux=relative/path",
        ],
        "--kernel-repo `linux=relative/path`: expected NAME=PATH",
    );
    bad(
        &["report", "--data-dir", "/nonexistent/farm", "m-1"],
        "--data-dir /nonexistent/farm: no farm store there",
    );
}
