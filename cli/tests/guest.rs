//! The kernel axis end to end: a real coordinator and agent, a matrix with
//! the running kernel, a Debian x86_64 kernel and a Debian s390x kernel; the
//! Debian cells run in QEMU guests under TCG and say so in every result.
//!
//! Needs qemu-system-x86, qemu-system-misc, busybox-static, binutils and s390x
//! as a dpkg foreign architecture (scripts/test.sh sets them up) and Debian's
//! package archive; it fails, never skips, without them.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::time::{Duration, Instant};

use common::{Farm, serial, wait_for};

/// A coordinator and one agent whose guests share the tests' kernel cache.
/// Submits `file` and waits up to `secs` for its matrix to end: its results.
fn finished(farm: &Farm, file: &std::path::Path, secs: u64) -> serde_json::Value {
    let id = farm.submit(file);
    wait_for(Duration::from_secs(secs), "the matrix to finish", || {
        farm.results(&id)["state"] == "done"
    });
    farm.results(&id)
}

fn guest_farm() -> Farm {
    guest_farm_with(&[])
}

fn guest_farm_with(env: &[(&str, String)]) -> Farm {
    Farm::with_guests(env)
}

/// QEMU processes on this machine (the agent's guests are its children,
/// not ours).
fn qemus() -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(comm) = std::fs::read_to_string(entry.path().join("comm"))
            && comm.starts_with("qemu-system")
        {
            found.push(format!(
                "{} {}",
                entry.file_name().to_string_lossy(),
                comm.trim()
            ));
        }
    }
    found
}

#[test]
fn x86_64_and_s390x_guests_run_beside_the_host_and_are_not_compared_across() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "kernels.toml",
        r#"
name = "kernels"
repetitions = 2
timeout_s = 120
kernels = ["running", "debian:6.1.0-57-cloud-amd64", "debian:6.1.0-50-s390x"]

[[workloads]]
name = "rt-hackbench"
params = { groups = 2, fds = 5, loops = 20 }

[[states]]
name = "autogroup-off"
autogroup = 0

[baseline]
kernel = "debian:6.1.0-57-cloud-amd64"
"#,
    );
    let v = finished(&farm, &file, 600);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 6, "{v}");
    for r in results {
        assert_eq!(r["ok"], true, "{r}");
        assert!(
            r["metrics"]["hackbench_time_s"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        let (arch, executor, release) = match r["cell"].as_u64().unwrap() {
            0 => ("x86_64", "host", None),
            1 => ("x86_64", "tcg", Some("6.1.0-57-cloud-amd64")),
            _ => ("s390x", "tcg", Some("6.1.0-50-s390x")),
        };
        assert_eq!(r["arch"], arch, "{r}");
        assert_eq!(r["executor"], executor, "{r}");
        let Some(release) = release else { continue };
        // The release the guest booted, by `uname -r` inside it.
        assert_eq!(r["kernel_release"], release, "{r}");
        let start = r["metrics"]["guest_start_s"].as_f64().unwrap();
        assert!(start > 0.5 && start < 120.0, "{r}");
        eprintln!("{arch} guest_start_s {start:.2}");
        // The guest's own telemetry: CPU times, IPIs, thread placement.
        let m = &r["metrics"];
        assert!(
            m["user_s"].as_f64().unwrap() + m["sys_s"].as_f64().unwrap() > 0.0,
            "{r}"
        );
        assert!(m["context_switches"].as_f64().unwrap() > 0.0, "{r}");
        let t = &r["telemetry"];
        let nodes = t["nodes"].as_array().expect("placement nodes");
        assert_eq!(nodes.len(), if arch == "s390x" { 1 } else { 2 }, "{t}");
    }
    // Side by side, but another arch is never compared.
    let cells = v["cells"].as_array().unwrap();
    let notes = cells[2]["notes"].to_string();
    assert!(
        notes.contains("not compared: s390x runs against x86_64 runs"),
        "{notes}"
    );
    let notes = cells[0]["notes"].to_string();
    assert!(notes.contains("not compared: emulated (tcg)"), "{notes}");
}

/// A guest run cancelled by the coordinator stops at once, its QEMU killed.
#[test]
fn a_cancelled_guest_run_stops_and_leaves_no_qemu() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "long.toml",
        r#"
name = "long-guest"
timeout_s = 600
kernels = ["debian:6.1.0-57-cloud-amd64"]

[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = 300 }
"#,
    );
    let id = farm.submit(&file);
    wait_for(Duration::from_secs(120), "the guest to start", || {
        !qemus().is_empty()
    });
    let t = Instant::now();
    let out = farm.farmctl(&["cancel", &id]);
    assert!(out.status.success(), "{out:?}");
    wait_for(Duration::from_secs(30), "the QEMU to be gone", || {
        qemus().is_empty()
    });
    eprintln!("cancel → QEMU gone: {:.1?}", t.elapsed());
    wait_for(Duration::from_secs(30), "the matrix to end", || {
        farm.results(&id)["state"] != "running"
    });
}

