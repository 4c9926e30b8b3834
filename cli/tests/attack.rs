//! A hostile agent that is not ours (Python's grpcio, `attack/forge.py`)
//! against a real coordinator and an honest agent running a matrix: its
//! takeover is refused, its claim cancelled, its forged results and values
//! dropped and counted, and the matrix completes with the honest values.
//!
//! Needs python3 with python3-grpcio and python3-protobuf, and protoc
//! (protobuf-compiler); scripts/test.sh installs them. It fails loudly
//! where they are missing.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use common::{Farm, scrape, serial, wait_for};

#[test]
fn a_forging_agent_changes_nothing_and_is_counted() {
    let _g = serial();
    let mut farm = Farm::start(&["--metrics-listen", "127.0.0.1:0"]);
    farm.start_agent();
    farm.wait_agents(1);
    let victim = farm.agents()[0].0.clone();
    // Long enough runs that the forger acts while runs are queued and one is held.
    let file = farm.write(
        "m.toml",
        "name = \"forged\"\nrepetitions = 4\n[[workloads]]\nname = \"cpu-hog\"\n\
         params = { seconds = 1.0, threads = 1 }\n",
    );
    let id = farm.submit(&file);
    wait_for(Duration::from_secs(30), "a run held by the agent", || {
        farm.agents().iter().any(|a| a.2.starts_with(&id))
    });
    let dir = env!("CARGO_MANIFEST_DIR");
    // Debian's Python, which python3-grpcio is for (not whatever `python3`
    // is first in PATH).
    let out = Command::new("/usr/bin/python3")
        .arg(format!("{dir}/tests/attack/forge.py"))
        .args(["--addr", &format!("127.0.0.1:{}", farm.port)])
        .arg("--token-file")
        .arg(farm.data_dir().join("agent.token"))
        .arg("--proto")
        .arg(format!("{dir}/../proto/proto/farm/v1/farm.proto"))
        .args([
            "--victim", &victim, "--matrix", &id, "--cells", "1", "--reps", "4",
        ])
        .arg("--submit-token-file")
        .arg(farm.data_dir().join("submit.token"))
        .output()
        .expect("/usr/bin/python3 must be installed (scripts/test.sh installs python3-grpcio)");
    assert!(
        out.status.success(),
        "forge.py (needs python3-grpcio, python3-protobuf, protobuf-compiler): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["flood_sent"], true, "{report}");
    // 512 MiB of flood went through a coordinator whose messages in flight
    // are bounded (64 MiB): its peak memory stays far below the flood (21 MB measured here).
    let pid = farm.coordinator.as_ref().unwrap().child.id();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap();
    eprintln!("coordinator peak RSS after the flood: {peak_kib} KiB");
    assert!(peak_kib < 128 << 10, "coordinator peak RSS {peak_kib} KiB");
    assert_eq!(report["takeover"], "FAILED_PRECONDITION", "{report}");
    assert_eq!(
        report["takeover_message"],
        format!("agent {victim} has a live session; another one may not take it over")
    );
    // Bad matrices are INVALID_ARGUMENT, with a message grpc-core can read.
    assert_eq!(report["not_utf8"]["code"], "INVALID_ARGUMENT", "{report}");
    assert_eq!(
        report["not_utf8"]["message"],
        "m.toml: not UTF-8 (byte 8 is not part of a UTF-8 character)"
    );
    assert_eq!(report["huge_value"]["code"], "INVALID_ARGUMENT", "{report}");
    let message = report["huge_value"]["message"].as_str().unwrap();
    assert!(message.len() <= 4096, "{} bytes: {message}", message.len());
    assert!(message.starts_with("m.toml:"), "{message}");
    // The forger hears acks (so that an honest agent would forget a stale
    // result) and a cancel of the run it claimed; it is never assigned one.
    let received: Vec<&str> = report["received"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        received.contains(&format!("cancel {id}.c0.r3@1").as_str()),
        "{received:?}"
    );
    assert!(
        !received.iter().any(|m| m.starts_with("assign")),
        "{received:?}"
    );

    let out = farm.farmctl(&["watch", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = farm.results(&id);
    assert_eq!(v["state"], "done");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        assert_eq!(r["agent_id"], victim.as_str(), "{r}");
        assert_eq!(r["ok"], true, "{r}");
        let wall = r["metrics"]["wall_s"].as_f64().unwrap();
        // cpu-hog for 1 s: the honest figure, never the forged 99 or NaN.
        assert!((0.9..5.0).contains(&wall), "{r}");
    }

    let addr: std::net::SocketAddr = std::fs::read_to_string(farm.data_dir().join("metrics.addr"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let (_, body) = scrape(addr, "/metrics");
    let rejected: BTreeMap<String, f64> = body
        .lines()
        .filter_map(|l| l.strip_prefix("farm_rejected_messages_total{reason=\""))
        .map(|l| {
            let (reason, value) = l.split_once("\"} ").unwrap();
            (reason.to_string(), value.parse().unwrap())
        })
        .collect();
    // 4 runs × (2 forged attempts + NaN + negative) results, 4 + 512
    // progress reports, 1 claim, 1 takeover.
    let want: BTreeMap<String, f64> = [
        ("claim_not_leased", 1.0),
        ("progress_not_leased", 516.0),
        ("result_not_leased", 16.0),
        ("session_takeover", 1.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(rejected, want, "{body}");
}
