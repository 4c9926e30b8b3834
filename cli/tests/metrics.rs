//! The coordinator's `/metrics`: a real coordinator and agent run a matrix
//! with a clear regression, and the scrape shows the fleet, the runs, the
//! series and the regression, in a text `promtool check metrics` accepts.
//!
//! Needs `promtool` (Debian package `prometheus`; scripts/test.sh installs
//! it). It fails loudly where it is missing.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Farm, scrape, serial, wait_for};

/// A sample line: metric name, labels, value.
type Line = (String, BTreeMap<String, String>, f64);

/// Parses the samples of the text format (label values may hold commas
/// and escaped quotes; workload labels do).
fn samples(text: &str) -> Vec<Line> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (name, rest) = match line.find('{') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => {
                let (n, v) = line.split_once(' ').unwrap();
                out.push((n.to_string(), BTreeMap::new(), v.parse().unwrap()));
                continue;
            }
        };
        let mut labels = BTreeMap::new();
        let mut chars = rest.chars();
        loop {
            let key: String = chars.by_ref().take_while(|&c| c != '=').collect();
            assert_eq!(chars.next(), Some('"'), "{line}");
            let mut value = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => match chars.next() {
                        Some('n') => value.push('\n'),
                        Some(c) => value.push(c),
                        None => break,
                    },
                    '"' => break,
                    c => value.push(c),
                }
            }
            labels.insert(key.trim_start_matches(',').to_string(), value);
            match chars.next() {
                Some(',') => {
                    if chars.as_str().starts_with('}') {
                        chars.next();
                        break;
                    }
                }
                Some('}') => break,
                other => panic!("unexpected {other:?} in {line}"),
            }
        }
        let value = chars.as_str().trim();
        out.push((name.to_string(), labels, value.parse().unwrap()));
    }
    out
}

/// The coordinator's metrics endpoint, once it has written its address.
fn metrics_addr(farm: &Farm) -> SocketAddr {
    common::written_addr(&farm.data_dir().join("metrics.addr"))
}

fn find<'a>(lines: &'a [Line], name: &str, labels: &[(&str, &str)]) -> Option<&'a Line> {
    lines.iter().find(|(n, l, _)| {
        n == name
            && labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
    })
}

