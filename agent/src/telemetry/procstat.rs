//! `/proc/stat`: how each CPU spent its time, in USER_HZ ticks.
//!
//! The `cpu` line sums over all possible CPUs; each `cpu<N>` line is one *online* CPU
//! (an offline CPU has no line). The columns are `user nice system idle iowait irq
//! softirq steal guest guest_nice`; kernels before 2.6.33 print fewer of them, which
//! then read as zero. Only the `cpu` lines are parsed; `intr`, `ctxt` and the rest are
//! skipped.
//!
//! The counters are not strictly monotonic: `Documentation/filesystems/proc.rst` warns
//! that iowait can decrease, and idle time has gone backwards on tickless kernels. A
//! [`delta`] therefore saturates at zero instead of failing.
//!
//! Idle, for this crate, is `idle + iowait`: a CPU waiting for I/O runs nothing and
//! could run any thread that was waiting for it (see [`super::waste`]).

impl From<[u64; 10]> for CpuTimes {
    /// The ten columns of a `cpu` line, in file order.
    fn from(c: [u64; 10]) -> CpuTimes {
        let [
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
        ] = c;
        CpuTimes {
            user,
            nice,
            system,
            idle,
            iowait,
            irq,
            softirq,
            steal,
            guest,
            guest_nice,
        }
    }
}

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::Path;

use super::error::{Error, ProcStatLine as LineError, Result};

/// The canonical name errors use; [`read`] replaces it with the path it read.
const FILE: &str = "/proc/stat";

/// The time columns of one `cpu` line, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    /// Time the hypervisor ran something else while this (virtual) CPU wanted to run.
    pub steal: u64,
    /// Time spent running a guest; already included in `user`.
    pub guest: u64,
    /// Time spent running a niced guest; already included in `nice`.
    pub guest_nice: u64,
}

impl CpuTimes {
    /// All ticks accounted to the CPU; `guest` and `guest_nice` are not added again.
    pub fn total(&self) -> u64 {
        [
            self.user,
            self.nice,
            self.system,
            self.idle,
            self.iowait,
            self.irq,
            self.softirq,
            self.steal,
        ]
        .iter()
        .fold(0u64, |sum, &t| sum.saturating_add(t))
    }

    /// Each column of `after` minus this one, zero where it went backwards.
    fn until(&self, after: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: after.user.saturating_sub(self.user),
            nice: after.nice.saturating_sub(self.nice),
            system: after.system.saturating_sub(self.system),
            idle: after.idle.saturating_sub(self.idle),
            iowait: after.iowait.saturating_sub(self.iowait),
            irq: after.irq.saturating_sub(self.irq),
            softirq: after.softirq.saturating_sub(self.softirq),
            steal: after.steal.saturating_sub(self.steal),
            guest: after.guest.saturating_sub(self.guest),
            guest_nice: after.guest_nice.saturating_sub(self.guest_nice),
        }
    }
}

/// The `cpu` lines of one sample of `/proc/stat`, or the difference of two.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcStat {
    /// The `cpu` line: all possible CPUs, including offline ones.
    pub total: CpuTimes,
    /// The `cpu<N>` lines, by CPU id: the online CPUs.
    pub per_cpu: BTreeMap<u32, CpuTimes>,
}

/// Parses the text of `/proc/stat`.
pub fn parse(text: &str) -> Result<ProcStat> {
    let mut total = None;
    let mut per_cpu = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let no = i + 1;
        let mut fields = line.split_ascii_whitespace();
        let Some(label) = fields.next().filter(|l| l.starts_with("cpu")) else {
            continue;
        };
        let bad = |reason: LineError| Error::parse(FILE, no, reason, line);
        let times = parse_times(fields).map_err(bad)?;
        match &label[3..] {
            "" => total = Some(times),
            n => {
                let cpu = n
                    .parse::<u32>()
                    .ok()
                    .filter(|_| n.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| bad(LineError::NotCpuN(label.to_owned())))?;
                if per_cpu.insert(cpu, times).is_some() {
                    return Err(bad(LineError::SecondLine(cpu)));
                }
            }
        }
    }
    let total = total.ok_or_else(|| Error::parse(FILE, 1, "no \"cpu\" line", text))?;
    Ok(ProcStat { total, per_cpu })
}

/// The time columns after the label: at least the four that every kernel prints, at
/// most the ten known ones (later additions are ignored).
fn parse_times<'a>(fields: impl Iterator<Item = &'a str>) -> Result<CpuTimes, LineError> {
    let mut t = [0u64; 10];
    let mut n = 0;
    for field in fields {
        let value = field
            .parse::<u64>()
            .map_err(|_| LineError::Ticks(field.to_owned()))?;
        if let Some(slot) = t.get_mut(n) {
            *slot = value;
        }
        n += 1;
    }
    if n < 4 {
        return Err(LineError::TooFewColumns(n));
    }
    Ok(CpuTimes::from(t))
}

/// The time spent between two samples: per column `after - before`, zero where a
/// counter went backwards. `per_cpu` holds the CPUs online at both samples; a CPU that
/// went offline or came online in between is left out, since its counters did not run
/// (or did not show) for the whole interval.
pub fn delta(before: &ProcStat, after: &ProcStat) -> ProcStat {
    ProcStat {
        total: before.total.until(&after.total),
        per_cpu: after
            .per_cpu
            .iter()
            .filter_map(|(cpu, a)| Some((*cpu, before.per_cpu.get(cpu)?.until(a))))
            .collect(),
    }
}

/// Seconds of `idle + iowait` in a delta of one CPU's times.
pub fn idle_seconds(delta: &CpuTimes, user_hz: u64) -> f64 {
    delta.idle.saturating_add(delta.iowait) as f64 / user_hz.max(1) as f64
}

/// The USER_HZ of the running kernel: the unit of `/proc/stat` and of task `utime` and
/// `stime`. It is 100 on every architecture the farm runs on; 100 is also the answer if
/// the kernel cannot be asked.
pub fn user_hz() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(hz)) if hz > 0 => hz.unsigned_abs(),
        _ => 100,
    }
}

/// Reads and parses `<root>/proc/stat`.
pub fn read(root: &Path) -> Result<ProcStat> {
    let path = super::files::path_below(root, FILE);
    parse(&super::files::read_text(&path)?).map_err(|e| e.at(&path))
}
