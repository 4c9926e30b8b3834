//! Why a runner telemetry line, or the run's telemetry as a whole, was
//! refused. Quoted guest text is already cut by the caller.

use crate::capabilities::parse::ParseError;

/// Why one runner line was refused: [`super::LineError`] names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Reason {
    #[error("{0:?} is neither `before` nor `after`")]
    Phase(String),
    #[error("a second reading for the same phase")]
    SecondReading,
    #[error("node id {0:?} is not a number")]
    NodeId(String),
    #[error("node id {0} is too large")]
    NodeIdTooLarge(u64),
    /// Boxed: a parse error is large, and this enum is carried in every
    /// guest runner error.
    #[error(transparent)]
    CpuList(Box<ParseError>),
    #[error("node {0} appears twice")]
    NodeTwice(u32),
    #[error("cpu{cpu} is already on node {node}")]
    CpuOnTwoNodes { cpu: u32, node: u32 },
    #[error("expected `times <before|after> <user> <sys>`")]
    TimesShape,
    #[error("{0:?} is not a time like 0m1.230s")]
    Clock(String),
    #[error("expected `ctxt <before|after> <n>`")]
    CtxtShape,
    #[error("{0:?} is not a count")]
    Count(String),
    /// The reason of a [`crate::telemetry::Error::Parse`]: the line is named
    /// by the caller.
    /// Boxed, as [`Reason::CpuList`].
    #[error(transparent)]
    Proc(Box<crate::telemetry::ParseReason>),
    /// Any other telemetry error, which the parsers used here do not give;
    /// as text, since those errors (I/O) are neither `Clone` nor `Eq`.
    #[error("{0}")]
    ProcOther(String),
    #[error("the session is not a number")]
    SessionNotNumber,
    #[error("session {0} is not a workload's (0 is the kernel threads', 1 init's)")]
    SessionReserved(u32),
    #[error("a second session, after {0}")]
    SecondSession(u32),
    #[error("the uptime is not like 12.34")]
    Uptime,
    /// Carries the previous sweep's `sample` line.
    #[error("the uptime does not advance from the sweep before (`{0}`)")]
    UptimeStalls(String),
    #[error("before any `sample` line")]
    NoSweep,
    #[error("task {0} twice in one sweep")]
    TaskTwice(u32),
    #[error("a second `sampler` line")]
    SecondSampler,
    #[error("a second `counts` line")]
    SecondCounts,
    #[error("expected four counts (task clock ns, context switches, migrations, page faults)")]
    CountsShape,
    #[error("expected four `times` values")]
    SamplerShape,
    #[error("bad time `{0}`")]
    SamplerTime(String),
    #[error("no `:` after the file name")]
    NoColon,
    #[error("not a /proc/<pid>/task/<tid>/sched file")]
    NotSchedFile,
    #[error("not `se.nr_migrations : <count>`")]
    NotMigrations,
    #[error("more than {0} lines in one reading")]
    TooManyLines(usize),
    #[error("not a /proc/<pid>/task/<tid>/schedstat file")]
    NotSchedstatFile,
    #[error("not three counters (run, wait, timeslices)")]
    NotSchedstat,
    #[error("a second `cpu` line in one sweep")]
    SecondTotal,
    #[error("a second cpu{0} line in one sweep")]
    SecondCpu(u32),
    #[error("{0:?} is not cpu<N>")]
    NotCpuN(String),
    #[error("{0:?} is not a cpu line")]
    NotCpuLine(String),
    #[error("{0:?} is not a tick count")]
    Ticks(String),
    #[error("expected at least 4 time columns, found {0}")]
    TooFewColumns(usize),
    #[error("field 6 (session) is not a number")]
    SessionField,
    #[error(transparent)]
    Calibration(#[from] crate::executor::guest::slowdown::CalibrationError),
    #[error("a second `calibrate` line")]
    SecondCalibration,
}

/// Why [`super::build`] could not turn what the guest reported into
/// metrics and telemetry.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("the wall time {0} s is not a duration")]
    Wall(f64),
    #[error("`{0} before` without `{0} after`")]
    BeforeOnly(&'static str),
    #[error("`{0} after` without `{0} before`")]
    AfterOnly(&'static str),
    #[error("schedstat: {0}")]
    Schedstat(String),
    #[error("`irq before` lines without `irq after` lines")]
    IrqBeforeOnly,
    #[error("`irq after` lines without `irq before` lines")]
    IrqAfterOnly,
    /// Boxed: a telemetry error is large, and so would every result be.
    #[error("irq: {0}")]
    Irq(#[source] Box<crate::telemetry::Error>),
    #[error("`sample` lines but no `session` line: the workload's tasks are unknown")]
    NoSession,
    /// Carries the sweep's `sample` line.
    #[error("sweep `{0}` has cpu<N> lines but no `cpu` line")]
    NoTotal(String),
    #[error("times: {what} time went backwards from {before} ms to {after} ms")]
    TimeBackwards {
        what: &'static str,
        before: u64,
        after: u64,
    },
    #[error("ctxt went backwards from {before} to {after}")]
    CtxtBackwards { before: u64, after: u64 },
}

/// The longest excerpt of a guest line an error quotes.
const EXCERPT: usize = 160;

/// `s` cut to [`EXCERPT`] characters.
pub(super) fn cut(s: &str) -> String {
    match s.char_indices().nth(EXCERPT) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}...", &s[..at]),
    }
}
