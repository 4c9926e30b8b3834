//! The Grafana dashboards against a real Prometheus: a real coordinator and
//! agent run a history with a change point and a matrix with a regression, Debian's `prometheus` scrapes the
//! coordinator's and the agent's /metrics (with the farm's recording rules), and every query
//! of every panel and annotation of `dashboards/*.json` must return at least
//! one series through Prometheus's HTTP API.
//!
//! Needs the Debian package `prometheus` (scripts/test.sh installs it); it
//! fails, naming the package, where it is missing.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{Farm, free_port, serial, wait_for};

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A Prometheus server, killed and reaped on drop.
struct Prometheus {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Starts Prometheus scraping the coordinator and the agent every second,
/// with the farm's recording rules (the dashboards use them).
fn start_prometheus(coordinator: SocketAddr, agent: SocketAddr) -> Prometheus {
    assert!(
        Path::new(PROMETHEUS).is_file(),
        "{PROMETHEUS} is missing: install the Debian package prometheus (scripts/test.sh does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let rules = repo().join("deploy/prometheus/rules/farm-recording.yml");
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n  - {}\n\
             scrape_configs:\n  - job_name: farm-coordinator\n    static_configs:\n      \
             - targets: [\"{coordinator}\"]\n  - job_name: farm-agents\n    static_configs:\n      \
             - targets: [\"{agent}\"]\n",
            rules.display()
        ),
    )
    .unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {PROMETHEUS}: {e}"));
    Prometheus {
        child,
        addr,
        _dir: dir,
    }
}

/// Percent-encodes a query string value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// `GET path` over a plain socket; the status line and the body. `None`
/// while nothing listens yet.
fn get(addr: SocketAddr, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = Vec::new();
    s.read_to_end(&mut response).ok()?;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n")?;
    // Prometheus answers with chunked transfer-encoding at times: the JSON
    // is the part between the first `{` and the last `}`.
    let body = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a <= b => body[a..=b].to_string(),
        _ => body.to_string(),
    };
    Some((head.lines().next().unwrap_or("").to_string(), body))
}

/// The series an instant query returns (empty while Prometheus is not up
/// or not ready).
fn query(prom: SocketAddr, expr: &str) -> Vec<serde_json::Value> {
    let Some((status, body)) = get(prom, &format!("/api/v1/query?query={}", encode(expr))) else {
        return Vec::new();
    };
    if status.contains(" 503 ") {
        // Listening, still loading its storage and rules.
        return Vec::new();
    }
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {body}"));
    assert_eq!(v["status"], "success", "`{expr}`: {v}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// Every query of a dashboard: panel targets and annotations, with where
/// it came from.
fn queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push((
                format!("panel `{}` {}", p["title"], t["refId"]),
                t["expr"].as_str().unwrap().to_string(),
            ));
        }
    }
    for a in dashboard["annotations"]["list"].as_array().unwrap() {
        if let Some(expr) = a["expr"].as_str() {
            out.push((format!("annotation `{}`", a["name"]), expr.to_string()));
        }
    }
    out
}

/// What Grafana would send with every variable at "All" (`.*`) and a rate
/// interval of a minute.
fn substitute(expr: &str, variables: &[String]) -> String {
    let mut out = expr.replace("$__rate_interval", "1m");
    for v in variables {
        out = out.replace(&format!("${v}"), ".*");
    }
    assert!(!out.contains('$'), "an unknown variable in `{expr}`");
    out
}

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

    let prom = start_prometheus(target, agent);
    wait_for(Duration::from_secs(60), "Prometheus to scrape", || {
        query(prom.addr, "up == 1").len() == 2
    });

    let mut checked = 0;
    for path in &dashboards {
        let d: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        // Provisioning-ready: a uid, and the data source as a variable.
        assert!(d["uid"].as_str().is_some_and(|u| !u.is_empty()), "{path:?}");
        let variables: Vec<String> = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["name"].as_str().unwrap().to_string())
            .collect();
        assert!(variables.iter().any(|v| v == "datasource"), "{path:?}");
        for (place, expr) in queries(&d) {
            let expr = substitute(&expr, &variables);
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
    // The regression of this matrix is what the regressions dashboard shows.
    let r = query(prom.addr, "farm_regression_ratio");
    assert!(
        r.iter().any(|s| s["metric"]["matrix"] == id.as_str()),
        "{r:?}"
    );
}
