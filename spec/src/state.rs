//! Machine states: the knobs a run turns — CPU hotplug, cgroup layout with
//! its limits, autogroup, scheduler features and tunables, NUMA balancing,
//! a guest kernel's command line — as one checked value.
//!
//! A [`MachineState`] holds only combinations that make sense: limits come
//! with a cgroup layout, and a cpuset keeps some CPU online while the
//! state's hotplug takes others away. The matrix builds one field by field
//! (to point at the field that is wrong); the wire's strings become one
//! through `farm_proto`'s `TryFrom`.

use std::fmt;
use std::str::FromStr;

use crate::cgroup::{CgroupShape, CpuMax, CpuWeight, OutOfRange, UnknownName, closed_word};
use crate::cpuset::CpuSet;
use crate::excerpt;
use crate::hotplug::HotplugPlan;
use crate::sched::{KernelCmdline, NumaBalancing, SchedFeatures, SchedTunables};

/// `kernel.sched_autogroup_enabled`: whether each session gets its own
/// task group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Autogroup {
    Off,
    On,
}

impl Autogroup {
    /// The sysctl's value.
    pub fn value(self) -> u32 {
        match self {
            Autogroup::Off => 0,
            Autogroup::On => 1,
        }
    }
}

impl TryFrom<u32> for Autogroup {
    type Error = OutOfRange;

    fn try_from(v: u32) -> Result<Autogroup, OutOfRange> {
        match v {
            0 => Ok(Autogroup::Off),
            1 => Ok(Autogroup::On),
            _ => Err(OutOfRange {
                what: "autogroup",
                value: v.to_string(),
                min: 0,
                max: 1,
            }),
        }
    }
}

impl FromStr for Autogroup {
    type Err = OutOfRange;

    fn from_str(s: &str) -> Result<Autogroup, OutOfRange> {
        match s {
            "0" => Ok(Autogroup::Off),
            "1" => Ok(Autogroup::On),
            _ => Err(OutOfRange {
                what: "autogroup",
                value: format!("`{}`", excerpt(s)),
                min: 0,
                max: 1,
            }),
        }
    }
}

impl fmt::Display for Autogroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value())
    }
}

/// The kinds of state an agent can apply, which it advertises and a cell
/// requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StateKind {
    Hotplug,
    Cgroup,
    Autogroup,
    SchedFeatures,
    SchedTunables,
    NumaBalancing,
    /// Only a guest's kernel has a command line a run can choose.
    Cmdline,
}

impl StateKind {
    pub const ALL: [StateKind; 7] = [
        StateKind::Hotplug,
        StateKind::Cgroup,
        StateKind::Autogroup,
        StateKind::SchedFeatures,
        StateKind::SchedTunables,
        StateKind::NumaBalancing,
        StateKind::Cmdline,
    ];
    const NAMES: [&'static str; 7] = [
        "hotplug",
        "cgroup",
        "autogroup",
        "sched_features",
        "sched_tunables",
        "numa_balancing",
        "cmdline",
    ];

    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

impl FromStr for StateKind {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<StateKind, UnknownName> {
        closed_word(
            s,
            "state kind",
            &StateKind::ALL,
            StateKind::as_str,
            &StateKind::NAMES,
        )
    }
}

impl fmt::Display for StateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A cgroup layout and the limits set on each of the run's cgroups.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CgroupSpec {
    pub shape: CgroupShape,
    pub weight: Option<CpuWeight>,
    pub max: Option<CpuMax>,
    /// `cpuset.cpus`.
    pub cpuset: Option<CpuSet>,
}

impl CgroupSpec {
    pub fn new(shape: CgroupShape) -> CgroupSpec {
        CgroupSpec {
            shape,
            weight: None,
            max: None,
            cpuset: None,
        }
    }
}

/// A named machine state; every part is optional (`None`: leave it alone).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MachineState {
    pub name: String,
    pub hotplug: Option<HotplugPlan>,
    pub cgroup: Option<CgroupSpec>,
    pub autogroup: Option<Autogroup>,
    pub sched_features: SchedFeatures,
    pub sched_tunables: SchedTunables,
    pub numa_balancing: Option<NumaBalancing>,
    /// Words added to a guest kernel's command line.
    pub cmdline: KernelCmdline,
}

