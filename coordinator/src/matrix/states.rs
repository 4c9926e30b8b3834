//! The `[[states]]` axis: hotplug, cgroup layout and limits, autogroup,
//! scheduler features and tunables, NUMA balancing, a guest's cmdline.
//!
//! Each field is parsed by its `farm_spec` type, one at a time so that an
//! error points at the field; the whole state is then checked as a
//! `farm_spec::MachineState` (a cpuset keeps a CPU online). The wire keeps
//! the strings the file gave.

use farm_proto::MachineState;
use farm_spec::sched::KnobError;
use farm_spec::state::{StateError, field};
use farm_spec::{
    Autogroup, CgroupShape, CgroupSpec, CpuMax, CpuSet, CpuWeight, HotplugPlan, KernelCmdline,
    NumaBalancing, SchedFeatures, SchedTunables,
};
use toml::Spanned;

use super::checks::{non_empty_axis, unique_name};
use super::location::{Checked, Issue, join};
use super::raw::{Int, RawState};

const DEFAULT_STATE: &str = "default";
/// What a `cgroup_cpuset` looks like, added to a CPU list's syntax errors.
const CPUSET_FORM: &str = "expected a CPU list like `1`, `0-3` or `0,2-3`";

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
        let at = |span: std::ops::Range<usize>, field: &str, why: String| {
            Issue::new(span, join(&key, field), why)
        };
        let hotplug = match &state.hotplug {
            None => None,
            Some(h) => Some(
                h.get_ref()
                    .parse::<HotplugPlan>()
                    .map_err(|e| at(h.span(), field::HOTPLUG, e.to_string()))?,
            ),
        };
        let shape = match &state.cgroup {
            None => None,
            Some(c) => Some(
                c.get_ref()
                    .parse::<CgroupShape>()
                    .map_err(|e| at(c.span(), field::CGROUP, e.to_string()))?,
            ),
        };
        // The limits are set on the run's cgroups: there must be some.
        let needs_cgroup = |field: &'static str, span: std::ops::Range<usize>| -> Checked<()> {
            if shape.is_none() {
                let why = StateError::LimitWithoutCgroup { field }.to_string();
                return Err(at(span, field, why));
            }
            Ok(())
        };
        let weight = match &state.cgroup_cpu_weight {
            None => None,
            Some(w) => {
                needs_cgroup(field::CPU_WEIGHT, w.span())?;
                let range = (CpuWeight::MIN, CpuWeight::MAX);
                Some(
                    int(w, range, CpuWeight::new)
                        .map_err(|why| at(w.span(), field::CPU_WEIGHT, why.to_string()))?,
                )
            }
        };
        let max = match &state.cgroup_cpu_max {
            None => None,
            Some(m) => {
                needs_cgroup(field::CPU_MAX, m.span())?;
                Some(
                    m.get_ref()
                        .parse::<CpuMax>()
                        .map_err(|e| at(m.span(), field::CPU_MAX, e.to_string()))?,
                )
            }
        };
        let cpuset = match &state.cgroup_cpuset {
            None => None,
            Some(c) => {
                needs_cgroup(field::CPUSET, c.span())?;
                let set = c.get_ref().parse::<CpuSet>().map_err(|e| {
                    let why = if e.is_syntax() {
                        format!("{e}: {CPUSET_FORM}")
                    } else {
                        e.to_string()
                    };
                    at(c.span(), field::CPUSET, why)
                })?;
                Some(set)
            }
        };
        let autogroup = match &state.autogroup {
            None => None,
            Some(a) => {
                let range = (Autogroup::Off.value(), Autogroup::On.value());
                Some(
                    int(a, range, Autogroup::try_from)
                        .map_err(|why| at(a.span(), field::AUTOGROUP, why.to_string()))?,
                )
            }
        };
        let numa_balancing = match &state.numa_balancing {
            None => None,
            Some(n) => Some(
                int(n, (0, 2), NumaBalancing::try_from)
                    .map_err(|why| at(n.span(), field::NUMA_BALANCING, why.to_string()))?,
            ),
        };
        let sched_features = words(&state.sched_features, &key, field::SCHED_FEATURES, |w| {
            SchedFeatures::parse(w)
        })?;
        let cmdline = words(&state.cmdline, &key, field::CMDLINE, |w| {
            KernelCmdline::parse(w)
        })?;
        let sched_tunables = tunables(&state.sched_tunables, &key)?;
        let typed = farm_spec::MachineState {
            name: name.clone(),
            hotplug,
            cgroup: shape.map(|shape| CgroupSpec {
                shape,
                weight,
                max,
                cpuset,
            }),
            autogroup,
            sched_features,
            sched_tunables,
            numa_balancing,
            cmdline,
        };
        if let Err(e) = typed.check() {
            // Only the cpuset crosses fields today; it names the value as the file gave it.
            let span = state.cgroup_cpuset.as_ref().map_or(0..0, Spanned::span);
            let why = match (&e, &state.cgroup_cpuset) {
                (StateError::CpusetOffline { .. }, Some(c)) => StateError::CpusetOffline {
                    cpuset: c.get_ref().clone(),
                }
                .to_string(),
                _ => e.to_string(),
            };
            return Err(at(span, e.field(), why));
        }
        // The wire keeps the file's strings; the typed state only checked them.
        let text = |v: &Option<Spanned<String>>| {
            v.as_ref().map(|s| s.get_ref().clone()).unwrap_or_default()
        };
        out.push(MachineState {
            name,
            hotplug: text(&state.hotplug),
            cgroup: text(&state.cgroup),
            autogroup: autogroup.map(Autogroup::value),
            cgroup_cpu_weight: weight.map_or(0, CpuWeight::get),
            cgroup_cpu_max: text(&state.cgroup_cpu_max),
            cgroup_cpuset: text(&state.cgroup_cpuset),
            sched_features: typed.sched_features.words(),
            sched_tunables: typed.sched_tunables.words(),
            numa_balancing: numa_balancing.map(NumaBalancing::value),
            cmdline: typed.cmdline.words(),
        });
    }
    Ok(out)
}