#[test]
fn metrics_show_the_fleet_the_runs_and_a_regression_and_pass_promtool() {
    let _g = serial();
    let mut farm = Farm::start(&["--metrics-listen", "127.0.0.1:0"]);
    let addr_file = farm.data_dir().join("metrics.addr");
    let addr = metrics_addr(&farm);
    farm.start_agent();
    farm.wait_agents(1);
    let file = farm.write("m.toml", common::CLEAR_REGRESSION);
    let id = farm.submit(&file);
    let out = farm.farmctl(&["watch", &id]);
    assert!(
        out.status.success(),
        "watch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results = farm.results(&id);
    let runs = results["results"].as_array().unwrap().len();

    let (head, _) = scrape(addr, "/nope");
    assert!(head.starts_with("HTTP/1.1 404"), "{head}");

    let candidate = "cpu-hog(seconds=0.3,threads=1)";
    let mut text = String::new();
    // The results gauges follow the matrix's end, right after its status.
    wait_for(Duration::from_secs(10), "the regression gauge", || {
        let (head, body) = scrape(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: text/plain; version=0.0.4"),
            "{head}"
        );
        text = body;
        find(&samples(&text), "farm_regression_ratio", &[]).is_some()
    });
    let lines = samples(&text);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let agents = find(
        &lines,
        "farm_agents_connected",
        &[
            ("arch", std::env::consts::ARCH),
            ("executor", "host"),
            ("kernel", release.trim()),
        ],
    );
    assert_eq!(agents.map(|l| l.2), Some(1.0), "{text}");
    let ok = find(&lines, "farm_runs_finished_total", &[("outcome", "ok")]);
    assert_eq!(ok.map(|l| l.2), Some(runs as f64), "{text}");
    for name in [
        "farm_run_duration_seconds_count",
        "farm_run_assignment_latency_seconds_count",
    ] {
        assert_eq!(
            find(&lines, name, &[]).map(|l| l.2),
            Some(runs as f64),
            "{name}: {text}"
        );
    }
    assert!(
        find(&lines, "farm_store_commit_latency_seconds_count", &[]).is_some_and(|l| l.2 >= 1.0),
        "{text}"
    );
    assert_eq!(
        find(&lines, "farm_runs", &[("state", "queued")]).map(|l| l.2),
        Some(0.0),
        "{text}"
    );
    let median = find(
        &lines,
        "farm_series_median",
        &[
            ("workload", candidate),
            ("metric", "wall_s"),
            ("kernel", "running"),
        ],
    );
    assert!(
        median.is_some_and(|l| l.2 > 0.25 && l.2 < 1.0),
        "{median:?}: {text}"
    );
    assert!(
        find(
            &lines,
            "farm_series_baseline_median",
            &[("workload", candidate), ("metric", "wall_s")],
        )
        .is_some_and(|l| l.2 > 0.05 && l.2 < 0.3),
        "{text}"
    );
    let regression = find(
        &lines,
        "farm_regression_ratio",
        &[
            ("workload", candidate),
            ("metric", "wall_s"),
            ("kernel", "running"),
            ("matrix", id.as_str()),
        ],
    )
    .unwrap_or_else(|| panic!("no wall_s regression of {id}: {text}"));
    assert!(regression.2 > 2.0, "{regression:?}");
    for key in ["state", "host"] {
        assert!(regression.1.contains_key(key), "{regression:?}");
    }
    // The runs added to decide it, under the same labels: this matrix's
    // cells, as `farmctl results` says.
    let extra = find(&lines, "farm_regression_extra_runs", &[]).cloned();
    let cell_extra = results["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["baseline"].is_u64())
        .and_then(|c| c["extra_runs"].as_f64())
        .unwrap_or(0.0);
    assert_eq!(
        extra.as_ref().map(|l| (&l.1, l.2)),
        Some((&regression.1, cell_extra)),
        "{text}"
    );

    check_with_promtool(&text);

    // A restarted coordinator shows the same results, recovered from the store.
    farm.kill_coordinator();
    std::fs::remove_file(&addr_file).unwrap();
    farm.start_coordinator();
    let addr = metrics_addr(&farm);
    let (_, text) = scrape(addr, "/metrics");
    let lines = samples(&text);
    let again = find(
        &lines,
        "farm_regression_ratio",
        &[
            ("workload", candidate),
            ("metric", "wall_s"),
            ("matrix", id.as_str()),
        ],
    );
    assert_eq!(again.map(|l| l.2), Some(regression.2), "{text}");
    assert!(
        find(&lines, "farm_series_median", &[("workload", candidate)]).is_some(),
        "{text}"
    );
}

fn check_with_promtool(text: &str) {
    let promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut promtool = match promtool {
        Ok(p) => p,
        Err(e) => panic!(
            "promtool could not be started ({e}): install the Debian package \
             `prometheus` (scripts/test.sh does)"
        ),
    };
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = promtool.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An agent's own `/metrics`: its runs by outcome and executor, its stream,
/// and a text `promtool check metrics` accepts.
#[test]
fn an_agent_serves_its_own_metrics() {
    let _g = serial();
    let mut farm = Farm::start(&[]);
    let state = farm.dir.path().join("agent-state");
    farm.start_agent_with(
        &state,
        &[("FARM_AGENT_METRICS_LISTEN", "127.0.0.1:0".to_string())],
    );
    farm.wait_agents(1);
    let addr = common::written_addr(&state.join("metrics.addr"));
    let matrix = farm.write(
        "a.toml",
        "name = \"a\"\nrepetitions = 3\n[[workloads]]\nname = \"cpu-hog\"\n\
         params = { threads = 1, seconds = 0.1 }\n",
    );
    let id = farm.submit(&matrix);
    let out = farm.farmctl(&["watch", &id]);
    assert!(out.status.success(), "{out:?}");
    let (head, text) = scrape(addr, "/metrics");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let lines = samples(&text);
    let get = |name: &str, labels: &[(&str, &str)]| find(&lines, name, labels).map(|l| l.2);
    assert_eq!(
        get(
            "farm_agent_runs_total",
            &[("outcome", "ok"), ("executor", "host")]
        ),
        Some(3.0),
        "{text}"
    );
    assert_eq!(get("farm_agent_connected", &[]), Some(1.0), "{text}");
    assert_eq!(get("farm_agent_running", &[]), Some(0.0), "{text}");
    assert_eq!(
        get(
            "farm_agent_run_duration_seconds_count",
            &[("executor", "host")]
        ),
        Some(3.0),
        "{text}"
    );
    check_with_promtool(&text);
}

/// `/metrics` has no authentication: binding it off loopback takes
/// `--metrics-public`, on the coordinator and on the agent alike.
#[test]
fn metrics_off_loopback_need_metrics_public() {
    let dir = tempfile::tempdir().unwrap();
    let want = "--metrics-listen 0.0.0.0:0 is not a loopback address: /metrics has no \
                authentication; pass --metrics-public to expose it";
    for bin in ["farm-coordinator", "farm-agent"] {
        let dir_flag = if bin == "farm-agent" {
            "--state-dir"
        } else {
            "--data-dir"
        };
        let out = Command::new(common::sibling_bin(bin))
            .args(["--metrics-listen", "0.0.0.0:0"])
            .arg(dir_flag)
            .arg(dir.path())
            .env("RUST_BACKTRACE", "0")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{bin}: {stderr}");
        assert!(stderr.contains(want), "{bin}: {stderr}");
    }
}
