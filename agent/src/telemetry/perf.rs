//! Software perf counters over a workload's whole process tree, as
//! `perf stat` gives them (seed 004: context-switches, cpu-migrations,
//! page-faults, task-clock and, from it, CPUs utilised).
//!
//! The counters are opened on the *calling thread* with `inherit`, just
//! before it forks the workload: every task the workload ever creates
//! inherits them, and each task's counts are added to ours when it exits.
//! Reading after the workload is reaped therefore covers the whole tree.
//! The calling thread itself is counted too; it only sleeps in `waitid`, so
//! it adds a context switch or two. Only software events are used: this
//! machine type has no hardware counters (FACTS.md).

use std::io;

use perf_event::Builder;
use perf_event::events::Software;

/// What the counters read at the end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    pub task_clock_ns: u64,
    pub context_switches: u64,
    pub cpu_migrations: u64,
    pub page_faults: u64,
}

impl Counts {
    /// CPUs utilised over `wall_s` seconds, as `perf stat` prints it.
    pub fn cpus_utilised(&self, wall_s: f64) -> f64 {
        if wall_s > 0.0 {
            self.task_clock_ns as f64 / 1e9 / wall_s
        } else {
            0.0
        }
    }
}

pub struct Counters {
    task_clock: perf_event::Counter,
    context_switches: perf_event::Counter,
    cpu_migrations: perf_event::Counter,
    page_faults: perf_event::Counter,
}

impl Counters {
    /// Opens and enables the counters on the calling thread, inherited by
    /// every task it creates from now on.
    pub fn open_inherited() -> io::Result<Counters> {
        let open = |ev: Software| -> io::Result<perf_event::Counter> {
            // Context switches and migrations happen in the kernel: counting
            // only user mode (the builder's default) would read zero. The
            // agent runs as root; an unprivileged one falls back to user mode.
            let build = |kernel: bool| {
                Builder::new(ev)
                    .observe_self()
                    .any_cpu()
                    .inherit(true)
                    .exclude_kernel(!kernel)
                    .exclude_hv(!kernel)
                    .build()
            };
            let mut c = build(true).or_else(|_| build(false))?;
            c.enable()?;
            Ok(c)
        };
        Ok(Counters {
            task_clock: open(Software::TASK_CLOCK)?,
            context_switches: open(Software::CONTEXT_SWITCHES)?,
            cpu_migrations: open(Software::CPU_MIGRATIONS)?,
            page_faults: open(Software::PAGE_FAULTS)?,
        })
    }

    pub fn read(&mut self) -> io::Result<Counts> {
        Ok(Counts {
            task_clock_ns: self.task_clock.read()?,
            context_switches: self.context_switches.read()?,
            cpu_migrations: self.cpu_migrations.read()?,
            page_faults: self.page_faults.read()?,
        })
    }
}