/// The fields of a state, by their matrix keys (the wire's names are the
/// same).
pub mod field {
    pub const HOTPLUG: &str = "hotplug";
    pub const CGROUP: &str = "cgroup";
    pub const AUTOGROUP: &str = "autogroup";
    pub const CPU_WEIGHT: &str = "cgroup_cpu_weight";
    pub const CPU_MAX: &str = "cgroup_cpu_max";
    pub const CPUSET: &str = "cgroup_cpuset";
    pub const SCHED_FEATURES: &str = "sched_features";
    pub const SCHED_TUNABLES: &str = "sched_tunables";
    pub const NUMA_BALANCING: &str = "numa_balancing";
    pub const CMDLINE: &str = "cmdline";
}

/// Why a state was refused, naming the field (a matrix key) at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateError {
    /// A field's value did not parse; the message says why.
    Field { field: &'static str, why: String },
    /// A limit was given without a cgroup layout to set it on.
    LimitWithoutCgroup { field: &'static str },
    /// Every CPU of the cpuset is offline during the run.
    CpusetOffline { cpuset: String },
}

impl StateError {
    /// The matrix key of the field at fault.
    pub fn field(&self) -> &'static str {
        match self {
            StateError::Field { field, .. } | StateError::LimitWithoutCgroup { field } => field,
            StateError::CpusetOffline { .. } => field::CPUSET,
        }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Field { why, .. } => f.write_str(why),
            StateError::LimitWithoutCgroup { field } => write!(
                f,
                "{field} needs cgroup = \"shared\" or \"separate\" in the same state \
                 (the limit is set on the run's cgroups)"
            ),
            StateError::CpusetOffline { cpuset } => write!(
                f,
                "every CPU of `{cpuset}` is offline during the run (hotplug = \"offline:...\" in \
                 the same state): the cgroup would have no CPU to run on"
            ),
        }
    }
}

impl std::error::Error for StateError {}

/// A state's fields as strings, the way the wire carries them: empty (or 0
/// for the weight, `None` for autogroup and NUMA balancing) means unset.
#[derive(Debug, Clone, Copy, Default)]
pub struct StateStrings<'a> {
    pub name: &'a str,
    pub hotplug: &'a str,
    pub cgroup: &'a str,
    pub autogroup: Option<u32>,
    pub cpu_weight: u32,
    pub cpu_max: &'a str,
    pub cpuset: &'a str,
    /// `NAME` or `NO_NAME` each.
    pub sched_features: &'a [String],
    /// `name=value` each.
    pub sched_tunables: &'a [String],
    pub numa_balancing: Option<u32>,
    pub cmdline: &'a [String],
}

impl MachineState {
    /// A state that changes nothing.
    pub fn unchanged(name: impl Into<String>) -> MachineState {
        MachineState {
            name: name.into(),
            hotplug: None,
            cgroup: None,
            autogroup: None,
            sched_features: SchedFeatures::default(),
            sched_tunables: SchedTunables::default(),
            numa_balancing: None,
            cmdline: KernelCmdline::default(),
        }
    }

    /// Parses and checks a state given as strings (see [`StateStrings`]).
    pub fn from_strings(s: StateStrings<'_>) -> Result<MachineState, StateError> {
        fn parse<T: FromStr>(field: &'static str, v: &str) -> Result<Option<T>, StateError>
        where
            T::Err: fmt::Display,
        {
            if v.is_empty() {
                return Ok(None);
            }
            v.parse().map(Some).map_err(|e: T::Err| StateError::Field {
                field,
                why: e.to_string(),
            })
        }
        let shape: Option<CgroupShape> = parse(field::CGROUP, s.cgroup)?;
        let weight = match s.cpu_weight {
            0 => None,
            w => Some(CpuWeight::new(w).map_err(|e| StateError::Field {
                field: field::CPU_WEIGHT,
                why: e.to_string(),
            })?),
        };
        let max: Option<CpuMax> = parse(field::CPU_MAX, s.cpu_max)?;
        let cpuset: Option<CpuSet> = parse(field::CPUSET, s.cpuset)?;
        let cgroup = match shape {
            Some(shape) => Some(CgroupSpec {
                shape,
                weight,
                max,
                cpuset,
            }),
            None => {
                for (set, field) in [
                    (weight.is_some(), field::CPU_WEIGHT),
                    (max.is_some(), field::CPU_MAX),
                    (cpuset.is_some(), field::CPUSET),
                ] {
                    if set {
                        return Err(StateError::LimitWithoutCgroup { field });
                    }
                }
                None
            }
        };
        let autogroup = s
            .autogroup
            .map(Autogroup::try_from)
            .transpose()
            .map_err(|e| StateError::Field {
                field: field::AUTOGROUP,
                why: e.to_string(),
            })?;
        let knob = |field: &'static str| {
            move |e: crate::sched::KnobError| StateError::Field {
                field,
                why: e.to_string(),
            }
        };
        let numa_balancing = s
            .numa_balancing
            .map(NumaBalancing::try_from)
            .transpose()
            .map_err(|e| StateError::Field {
                field: field::NUMA_BALANCING,
                why: e.to_string(),
            })?;
        let state = MachineState {
            name: s.name.to_owned(),
            hotplug: parse(field::HOTPLUG, s.hotplug)?,
            cgroup,
            autogroup,
            sched_features: SchedFeatures::parse(s.sched_features)
                .map_err(knob(field::SCHED_FEATURES))?,
            sched_tunables: SchedTunables::parse(s.sched_tunables)
                .map_err(knob(field::SCHED_TUNABLES))?,
            numa_balancing,
            cmdline: KernelCmdline::parse(s.cmdline).map_err(knob(field::CMDLINE))?,
        };
        state.check()?;
        Ok(state)
    }

