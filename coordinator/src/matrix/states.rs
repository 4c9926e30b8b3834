//! The `[[states]]` axis: hotplug, cgroup layout and limits, autogroup.

use std::ops::RangeInclusive;

use farm_proto::MachineState;
use toml::Spanned;

use super::Checked;
use super::checks::{bounded, non_empty_axis, one_of, unique_name};
use super::location::{Issue, join};
use super::raw::RawState;

const AUTOGROUP: RangeInclusive<i64> = 0..=1;
/// cgroup2 `cpu.weight`.
const CPU_WEIGHT: RangeInclusive<i64> = 1..=10_000;
/// `cpu.max` / `cpu.cfs_period_us` in µs: the kernel refuses a period under
/// 1 ms or over 1 s.
const CPU_MAX_PERIOD_US: RangeInclusive<u64> = 1_000..=1_000_000;
/// `cpu.max` / `cpu.cfs_quota_us` in µs: at least 1 ms, at most the kernel's
/// `max_cfs_runtime` (2^44 - 1 µs).
const CPU_MAX_QUOTA_US: RangeInclusive<u64> = 1_000..=(1 << 44) - 1;
const DEFAULT_STATE: &str = "default";
const CGROUP_LAYOUTS: &[&str] = &["shared", "separate"];
const HOTPLUG_MODES: &[&str] = &["cycle", "offline"];
/// CPU numbers in hotplug lists stay below this (the largest `min_cpus`).
const CPU_LIMIT: u32 = 100_000;

pub(super) fn states(raw: Option<&Spanned<Vec<Spanned<RawState>>>>) -> Checked<Vec<MachineState>> {
    let Some(raw) = raw else {
        return Ok(vec![MachineState {
            name: DEFAULT_STATE.to_owned(),
            ..Default::default()
        }]);
    };
    let mut out: Vec<MachineState> = Vec::new();
    for (i, state) in non_empty_axis(raw, "states")?.iter().enumerate() {
        let state = state.get_ref();
        let key = format!("states[{i}]");
        let name = unique_name(
            &state.name,
            &key,
            "state",
            out.iter().map(|s| s.name.as_str()),
        )?;
        let (hotplug, offline) = match &state.hotplug {
            None => (String::new(), Vec::new()),
            Some(h) => {
                let (mode, cpus) = check_hotplug(h.get_ref())
                    .map_err(|m| Issue::new(h.span(), join(&key, "hotplug"), m))?;
                let offline = if mode == "offline" { cpus } else { Vec::new() };
                (h.get_ref().clone(), offline)
            }
        };
        let cgroup = match &state.cgroup {
            None => String::new(),
            Some(c) => one_of(c, &join(&key, "cgroup"), "cgroup layout", CGROUP_LAYOUTS)?,
        };
        // The limits are set on the run's cgroups: there must be some.
        let needs_cgroup = |field: &str, span: std::ops::Range<usize>| -> Checked<()> {
            if cgroup.is_empty() {
                return Err(Issue::new(
                    span,
                    join(&key, field),
                    format!(
                        "{field} needs cgroup = \"shared\" or \"separate\" in the same state \
                         (the limit is set on the run's cgroups)"
                    ),
                ));
            }
            Ok(())
        };
        let cgroup_cpu_weight = match &state.cgroup_cpu_weight {
            None => 0,
            Some(w) => {
                needs_cgroup("cgroup_cpu_weight", w.span())?;
                bounded(Some(w), &join(&key, "cgroup_cpu_weight"), CPU_WEIGHT, 0u32)?
            }
        };
        let cgroup_cpu_max = match &state.cgroup_cpu_max {
            None => String::new(),
            Some(m) => {
                needs_cgroup("cgroup_cpu_max", m.span())?;
                check_cpu_max(m.get_ref())
                    .map_err(|e| Issue::new(m.span(), join(&key, "cgroup_cpu_max"), e))?;
                m.get_ref().clone()
            }
        };
        let cgroup_cpuset = match &state.cgroup_cpuset {
            None => String::new(),
            Some(c) => {
                needs_cgroup("cgroup_cpuset", c.span())?;
                check_cpuset(c.get_ref(), &offline)
                    .map_err(|e| Issue::new(c.span(), join(&key, "cgroup_cpuset"), e))?;
                c.get_ref().clone()
            }
        };
        let autogroup = match &state.autogroup {
            None => None,
            Some(a) => Some(bounded(Some(a), &join(&key, "autogroup"), AUTOGROUP, 0u32)?),
        };
        out.push(MachineState {
            name,
            hotplug,
            cgroup,
            autogroup,
            cgroup_cpu_weight,
            cgroup_cpu_max,
            cgroup_cpuset,
        });
    }
    Ok(out)
}

/// Inclusive ranges of CPU numbers, as a CPU list gives them.
type CpuRanges = Vec<(u32, u32)>;

