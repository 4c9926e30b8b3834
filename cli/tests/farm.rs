//! End-to-end: real coordinators, agents and farmctl as processes on 127.0.0.1.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::time::Duration;

use common::{Farm, agents_of, assert_exactly_once, executions, serial, twelve_runs, wait_for};
use serde_json::Value;

#[test]
fn two_agents_run_a_matrix_to_completion() {
    let _g = serial();
    let mut farm = Farm::start(&[]);
    farm.start_agent();
    farm.start_agent();
    farm.wait_agents(2);
    let file = farm.write("m.toml", &twelve_runs(0.3));
    let id = farm.submit(&file);
    let out = farm.farmctl(&["watch", &id]);
    assert!(
        out.status.success(),
        "watch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = farm.results(&id);
    assert_eq!(v["state"], "done");
    assert_exactly_once(&v, 12);
    // Pushed to both idle agents, one run at a time each.
    let agents = agents_of(&v);
    assert_eq!(agents.len(), 2, "{agents:?}");
    // Every cell has 3 runs and the non-baseline cells a ratio.
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        let wall = c["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == "wall_s")
            .unwrap();
        assert_eq!(wall["n"], 3, "{c}");
        assert_eq!(c["baseline"].is_null(), wall["ratio"].is_null(), "{c}");
    }
    // The human table says the same.
    let table = String::from_utf8(farm.farmctl(&["results", &id]).stdout).unwrap();
    assert!(table.contains("12/12 done"), "{table}");
    // Cancelling an ended matrix changes nothing.
    let out = farm.farmctl(&["cancel", &id]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cancelled 0 runs"
    );
    assert_eq!(farm.results(&id)["state"], "done");
    // An unknown id is bad input.
    assert_eq!(farm.farmctl(&["results", "m-nope"]).status.code(), Some(2));
}

#[test]
fn a_killed_agent_loses_its_run_to_the_other() {
    let _g = serial();
    let mut farm = Farm::start(&["--heartbeat-ms", "200", "--lease-ms", "1500"]);
    farm.start_agent();
    farm.start_agent();
    farm.wait_agents(2);
    let id = farm.submit(&farm.write("m.toml", &twelve_runs(1.5)));
    // Wait until both agents are in the middle of a run.
    wait_for(Duration::from_secs(30), "both agents busy", || {
        farm.agents()
            .iter()
            .filter(|a| a.1 && a.2.starts_with(&id))
            .count()
            == 2
    });
    let victim_log = farm.agents[0].log_text();
    let victim = victim_log
        .split_whitespace()
        .find_map(|w| w.strip_prefix("agent=").filter(|a| a.starts_with("a-")))
        .map(|s| {
            s.trim_matches(|c: char| !c.is_alphanumeric() && c != '-')
                .to_string()
        })
        .expect("agent 0 logged its id");
    let lost_run = farm
        .agents()
        .into_iter()
        .find(|a| a.0 == victim)
        .map(|a| a.2)
        .unwrap();
    farm.agents[0].kill();
    let out = farm.farmctl(&["watch", &id]);
    assert!(
        out.status.success(),
        "watch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = farm.results(&id);
    assert_exactly_once(&v, 12);
    let lost = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == lost_run.as_str())
        .unwrap();
    assert_ne!(
        lost["agent_id"],
        victim.as_str(),
        "the lost run must finish on the other agent"
    );
    assert_eq!(lost["attempt"], 2, "{lost}");
    // The killed agent's workload died with it (PR_SET_PDEATHSIG): nothing of it is left.
    // Only our workload binary: other farm-workload builds may be running here.
    let pattern = format!("^{} ", env!("CARGO_BIN_EXE_farm-workload"));
    let leftover = std::process::Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .unwrap();
    assert!(
        leftover.stdout.is_empty(),
        "leftover workloads: {}",
        String::from_utf8_lossy(&leftover.stdout)
    );
}

#[test]
fn a_killed_coordinator_restarts_and_finishes_with_nothing_lost_or_repeated() {
    let _g = serial();
    // A lease long enough for the agents to come back before it expires.
    let mut farm = Farm::start(&["--heartbeat-ms", "200", "--lease-ms", "15000"]);
    farm.start_agent();
    farm.start_agent();
    farm.wait_agents(2);
    let id = farm.submit(&farm.write("m.toml", &twelve_runs(1.0)));
    wait_for(
        Duration::from_secs(60),
        "some runs done and two running",
        || {
            let v = farm.results(&id);
            v["counts"]["finished"].as_u64().unwrap() >= 3
                && v["counts"]["running"].as_u64().unwrap() == 2
        },
    );
    farm.kill_coordinator();
    // Runs in progress go on without the coordinator; their results wait in the agents' outboxes.
    std::thread::sleep(Duration::from_millis(1500));
    farm.start_coordinator();
    let out = farm.farmctl(&["watch", &id]);
    assert!(
        out.status.success(),
        "watch: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = farm.results(&id);
    assert_exactly_once(&v, 12);
    // Same agents after the restart: they resumed their identities.
    let agents = agents_of(&v);
    assert_eq!(agents.len(), 2, "{agents:?}");
    let execs = executions(&farm.agents);
    assert_eq!(execs.len(), 12, "{execs:?}");
    for (run, attempts) in &execs {
        assert_eq!(
            attempts.len(),
            1,
            "run {run} executed more than once: {attempts:?}"
        );
    }
}

#[test]
fn farmctl_run_executes_a_matrix_locally() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("m.toml");
    std::fs::write(&file, twelve_runs(0.2)).unwrap();
    let out = std::process::Command::new(common::farmctl_bin())
        .args(["run", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_exactly_once(&v, 12);
}

#[test]
fn cells_no_agent_can_serve_wait_with_a_reason_and_are_never_run() {
    let _g = serial();
    let mut farm = Farm::start(&[]);
    farm.start_agent();
    farm.wait_agents(1);
    let file = farm.write(
        "waits.toml",
        r#"
name = "waits"
[[workloads]]
name = "cpu-hog"
params = { seconds = 0.1 }
[[states]]
name = "plain"
[[states]]
name = "cycled"
hotplug = "cycle:63"
[[hosts]]
name = "here"
[[hosts]]
name = "mainframe"
arch = "s390x"
"#,
    );
    let id = farm.submit(&file);
    // `watch` runs until the matrix ends; the servable cell finishes, the others wait.
    let mut watch = std::process::Command::new(common::farmctl_bin())
        .args(["watch", &id])
        .env("FARM_COORDINATOR", farm.url())
        .env("FARM_TOKEN_FILE", farm.data_dir().join("submit.token"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(
        Duration::from_secs(30),
        "the servable cell to finish",
        || farm.results(&id)["counts"]["finished"] == 1,
    );
    let out = farm.farmctl(&["cancel", &id]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "cancelled 3 runs"
    );
    let status = watch.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(watch.stderr.as_mut().unwrap(), &mut err).unwrap();
    // A cancelled matrix is not a success.
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("waiting: no agent with arch=s390x"), "{err}");
    assert!(
        err.contains("waiting: no agent with hotplug of cpu 63"),
        "{err}"
    );
    let v = farm.results(&id);
    assert_eq!(v["state"], "cancelled");
    assert_exactly_once(&v, 1);
}
