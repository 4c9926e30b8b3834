//! The Grafana dashboards against a real Prometheus: a real coordinator and
//! agent run a history with a change point and a matrix with a regression, Debian's `prometheus` scrapes the
//! coordinator's and the agent's /metrics (with the farm's recording rules), and every query
//! of every panel and annotation of `dashboards/*.json` must return at least
//! one series through Prometheus's HTTP API.
//!
//! Needs the Debian package `prometheus` (scripts/test.sh installs it); it
//! fails, naming the package, where it is missing.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::prometheus::{self, DRIFT, dashboard_queries, query, repo};
use common::{Farm, serial, wait_for};

#[test]
fn every_dashboard_query_returns_series_from_a_real_prometheus() {
    let _g = serial();
    let mut dashboards: Vec<PathBuf> = std::fs::read_dir(repo().join("dashboards"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    dashboards.sort();
    // Exactly the four dashboards the README documents, each provisioned
    // under a uid equal to its file name, so a lost or renamed one fails here.
    let uids: Vec<(String, String)> = dashboards
        .iter()
        .map(|p| {
            let d: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, d["uid"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    let expected = [
        ("farm-fleet.json", "farm-fleet"),
        ("farm-placement.json", "farm-placement"),
        ("farm-regressions.json", "farm-regressions"),
        ("farm-trends.json", "farm-trends"),
    ]
    .map(|(f, u)| (f.to_string(), u.to_string()));
    assert_eq!(uids, expected, "the dashboards of dashboards/");
    let mut farm = Farm::start(&["--metrics-listen", "127.0.0.1:0"]);
    let target = common::written_addr(&farm.data_dir().join("metrics.addr"));
    let state = farm.dir.path().join("agent-state");
    farm.start_agent_with(
        &state,
        &[("FARM_AGENT_METRICS_LISTEN", "127.0.0.1:0".to_string())],
    );
    let agent = common::written_addr(&state.join("metrics.addr"));
    farm.wait_agents(1);
    // A history with a change point (the trends' annotations), then a
    // matrix with a regression against its baseline.
    common::stepped_history(&farm);
    let matrix = farm.write("m.toml", common::CLEAR_REGRESSION);
    let id = farm.submit(&matrix);
    let out = farm.farmctl(&["watch", &id]);
    assert!(out.status.success(), "{out:?}");

    let prom = prometheus::start(
        &[("farm-coordinator", target), ("farm-agents", agent)],
        false,
    );
    wait_for(Duration::from_secs(60), "Prometheus to scrape", || {
        query(prom.addr, "up == 1").len() == 2
    });

    let (mut checked, mut drift_queries) = (0, 0);
    for path in &dashboards {
        let d: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // Provisioning-ready: a uid, and the data source as a variable.
        assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty()), "{path:?}");
        let variables = d["templating"]["list"].as_array().unwrap();
        assert!(
            variables.iter().any(|v| v["name"] == "datasource"),
            "{path:?}"
        );
        for (place, expr) in dashboard_queries(&d) {
            // A drift needs a history that drifts: cli/tests/drift.rs
            // checks these queries on one.
            if expr.contains(DRIFT) {
                drift_queries += 1;
                continue;
            }
            let mut last = Vec::new();
            // Rates need two scrapes: wait for them rather than sleep.
            wait_for(
                Duration::from_secs(60),
                &format!("{}: {place}: `{expr}`", path.display()),
                || {
                    last = query(prom.addr, &expr);
                    !last.is_empty()
                },
            );
            checked += 1;
        }
    }
    eprintln!(
        "{checked} queries of {} dashboards answered",
        dashboards.len()
    );
    // The trends' drift panel, and only it, is left to the drift test.
    assert_eq!(drift_queries, 1);
    // The regression of this matrix is what the regressions dashboard shows.
    let r = query(prom.addr, "farm_regression_ratio");
    assert!(
        r.iter().any(|s| s["metric"]["matrix"] == id.as_str()),
        "{r:?}"
    );
}
