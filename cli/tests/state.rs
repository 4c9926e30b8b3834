//! Machine states are always restored: the agent is SIGKILLed at every step
//! of applying and of restoring a state, restarted, and the machine must be
//! exactly as before — CPUs online, autogroup, no cgroups, no processes.
//!
//! Needs root, CPU hotplug of cpu1, and a cpu cgroup controller: the CI
//! machine has all three. It fails loudly where they are missing.

mod common;

use std::path::Path;
use std::time::Duration;

use common::{Farm, serial, wait_for};

#[derive(Debug, Clone, PartialEq, Eq)]
struct Machine {
    online: String,
    autogroup: String,
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
    let mut farm = Farm::start(&["--heartbeat-ms", "200", "--lease-ms", "1000"]);
    let matrix = farm.write(
        "state.toml",
        &format!(
            r#"
name = "crash-every-step"
[[workloads]]
name = "cpu-hog"
params = {{ seconds = 0.3 }}
[[states]]
name = "everything"
hotplug = "offline:1"
autogroup = {flip}
cgroup = "separate"
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
