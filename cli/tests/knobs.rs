//! Scheduler knobs as a matrix axis, end to end in real guests: a Debian
//! 6.12 kernel (EEVDF) booted under TCG with a state's sched features,
//! debugfs tunables, NUMA balancing and command-line words; the guest
//! applies them, reports them as its kernel then shows them, and the agent
//! checks them against the state. A feature the kernel lacks, and a CFS
//! tunable EEVDF no longer has, fail their runs naming them.
//!
//! This machine's own kernel refuses debugfs scheduler files even to root
//! (docs/BENCHMARKS.md and the agent's capabilities: none advertised), so
//! guests are where these knobs are tested. Needs what `cli/tests/guest.rs`
//! needs; fails, never skips, without it.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::time::Duration;

use common::{Farm, serial, wait_for};

const KERNEL: &str = "debian:6.12.107+deb12-cloud-amd64";

#[test]
fn eevdf_knobs_are_applied_in_a_guest_and_what_its_kernel_lacks_is_named() {
    let _g = serial();
    let farm = Farm::with_guests(&[]);
    let file = farm.write(
        "knobs.toml",
        &format!(
            r#"
name = "eevdf-knobs"
timeout_s = 120
kernels = ["{KERNEL}"]

[[workloads]]
name = "cpu-hog"
params = {{ threads = 4, seconds = 1 }}

[[states]]
name = "eevdf"
sched_features = ["NO_RUN_TO_PARITY", "HRTICK"]
sched_tunables = {{ base_slice_ns = 1500000, migration_cost_ns = 250000 }}
numa_balancing = 1
cmdline = ["relax_domain_level=1", "preempt=full"]

[[states]]
name = "no-such-feature"
sched_features = ["NO_PLACE_LAGGY"]

[[states]]
name = "cfs-tunable"
sched_tunables = {{ min_granularity_ns = 1000000 }}
"#
        ),
    );
    let id = farm.submit(&file);
    wait_for(Duration::from_secs(600), "the matrix to finish", || {
        farm.results(&id)["state"] == "done"
    });
    let v = farm.results(&id);
    let by_cell = |c: u64| common::result_of_cell(&v, c);
    // Taken, and checked by the agent against what the kernel then showed.
    let r = by_cell(0);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["executor"], "tcg", "{r}");
    assert!(r["metrics"]["hog_ops_per_s"].as_f64().unwrap() > 0.0, "{r}");
    // Four threads on four vCPUs wait little, but a figure there must be.
    let wait = r["metrics"]["runqueue_wait_s"].as_f64();
    assert!(
        wait.is_some_and(|w| w >= 0.0),
        "no runqueue wait from the guest: {r}"
    );
    assert!(
        r["metrics"]["runqueue_wait_p99_us"].as_f64().is_some(),
        "{r}"
    );
    // Load balancing per level of the 2-node guest (MC within a node, NUMA
    // across), from /proc/schedstat around the run.
    let mut lb: Vec<&str> = r["metrics"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .filter(|k| k.starts_with("lb_"))
        .collect();
    lb.sort_unstable();
    // Each idle type's attempts, failures, imbalance and tasks pulled;
    // tasks pushed; wake-affine moves.
    let mut want: Vec<String> = ["mc", "numa"]
        .iter()
        .flat_map(|l| {
            let per_type = ["busy", "idle", "newidle"].into_iter().flat_map(move |t| {
                ["", "_failed", "_imbalance", "_gained"].map(|o| format!("lb_{l}_{t}{o}"))
            });
            per_type.chain(["pushed", "wake_affine"].map(|c| format!("lb_{l}_{c}")))
        })
        .collect();
    want.sort_unstable();
    assert_eq!(lb, want, "{r}");
    assert!(r["metrics"]["lb_mc_idle"].as_f64().unwrap() > 0.0, "{r}");

    let bad = by_cell(1);
    assert_eq!(bad["ok"], false, "{bad}");
    let e = bad["error"].as_str().unwrap();
    assert!(
        e.contains(
            "the guest could not apply sched feature NO_PLACE_LAGGY: the guest's kernel has \
             no such feature (it has: PLACE_LAG "
        ),
        "{e}"
    );
    let cfs = by_cell(2);
    assert_eq!(cfs["ok"], false, "{cfs}");
    let e = cfs["error"].as_str().unwrap();
    assert!(
        e.contains(
            "the guest could not apply sched tunable min_granularity_ns: the guest's kernel \
             has no such tunable (/sys/kernel/debug/sched/min_granularity_ns)"
        ),
        "{e}"
    );
}

#[test]
fn a_cmdline_state_is_refused_for_the_agents_own_kernel() {
    let _g = serial();
    let farm = Farm::start(&[]);
    let file = farm.write(
        "host.toml",
        r#"
name = "cmdline-on-host"
kernels = ["running"]
[[workloads]]
name = "cpu-hog"
[[states]]
name = "isolated"
cmdline = ["isolcpus=1"]
"#,
    );
    let out = farm.farmctl(&["submit", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("states[0].cmdline")
            && err.contains("a kernel command line needs a kernel booted in a guest"),
        "{err}"
    );
}
