//! CPU lists (`1`, `1-3`, `0,2-5`): the form of matrix files, of the wire,
//! and of the kernel's own files (`/sys/devices/system/cpu/online`,
//! `node<N>/cpulist`, `cpuset.cpus`).
//!
//! A [`CpuSet`] keeps merged, sorted inclusive ranges and never expands
//! them: `1-99999` is one pair, not 99,999 numbers, whatever number of cells
//! or runs carry it.

use std::fmt;
use std::str::FromStr;

use crate::excerpt;

/// A set of CPU numbers, as disjoint, sorted, non-touching inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuSet {
    ranges: Vec<(u32, u32)>,
}

/// Why a CPU list was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpuSetError {
    /// The list names no CPU (a matrix's or the wire's list must name one).
    Empty,
    /// An item is not a decimal CPU number (signs, spaces, empty items).
    NotANumber { item: String, list: String },
    /// A CPU number at or above [`CpuSet::MAX_CPU`]` + 1`.
    TooLarge { cpu: String },
    /// A range whose start is after its end.
    Backwards { range: String },
    /// More items than [`CpuSet::MAX_ITEMS`].
    TooManyItems,
}

impl CpuSetError {
    /// Whether the list is malformed (as opposed to well-formed but out of
    /// bounds): callers add what form they expected to these.
    pub fn is_syntax(&self) -> bool {
        matches!(self, CpuSetError::Empty | CpuSetError::NotANumber { .. })
    }
}

impl fmt::Display for CpuSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuSetError::Empty => f.write_str("no CPUs given"),
            CpuSetError::NotANumber { item, list } => {
                write!(f, "`{item}` in `{list}` is not a CPU number")
            }
            CpuSetError::TooLarge { cpu } => write!(
                f,
                "CPU {cpu} is beyond the largest supported CPU number {}",
                CpuSet::MAX_CPU
            ),
            CpuSetError::Backwards { range } => write!(f, "range `{range}` runs backwards"),
            CpuSetError::TooManyItems => {
                write!(f, "more than {} items in a CPU list", CpuSet::MAX_ITEMS)
            }
        }
    }
}

impl std::error::Error for CpuSetError {}

impl CpuSet {
    /// The largest CPU number: far above any kernel's `NR_CPUS` (8192 with
    /// x86_64 `MAXSMP`), so a real machine never meets it, and a corrupt or
    /// hostile number is refused rather than carried.
    pub const MAX_CPU: u32 = 99_999;
    /// The most comma-separated items a list may have: a kernel prints
    /// merged ranges, and a matrix needs a handful; this bounds the work and
    /// memory of a list whatever its length.
    pub const MAX_ITEMS: usize = 1024;

    /// The set of the given ranges (merged); ranges beyond [`Self::MAX_CPU`]
    /// are clipped to it.
    pub fn from_ranges(ranges: impl IntoIterator<Item = (u32, u32)>) -> CpuSet {
        let mut all: Vec<(u32, u32)> = ranges
            .into_iter()
            .filter(|&(lo, hi)| lo <= hi && lo <= Self::MAX_CPU)
            .map(|(lo, hi)| (lo, hi.min(Self::MAX_CPU)))
            .collect();
        all.sort_unstable();
        let mut out: Vec<(u32, u32)> = Vec::with_capacity(all.len());
        for (lo, hi) in all {
            match out.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        CpuSet { ranges: out }
    }

    /// The set of the given CPUs.
    pub fn from_cpus(cpus: impl IntoIterator<Item = u32>) -> CpuSet {
        CpuSet::from_ranges(cpus.into_iter().map(|c| (c, c)))
    }

    /// Parses a list as the kernel prints it in `/sys` and `/proc`:
    /// surrounding whitespace (the trailing newline) is ignored and an empty
    /// list is valid (a memory-only node; `cpu/offline` with every CPU
    /// online). Otherwise the same grammar and limits as [`FromStr`].
    pub fn parse_kernel_list(s: &str) -> Result<CpuSet, CpuSetError> {
        let s = s.trim();
        if s.is_empty() {
            return Ok(CpuSet::default());
        }
        s.parse()
    }

    /// The merged ranges, ascending.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// How many CPUs the set holds.
    pub fn count(&self) -> usize {
        self.ranges
            .iter()
            .map(|&(lo, hi)| (hi - lo) as usize + 1)
            .sum()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        let i = self.ranges.partition_point(|r| r.1 < cpu);
        self.ranges.get(i).is_some_and(|r| r.0 <= cpu)
    }

    /// Every CPU of the set, ascending (lazily: nothing is expanded ahead).
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.ranges.iter().flat_map(|&(lo, hi)| lo..=hi)
    }

    /// The smallest CPU of the set.
    pub fn first(&self) -> Option<u32> {
        self.ranges.first().map(|r| r.0)
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset_of(&self, other: &CpuSet) -> bool {
        self.ranges.iter().all(|&(lo, hi)| {
            let i = other.ranges.partition_point(|r| r.1 < lo);
            other.ranges.get(i).is_some_and(|r| r.0 <= lo && hi <= r.1)
        })
    }

    /// The CPUs of `self` that are not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut out = Vec::new();
        for &(lo, hi) in &self.ranges {
            let mut start = lo;
            for &(olo, ohi) in &other.ranges {
                if ohi < start || olo > hi {
                    continue;
                }
                if olo > start {
                    out.push((start, olo - 1));
                }
                if ohi >= hi {
                    start = hi.saturating_add(1);
                    break;
                }
                start = ohi + 1;
            }
            if start <= hi && start >= lo {
                out.push((start, hi));
            }
        }
        CpuSet { ranges: out }
    }
}

impl FromStr for CpuSet {
    type Err = CpuSetError;

    /// Parses `1`, `1-3`, `1,3-5`: decimal numbers up to [`CpuSet::MAX_CPU`],
    /// no signs, spaces or empty items, ranges not backwards, at most
    /// [`CpuSet::MAX_ITEMS`] items; the list must name a CPU.
    fn from_str(list: &str) -> Result<CpuSet, CpuSetError> {
        if list.is_empty() {
            return Err(CpuSetError::Empty);
        }
        let cpu = |s: &str| -> Result<u32, CpuSetError> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(CpuSetError::NotANumber {
                    item: excerpt(s),
                    list: excerpt(list),
                });
            }
            match s.parse::<u32>() {
                Ok(n) if n <= CpuSet::MAX_CPU => Ok(n),
                _ => Err(CpuSetError::TooLarge { cpu: excerpt(s) }),
            }
        };
        let mut ranges = Vec::new();
        for (i, item) in list.split(',').enumerate() {
            if i == CpuSet::MAX_ITEMS {
                return Err(CpuSetError::TooManyItems);
            }
            let (lo, hi) = match item.split_once('-') {
                Some((lo, hi)) => (cpu(lo)?, cpu(hi)?),
                None => {
                    let n = cpu(item)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(CpuSetError::Backwards {
                    range: excerpt(item),
                });
            }
            ranges.push((lo, hi));
        }
        Ok(CpuSet::from_ranges(ranges))
    }
}

/// The canonical list: merged ranges, ascending, `a-b` for ranges of two or
/// more CPUs (`0-1,3`); an empty set prints as nothing.
impl fmt::Display for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
