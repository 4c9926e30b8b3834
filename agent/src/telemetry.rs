//! Scheduler telemetry: what the seeds' authors measured by hand, as plain data.
//!
//! Layout, one concept per module:
//! - [`interrupts`]: `/proc/interrupts`, deltas per line and CPU, and the IPI kinds
//!   (rescheduling, function call, TLB shootdown) that seed 002 counted.
//! - [`procstat`]: the per-CPU times of `/proc/stat`, their deltas, idle seconds.
//! - [`taskstat`]: one thread's `/proc/<pid>/task/<tid>/stat`: run state and CPU.
//! - [`placement`]: summaries of a timeline of thread samples over NUMA nodes, the way
//!   seeds 001 ("NUMA nodes: 2 2 2 1 ...") and 003 ("Average 13.05 13.54 27.65 25.76")
//!   summarised `ps` output.
//! - [`waste`]: the work-conservation check of "The Linux Scheduler: a Decade of Wasted
//!   Cores": CPU time left idle while runnable threads waited elsewhere.
//! - [`topology`]: scheduling-domain levels per CPU (debugfs, else synthesized from
//!   sysfs) and a readable diff of two snapshots (seed 000: a level missing after a
//!   hotplug cycle).
//! - [`loads`]: the CPU time of the competing loads' process trees over a run.
//! - [`loadavg`]: `/proc/loadavg`, the host's load averages at a run's end.
//! - [`runqueue`]: a thread's `schedstat` (time waiting for a CPU) and the run's
//!   total, percentiles per timeslice and series of waiting threads.
//! - [`schedstat`]: `/proc/schedstat`'s load-balancing counters per sched-domain level,
//!   and their deltas over a run by level name.
//! - [`downsample`]: a result's placement series thinned, evenly, to the result
//!   budget.
//!
//! **Architecture invariant**: every parser and summary is a pure function from text or
//! plain data to plain data, tested with tables of fixtures captured from real machines
//! (a farm host, and x86_64 and s390x QEMU guests). The only I/O is in the `read*`
//! functions at the bottom of [`interrupts`], [`loadavg`], [`procstat`], [`taskstat`]
//! and [`topology`] (and [`procstat::user_hz`]); they take the root of the filesystem ("/"
//! in production, a temporary directory in tests), read files, and hand the text to
//! the pure parser. [`placement`] and [`waste`] do no I/O at all. Sampling on a timer
//! and storing results belong to the run path, not here.
//!
//! Errors: one [`Error`] for all modules (`error`, with the line errors of
//! `/proc/interrupts` and `/proc/stat`). A parse error names the file, the line number
//! (1-based) and the offending content; the pure parsers use the file's canonical name
//! (`/proc/interrupts`) and the readers (through `files`) replace it with the path
//! actually read. The modules import `error` and `files`, never this file.

pub mod downsample;
mod error;
mod files;
pub mod interrupts;
pub mod loadavg;
pub mod loads;
pub mod perf;
pub mod placement;
pub mod procstat;
pub mod report;
pub mod runqueue;
pub mod sampler;
pub mod schedstat;
pub mod taskstat;
pub mod topology;
pub mod waste;

pub use error::{Error, InterruptsLine, ParseReason, ProcStatLine, Result};
