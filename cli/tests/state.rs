//! Machine states are always restored: the agent is SIGKILLed at every step
//! of applying and of restoring a state, restarted, and the machine must be
//! exactly as before — CPUs online, autogroup, NUMA balancing, no cgroups,
//! no processes. (Scheduler features and tunables are debugfs files this
//! machine's kernel refuses even to root; they are applied, and checked,
//! inside guests: `cli/tests/knobs.rs`.)
//!
//! Needs root, CPU hotplug of cpu1, and a cpu cgroup controller: the CI
//! machine has all three. It fails loudly where they are missing.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Farm, serial, wait_for};
use nix::sys::resource::{UsageWho, getrusage};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Machine {
    online: String,
    autogroup: String,
    numa_balancing: String,
    farm_cgroups: Vec<String>,
    workloads: String,
}

fn read(p: &str) -> String {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{p}: {e}"))
        .trim()
        .to_string()
}

fn snapshot() -> Machine {
    let farm_cgroups = [
        "/sys/fs/cgroup/cpu/farm",
        "/sys/fs/cgroup/cpuset/farm",
        "/sys/fs/cgroup/farm",
    ]
    .iter()
    .filter(|p| Path::new(p).exists())
    .map(|p| p.to_string())
    .collect();
    // Only our workload binary: other farm-workload builds may be running here.
    let pattern = format!("^{} ", env!("CARGO_BIN_EXE_farm-workload"));
    let pgrep = std::process::Command::new("pgrep")
        .args(["-f", &pattern])
        .output()
        .unwrap();
    Machine {
        online: read("/sys/devices/system/cpu/online"),
        autogroup: read("/proc/sys/kernel/sched_autogroup_enabled"),
        numa_balancing: read("/proc/sys/kernel/numa_balancing"),
        farm_cgroups,
        workloads: String::from_utf8_lossy(&pgrep.stdout).trim().to_string(),
    }
}

fn require_root_and_hotplug() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test changes CPU hotplug, sysctls and cgroups: run it as root (CI does)"
    );
    assert!(
        Path::new("/sys/devices/system/cpu/cpu1/online").exists(),
        "this test needs a hotpluggable cpu1 (/sys/devices/system/cpu/cpu1/online)"
    );
}

#[test]
fn a_crash_at_any_step_of_applying_or_restoring_leaves_the_machine_as_it_was() {
    let _g = serial();
    require_root_and_hotplug();
    let before = snapshot();
    assert!(
        before.farm_cgroups.is_empty() && before.workloads.is_empty(),
        "machine not clean to begin with: {before:?}"
    );
    assert_eq!(before.online, "0-1", "cpu1 must be online to begin with");
    let flip = if before.autogroup == "1" { 0 } else { 1 };
    let numa = if before.numa_balancing == "1" { 0 } else { 1 };
    let mut farm = Farm::start(&["--heartbeat-ms", "200", "--lease-ms", "1000"]);
    let matrix = farm.write(
        "state.toml",
        &format!(
            r#"
name = "crash-every-step"
[[workloads]]
name = "cpu-hog"
params = {{ seconds = 0.3 }}
[[loads]]
name = "cpu-hog"
instances = 2
[[states]]
name = "everything"
hotplug = "offline:1"
autogroup = {flip}
numa_balancing = {numa}
cgroup = "separate"
cgroup_cpu_weight = 200
"#
        ),
    );
    let state_dir = farm.dir.path().join("agent-state");
    let mut changed_seen = false;
    let mut step = 1;
    loop {
        assert!(step < 100, "the run never completed without a crash");
        let victim =
            farm.start_agent_with(&state_dir, &[("FARM_AGENT_CRASH_AT", step.to_string())]);
        farm.wait_agents(1);
        let id = farm.submit(&matrix);
        let mut crashed = false;
        wait_for(
            Duration::from_secs(60),
            "a crash or the end of the run",
            || {
                if farm.agents[victim].child.try_wait().unwrap().is_some() {
                    crashed = true;
                    return true;
                }
                farm.results(&id)["state"] == "done"
            },
        );
        if !crashed {
            // Past the last step: the run went through; the machine was restored normally.
            let v = farm.results(&id);
            assert_eq!(v["results"][0]["ok"], true, "{v}");
            farm.agents[victim].kill();
            assert_eq!(snapshot(), before, "after a normal run");
            break;
        }
        changed_seen |= snapshot() != before;
        // The agent comes back, restores from its journal before it connects, and runs the re-queued run.
        let again = farm.start_agent_with(&state_dir, &[]);
        farm.wait_agents(1);
        wait_for(Duration::from_secs(60), "the re-queued run", || {
            farm.results(&id)["state"] == "done"
        });
        farm.agents[again].kill();
        assert_eq!(snapshot(), before, "after a crash at step {step}");
        step += 1;
    }
    assert!(step > 5, "only {step} steps: the state was not applied");
    assert!(
        changed_seen,
        "no crash ever left a change behind: the test did not test restoring"
    );
}

