//! Cgroup layouts (seed 003) and the limits a state sets on every cgroup of
//! a run: `cpu.weight` and `cpu.max` (v1: `cpu.shares`, `cpu.cfs_quota_us`
//! and `cpu.cfs_period_us`).

use std::fmt;
use std::num::NonZeroU16;
use std::str::FromStr;

use crate::excerpt;

/// How a run's programs are grouped: `shared` puts the measured workload
/// and its competing loads in one cgroup; `separate` gives each its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CgroupShape {
    Shared,
    Separate,
}

impl CgroupShape {
    pub const ALL: [CgroupShape; 2] = [CgroupShape::Shared, CgroupShape::Separate];

    pub fn as_str(self) -> &'static str {
        match self {
            CgroupShape::Shared => "shared",
            CgroupShape::Separate => "separate",
        }
    }
}

/// A word that is not one of a closed set of names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    /// What kind of word it should have been ("cgroup layout").
    pub what: &'static str,
    pub value: String,
    pub known: &'static [&'static str],
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown {} `{}` (known: {})",
            self.what,
            self.value,
            self.known.join(", ")
        )
    }
}

impl std::error::Error for UnknownName {}

/// The word of `all` whose name is `s`: the one parser of every closed set
/// of words here (layouts, executors, state kinds, arches).
pub(crate) fn closed_word<T: Copy>(
    s: &str,
    what: &'static str,
    all: &[T],
    name: fn(T) -> &'static str,
    known: &'static [&'static str],
) -> Result<T, UnknownName> {
    all.iter()
        .copied()
        .find(|w| name(*w) == s)
        .ok_or_else(|| UnknownName {
            what,
            value: excerpt(s),
            known,
        })
}

impl FromStr for CgroupShape {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<CgroupShape, UnknownName> {
        closed_word(
            s,
            "cgroup layout",
            &CgroupShape::ALL,
            CgroupShape::as_str,
            &["shared", "separate"],
        )
    }
}

impl fmt::Display for CgroupShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cgroup2 `cpu.weight`: 1..=10000 (the kernel's bounds; 100 is the
/// default of a cgroup that sets none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuWeight(NonZeroU16);

/// A number outside its bounds, or not a number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    pub what: &'static str,
    pub value: String,
    pub min: u64,
    pub max: u64,
}

impl fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} is out of range {}..={}",
            self.what, self.value, self.min, self.max
        )
    }
}

impl std::error::Error for OutOfRange {}

impl CpuWeight {
    pub const MIN: u32 = 1;
    pub const MAX: u32 = 10_000;

    pub fn new(weight: u32) -> Result<CpuWeight, OutOfRange> {
        match u16::try_from(weight).ok().and_then(NonZeroU16::new) {
            Some(w) if weight <= Self::MAX => Ok(CpuWeight(w)),
            _ => Err(OutOfRange {
                what: "cpu weight",
                value: weight.to_string(),
                min: Self::MIN.into(),
                max: Self::MAX.into(),
            }),
        }
    }

    pub fn get(self) -> u32 {
        self.0.get().into()
    }

    /// The cgroup v1 `cpu.shares` of the same weight: 1024 is v1's default
    /// where v2's is 100.
    pub fn v1_shares(self) -> u64 {
        (u64::from(self.get()) * 1024 / 100).max(2)
    }
}

impl FromStr for CpuWeight {
    type Err = OutOfRange;

    fn from_str(s: &str) -> Result<CpuWeight, OutOfRange> {
        let n: u32 = s.parse().map_err(|_| OutOfRange {
            what: "cpu weight",
            value: format!("`{}`", excerpt(s)),
            min: Self::MIN.into(),
            max: Self::MAX.into(),
        })?;
        CpuWeight::new(n)
    }
}

