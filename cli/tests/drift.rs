//! A step and a drift, end to end: a real coordinator and agent run the same
//! matrix 24 times, Debian's Prometheus scrapes the coordinator with the
//! farm's alert rules, and the history alert must fire where one series
//! steps and not where the other drifts, which gets a drift finding instead.
//!
//! The benchmark is a stand-in for a user-built STREAM (`stream-bin`, found
//! in the agent's `--tools-dir`): a script that prints STREAM's table with
//! the rate the test wrote for its thread count, so that each matrix's
//! figure is known exactly. Needs the Debian package `prometheus`
//! (scripts/test.sh installs it); fails, naming it, where it is missing.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::prometheus::{self, DRIFT, alerts, dashboard_queries, query, repo};
use common::{Farm, scrape, serial, wait_for};
use serde_json::Value;

/// STREAM's output with every rate the figure in `rate-$OMP_NUM_THREADS`.
const STREAM: &str = r#"#!/bin/sh
r=$(cat "$(dirname "$0")/rate-$OMP_NUM_THREADS")
echo "Function    Best Rate MB/s  Avg time     Min time     Max time"
for k in Copy: Scale: Add: Triad:; do
  echo "$k           $r     0.008936     0.008816     0.009071"
done
echo "-------------------------------------------------------------"
echo "Solution Validates: avg error less than 1.000000e-13 on all three arrays"
"#;

const MATRIX: &str = r#"
name = "stream-history"
repetitions = 3
timeout_s = 30

[[workloads]]
name = "stream-bin"
params = { threads = 1 }

[[workloads]]
name = "stream-bin"
params = { threads = 2 }
"#;

/// Matrices in the history.
const POINTS: usize = 24;

/// A fixed wobble of up to ±0.25%, so that no two points are equal.
const WOBBLE: [f64; 12] = [
    0.002, -0.0015, 0.0, 0.001, -0.002, 0.0025, -0.001, 0.0005, -0.0025, 0.0015, -0.0005, 0.001,
];

/// Threads 1: 10,000 MB/s, then 8,000 from the 13th matrix on (a step).
fn stepped(i: usize) -> f64 {
    (if i < POINTS / 2 { 10_000.0 } else { 8_000.0 }) * (1.0 + WOBBLE[i % 12])
}

/// Threads 2: 0.4% less each matrix (a drift; 9% over the 24).
fn drifting(i: usize) -> f64 {
    10_000.0 * (1.0 - 0.004 * i as f64) * (1.0 + WOBBLE[i % 12])
}

const TRIAD: &str = "stream_triad_mb_per_s";

fn history<'a>(cell: &'a Value, metric: &str) -> &'a Value {
    cell["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} history in {cell}"))
}

fn label<'a>(alert: &'a Value, name: &str) -> &'a str {
    alert["labels"][name].as_str().unwrap_or("")
}