/// Seed 000 in a guest: cpu1 taken offline and brought back before the run
/// on a guest of 4 nodes × 2 vCPUs (the matrix's `[guest]`); the result
/// carries the sched domains before and after (debugfs, `sched_verbose`),
/// their difference, and threads placed on the 4 nodes.
#[test]
fn a_hotplug_cycle_inside_a_guest_reports_the_domains_before_and_after() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "seed000.toml",
        r#"
name = "hotplug-in-guest"
timeout_s = 120
kernels = ["debian:6.1.0-57-cloud-amd64"]

[[workloads]]
name = "cpu-hog"
params = { threads = 4, seconds = 1 }

[[states]]
name = "cycled"
hotplug = "cycle:1"
autogroup = 0

[guest]
cpus = 8
numa_nodes = 4
memory_mib = 1024
"#,
    );
    let v = finished(&farm, &file, 300);
    let r = &v["results"][0];
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["executor"], "tcg", "{r}");
    let t = &r["telemetry"]["topology"];
    assert!(t["source"].as_str().unwrap().contains("debugfs"), "{t}");
    let before = t["before"].as_array().unwrap();
    let after = t["after"].as_array().unwrap();
    assert_eq!(before.len(), 8, "{t}");
    assert_eq!(after.len(), 8, "{t}");
    let nodes = r["telemetry"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4, "{r}");
    for n in nodes {
        assert_eq!(n["cpus"], 2, "{r}");
    }
    for line in before.iter().chain(after) {
        assert!(line.as_str().unwrap().contains("NUMA"), "{t}");
    }
    // Debian's 6.1 rebuilds the NUMA level after the cycle: nothing changed.
    assert_eq!(t["changes"], serde_json::json!([]), "{t}");
}

/// What a guest counts, against what is known: four threads spinning for
/// 2 s on 2 vCPUs keep both CPUs busy (4 CPU-s on the task clock, counted
/// by the in-guest sampler's perf counters) while two of them always wait
/// (4 s of runqueue wait, from the runqueues' `run_delay`: the sweeps'
/// per-thread readings of a run this short would see a fraction).
#[test]
fn a_guests_counters_and_runqueue_wait_match_four_threads_on_two_cpus() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "truth.toml",
        r#"
name = "truth"
timeout_s = 120
kernels = ["debian:6.1.0-57-cloud-amd64"]

[[workloads]]
name = "cpu-hog"
params = { threads = 4, seconds = 2 }

[guest]
cpus = 2
numa_nodes = 1
"#,
    );
    let v = finished(&farm, &file, 300);
    let r = &v["results"][0];
    assert_eq!(r["ok"], true, "{r}");
    let m = &r["metrics"];
    let get = |name: &str| {
        m[name]
            .as_f64()
            .unwrap_or_else(|| panic!("no {name} in {m}"))
    };
    eprintln!("{m:#}");
    // Both CPUs busy for the 2 s, and the wait of the two that do not run.
    let clock = get("task_clock_s");
    assert!((3.6..4.4).contains(&clock), "task clock {clock} s");
    let wait = get("runqueue_wait_s");
    assert!((3.4..4.6).contains(&wait), "runqueue wait {wait} s");
    let cpus = get("cpus_utilised");
    assert!((1.7..2.05).contains(&cpus), "CPUs utilised {cpus}");
    // The counters' own figures, not the guest-wide or sampled ones: four
    // threads sharing two CPUs are switched at every slice (EEVDF or CFS,
    // some hundreds a second), and the user and system time of `times`
    // agree with the task clock.
    let switches = get("context_switches");
    assert!(switches >= 200.0, "{switches} context switches");
    let cpu_s = get("user_s") + get("sys_s");
    assert!(
        (clock - cpu_s).abs() < 0.15 * clock,
        "times {cpu_s} s, task clock {clock} s"
    );
    assert!(m["cpu_migrations"].is_number(), "{m}");
    assert!(m["page_faults"].as_f64().unwrap() > 0.0, "{m}");
    assert!(qemus().is_empty(), "{:?}", qemus());
}