impl fmt::Display for CpuWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A `cpu.max`: at most `quota_us` of CPU time every `period_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CpuMax {
    quota_us: u64,
    period_us: u64,
}

/// Why a `cpu.max` was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuMaxError {
    /// `max` as the quota: no limit, which is what leaving the key out says.
    Unlimited,
    Form {
        spec: String,
    },
    NotANumber {
        what: &'static str,
        value: String,
        spec: String,
    },
    OutOfRange(OutOfRange),
}

/// What a `cpu.max` looks like, for messages.
pub const CPU_MAX_FORM: &str =
    "expected \"QUOTA PERIOD\" in µs, e.g. \"50000 100000\" (half a CPU per 100 ms)";

impl fmt::Display for CpuMaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuMaxError::Unlimited => f.write_str(
                "an unlimited quota (`max`) is what no cgroup_cpu_max gives: leave the key out",
            ),
            CpuMaxError::Form { spec } => write!(f, "`{spec}`: {CPU_MAX_FORM}"),
            CpuMaxError::NotANumber { what, value, spec } => {
                write!(
                    f,
                    "{what} `{value}` in `{spec}` is not a number: {CPU_MAX_FORM}"
                )
            }
            CpuMaxError::OutOfRange(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for CpuMaxError {}

impl CpuMax {
    /// The kernel's bounds on the period (1 ms to 1 s)...
    pub const PERIOD_US: std::ops::RangeInclusive<u64> = 1_000..=1_000_000;
    /// ... and on the quota (at least 1 ms, below 2^44 µs).
    pub const QUOTA_US: std::ops::RangeInclusive<u64> = 1_000..=(1 << 44) - 1;

    pub fn new(quota_us: u64, period_us: u64) -> Result<CpuMax, CpuMaxError> {
        let check = |what: &'static str, n: u64, range: &std::ops::RangeInclusive<u64>| {
            if range.contains(&n) {
                Ok(())
            } else {
                Err(CpuMaxError::OutOfRange(OutOfRange {
                    what,
                    value: format!("{n} µs"),
                    min: *range.start(),
                    max: *range.end(),
                }))
            }
        };
        check("quota", quota_us, &Self::QUOTA_US)?;
        check("period", period_us, &Self::PERIOD_US)?;
        Ok(CpuMax {
            quota_us,
            period_us,
        })
    }

    pub fn quota_us(self) -> u64 {
        self.quota_us
    }

    pub fn period_us(self) -> u64 {
        self.period_us
    }
}

impl FromStr for CpuMax {
    type Err = CpuMaxError;

    /// `QUOTA PERIOD` in µs with one space between, as `cpu.max` reads.
    fn from_str(spec: &str) -> Result<CpuMax, CpuMaxError> {
        let split = spec.split_once(' ');
        if split.map_or(spec, |(quota, _)| quota) == "max" {
            return Err(CpuMaxError::Unlimited);
        }
        let Some((quota, period)) = split else {
            return Err(CpuMaxError::Form {
                spec: excerpt(spec),
            });
        };
        let micros = |what: &'static str, s: &str| -> Result<u64, CpuMaxError> {
            let not_a_number = || CpuMaxError::NotANumber {
                what,
                value: excerpt(s),
                spec: excerpt(spec),
            };
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(not_a_number());
            }
            // All digits: only overflow fails, and that is out of range.
            s.parse::<u64>().map_err(|_| {
                let range = if what == "quota" {
                    CpuMax::QUOTA_US
                } else {
                    CpuMax::PERIOD_US
                };
                CpuMaxError::OutOfRange(OutOfRange {
                    what,
                    value: format!("{} µs", excerpt(s)),
                    min: *range.start(),
                    max: *range.end(),
                })
            })
        };
        let (q, p) = (micros("quota", quota)?, micros("period", period)?);
        CpuMax::new(q, p)
    }
}

impl fmt::Display for CpuMax {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.quota_us, self.period_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert_eq!("shared".parse::<CgroupShape>(), Ok(CgroupShape::Shared));
        assert_eq!("separate".parse::<CgroupShape>(), Ok(CgroupShape::Separate));
        assert_eq!(
            "Shared".parse::<CgroupShape>().unwrap_err().to_string(),
            "unknown cgroup layout `Shared` (known: shared, separate)"
        );
    }

    #[test]
    fn weights() {
        assert_eq!(CpuWeight::new(1).unwrap().get(), 1);
        assert_eq!(CpuWeight::new(10_000).unwrap().v1_shares(), 102_400);
        assert_eq!(CpuWeight::new(100).unwrap().v1_shares(), 1024);
        assert_eq!(CpuWeight::new(1).unwrap().v1_shares(), 10);
        for bad in [0, 10_001, 65_536, u32::MAX] {
            assert_eq!(
                CpuWeight::new(bad).unwrap_err().to_string(),
                format!("cpu weight {bad} is out of range 1..=10000")
            );
        }
        assert_eq!("250".parse::<CpuWeight>().unwrap().get(), 250);
        assert_eq!(
            "x".parse::<CpuWeight>().unwrap_err().to_string(),
            "cpu weight `x` is out of range 1..=10000"
        );
    }

    #[test]
    fn cpu_max() {
        let m: CpuMax = "50000 100000".parse().unwrap();
        assert_eq!((m.quota_us(), m.period_us()), (50_000, 100_000));
        assert_eq!(m.to_string(), "50000 100000");
        for (bad, why) in [
            ("max 100000", CpuMaxError::Unlimited.to_string()),
            ("max", CpuMaxError::Unlimited.to_string()),
            ("50000", format!("`50000`: {CPU_MAX_FORM}")),
            (
                "50000  100000",
                format!("period ` 100000` in `50000  100000` is not a number: {CPU_MAX_FORM}"),
            ),
            ("50000\t100000", format!("`50000\t100000`: {CPU_MAX_FORM}")),
            (
                "-5 100000",
                format!("quota `-5` in `-5 100000` is not a number: {CPU_MAX_FORM}"),
            ),
            (
                "999 100000",
                "quota 999 µs is out of range 1000..=17592186044415".into(),
            ),
            (
                "17592186044416 100000",
                "quota 17592186044416 µs is out of range 1000..=17592186044415".into(),
            ),
            (
                "99999999999999999999999 100000",
                "quota 99999999999999999999999 µs is out of range 1000..=17592186044415".into(),
            ),
            (
                "50000 999",
                "period 999 µs is out of range 1000..=1000000".into(),
            ),
            (
                "50000 1000001",
                "period 1000001 µs is out of range 1000..=1000000".into(),
            ),
        ] {
            assert_eq!(
                bad.parse::<CpuMax>().unwrap_err().to_string(),
                why,
                "{bad:?}"
            );
        }
    }
}
