//! Telemetry checked against a known answer, on real processes.
//!
//! Each test builds a situation whose figure is known before it runs —
//! a thread kept runnable behind a real-time hog for a set time — and
//! checks that the sampler reports that figure. They need root (SCHED_FIFO)
//! and CPU 1, and run one at a time in this binary of their own, so that
//! nothing else of the test suite competes for the CPUs they measure.

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use farm_agent::telemetry::placement::NodeMap;
use farm_agent::telemetry::sampler::Sampler;
use farm_agent::telemetry::{procstat, waste};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn require_root_and_two_cpus() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests need root: SCHED_FIFO for the hog"
    );
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_ne!(online.trim(), "0", "these tests need CPU 1 online");
    for tool in ["chrt", "taskset", "timeout"] {
        assert!(
            Command::new(tool).arg("--version").output().is_ok(),
            "`{tool}` is missing (util-linux, coreutils)"
        );
    }
}

/// How long the hog holds CPU 1.
const HOG_S: f64 = 1.5;

/// A shell whose victim, a plain loop pinned to CPU 1, is runnable
/// throughout, while a SCHED_FIFO loop on CPU 1 holds the CPU for HOG_S:
/// the victim waits HOG_S on CPU 1's runqueue while CPU 0 idles (`timeout`
/// itself is not pinned: at the hog's priority it could never preempt it). The
/// victim then runs its remaining work (`iterations`) alone.
fn victim_behind_a_hog(iterations: u32) -> std::process::Child {
    let script = format!(
        "taskset -c 1 sh -c 'i=0; while [ $i -lt {iterations} ]; do i=$((i+1)); done' &
         sleep 0.05
         timeout {HOG_S} chrt -f 10 taskset -c 1 sh -c 'while :; do :; done'
         wait"
    );
    Command::new("/bin/sh")
        .args(["-c", &script])
        .spawn()
        .unwrap()
}

#[test]
fn a_thread_kept_behind_a_busy_cpu_shows_its_wait_and_the_wasted_core() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    let mut child = victim_behind_a_hog(300_000);
    let sampler = Sampler::spawn(Path::new("/"), Duration::from_millis(20)).unwrap();
    sampler.track(child.id());
    assert!(child.wait().unwrap().success());
    let c = sampler.finish();

    // The victim waited the hog's whole time; the hog (FIFO) and the
    // shells next to nothing.
    let wait = c.waits.total_s();
    eprintln!("wait {wait:.3} s over {} sweeps", c.snapshots.len());
    assert!(
        (HOG_S - 0.05..HOG_S + 0.15).contains(&wait),
        "runqueue wait {wait:.3} s, expected about {HOG_S} s"
    );
    // Timeslices cut short by the hog waited ~HOG_S: the largest wait per
    // timeslice is of that order, far above a shared CPU's few ms.
    let max = c.waits.quantile_us(1.0).unwrap();
    assert!(max > 100_000.0, "longest wait per timeslice {max:.0} µs");
    // The series of waiting threads adds up to the same wait over time.
    // The kernel books a wait when the thread gets the CPU, so the whole
    // wait shows at the first sweep after the hog, not spread over it.
    let series = &c.waits.series;
    let integral: f64 = series
        .windows(2)
        .map(|w| w[1].waiting * (w[1].t_ms - w[0].t_ms) as f64 / 1e3)
        .sum();
    assert!(
        (HOG_S - 0.1..HOG_S + 0.2).contains(&integral),
        "waiting threads over time add up to {integral:.3} s: {series:?}"
    );

    // CPU 0 idled while the victim waited on CPU 1: wasted-core time of
    // about the hog's time. The check counts a queue only when two sweeps
    // both see it, so up to an interval is lost at each end of the hog;
    // the sweeps are ~100 ms apart here, where the overhead budget (0.4% of
    // the workload's CPU) puts them.
    let map = NodeMap::single(&[0, 1]);
    let w = waste::check(&c.snapshots, &c.samples, &[0, 1], &map, procstat::user_hz());
    assert!(
        (HOG_S - 0.35..HOG_S + 0.1).contains(&w.wasted_cpu_s),
        "wasted-core time {:.3} CPU-s, expected about {HOG_S}",
        w.wasted_cpu_s
    );
}

#[test]
fn a_thread_alone_on_its_cpu_hardly_waits() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    let mut child = Command::new("taskset")
        .args([
            "-c",
            "1",
            "sh",
            "-c",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        ])
        .spawn()
        .unwrap();
    let sampler = Sampler::spawn(Path::new("/"), Duration::from_millis(20)).unwrap();
    sampler.track(child.id());
    assert!(child.wait().unwrap().success());
    let c = sampler.finish();
    let wait = c.waits.total_s();
    assert!(wait < 0.05, "runqueue wait {wait:.3} s alone on a CPU");
    assert!(c.waits.timeslices() >= 1);
    let w = waste::check(
        &c.snapshots,
        &c.samples,
        &[0, 1],
        &NodeMap::single(&[0, 1]),
        procstat::user_hz(),
    );
    assert!(w.wasted_cpu_s < 0.05, "wasted {:.3}", w.wasted_cpu_s);
}