    /// The checks across fields: a cpuset keeps a CPU online.
    pub fn check(&self) -> Result<(), StateError> {
        let offline = self
            .hotplug
            .as_ref()
            .and_then(HotplugPlan::offline_during_run);
        let cpuset = self.cgroup.as_ref().and_then(|c| c.cpuset.as_ref());
        if let (Some(offline), Some(cpuset)) = (offline, cpuset)
            && cpuset.is_subset_of(offline)
        {
            return Err(StateError::CpusetOffline {
                cpuset: excerpt(&cpuset.to_string()),
            });
        }
        Ok(())
    }

    /// The kinds of state applying this one needs, in [`StateKind::ALL`] order.
    pub fn kinds(&self) -> Vec<StateKind> {
        let mut out = Vec::new();
        if self.hotplug.is_some() {
            out.push(StateKind::Hotplug);
        }
        if self.cgroup.is_some() {
            out.push(StateKind::Cgroup);
        }
        if self.autogroup.is_some() {
            out.push(StateKind::Autogroup);
        }
        if !self.sched_features.is_empty() {
            out.push(StateKind::SchedFeatures);
        }
        if !self.sched_tunables.is_empty() {
            out.push(StateKind::SchedTunables);
        }
        if self.numa_balancing.is_some() {
            out.push(StateKind::NumaBalancing);
        }
        if !self.cmdline.is_empty() {
            out.push(StateKind::Cmdline);
        }
        out
    }

    /// Whether the state changes nothing.
    pub fn is_unchanged(&self) -> bool {
        self.kinds().is_empty()
    }

    /// The state as strings, the inverse of [`MachineState::from_strings`]:
    /// each field in its canonical form.
    pub fn to_strings(&self) -> OwnedStateStrings {
        let c = self.cgroup.as_ref();
        OwnedStateStrings {
            name: self.name.clone(),
            hotplug: self
                .hotplug
                .as_ref()
                .map(|h| h.to_string())
                .unwrap_or_default(),
            cgroup: c.map(|c| c.shape.to_string()).unwrap_or_default(),
            autogroup: self.autogroup.map(Autogroup::value),
            cpu_weight: c.and_then(|c| c.weight).map_or(0, CpuWeight::get),
            cpu_max: c
                .and_then(|c| c.max)
                .map(|m| m.to_string())
                .unwrap_or_default(),
            cpuset: c
                .and_then(|c| c.cpuset.as_ref())
                .map(|s| s.to_string())
                .unwrap_or_default(),
            sched_features: self.sched_features.words(),
            sched_tunables: self.sched_tunables.words(),
            numa_balancing: self.numa_balancing.map(NumaBalancing::value),
            cmdline: self.cmdline.words(),
        }
    }
}

/// [`StateStrings`] that own their strings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnedStateStrings {
    pub name: String,
    pub hotplug: String,
    pub cgroup: String,
    pub autogroup: Option<u32>,
    pub cpu_weight: u32,
    pub cpu_max: String,
    pub cpuset: String,
    pub sched_features: Vec<String>,
    pub sched_tunables: Vec<String>,
    pub numa_balancing: Option<u32>,
    pub cmdline: Vec<String>,
}

impl OwnedStateStrings {
    pub fn as_strings(&self) -> StateStrings<'_> {
        StateStrings {
            name: &self.name,
            hotplug: &self.hotplug,
            cgroup: &self.cgroup,
            autogroup: self.autogroup,
            cpu_weight: self.cpu_weight,
            cpu_max: &self.cpu_max,
            cpuset: &self.cpuset,
            sched_features: &self.sched_features,
            sched_tunables: &self.sched_tunables,
            numa_balancing: self.numa_balancing,
            cmdline: &self.cmdline,
        }
    }
}

#[cfg(test)]
mod tests;
