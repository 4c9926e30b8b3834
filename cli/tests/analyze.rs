//! `farmctl analyze`: the exact interface other tools call, on real files.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::farmctl_bin;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn analyze(args: &[&str]) -> Output {
    std::process::Command::new(farmctl_bin())
        .arg("analyze")
        .args(args)
        .output()
        .expect("farmctl runs")
}

fn lines(values: impl IntoIterator<Item = f64>) -> String {
    values.into_iter().map(|v| format!("{v}\n")).collect()
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    })
}

#[test]
fn compare_prints_exactly_the_documented_object() {
    let dir = tempfile::tempdir().unwrap();
    // Times: the candidate is 10% slower, with ±1% noise, 10 runs a side.
    let noise = [0.0, 0.4, -0.3, 0.8, -0.9, 0.2, -0.5, 0.6, -0.1, 0.3];
    let base = write(dir.path(), "b", &lines(noise.iter().map(|n| 100.0 + n)));
    let cand = write(dir.path(), "c", &lines(noise.iter().map(|n| 110.0 - n)));
    let b = base.to_str().unwrap();
    let c = cand.to_str().unwrap();
    let v = json(&analyze(&[
        "compare",
        "--baseline",
        b,
        "--candidate",
        c,
        "--json",
    ]));
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = [
        "verdict",
        "ratio",
        "ci_low",
        "ci_high",
        "p_value",
        "n_baseline",
        "n_candidate",
    ];
    want.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(v["verdict"], "regression");
    let ratio = v["ratio"].as_f64().unwrap();
    assert!((ratio - 1.1).abs() < 0.01, "{v}");
    assert!(v["ci_low"].as_f64().unwrap() <= ratio && ratio <= v["ci_high"].as_f64().unwrap());
    assert!(v["p_value"].as_f64().unwrap() < 0.01, "{v}");
    assert_eq!(
        (v["n_baseline"].as_u64(), v["n_candidate"].as_u64()),
        (Some(10), Some(10))
    );
    // The same numbers as throughputs: 10% more is better.
    let v = json(&analyze(&[
        "compare",
        "--baseline",
        b,
        "--candidate",
        c,
        "--higher-is-better",
        "--json",
    ]));
    assert_eq!(v["verdict"], "improvement");
    // A minimum effect above the change: no regression can be called.
    let v = json(&analyze(&[
        "compare",
        "--baseline",
        b,
        "--candidate",
        c,
        "--min-effect",
        "20",
        "--json",
    ]));
    assert_ne!(v["verdict"], "regression", "{v}");
    // Without --json: one human line.
    let out = analyze(&["compare", "--baseline", b, "--candidate", c]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("regression: "), "{text}");
}

#[test]
fn changepoints_finds_a_step() {
    let dir = tempfile::tempdir().unwrap();
    // 60 points at 100, then 60 at 120, with a small deterministic wobble.
    let series: Vec<f64> = (0..120)
        .map(|i| {
            let level = if i < 60 { 100.0 } else { 120.0 };
            level + f64::from((i * 7) % 5) - 2.0
        })
        .collect();
    let f = write(dir.path(), "s", &lines(series));
    let v = json(&analyze(&[
        "changepoints",
        "--series",
        f.to_str().unwrap(),
        "--json",
    ]));
    let points = v["change_points"].as_array().unwrap();
    assert_eq!(points.len(), 1, "{v}");
    let p = &points[0];
    assert_eq!(p["index"], 60, "{v}");
    assert!(
        (p["mean_before"].as_f64().unwrap() - 100.0).abs() < 1.0,
        "{v}"
    );
    assert!(
        (p["mean_after"].as_f64().unwrap() - 120.0).abs() < 1.0,
        "{v}"
    );
    assert!(p["p_value"].as_f64().unwrap() < 0.05, "{v}");
    // A flat series has none.
    let f = write(
        dir.path(),
        "flat",
        &lines((0..50).map(|i| f64::from(i % 3))),
    );
    let v = json(&analyze(&[
        "changepoints",
        "--series",
        f.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["change_points"], serde_json::json!([]), "{v}");
    assert!(v.get("drift").is_none(), "no drift in a flat series: {v}");
}

#[test]
fn changepoints_says_a_drift_after_the_last_change() {
    let dir = tempfile::tempdir().unwrap();
    // 20 points at 100, then a step to 120 rising by 0.5 a point for 40,
    // with the same wobble as above.
    let series: Vec<f64> = (0..60)
        .map(|i| {
            let level = if i < 20 {
                100.0
            } else {
                120.0 + 0.5 * f64::from(i - 20)
            };
            level + f64::from((i * 7) % 5) - 2.0
        })
        .collect();
    let f = write(dir.path(), "s", &lines(series));
    let path = f.to_str().unwrap();
    let v = json(&analyze(&["changepoints", "--series", path, "--json"]));
    let at: Vec<u64> = v["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(at, vec![20], "{v}");
    // The last 30 points, all after the change.
    let d = &v["drift"];
    assert_eq!(
        (d["start_index"].as_u64(), d["points"].as_u64()),
        (Some(30), Some(30)),
        "{v}"
    );
    let slope = d["slope"].as_f64().unwrap();
    assert!((slope - 0.5).abs() < 0.05, "{v}");
    assert!(
        d["slope_low"].as_f64().unwrap() < 0.5 && 0.5 < d["slope_high"].as_f64().unwrap(),
        "{v}"
    );
    // A window of 15: from point 45.
    let v = json(&analyze(&[
        "changepoints",
        "--series",
        path,
        "--drift-window",
        "15",
        "--json",
    ]));
    assert_eq!(v["drift"]["start_index"], 45, "{v}");
    // In words.
    let out = analyze(&["changepoints", "--series", path]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("the series drifts +0.4"), "{text}");
    assert!(text.contains("at 20: mean"), "{text}");
    // Out of its bounds, the window is bad input.
    for bad in ["9", "1001", "x"] {
        let out = analyze(&["changepoints", "--series", path, "--drift-window", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--drift-window"),
            "{bad}"
        );
    }
}

#[test]
fn bad_files_exit_2_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good", "1\n2\n3\n");
    let good = good.to_str().unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        ("missing", "", &["missing", "No such file"]),
        ("empty", "", &["empty", "empty"]),
        (
            "word",
            "1\n2\nabc\n",
            &["word line 3", "\"abc\" is not a number"],
        ),
        ("nan", "1\nNaN\n", &["nan line 2", "not a finite number"]),
        ("inf", "inf\n2\n", &["inf line 1", "not a finite number"]),
        ("one", "42\n", &["one", "at least 2"]),
        ("blank", "1\n\n2\n", &["blank line 2", "is not a number"]),
    ];
    for (name, text, want) in cases {
        let path = dir.path().join(name);
        if *name != "missing" {
            std::fs::write(&path, text).unwrap();
        }
        let p = path.to_str().unwrap();
        for args in [
            vec!["compare", "--baseline", good, "--candidate", p, "--json"],
            vec!["compare", "--baseline", p, "--candidate", good],
            vec!["changepoints", "--series", p, "--json"],
        ] {
            let out = analyze(&args);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {err}");
            assert!(out.stdout.is_empty(), "{name}: printed {:?}", out.stdout);
            assert_eq!(err.lines().count(), 1, "{name}: {err}");
            for w in *want {
                assert!(err.contains(w), "{name} {args:?}: {err:?} lacks {w:?}");
            }
        }
    }
    // A bad flag value is bad input too.
    let out = analyze(&[
        "compare",
        "--baseline",
        good,
        "--candidate",
        good,
        "--min-effect",
        "150",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
