//! Debian's Prometheus for the tests that read the farm's metrics through
//! it: a server scraping given targets every second with the farm's rules,
//! instant queries and the alerts it raises, over its HTTP API.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::free_port;

const PROMETHEUS: &str = "/usr/bin/prometheus";

/// A Prometheus server, killed and reaped on drop.
pub struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Starts Prometheus scraping `targets` (job name, address) every second
/// and evaluating rules every second: the farm's recording rules (the
/// dashboards use them) and, with `alerts`, its alert rules.
pub fn start(targets: &[(&str, SocketAddr)], alerts: bool) -> Prometheus {
    assert!(
        Path::new(PROMETHEUS).is_file(),
        "{PROMETHEUS} is missing: install the Debian package prometheus (scripts/test.sh does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let rules = repo().join("deploy/prometheus/rules");
    let mut files = vec![rules.join("farm-recording.yml")];
    if alerts {
        files.push(rules.join("farm-alerts.yml"));
    }
    let mut config =
        String::from("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n");
    for f in &files {
        config += &format!("  - {}\n", f.display());
    }
    config += "scrape_configs:\n";
    for (job, addr) in targets {
        config +=
            &format!("  - job_name: {job}\n    static_configs:\n      - targets: [\"{addr}\"]\n");
    }
    let path = dir.path().join("prometheus.yml");
    std::fs::write(&path, config).unwrap();
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
    let child = Command::new(PROMETHEUS)
        .arg(format!("--config.file={}", path.display()))
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
pub fn query(prom: SocketAddr, expr: &str) -> Vec<serde_json::Value> {
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

/// The alerts Prometheus has now (pending or firing), each alert's labels
/// and state; empty while it is not up.
pub fn alerts(prom: SocketAddr) -> Vec<serde_json::Value> {
    let Some((status, body)) = get(prom, "/api/v1/alerts") else {
        return Vec::new();
    };
    if status.contains(" 503 ") {
        return Vec::new();
    }
    let v: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{status}: not JSON ({e}): {body}"));
    v["data"]["alerts"].as_array().cloned().unwrap_or_default()
}

/// The metric of a history's drift: its dashboard queries need a history
/// that drifts (cli/tests/drift.rs), which the dashboards test's has not.
pub const DRIFT: &str = "farm_series_drift_ratio";

/// Every query of a Grafana dashboard (panel targets and annotations), with
/// where it came from, as Grafana would send it with every variable at
/// "All" (`.*`) and a rate interval of a minute.
pub fn dashboard_queries(dashboard: &serde_json::Value) -> Vec<(String, String)> {
    let variables: Vec<String> = dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    let substitute = |expr: &str| {
        let mut out = expr.replace("$__rate_interval", "1m");
        for v in &variables {
            out = out.replace(&format!("${v}"), ".*");
        }
        assert!(!out.contains('$'), "an unknown variable in `{expr}`");
        out
    };
    let mut out = Vec::new();
    for p in dashboard["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            out.push((
                format!("panel `{}` {}", p["title"], t["refId"]),
                substitute(t["expr"].as_str().unwrap()),
            ));
        }
    }
    for a in dashboard["annotations"]["list"].as_array().unwrap() {
        if let Some(expr) = a["expr"].as_str() {
            out.push((format!("annotation `{}`", a["name"]), substitute(expr)));
        }
    }
    out
}