/// A list of words (`sched_features`, `cmdline`) made into its `farm_spec`
/// value by `make`; an error names the word at fault
/// (`states[1].cmdline[0]`), or the list when it is the list's (a word
/// twice, too many).
fn words<T>(
    raw: &Option<Spanned<Vec<Spanned<String>>>>,
    key: &str,
    field: &str,
    make: impl Fn(&[String]) -> Result<T, KnobError>,
) -> Checked<T> {
    let list: Vec<String> = raw
        .as_ref()
        .map(|l| l.get_ref().iter().map(|w| w.get_ref().clone()).collect())
        .unwrap_or_default();
    make(&list).map_err(|e| {
        let list = raw.as_ref().expect("an empty list parses");
        // The first word that does not parse on its own is the one at fault.
        let alone = list
            .get_ref()
            .iter()
            .enumerate()
            .find(|(_, w)| make(std::slice::from_ref(w.get_ref())).is_err());
        match alone {
            Some((i, w)) => {
                Issue::new(w.span(), join(key, &format!("{field}[{i}]")), e.to_string())
            }
            None => Issue::new(list.span(), join(key, field), e.to_string()),
        }
    })
}

/// `sched_tunables = { base_slice_ns = 3000000 }`: each value checked
/// against its tunable's range, the error naming it
/// (`states[0].sched_tunables.base_slice_ns`).
fn tunables(
    raw: &Option<Spanned<std::collections::BTreeMap<String, Spanned<Int>>>>,
    key: &str,
) -> Checked<SchedTunables> {
    let mut out = SchedTunables::default();
    let Some(table) = raw else {
        return Ok(out);
    };
    for (name, v) in table.get_ref() {
        let at = join(key, &format!("{}.{name}", field::SCHED_TUNABLES));
        let value = u64::try_from(v.get_ref().0).map_err(|_| {
            Issue::new(
                v.span(),
                at.clone(),
                format!("{} is negative", v.get_ref().0),
            )
        })?;
        out.insert(name, value)
            .map_err(|e| Issue::new(v.span(), at, e.to_string()))?;
    }
    Ok(out)
}

/// An integer of the file that its `farm_spec` type refused.
#[derive(Debug, thiserror::Error)]
#[error("{value} is out of range {min}..={max}")]
struct OutOfRange {
    value: i64,
    min: u32,
    max: u32,
}

/// An integer of the file made into a `farm_spec` value by `make`; out of
/// `range` (the type's own bounds, for the message) it is refused as the
/// matrix refuses any number: "N is out of range MIN..=MAX".
fn int<T, E>(
    value: &Spanned<Int>,
    (min, max): (u32, u32),
    make: impl Fn(u32) -> Result<T, E>,
) -> Result<T, OutOfRange> {
    let n = value.get_ref().0;
    u32::try_from(n)
        .ok()
        .and_then(|v| make(v).ok())
        .ok_or(OutOfRange { value: n, min, max })
}

/// A state with `cmdline` words needs every kernel to boot in a guest
/// (cells are the product of the axes): the agent's own kernel has the
/// command line it booted with.
pub(super) fn cmdline_fits(
    raw: &super::raw::RawMatrix,
    kernels: &[farm_spec::Kernel],
    states: &[MachineState],
) -> Checked<()> {
    let Some(kernel) = kernels.iter().find(|k| !k.is_guest()) else {
        return Ok(());
    };
    let Some(i) = states.iter().position(|s| !s.cmdline.is_empty()) else {
        return Ok(());
    };
    let span = raw
        .states
        .as_ref()
        .and_then(|v| v.get_ref().get(i))
        .and_then(|s| s.get_ref().cmdline.as_ref())
        .map_or(0..0, Spanned::span);
    Err(Issue::new(
        span,
        format!("states[{i}].{}", field::CMDLINE),
        format!(
            "a kernel command line needs a kernel booted in a guest, and `{kernel}` runs on the \
             agent's own kernel (put such states in a matrix of guest kernels)"
        ),
    ))
}
