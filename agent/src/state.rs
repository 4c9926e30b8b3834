//! Machine states: the knobs a run turns — CPU hotplug, autogroup, cgroup
//! layout, scheduler features and tunables, NUMA balancing — applied
//! before the run and restored after it.
//!
//! Every change goes through the [`journal`] first (old value, fsynced), so
//! that the machine can be put back after a normal run and after a crash at
//! any step. [`Applier::apply`] makes the changes; [`Journal::restore`]
//! undoes them.

pub mod cgroup;
mod error;
mod files;
pub mod hotplug;
pub mod journal;
pub mod sched;

use farm_proto::Capabilities;
use farm_spec::{HotplugMode, MachineState, StateKind};
use tracing::info;

pub use cgroup::Placement;
pub use error::{Error, Result};
pub use journal::{Entry, Journal};

use files::{read_trimmed, write};

/// The state kinds this agent can apply on a machine with these capabilities.
pub fn kinds(caps: &Capabilities) -> Vec<StateKind> {
    let mut out = Vec::new();
    if !caps.hotpluggable_cpus.is_empty() {
        out.push(StateKind::Hotplug);
    }
    if caps.sysctl_writable {
        out.push(StateKind::Autogroup);
    }
    if caps.root && cgroup::Layout::of(caps).is_some() {
        out.push(StateKind::Cgroup);
    }
    if !caps.sched_features.is_empty() {
        out.push(StateKind::SchedFeatures);
    }
    if !caps.sched_tunables.is_empty() {
        out.push(StateKind::SchedTunables);
    }
    if caps.numa_balancing_writable {
        out.push(StateKind::NumaBalancing);
    }
    out
}

pub struct Applier<'a> {
    pub journal: &'a mut Journal,
    pub caps: &'a Capabilities,
}

impl Applier<'_> {
    /// Applies `state` for a run with `loads` competing programs; `tag`
    /// names the run's cgroups.
    pub fn apply(&mut self, state: &MachineState, tag: &str, loads: usize) -> Result<Placement> {
        let refuse = |why: String| Error::Refused {
            state: state.name.clone(),
            why,
        };
        let root = self.journal.root().to_path_buf();
        if state.cmdline.iter().next().is_some() {
            return Err(refuse(
                "a kernel command line needs a kernel booted in a guest".into(),
            ));
        }
        sched::apply(self.journal, &root, state)?;
        if let Some(v) = state.autogroup {
            if !self.caps.sysctl_writable {
                return Err(refuse(
                    "kernel.sched_autogroup_enabled is not writable here".into(),
                ));
            }
            let key = journal::SYSCTLS[0];
            let path = journal::sysctl_path(&root, key);
            let was = read_trimmed(&path)?;
            self.journal.record(&Entry::Sysctl {
                key: key.into(),
                was,
            })?;
            write(&path, &v.value().to_string())?;
            journal::step("autogroup written");
        }
        if let Some(plan) = &state.hotplug {
            hotplug::check(plan, self.caps).map_err(|source| Error::Hotplug {
                state: state.name.clone(),
                source,
            })?;
            for cpu in plan.cpus.iter() {
                let path = journal::cpu_online_path(&root, cpu);
                let was = read_trimmed(&path)? == "1";
                self.journal.record(&Entry::CpuOnline { cpu, was })?;
                write(&path, "0")?;
                journal::step("cpu offlined");
            }
            if plan.mode == HotplugMode::Cycle {
                for cpu in plan.cpus.iter() {
                    write(&journal::cpu_online_path(&root, cpu), "1")?;
                    journal::step("cpu onlined");
                }
            }
            info!(hotplug = %plan, "hotplug applied");
        }
        let Some(spec) = &state.cgroup else {
            return Ok(Placement {
                workload: Vec::new(),
                loads: vec![Vec::new(); loads],
            });
        };
        let layout = cgroup::Layout::of(self.caps)
            .ok_or_else(|| refuse("no usable cpu cgroup controller".into()))?;
        cgroup::create(self.journal, &root, layout, spec, tag, loads)
    }
}
