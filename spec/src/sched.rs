//! Scheduler knobs a state turns: `/sys/kernel/debug/sched/features`
//! toggles, the debugfs tunables, `kernel.numa_balancing`, and, for a
//! guest's kernel, words of its command line.
//!
//! Each is checked here for its form and its limits; whether the kernel
//! that runs has a feature or a tunable is known only to the agent (or the
//! guest) that reads it, which refuses the run naming it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::cgroup::{OutOfRange, UnknownName, closed_word};
use crate::excerpt;

#[cfg(test)]
mod tests;

/// Why a knob's value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KnobError {
    /// Not of the form its kind takes; says what was expected.
    Form {
        what: &'static str,
        value: String,
        expected: &'static str,
    },
    Unknown(UnknownName),
    OutOfRange(OutOfRange),
    /// The same name twice in one list.
    Twice {
        what: &'static str,
        name: String,
    },
    TooMany {
        what: &'static str,
        max: usize,
    },
}

impl fmt::Display for KnobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KnobError::Form {
                what,
                value,
                expected,
            } => write!(f, "bad {what} `{value}`: expected {expected}"),
            KnobError::Unknown(e) => e.fmt(f),
            KnobError::OutOfRange(e) => e.fmt(f),
            KnobError::Twice { what, name } => write!(f, "{what} `{name}` is given twice"),
            KnobError::TooMany { what, max } => write!(f, "more than {max} {what}s"),
        }
    }
}

impl std::error::Error for KnobError {}

/// One toggle of `/sys/kernel/debug/sched/features`: `HRTICK` turns it on,
/// `NO_HRTICK` off, as the file itself takes them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SchedFeature {
    name: String,
    on: bool,
}

impl SchedFeature {
    /// The longest feature name taken (the kernel's are up to ~25).
    pub const MAX_NAME: usize = 40;

    /// The feature's name without `NO_`.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn on(&self) -> bool {
        self.on
    }

    pub fn new(name: &str, on: bool) -> Result<SchedFeature, KnobError> {
        let ok = !name.is_empty()
            && name.len() <= Self::MAX_NAME
            && name.starts_with(|c: char| c.is_ascii_uppercase())
            && name
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !ok {
            return Err(KnobError::Form {
                what: "sched feature",
                value: excerpt(name),
                expected: "a name like `HRTICK` or `NO_HRTICK` (A-Z, 0-9, _)",
            });
        }
        Ok(SchedFeature {
            name: name.to_owned(),
            on,
        })
    }
}

/// `/sys/kernel/debug/sched/features` as the kernel writes it: every
/// feature it has, space-separated, `NO_` before those that are off.
pub fn parse_features_file(text: &str) -> Result<Vec<SchedFeature>, KnobError> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() > SchedFeatures::MAX {
        return Err(KnobError::TooMany {
            what: "sched feature",
            max: SchedFeatures::MAX,
        });
    }
    words.iter().map(|w| w.parse()).collect()
}

impl FromStr for SchedFeature {
    type Err = KnobError;

    fn from_str(s: &str) -> Result<SchedFeature, KnobError> {
        match s.strip_prefix("NO_") {
            Some(name) => SchedFeature::new(name, false),
            None => SchedFeature::new(s, true),
        }
    }
}

impl fmt::Display for SchedFeature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.on {
            f.write_str("NO_")?;
        }
        f.write_str(&self.name)
    }
}

/// The toggles of one state, each feature at most once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SchedFeatures(Vec<SchedFeature>);

impl SchedFeatures {
    /// Twice what a kernel has (6.12: 27).
    pub const MAX: usize = 64;

    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<SchedFeatures, KnobError> {
        if words.len() > Self::MAX {
            return Err(KnobError::TooMany {
                what: "sched feature",
                max: Self::MAX,
            });
        }
        let mut out: Vec<SchedFeature> = Vec::with_capacity(words.len());
        for w in words {
            let f: SchedFeature = w.as_ref().parse()?;
            if out.iter().any(|g| g.name == f.name) {
                return Err(KnobError::Twice {
                    what: "sched feature",
                    name: f.name,
                });
            }
            out.push(f);
        }
        Ok(SchedFeatures(out))
    }

    pub fn iter(&self) -> impl Iterator<Item = &SchedFeature> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The canonical words, in the order given.
    pub fn words(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}

/// The debugfs scheduler tunables a state may set
/// (`/sys/kernel/debug/sched/<name>`): EEVDF's (6.6 on) and CFS's (up to
/// 6.5), each with the range taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tunable {
    BaseSliceNs,
    MigrationCostNs,
    NrMigrate,
    TunableScaling,
    LatencyNs,
    MinGranularityNs,
    WakeupGranularityNs,
}