/// A kernel image of the agent's own (`file:`, from its --kernel-dir) boots
/// like a Debian one; one outside that directory is never read.
#[test]
fn a_file_kernel_from_the_agents_kernel_dir_boots_in_a_guest() {
    let _g = serial();
    let cache = common::guest_cache();
    let debian =
        farm_agent::executor::guest::image::kernels::resolve("debian:6.1.0-57-cloud-amd64", &cache)
            .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("vmlinuz-mine");
    std::fs::copy(&debian.vmlinuz, &image).unwrap();
    let farm = guest_farm_with(&[("FARM_KERNEL_DIRS", dir.path().display().to_string())]);
    let file = farm.write(
        "file.toml",
        &format!(
            r#"
name = "file-kernel"
timeout_s = 120
kernels = ["file:{}"]

[[workloads]]
name = "cpu-hog"
params = {{ threads = 1, seconds = 1 }}
"#,
            image.display()
        ),
    );
    let v = finished(&farm, &file, 300);
    let r = &v["results"][0];
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["executor"], "tcg", "{r}");
    assert_eq!(r["arch"], "x86_64", "{r}");
    assert_eq!(r["kernel_release"], "6.1.0-57-cloud-amd64", "{r}");
    assert!(r["metrics"]["hog_ops_per_s"].as_f64().unwrap() > 0.0, "{r}");

    // Another path: no agent lists it, so the cell waits and says why.
    let file = farm.write(
        "elsewhere.toml",
        r#"
name = "elsewhere"
kernels = ["file:/etc/vmlinuz-not-here"]

[[workloads]]
name = "cpu-hog"
"#,
    );
    let id = farm.submit(&file);
    let waiting = farm.results(&id)["waiting"].to_string();
    assert!(
        waiting.contains("an agent with that image in its --kernel-dir"),
        "{waiting}"
    );
    let out = farm.farmctl(&["cancel", &id]);
    assert!(out.status.success(), "{out:?}");
}

/// A `git:` kernel of a matrix: the agent that has the repository builds
/// the ref's commit (as `nobody`, the test's build user; from the cache
/// when agent/tests/build.rs built it first) and runs the workload in its
/// guest; the result names the commit and the configuration's hash. A
/// repository no agent has waits, saying why, and a ref the repository
/// lacks fails its run, naming it.
#[test]
fn a_git_kernel_is_built_by_the_agent_with_its_repository_and_runs() {
    let _g = serial();
    let repo = common::kernel_tree();
    let commit = common::git(&repo, &["rev-parse", "v6.1"]);
    let farm = guest_farm_with(&[
        ("FARM_KERNEL_REPOS", format!("linux={repo}")),
        ("FARM_BUILD_USER", "nobody".into()),
    ]);
    let file = farm.write(
        "git.toml",
        r#"
name = "git-kernel"
timeout_s = 120
kernels = ["git:linux@v6.1", "git:linux@no-such-tag"]

[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = 1 }
"#,
    );
    let id = farm.submit(&file);
    // A cold build is minutes on 2 cores; the build test usually did it.
    wait_for(Duration::from_secs(1500), "the matrix to finish", || {
        farm.results(&id)["state"] == "done"
    });
    let v = farm.results(&id);
    let by_cell = |c: u64| common::result_of_cell(&v, c);
    let r = by_cell(0);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["executor"], "tcg", "{r}");
    assert_eq!(r["kernel_commit"], commit.as_str(), "{r}");
    assert_eq!(
        r["kernel_config_sha256"].as_str().map(str::len),
        Some(64),
        "{r}"
    );
    assert!(r["metrics"]["hog_ops_per_s"].as_f64().unwrap() > 0.0, "{r}");
    let bad = by_cell(1);
    assert_eq!(bad["ok"], false, "{bad}");
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("`no-such-tag` is no commit, tag or branch of repository `linux`"),
        "{bad}"
    );

    let file = farm.write(
        "tip.toml",
        "name = \"tip\"\nkernels = [\"git:tip@sched/urgent\"]\n[[workloads]]\nname = \"cpu-hog\"\n",
    );
    let id = farm.submit(&file);
    let waiting = farm.results(&id)["waiting"].to_string();
    assert!(
        waiting.contains("an agent with the repository `tip` in its --kernel-repo"),
        "{waiting}"
    );
    let out = farm.farmctl(&["cancel", &id]);
    assert!(out.status.success(), "{out:?}");
}

