//! The scheduler counters of a workload's whole process tree, as `perf stat`
//! gives them (seed 004: context-switches, cpu-migrations, page-faults,
//! task-clock and, from it, CPUs utilised).
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

/// What was counted over the tree: CPU time, context switches and page
/// faults from `wait4`'s rusage; migrations from the perf counter.
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

/// The one inherited counter: CPU migrations. Context switches, page faults
/// and CPU time come from the reaped tree's `rusage` at no cost, where
/// inherited perf events for them cost a workload of hundreds of
/// context-switching threads several per cent (perf switches every inherited
/// event in and out on every context switch).
pub struct Counters {
    cpu_migrations: perf_event::Counter,
}

impl Counters {
    /// Opens and enables the counter on the calling thread, inherited by
    /// every task it creates from now on.
    pub fn open_inherited() -> io::Result<Counters> {
        // Migrations are counted in the kernel: counting only user mode (the
        // builder's default) would read zero. The agent runs as root; an
        // unprivileged one falls back to user mode.
        let build = |kernel: bool| {
            Builder::new(Software::CPU_MIGRATIONS)
                .observe_self()
                .any_cpu()
                .inherit(true)
                .exclude_kernel(!kernel)
                .exclude_hv(!kernel)
                .build()
        };
        let mut c = build(true).or_else(|_| build(false))?;
        c.enable()?;
        Ok(Counters { cpu_migrations: c })
    }

    /// Migrations of every task of the tree, once it has been reaped.
    pub fn cpu_migrations(&mut self) -> io::Result<u64> {
        self.cpu_migrations.read()
    }
}