/// The busy and stolen ticks of all CPUs (`/proc/stat`'s `cpu` line).
fn busy_and_steal_ticks() -> (u64, u64) {
    let stat = read("/proc/stat");
    let line = stat.lines().next().unwrap();
    let t: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy = t[0] + t[1] + t[2] + t[5] + t[6];
    (busy, t[7])
}

/// CPU time, in seconds, of this process and of its children once reaped.
fn ours_s() -> f64 {
    let s = |who| {
        let u = getrusage(who).unwrap();
        let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 + v.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    };
    s(UsageWho::RUSAGE_SELF) + s(UsageWho::RUSAGE_CHILDREN)
}

/// Whether the machine's CPUs were the test's while it ran: the busy time
/// of all CPUs less the test's own (this process and the `farmctl run` it
/// reaped, with every workload and load that ran under it), and the time
/// the hypervisor stole. Said in words for a failure's message.
struct Others {
    stat: (u64, u64),
    ours_s: f64,
    t: Instant,
}

impl Others {
    fn watch() -> Others {
        Others {
            stat: busy_and_steal_ticks(),
            ours_s: ours_s(),
            t: Instant::now(),
        }
    }

    /// After the test's processes are reaped. Other work that took more
    /// than `share` of the CPUs changes the shares the test reads.
    fn condition(self, share: f64) -> String {
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        let (busy, steal) = busy_and_steal_ticks();
        let window = self.t.elapsed().as_secs_f64();
        let others = ((busy - self.stat.0) as f64 / hz - (ours_s() - self.ours_s)).max(0.0);
        let steal = (steal - self.stat.1) as f64 / hz;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let spare = share * cpus * window;
        let figures = format!(
            "other work took {others:.1} CPU-s of the {cpus} CPUs in the test's {window:.0} s \
             and the hypervisor stole {steal:.1} s"
        );
        if others + steal > spare {
            format!(
                "CONDITION NOT MET, the test needs the machine to itself: {figures} (at most \
                 {spare:.1} s, {:.0}% of the CPUs)",
                share * 100.0
            )
        } else {
            format!("the machine was quiet ({figures}): the reading is off")
        }
    }
}

