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
//! Errors: one [`Error`] for all modules. A parse error names the file, the line number
//! (1-based) and the offending content; the pure parsers use the file's canonical name
//! (`/proc/interrupts`) and the readers replace it with the path actually read.

pub mod downsample;
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

use std::io;
use std::path::{Path, PathBuf};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a line of a kernel file did not parse: [`Error::Parse`] names the
/// file, the line and its content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseReason {
    /// One of the fixed reasons the parsers give, e.g. `no CPU header`.
    #[error("{0}")]
    Plain(&'static str),
    /// A task stat file without field `n`.
    #[error("no field {n} ({name})")]
    NoField { n: usize, name: &'static str },
    #[error("field {n} ({name}) is not a number")]
    FieldNotNumber { n: usize, name: &'static str },
    #[error(transparent)]
    CpuList(#[from] crate::capabilities::parse::ParseError),
    #[error(transparent)]
    Interrupts(#[from] interrupts::LineError),
    #[error(transparent)]
    ProcStat(#[from] procstat::LineError),
}

impl From<&'static str> for ParseReason {
    fn from(reason: &'static str) -> Self {
        ParseReason::Plain(reason)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Displays as `/proc/interrupts line 3: expected 2 per-CPU counts, found 1: "RES: 7"`.
    #[error("{file} line {line}: {reason}: {content:?}")]
    Parse {
        file: String,
        /// 1-based; 1 for single-line files.
        line: usize,
        /// Boxed: it is large, and every telemetry result carries it.
        reason: Box<ParseReason>,
        /// The offending line, cut to a readable length.
        content: String,
    },
    /// A counter that only grows was smaller in the later sample. Displays as
    /// `/proc/interrupts: RES on cpu1 went backwards from 500 to 400`.
    #[error("{file}: {counter} went backwards from {before} to {after}")]
    Backwards {
        file: String,
        /// The counter, e.g. "RES on cpu1" or "ERR".
        counter: String,
        before: u64,
        after: u64,
    },
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Error {
    /// A parse error in `file` at `line` (1-based).
    fn parse(file: &str, line: usize, reason: impl Into<ParseReason>, content: &str) -> Self {
        Error::Parse {
            file: file.to_owned(),
            line,
            reason: Box::new(reason.into()),
            content: excerpt(content),
        }
    }

    /// The same error naming `path` instead of the canonical file name the pure parser
    /// used, so that a reader's error says which file of which root was bad.
    fn at(self, path: &Path) -> Self {
        let file = path.display().to_string();
        match self {
            Error::Parse {
                line,
                reason,
                content,
                ..
            } => Error::Parse {
                file,
                line,
                reason,
                content,
            },
            Error::Backwards {
                counter,
                before,
                after,
                ..
            } => Error::Backwards {
                file,
                counter,
                before,
                after,
            },
            read @ Error::Read { .. } => read,
        }
    }
}

/// `abs`, an absolute path on the sampled machine, as a path below `root`.
fn path_below(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// Reads a whole file as text; bytes that are not UTF-8 (a thread may name itself
/// anything) are replaced rather than refused.
fn read_text(path: &Path) -> Result<String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// At most 120 characters of `s`, so that an error quoting a garbage line stays readable.
fn excerpt(s: &str) -> String {
    const MAX: usize = 120;
    match s.char_indices().nth(MAX) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}...", &s[..cut]),
    }
}