#[test]
fn the_history_alert_fires_on_a_step_and_not_on_a_drift() {
    let _g = serial();
    let mut farm = Farm::start(&["--metrics-listen", "127.0.0.1:0"]);
    let metrics = common::written_addr(&farm.data_dir().join("metrics.addr"));
    let tools = farm.dir.path().join("tools");
    std::fs::create_dir(&tools).unwrap();
    let script = tools.join("stream");
    std::fs::write(&script, STREAM).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let state = farm.dir.path().join("agent-state");
    farm.start_agent_with(
        &state,
        &[("FARM_AGENT_TOOLS_DIRS", tools.display().to_string())],
    );
    farm.wait_agents(1);
    let prom = prometheus::start(&[("farm-coordinator", metrics)], true);

    let file = farm.write("stream.toml", MATRIX);
    let write_rate = |threads: u32, rate: f64| {
        std::fs::write(
            tools.join(format!("rate-{threads}")),
            format!("{rate:.1}\n"),
        )
        .unwrap();
    };
    let mut ids = Vec::new();
    for i in 0..POINTS {
        write_rate(1, stepped(i));
        write_rate(2, drifting(i));
        let id = farm.submit(&file);
        let w = farm.farmctl(&["watch", &id]);
        assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
        ids.push(id);
    }
    let last = ids.last().unwrap();
    let r = farm.results(last);

    // The step: one change point, at the 13th matrix; flat after it.
    let step = history(&r["cells"][0], TRIAD);
    let cps: Vec<u64> = step["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    assert_eq!(cps, vec![12], "{step}");
    assert!(step.get("drift").is_none(), "{step}");
    // The drift: no change point, a drift over all 24 of -0.40% a matrix.
    let drift = history(&r["cells"][1], TRIAD);
    assert_eq!(drift["change_points"], serde_json::json!([]), "{drift}");
    let d = &drift["drift"];
    assert_eq!(d["start_index"], 0, "{drift}");
    assert_eq!(d["points"], POINTS, "{drift}");
    let pct = d["per_point_pct"].as_f64().unwrap();
    assert!((pct + 0.40).abs() < 0.01, "{d}");
    let (low, high) = (
        d["per_point_pct_low"].as_f64().unwrap(),
        d["per_point_pct_high"].as_f64().unwrap(),
    );
    assert!(low < -0.40 && -0.40 < high && high < 0.0, "{d}");
    let ratio = d["ratio"].as_f64().unwrap();
    assert!((ratio - (1.0 - 0.004 * 23.0)).abs() < 0.003, "{d}");

    // `farmctl results` says both, in words.
    let out = farm.farmctl(&["results", last]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(&format!(
            "^ {TRIAD} changed ×0.800 at matrix {} (kernel running), point 13 of its history's 24",
            ids[12]
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "^ {TRIAD} drifts -0.40% per matrix over the last 24 (95%: "
        )),
        "{text}"
    );

    // /metrics: the drift's ratio; the step's regression found by the
    // history, where it began; the drift's found by the drift, labelled
    // with its regime's first matrix.
    let (_, text) = scrape(metrics, "/metrics");
    let line = |prefix: &str, parts: &[&str]| -> String {
        text.lines()
            .find(|l| l.starts_with(prefix) && parts.iter().all(|p| l.contains(p)))
            .unwrap_or_else(|| panic!("no {prefix} with {parts:?} in\n{text}"))
            .to_string()
    };
    let value = |l: &str| -> f64 { l.rsplit(' ').next().unwrap().parse().unwrap() };
    let two = r#"workload="stream-bin(threads=2)""#;
    let one = r#"workload="stream-bin(threads=1)""#;
    let triad = format!(r#"metric="{TRIAD}""#);
    let l = line("farm_series_drift_ratio{", &[two, &triad]);
    assert!((value(&l) - ratio).abs() < 1e-9, "{l}");
    let l = line(
        "farm_regression_ratio{",
        &[one, &triad, r#"found_by="history""#],
    );
    assert!(l.contains(&format!(r#"matrix="{}""#, ids[12])), "{l}");
    assert!((value(&l) - 0.8).abs() < 0.001, "{l}");
    let l = line(
        "farm_regression_ratio{",
        &[two, &triad, r#"found_by="drift""#],
    );
    assert!(l.contains(&format!(r#"matrix="{}""#, ids[0])), "{l}");
    assert!(
        !text.lines().any(|l| l.starts_with("farm_regression_ratio{")
            && l.contains(two)
            && l.contains(&triad)
            && l.contains(r#"found_by="history""#)),
        "a history regression on the drift:\n{text}"
    );

    // Prometheus, with the farm's alert rules: the step's history alert
    // fires, the drift raises its own (9% beyond the 2% minimum effect),
    // never a history one.
    let triad_alerts = || -> Vec<Value> {
        alerts(prom.addr)
            .into_iter()
            .filter(|a| label(a, "alertname") == "FarmRegressionDetected")
            .filter(|a| label(a, "metric") == TRIAD)
            .collect()
    };
    wait_for(
        Duration::from_secs(60),
        "the step's and the drift's alerts to fire",
        || {
            let a = triad_alerts();
            let firing = |workload: &str, found_by: &str| {
                a.iter().any(|x| {
                    label(x, "workload") == workload
                        && label(x, "found_by") == found_by
                        && x["state"] == "firing"
                })
            };
            firing("stream-bin(threads=1)", "history") && firing("stream-bin(threads=2)", "drift")
        },
    );
    let a = triad_alerts();
    let found: Vec<(&str, &str, &str)> = a
        .iter()
        .map(|x| {
            (
                label(x, "workload"),
                label(x, "found_by"),
                label(x, "matrix"),
            )
        })
        .collect();
    assert_eq!(
        found.len(),
        2,
        "one alert per series: {found:?}\n{}",
        serde_json::to_string_pretty(&a).unwrap()
    );
    assert!(found.contains(&("stream-bin(threads=1)", "history", ids[12].as_str())));
    assert!(found.contains(&("stream-bin(threads=2)", "drift", ids[0].as_str())));
    let diagnosis = a
        .iter()
        .find(|x| label(x, "found_by") == "drift")
        .map(|x| label(x, "diagnosis"))
        .unwrap();
    assert_eq!(
        diagnosis,
        "the series' history drifts the wrong way since running"
    );

    // Grafana's trends dashboard: its drift panel, as Grafana would ask
    // with every variable at "All", shows the drifting series (each of
    // STREAM's four rates drifts alike) and only it, at the drift's ratio.
    let trends: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("dashboards/farm-trends.json")).unwrap(),
    )
    .unwrap();
    let panels: Vec<(String, String)> = dashboard_queries(&trends)
        .into_iter()
        .filter(|(_, expr)| expr.contains(DRIFT))
        .collect();
    assert_eq!(panels.len(), 1, "{panels:?}");
    let (place, expr) = &panels[0];
    // Prometheus scrapes every second while the matrices run: an earlier
    // scrape holds the drift over fewer matrices (a smaller ratio), so wait
    // until the latest scrape shows the drift the last results report.
    let triad_ratio = |series: &[Value]| -> Option<f64> {
        series
            .iter()
            .find(|s| s["metric"]["metric"] == TRIAD)
            .and_then(|s| s["value"][1].as_str()?.parse().ok())
    };
    let mut series = Vec::new();
    wait_for(
        Duration::from_secs(60),
        &format!("{place}: `{expr}` to show the triad's drift ratio {ratio}"),
        || {
            series = query(prom.addr, expr);
            triad_ratio(&series).is_some_and(|v| (v - ratio).abs() < 1e-9)
        },
    );
    let mut shown: Vec<(&str, &str)> = series
        .iter()
        .map(|s| {
            (
                s["metric"]["workload"].as_str().unwrap(),
                s["metric"]["metric"].as_str().unwrap(),
            )
        })
        .collect();
    shown.sort();
    assert_eq!(
        shown,
        [
            "stream_add_mb_per_s",
            "stream_copy_mb_per_s",
            "stream_scale_mb_per_s",
            TRIAD
        ]
        .map(|m| ("stream-bin(threads=2)", m))
    );
}