/// Seed 003 on two CPUs: lu beside two CPU hogs gets a third of the machine
/// when each program has a cgroup of its own, half of it when they share
/// one, so `separate` must be clearly slower — and the machine must be left
/// as it was found.
#[test]
fn group_imbalance_example_shows_separate_groups_slower_and_restores_the_machine() {
    let _g = serial();
    require_root_and_hotplug();
    let before = snapshot();
    let dir = tempfile::tempdir().unwrap();
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/group-imbalance.toml"
    ))
    .unwrap();
    // One thread count, to keep the test short: five runs a side are
    // enough for a verdict when every separate run is slower; a noisy
    // machine gets one more round.
    let text = example.replace("threads = [2, 3]", "threads = 2") + "\n[verdict]\nmax_runs = 10\n";
    assert!(
        example.contains("repetitions = 5") && !example.contains("[verdict]"),
        "the example changed shape: update this test"
    );
    let file = dir.path().join("gi.toml");
    std::fs::write(&file, text).unwrap();
    let machine = Others::watch();
    let out = std::process::Command::new(common::farmctl_bin())
        .args(["run", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    // The shares below are of the two CPUs, to within 0.15 of a CPU
    // (7.5%): other work may take 5% of them.
    let others = machine.condition(0.05);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let separate = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"].as_str().unwrap().contains("separate"))
        .unwrap();
    let wall = separate["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "wall_s")
        .unwrap();
    let ratio = wall["ratio"].as_f64().unwrap();
    assert!(
        ratio > 1.2,
        "separate groups should be clearly slower than shared: ratio {ratio}; {others}: {v}"
    );
    // And the farm says so, with the telemetry that moved with it.
    assert_eq!(separate["verdict"], "regression", "{others}: {separate}");
    assert_eq!(wall["verdict"], "regression", "{others}: {wall}");
    assert!(wall["ci_low"].as_f64().unwrap() > 1.0, "{others}: {wall}");
    let diagnosis = separate["diagnosis"].as_array().unwrap();
    assert!(
        !diagnosis.is_empty(),
        "a regression without a diagnosis; {others}: {separate}"
    );
    // Who took the CPUs lu lost: the two hogs' share of the CPU time the
    // test's programs got, about 1/2 when all four threads share one group
    // (2 of 4 threads) and 2/3 when each program has a group (2 of 3 equal
    // groups). A share of what they got, not of the machine: other work on
    // a busy machine takes CPUs from all of them, not from the split.
    let medians = |name: &str| {
        let m = separate["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {separate}"));
        (
            m["baseline_median"].as_f64().unwrap(),
            m["median"].as_f64().unwrap(),
        )
    };
    let (loads_b, loads_c) = medians("loads_cpus");
    let (lu_b, lu_c) = medians("cpus_utilised");
    let (b, c) = (loads_b / (loads_b + lu_b), loads_c / (loads_c + lu_c));
    assert!(
        (0.42..=0.58).contains(&b),
        "shared: the loads took {b:.2} of the CPU time ({loads_b:.2} CPUs, lu {lu_b:.2}); {others}"
    );
    assert!(
        (0.60..=0.73).contains(&c),
        "separate: the loads took {c:.2} of the CPU time ({loads_c:.2} CPUs, lu {lu_c:.2}); {others}"
    );
    // Where the hogs' threads were: each is a main thread and one worker,
    // on this machine's one node, in both states.
    let on_node0 = separate["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "loads_node0_threads")
        .unwrap_or_else(|| panic!("no loads_node0_threads: {separate}"));
    assert_eq!(
        (
            on_node0["baseline_median"].as_f64(),
            on_node0["median"].as_f64()
        ),
        (Some(4.0), Some(4.0)),
        "{on_node0}"
    );
    // The farm says what the loads took, in CPUs of this machine, as the
    // medians above: "the competing loads took X of 2 CPUs (Y in the
    // baseline)".
    let line =
        format!("the competing loads took {loads_c:.1} of 2 CPUs ({loads_b:.1} in the baseline)");
    assert!(
        diagnosis.iter().any(|l| l.as_str() == Some(line.as_str())),
        "no {line:?} in {diagnosis:?}; {others}"
    );
    // Each cell says where its threads were.
    for c in v["cells"].as_array().unwrap() {
        let notes = c["notes"].as_array().unwrap();
        assert!(
            notes
                .iter()
                .any(|n| n.as_str().unwrap().starts_with("node 0 holds")),
            "{c}"
        );
    }
    assert_eq!(snapshot(), before);
}