/// Seed 001 in a real guest: four STREAM instances on a 4-node guest (one
/// CPU per node). With `isolcpus=3` the scheduler never puts them on CPU 3,
/// so two instances must share a node while node 3 idles; without it each
/// has a node of its own. The diagnosis says so in the report's words.
#[test]
fn instances_crowding_a_node_while_another_idles_are_named_in_the_diagnosis() {
    let _g = serial();
    let farm = guest_farm();
    let file = farm.write(
        "crowding.toml",
        r#"
name = "stream-crowding"
repetitions = 2
timeout_s = 120
kernels = ["debian:6.1.0-57-cloud-amd64"]

[[workloads]]
name = "stream"
params = { instances = 4, size_mb = 16, ntimes = 20 }

[[states]]
name = "spread"
autogroup = 0

[[states]]
name = "node-3-isolated"
autogroup = 0
cmdline = ["isolcpus=3"]

[guest]
cpus = 4
numa_nodes = 4
memory_mib = 1024

[baseline]
state = "spread"
"#,
    );
    let v = finished(&farm, &file, 900);
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["ok"], true, "{r}");
    }
    let isolated = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().contains("node-3-isolated"))
        .unwrap_or_else(|| panic!("no isolated cell: {v}"))
        .clone();
    let diagnosis: Vec<&str> = isolated["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    // "instances 1 and 2 both on NUMA node 0; node 3 idle": which share a
    // node, and how many (two "both", three "all"), is the scheduler's
    // choice (instances that move between nodes 0-2 can leave another node
    // without one at home: "nodes 0 and 3 idle"); node 3 idle is isolcpus'.
    let crowding: Vec<&&str> = diagnosis
        .iter()
        .filter(|l| {
            (l.contains(" both on NUMA node ") || l.contains(" all on NUMA node "))
                && l.ends_with(" 3 idle")
        })
        .collect();
    let spread = &v["cells"][0];
    eprintln!("{diagnosis:#?}");
    assert_eq!(
        crowding.len(),
        1,
        "{diagnosis:?}\nisolated: {}\nspread: {}",
        isolated["notes"],
        spread["notes"]
    );
    assert!(crowding[0].starts_with("instances "), "{crowding:?}");
    assert!(qemus().is_empty(), "{:?}", qemus());
}

/// Seed 002's example in a guest (`examples/udp-stream-guest.toml`, cut to
/// one short run a state): the loopback UDP stream runs (the guest brings
/// `lo` up), and each result carries the load balancer's counters per
/// domain level beside the IPIs per kind.
#[test]
fn the_udp_stream_guest_example_shows_balancing_beside_ipis() {
    let _g = serial();
    let farm = guest_farm();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/udp-stream-guest.toml"
    ))
    .unwrap();
    assert!(
        example.contains("repetitions = 5") && example.contains("seconds = 3"),
        "the example changed shape: update this test"
    );
    let text = example
        .replace("repetitions = 5", "repetitions = 1")
        .replace("seconds = 3", "seconds = 1")
        + "\n[verdict]\nmax_runs = 1\n";
    let file = farm.write("udp.toml", &text);
    let v = finished(&farm, &file, 600);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "{v}");
    for r in results {
        assert_eq!(r["ok"], true, "{r}");
        let m = &r["metrics"];
        assert!(m["messages_per_s"].as_f64().unwrap() > 0.0, "{r}");
        for name in [
            "lb_mc_newidle",
            "lb_numa_newidle",
            "rescheduling_ipis",
            "function_call_ipis",
        ] {
            assert!(m[name].as_f64().is_some(), "no {name}: {r}");
        }
        // Every message wakes the receiver on the other node: 6.1 queues
        // those wake-ups on the remote CPU with a function-call IPI.
        assert!(m["function_call_ipis"].as_f64().unwrap() > 100.0, "{r}");
    }
    assert!(qemus().is_empty(), "{:?}", qemus());
}
