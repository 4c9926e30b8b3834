//! What telemetry costs a run: the same workload, alternately with and
//! without the placement sampler and perf counters, side by side.
//!
//! Reports, per workload, the sampler's own CPU time against the workload's
//! (measured exactly, every run), and the medians of the workload's CPU time
//! (user + sys from wait4) and wall time with telemetry on and off.
//! See docs/BENCHMARKS.md for the command.

// An example is a program: it prints its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use farm_agent::executor::Killer;
use farm_agent::executor::host::{self, Spec};
use farm_agent::telemetry::sampler::{DEFAULT_INTERVAL, Sampler};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

struct Run {
    cpu_s: f64,
    wall_s: f64,
    sampler_cpu_s: f64,
}

fn run(bin: &Path, args: &[&str], telemetry: bool) -> Run {
    let mut spec = Spec::new(
        bin,
        args.iter().map(|s| s.to_string()).collect(),
        Duration::from_secs(600),
    );
    // TELEMETRY_PARTS=perf or =sampler measures one part alone.
    let parts = std::env::var("TELEMETRY_PARTS").unwrap_or_default();
    spec.perf = telemetry && parts != "sampler";
    let sampler = (telemetry && parts != "perf")
        .then(|| Sampler::spawn(Path::new("/"), DEFAULT_INTERVAL).expect("sampler"));
    let running = host::start(&spec, &Killer::default()).expect("start");
    if let Some(s) = &sampler {
        s.track(running.pid() as u32);
    }
    let out = running.wait().expect("wait");
    assert_eq!(out.exit, host::Exit::Code(0), "{}", out.stderr_tail);
    let collected = sampler.map(|s| s.finish());
    if let Some(c) = &collected
        && std::env::var_os("TELEMETRY_DEBUG").is_some()
    {
        eprintln!(
            "sweeps {} mean interval {:?} sampler cpu {:?} threads read {}/{}",
            c.snapshots.len(),
            c.interval,
            c.cost,
            c.threads_read,
            c.threads_seen
        );
    }
    let sampler_cpu_s = collected.map(|c| c.cost.as_secs_f64()).unwrap_or(0.0);
    Run {
        cpu_s: (out.user + out.sys).as_secs_f64(),
        wall_s: out.wall.as_secs_f64(),
        sampler_cpu_s,
    }
}

fn main() {
    let bin: PathBuf = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| "target/release/farm-workload".into());
    let reps: usize = std::env::args()
        .nth(2)
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let ours: &[(&str, &[&str])] = &[
        (
            "lu, 2 threads",
            &["lu", "--param", "threads=2", "--param", "iterations=40"],
        ),
        (
            "lu, 16 threads",
            &["lu", "--param", "threads=16", "--param", "iterations=40"],
        ),
        (
            "hackbench, 400 threads",
            &["hackbench", "--param", "loops=400"],
        ),
        (
            "cpu-hog, 2 threads",
            &["cpu-hog", "--param", "threads=2", "--param", "seconds=2"],
        ),
    ];
    let mut workloads: Vec<(&str, PathBuf, &[&str])> = ours
        .iter()
        .map(|(name, args)| (*name, bin.clone(), *args))
        .collect();
    // rt-tests' hackbench forks its 400 senders and receivers as processes:
    // the other shape of a large workload.
    let rt = Path::new("/usr/bin/hackbench");
    if rt.exists() {
        workloads.push((
            "rt-hackbench, 400 procs",
            rt.to_path_buf(),
            &["-g", "10", "-l", "2000"],
        ));
    } else {
        eprintln!("/usr/bin/hackbench (rt-tests) is not installed: its row is left out");
    }
    println!(
        "{} repetitions each, alternating on/off, sampler interval {:?}",
        reps, DEFAULT_INTERVAL
    );
    println!(
        "{:<24} {:>10} {:>10} {:>9} {:>10} {:>10} {:>9} {:>12}",
        "workload", "cpu off", "cpu on", "ratio", "wall off", "wall on", "ratio", "sampler/cpu"
    );
    // A third argument keeps only the workloads whose name contains it.
    let only = std::env::args().nth(3).unwrap_or_default();
    workloads.retain(|(name, ..)| name.contains(only.as_str()));
    for (name, bin, args) in workloads {
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            off.push(run(&bin, args, false));
            on.push(run(&bin, args, true));
        }
        let cpu_off = median(off.iter().map(|r| r.cpu_s).collect());
        let cpu_on = median(on.iter().map(|r| r.cpu_s).collect());
        let wall_off = median(off.iter().map(|r| r.wall_s).collect());
        let wall_on = median(on.iter().map(|r| r.wall_s).collect());
        let sampler = median(
            on.iter()
                .map(|r| r.sampler_cpu_s / r.cpu_s * 100.0)
                .collect(),
        );
        println!(
            "{:<24} {:>9.3}s {:>9.3}s {:>9.4} {:>9.3}s {:>9.3}s {:>9.4} {:>11.3}%",
            name,
            cpu_off,
            cpu_on,
            cpu_on / cpu_off,
            wall_off,
            wall_on,
            wall_on / wall_off,
            sampler
        );
    }
}