/// The CPUs a `cycle:CPUS` / `offline:CPUS` state names, for placement; a
/// malformed spec (never stored: matrices are validated on submission) names none.
pub fn hotplug_cpus(spec: &str) -> Vec<u32> {
    check_hotplug(spec)
        .map(|(_, ranges)| ranges.into_iter().flat_map(|(lo, hi)| lo..=hi).collect())
        .unwrap_or_default()
}

/// Checks `cycle:CPUS` / `offline:CPUS`, CPUS being a list of CPU numbers and
/// ranges such as `1`, `1-3` or `1,3-5`; gives the mode and the CPUs.
fn check_hotplug(spec: &str) -> std::result::Result<(&str, CpuRanges), String> {
    const FORM: &str =
        "expected `cycle:CPUS` or `offline:CPUS` with CPUS like `1`, `1-3` or `1,3-5`";
    let Some((mode, cpus)) = spec.split_once(':') else {
        return Err(format!("`{spec}`: {FORM}"));
    };
    if !HOTPLUG_MODES.contains(&mode) {
        return Err(format!(
            "unknown hotplug mode `{mode}` (known: {})",
            HOTPLUG_MODES.join(", ")
        ));
    }
    Ok((mode, cpu_list(cpus, FORM)?))
}

/// Checks a `cgroup_cpuset` CPU list, and that some CPU of it stays online
/// while `offline` CPUs are taken away.
fn check_cpuset(cpus: &str, offline: &[(u32, u32)]) -> std::result::Result<(), String> {
    const FORM: &str = "expected a CPU list like `1`, `0-3` or `0,2-3`";
    let wanted = merged(cpu_list(cpus, FORM)?);
    let offline = merged(offline.to_vec());
    // Merged, disjoint and apart: a range the offline CPUs cover lies in one of theirs.
    let covered = |&(lo, hi): &(u32, u32)| {
        let i = offline.partition_point(|r| r.1 < lo);
        offline.get(i).is_some_and(|r| r.0 <= lo && hi <= r.1)
    };
    if wanted.iter().all(covered) {
        return Err(format!(
            "every CPU of `{cpus}` is offline during the run (hotplug = \"offline:...\" in the \
             same state): the cgroup would have no CPU to run on"
        ));
    }
    Ok(())
}

/// Checks a `cgroup_cpu_max`: "QUOTA PERIOD" in µs, within the kernel's bounds.
fn check_cpu_max(spec: &str) -> std::result::Result<(), String> {
    const FORM: &str =
        "expected \"QUOTA PERIOD\" in µs, e.g. \"50000 100000\" (half a CPU per 100 ms)";
    let split = spec.split_once(' ');
    if split.map_or(spec, |(quota, _)| quota) == "max" {
        return Err(
            "an unlimited quota (`max`) is what no cgroup_cpu_max gives: leave the key out"
                .to_owned(),
        );
    }
    let Some((quota, period)) = split else {
        return Err(format!("`{spec}`: {FORM}"));
    };
    let micros = |what: &str, s: &str, range: RangeInclusive<u64>| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{what} `{s}` in `{spec}` is not a number: {FORM}"));
        }
        match s.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(format!(
                "{what} {s} µs is out of range {}..={}",
                range.start(),
                range.end()
            )),
        }
    };
    micros("quota", quota, CPU_MAX_QUOTA_US)?;
    micros("period", period, CPU_MAX_PERIOD_US)?;
    Ok(())
}

/// Parses a list of CPU numbers and ranges such as `1`, `1-3` or `1,3-5`;
/// `form` says what was expected.
fn cpu_list(cpus: &str, form: &str) -> std::result::Result<CpuRanges, String> {
    if cpus.is_empty() {
        return Err(format!("no CPUs given: {form}"));
    }
    let cpu = |s: &str| -> std::result::Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("`{s}` in `{cpus}` is not a CPU number: {form}"));
        }
        match s.parse::<u32>() {
            Ok(n) if n < CPU_LIMIT => Ok(n),
            _ => Err(format!(
                "CPU {s} is beyond the largest supported CPU number {}",
                CPU_LIMIT - 1
            )),
        }
    };
    let mut out = Vec::new();
    for item in cpus.split(',') {
        if let Some((lo, hi)) = item.split_once('-') {
            let (lo, hi) = (cpu(lo)?, cpu(hi)?);
            if lo > hi {
                return Err(format!("range `{item}` runs backwards"));
            }
            out.push((lo, hi));
        } else {
            let n = cpu(item)?;
            out.push((n, n));
        }
    }
    Ok(out)
}

/// Sorts ranges and joins those that overlap or touch.
fn merged(mut ranges: CpuRanges) -> CpuRanges {
    ranges.sort_unstable();
    let mut out: CpuRanges = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}
