//! Continuous matrices end to end, with a real coordinator and agent:
//! - a schedule triggered by new kernels: images dropped in the agent's
//!   --kernel-dir are each executed once, in QEMU guests, extending one
//!   history, and `farmctl schedules` shows the executions and verdicts;
//! - change-point detection on every new point of a history: a machine
//!   that gets slower from one matrix on (a CPU hog outside the farm) sets
//!   `farm_regression_ratio` at the kernel and matrix where it began.
//!
//! The cron path is driven on paused time in the coordinator's own tests
//! (`scheduler::continuous::tests`). The trigger test needs what guests need
//! (scripts/test.sh installs it); it fails, never skips, without it.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::time::Duration;

use common::{Farm, scrape, serial, wait_for};
use serde_json::Value;

fn schedules(farm: &Farm) -> Value {
    let out = farm.farmctl(&["schedules", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn each_new_kernel_in_an_agents_catalogue_runs_the_schedule_once() {
    let _g = serial();
    let cache = common::guest_cache();
    let debian =
        farm_agent::executor::guest::image::kernels::resolve("debian:6.1.0-57-cloud-amd64", &cache)
            .unwrap_or_else(|e| panic!("{e}"));
    let kernels = tempfile::tempdir().unwrap();
    let farm = Farm::with_guests(&[
        ("FARM_KERNEL_DIRS", kernels.path().display().to_string()),
        ("FARM_AGENT_RESCAN_S", "1".to_string()),
    ]);
    let file = farm.write(
        "nightly.toml",
        &format!(
            r#"
name = "new-kernels"
timeout_s = 120
repetitions = 2

[[workloads]]
name = "cpu-hog"
params = {{ threads = 1, seconds = 0.5 }}

[schedule]
on_new_kernel = "file:{}/*"
"#,
            kernels.path().display()
        ),
    );
    let out = farm.farmctl(&["submit", file.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(id.starts_with("s-"), "{id}");
    let s = schedules(&farm);
    assert_eq!(s[0]["schedule_id"], id.as_str());
    assert_eq!(s[0]["executions"], 0);
    assert!(s[0]["last"].is_null());
    let text = String::from_utf8(farm.farmctl(&["schedules"]).stdout).unwrap();
    assert!(
        text.contains("new kernel file:") && text.contains("last: none yet"),
        "{text}"
    );

    // Two kernels appear one after the other: one execution each.
    let mut matrices = Vec::new();
    for (n, name) in ["v6.1-57-a", "v6.1-57-b"].iter().enumerate() {
        let image = kernels.path().join(name);
        let tmp = kernels.path().join(format!(".{name}.part"));
        // Whole, then renamed: the agent never sees half an image.
        std::fs::copy(&debian.vmlinuz, &tmp).unwrap();
        std::fs::rename(&tmp, &image).unwrap();
        let kernel = format!("file:{}", image.display());
        wait_for(Duration::from_secs(300), "the execution to end", || {
            let s = schedules(&farm);
            s[0]["executions"] == n + 1
                && s[0]["last"]["kernel"] == kernel.as_str()
                && s[0]["last"]["state"] == "done"
        });
        let s = schedules(&farm);
        let last = &s[0]["last"];
        assert_eq!(last["regressions"], 0, "{last}");
        matrices.push(last["matrix_id"].as_str().unwrap().to_string());
        let r = farm.results(&matrices[n]);
        let points = r["cells"][0]["history"][0]["points"].as_array().unwrap();
        assert_eq!(points.last().unwrap()["kernel"], kernel.as_str(), "{r}");
        assert!(
            r["results"]
                .as_array()
                .unwrap()
                .iter()
                .all(|x| x["ok"] == true),
            "{r}"
        );
    }
    // The second execution's cell continues the first's history: one
    // series across the two kernels.
    let r = farm.results(&matrices[1]);
    let history = r["cells"][0]["history"].as_array().unwrap();
    let wall = history.iter().find(|h| h["metric"] == "wall_s").unwrap();
    let points: Vec<&str> = wall["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["matrix_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        points,
        [matrices[0].as_str(), matrices[1].as_str()],
        "{wall}"
    );
    let text = String::from_utf8(farm.farmctl(&["schedules"]).stdout).unwrap();
    assert!(text.contains("executions: 2"), "{text}");
    assert!(text.contains("no regression against baselines"), "{text}");

    // Unscheduled: a third kernel runs nothing.
    let out = farm.farmctl(&["unschedule", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&format!("unscheduled {id}:")),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(schedules(&farm), Value::Array(vec![]));
    let out = farm.farmctl(&["unschedule", "s-nothere"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown schedule is bad input"
    );
}

#[test]
fn a_history_that_steps_up_sets_the_regression_gauge_where_it_began() {
    let _g = serial();
    let mut farm = Farm::start(&["--metrics-listen", "127.0.0.1:0"]);
    farm.start_agent();
    farm.wait_agents(1);
    let ids = common::stepped_history(&farm);
    let r = farm.results(ids.last().unwrap());
    let wall = r["cells"][0]["history"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["metric"] == "wall_s")
        .cloned()
        .unwrap();
    let cps = wall["change_points"].as_array().unwrap();
    assert_eq!(cps.len(), 1, "{wall}");
    assert_eq!(
        cps[0]["index"], 6,
        "the change begins at the 7th matrix: {wall}"
    );

    let addr = common::written_addr(&farm.data_dir().join("metrics.addr"));
    let (_, text) = scrape(addr, "/metrics");
    let line = text
        .lines()
        .find(|l| l.starts_with("farm_regression_ratio{") && l.contains("metric=\"wall_s\""))
        .unwrap_or_else(|| panic!("no wall_s regression in\n{text}"));
    assert!(line.contains(&format!("matrix=\"{}\"", ids[6])), "{line}");
    assert!(line.contains("kernel=\"running\""), "{line}");
    assert!(line.contains("found_by=\"history\""), "{line}");
    let ratio: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(ratio > 1.2, "{line}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("farm_series_change_ratio{")
                && l.contains(&format!("matrix=\"{}\"", ids[6]))),
        "{text}"
    );
}
