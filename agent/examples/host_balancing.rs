//! The host executor's load-balancing telemetry, run as the host executor
//! runs it, on a kernel with CONFIG_SCHEDSTATS: for `agent/tests/guest.rs`,
//! which runs it inside a guest (the farm's development hosts have a kernel
//! without `/proc/schedstat`). In order, as `executor::host` does around a
//! run: kernel.sched_schedstats turned on through the journal, the
//! topology read from the kernel's domains, `/proc/schedstat` before, the
//! workload, `/proc/schedstat` after, `schedstat::host_balancing`, and the
//! journal restored.
//!
//! ```text
//! host_balancing JOURNAL THREADS SECONDS
//! ```
//!
//! The workload: THREADS threads that spin for 3 ms and sleep for 1 ms in
//! turn for SECONDS, so that CPUs keep going idle and balancing newly idle.
//! Prints `schedstats <0|1>` (the sysctl during the run), one
//! `<metric> <value>` line per metric, then `restored <0|1>` (the sysctl
//! after the journal's restore). Exit 0 when done, 1 with the error on
//! stderr.

// An example is a program: it prints its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use farm_agent::state::{journal::Journal, sched};
use farm_agent::telemetry::{schedstat, topology};

const SYSCTL: &str = "/proc/sys/kernel/sched_schedstats";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [journal, threads, seconds] = &args[..] else {
        eprintln!("usage: host_balancing JOURNAL THREADS SECONDS");
        return ExitCode::from(2);
    };
    let root = Path::new("/");
    let run = || -> Result<(), String> {
        let threads: usize = threads.parse().map_err(|_| format!("`{threads}`"))?;
        let seconds: f64 = seconds.parse().map_err(|_| format!("`{seconds}`"))?;
        let mut j = Journal::open(Path::new(journal), root).map_err(|e| e.to_string())?;
        if !sched::enable_schedstats(&mut j, root).map_err(|e| e.to_string())? {
            return Err("kernel.sched_schedstats cannot be written".into());
        }
        let read = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
        println!("schedstats {}", read(SYSCTL)?.trim());
        let topology = topology::read(root).map_err(|e| e.to_string())?;
        let before = read("/proc/schedstat")?;
        spin_and_sleep(threads, Duration::from_secs_f64(seconds));
        let after = read("/proc/schedstat")?;
        let metrics = schedstat::host_balancing(&before, &after, Some(&topology))
            .map_err(|e| e.to_string())?;
        for (name, _, value) in metrics {
            println!("{name} {value}");
        }
        j.restore().map_err(|e| e.to_string())?;
        println!("restored {}", read(SYSCTL)?.trim());
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("host_balancing: {e}");
            ExitCode::FAILURE
        }
    }
}

fn spin_and_sleep(threads: usize, run: Duration) {
    let end = Instant::now() + run;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(move || {
                while Instant::now() < end {
                    let spin = Instant::now() + Duration::from_millis(3);
                    while Instant::now() < spin {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
    });
}