impl Tunable {
    pub const ALL: [Tunable; 7] = [
        Tunable::BaseSliceNs,
        Tunable::MigrationCostNs,
        Tunable::NrMigrate,
        Tunable::TunableScaling,
        Tunable::LatencyNs,
        Tunable::MinGranularityNs,
        Tunable::WakeupGranularityNs,
    ];
    const NAMES: [&'static str; 7] = [
        "base_slice_ns",
        "migration_cost_ns",
        "nr_migrate",
        "tunable_scaling",
        "latency_ns",
        "min_granularity_ns",
        "wakeup_granularity_ns",
    ];

    /// The file's name under `/sys/kernel/debug/sched/`.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// The values taken: a slice between 0.1 ms and 100 ms, costs up to 1 s,
    /// `tunable_scaling` 0 (none), 1 (log) or 2 (linear).
    pub fn range(self) -> (u64, u64) {
        const MS: u64 = 1_000_000;
        match self {
            Tunable::BaseSliceNs | Tunable::MinGranularityNs => (MS / 10, 100 * MS),
            Tunable::LatencyNs => (MS / 10, 1000 * MS),
            Tunable::MigrationCostNs | Tunable::WakeupGranularityNs => (0, 1000 * MS),
            Tunable::NrMigrate => (1, 4096),
            Tunable::TunableScaling => (0, 2),
        }
    }
}

impl FromStr for Tunable {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Tunable, UnknownName> {
        closed_word(
            s,
            "sched tunable",
            &Tunable::ALL,
            Tunable::as_str,
            &Tunable::NAMES,
        )
    }
}

impl fmt::Display for Tunable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The tunables of one state and their values, each within its range.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct SchedTunables(BTreeMap<Tunable, u64>);

impl SchedTunables {
    /// One tunable set to `value`, checked against its range.
    pub fn insert(&mut self, name: &str, value: u64) -> Result<(), KnobError> {
        let t: Tunable = name.parse().map_err(KnobError::Unknown)?;
        let (min, max) = t.range();
        if !(min..=max).contains(&value) {
            return Err(KnobError::OutOfRange(OutOfRange {
                what: t.as_str(),
                value: value.to_string(),
                min,
                max,
            }));
        }
        if self.0.insert(t, value).is_some() {
            return Err(KnobError::Twice {
                what: "sched tunable",
                name: t.as_str().into(),
            });
        }
        Ok(())
    }

    /// From the wire's `name=value` words.
    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<SchedTunables, KnobError> {
        let mut out = SchedTunables::default();
        for w in words {
            let w = w.as_ref();
            let bad = || KnobError::Form {
                what: "sched tunable",
                value: excerpt(w),
                expected: "`name=value`, the value a whole number",
            };
            let (name, value) = w.split_once('=').ok_or_else(bad)?;
            out.insert(name, value.parse().map_err(|_| bad())?)?;
        }
        Ok(out)
    }

    pub fn iter(&self) -> impl Iterator<Item = (Tunable, u64)> + '_ {
        self.0.iter().map(|(t, v)| (*t, *v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `name=value` words, in the tunables' order.
    pub fn words(&self) -> Vec<String> {
        self.iter().map(|(t, v)| format!("{t}={v}")).collect()
    }
}

/// `kernel.numa_balancing`: off, on, or (5.18 on) memory tiering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NumaBalancing {
    Off,
    On,
    MemoryTiering,
}

impl NumaBalancing {
    pub fn value(self) -> u32 {
        match self {
            NumaBalancing::Off => 0,
            NumaBalancing::On => 1,
            NumaBalancing::MemoryTiering => 2,
        }
    }
}

impl TryFrom<u32> for NumaBalancing {
    type Error = OutOfRange;

    fn try_from(v: u32) -> Result<NumaBalancing, OutOfRange> {
        match v {
            0 => Ok(NumaBalancing::Off),
            1 => Ok(NumaBalancing::On),
            2 => Ok(NumaBalancing::MemoryTiering),
            _ => Err(OutOfRange {
                what: "numa_balancing",
                value: v.to_string(),
                min: 0,
                max: 2,
            }),
        }
    }
}

impl fmt::Display for NumaBalancing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value())
    }
}

pub use cmdline::{CmdlineWord, KernelCmdline};

mod cmdline;
