//! Why a kernel file of the sampled machine could not be read: every
//! reader's [`Error`], and the reasons a line of `/proc/interrupts` or
//! `/proc/stat` was refused.

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
    Interrupts(#[from] InterruptsLine),
    #[error(transparent)]
    ProcStat(#[from] ProcStatLine),
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
    pub(super) fn parse(
        file: &str,
        line: usize,
        reason: impl Into<ParseReason>,
        content: &str,
    ) -> Self {
        Error::Parse {
            file: file.to_owned(),
            line,
            reason: Box::new(reason.into()),
            content: excerpt(content),
        }
    }

    /// The same error naming `path` instead of the canonical file name the pure parser
    /// used, so that a reader's error says which file of which root was bad.
    pub(super) fn at(self, path: &Path) -> Self {
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

/// At most 120 characters of `s`, so that an error quoting a garbage line stays readable.
pub(super) fn excerpt(s: &str) -> String {
    const MAX: usize = 120;
    match s.char_indices().nth(MAX) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}...", &s[..cut]),
    }
}

/// Why a line of `/proc/interrupts` was refused.
/// Why the header or a line of `/proc/interrupts` did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InterruptsLine {
    #[error("header column {0:?} is not CPU<n>")]
    HeaderColumn(String),
    #[error("CPU{0} appears twice in the header")]
    HeaderTwice(u32),
    #[error("no CPU columns in the header")]
    NoCpuColumns,
    #[error("no colon after the interrupt name")]
    NoColon,
    #[error("bad interrupt name {0:?}")]
    BadName(String),
    /// Fewer (or more) counts than the header has CPUs.
    #[error("expected {expected} per-CPU counts, found {found}")]
    CountsShort { expected: usize, found: usize },
    #[error("count {0:?} does not fit in 64 bits")]
    CountTooLarge(String),
}

/// Why a line of `/proc/stat` was refused.
/// Why a `cpu` line of `/proc/stat` did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcStatLine {
    #[error("{0:?} is not a tick count")]
    Ticks(String),
    #[error("expected at least 4 time columns, found {0}")]
    TooFewColumns(usize),
    #[error("{0:?} is not cpu<N>")]
    NotCpuN(String),
    #[error("second line for cpu{0}")]
    SecondLine(u32),
}
