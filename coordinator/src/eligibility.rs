//! Which agent may serve which cell, and, when none may, why.
//!
//! Pure functions over capabilities and cells: the scheduler calls
//! [`satisfies`] on its hot path and [`waiting_reason`] when it reports a
//! matrix's status.

use std::fmt;

use farm_proto::Capabilities;

use crate::cell::Cell;
use farm_spec::{Arch, CpuSet, Executor, Kernel, StateKind};

/// One thing a cell asks of an agent, from the cell's types (`crate::cell`);
/// an agent's capabilities stay the wire's strings and are compared with
/// the types' names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Requirement {
    Arch(String),
    MinCpus(u32),
    MinNumaNodes(u32),
    Executor(Executor),
    /// A release the agent must run (`uname -r`).
    Kernel(String),
    /// A `debian:` kernel booted in a guest: an agent that boots guests of this arch.
    GuestKernel {
        kernel: String,
        arch: Arch,
    },
    /// A `file:` image booted in a guest: an agent that lists it (its own files).
    GuestImage(String),
    /// A `git:` kernel, built from a tree and booted in a guest: an agent
    /// that has the repository (`--kernel-repo`).
    KernelRepo {
        kernel: String,
        repo: String,
    },
    /// A `[build]`'s base configuration or patch: an agent whose operator
    /// keeps that file (`--build-configs`, `--build-patches`).
    BuildFile {
        kind: BuildFileKind,
        name: String,
    },
    Workload(String),
    /// A machine-state kind the agent must be able to apply and restore.
    State(StateKind),
    /// A scheduler feature or tunable the agent's running kernel must have
    /// (its debugfs, as the agent read it at registration).
    SchedKnob {
        kind: KnobKind,
        name: String,
    },
    /// These CPUs must be hotpluggable there, and one CPU must stay online.
    /// Kept as ranges: a cell's `offline:1-4095` is one pair, not 4,095 numbers.
    Hotplug(CpuSet),
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Arch(a) => write!(f, "arch={a}"),
            Requirement::MinCpus(n) => write!(f, "cpus>={n}"),
            Requirement::MinNumaNodes(n) => write!(f, "numa_nodes>={n}"),
            Requirement::Executor(e) => write!(f, "executor={e}"),
            Requirement::Kernel(k) => write!(f, "kernel={k}"),
            Requirement::GuestImage(kernel) => {
                write!(
                    f,
                    "kernel={kernel} (an agent with that image in its --kernel-dir)"
                )
            }
            Requirement::GuestKernel { kernel, arch } => {
                write!(f, "kernel={kernel} (an agent that boots {arch} guests)")
            }
            Requirement::KernelRepo { kernel, repo } => write!(
                f,
                "kernel={kernel} (an agent with the repository `{repo}` in its --kernel-repo)"
            ),
            Requirement::BuildFile { kind, name } => write!(
                f,
                "build {kind} `{name}` (an agent with it in its {})",
                kind.flag()
            ),
            Requirement::Workload(w) => write!(f, "workload={w}"),
            Requirement::State(s) => write!(f, "state={s}"),
            Requirement::SchedKnob { kind, name } => {
                write!(f, "sched {kind} {name} (an agent whose kernel has it)")
            }
            Requirement::Hotplug(cpus) => {
                // As ranges (the kernel's list format): a reason is formatted
                // per status, and `offline:1-99999` spelt CPU by CPU made a
                // megabyte of it.
                let s = if cpus.count() == 1 { "" } else { "s" };
                write!(f, "hotplug of cpu{s} {cpus}")
            }
        }
    }
}

/// A debugfs scheduler knob's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KnobKind {
    Feature,
    Tunable,
}

impl fmt::Display for KnobKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KnobKind::Feature => "feature",
            KnobKind::Tunable => "tunable",
        })
    }
}

/// Which of an operator's build directories a file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BuildFileKind {
    Config,
    Patch,
}

impl BuildFileKind {
    fn flag(self) -> &'static str {
        match self {
            BuildFileKind::Config => "--build-configs",
            BuildFileKind::Patch => "--build-patches",
        }
    }
}

impl fmt::Display for BuildFileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BuildFileKind::Config => "configuration",
            BuildFileKind::Patch => "patch",
        })
    }
}

impl Requirement {
    pub fn holds(&self, caps: &Capabilities) -> bool {
        match self {
            Requirement::Arch(a) => caps.arch == *a,
            Requirement::MinCpus(n) => caps.cpus_online >= *n,
            // s390x and non-NUMA kernels expose no node directory: that is one node.
            Requirement::MinNumaNodes(n) => (caps.numa_nodes.len().max(1) as u32) >= *n,
            Requirement::Executor(e) => caps.executors.iter().any(|x| x == e.as_str()),
            Requirement::Kernel(k) => caps.kernel_release == *k,
            Requirement::GuestImage(kernel) => caps.guest_kernels.iter().any(|k| k == kernel),
            Requirement::KernelRepo { repo, .. } => caps.kernel_repos.iter().any(|r| r == repo),
            Requirement::GuestKernel { arch, .. } => {
                caps.guest_arches.iter().any(|a| a == arch.uname())
            }
            Requirement::BuildFile { kind, name } => match kind {
                BuildFileKind::Config => caps.build_configs.iter().any(|c| c == name),
                BuildFileKind::Patch => caps.build_patches.iter().any(|p| p == name),
            },
            Requirement::Workload(w) => caps.workloads.iter().any(|x| x == w),
            Requirement::State(s) => caps.state_kinds.iter().any(|x| x == s.as_str()),
            Requirement::SchedKnob { kind, name } => match kind {
                KnobKind::Feature => caps.sched_features.iter().any(|x| x == name),
                KnobKind::Tunable => caps.sched_tunables.iter().any(|x| x == name),
            },
            Requirement::Hotplug(cpus) => {
                let hotpluggable = &caps.hotpluggable_cpus;
                // More CPUs than the agent can hotplug fail at once; otherwise
                // its list becomes ranges (n log n) and the set is compared
                // range by range, never expanded: `offline:1-99999` against a
                // long list is not a scan of the list per CPU.
                cpus.count() <= hotpluggable.len()
                    && cpus.is_subset_of(&CpuSet::from_cpus(hotpluggable.iter().copied()))
                    && caps.online_cpus.iter().any(|&c| !cpus.contains(c))
            }
        }
    }
}

/// The catalogue name of `cell`'s build, for a `git:` kernel: an agent that
/// lists it has the image, and is preferred for the cell.
pub fn built_name(cell: &Cell) -> Option<String> {
    let Kernel::Git(g) = &cell.kernel else {
        return None;
    };
    let build = cell.build.clone().unwrap_or_default();
    Some(farm_spec::build::catalogue_name(g, &build))
}

/// The operator's files a cell's `[build]` names.
fn build_files(cell: &Cell) -> Vec<Requirement> {
    let Some(b) = &cell.build else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let farm_spec::BaseConfig::File(n) = &b.base {
        out.push(Requirement::BuildFile {
            kind: BuildFileKind::Config,
            name: n.to_string(),
        });
    }
    out.extend(b.patches.iter().map(|p| Requirement::BuildFile {
        kind: BuildFileKind::Patch,
        name: p.to_string(),
    }));
    out
}

/// Everything `cell` asks of an agent, in a stable order.
pub fn requirements(cell: &Cell) -> Vec<Requirement> {
    let mut out = Vec::new();
    if let Some(h) = &cell.host {
        if let Some(arch) = &h.arch {
            out.push(Requirement::Arch(arch.clone()));
        }
        if h.min_cpus > 0 {
            out.push(Requirement::MinCpus(h.min_cpus));
        }
        if h.min_numa_nodes > 1 {
            out.push(Requirement::MinNumaNodes(h.min_numa_nodes));
        }
        if let Some(e) = h.executor {
            out.push(Requirement::Executor(e));
        }
    }
    match &cell.kernel {
        Kernel::Running => {}
        Kernel::Release(r) => out.push(Requirement::Kernel(r.clone())),
        Kernel::Debian(d) => out.push(Requirement::GuestKernel {
            kernel: cell.kernel.to_string(),
            arch: d.arch(),
        }),
        // An image of the user's: the agents that list it (its arch is
        // checked when it boots).
        Kernel::File(_) => out.push(Requirement::GuestImage(cell.kernel.to_string())),
        // Built where the repository is, and booted there in an x86_64 guest.
        Kernel::Git(g) => {
            out.push(Requirement::GuestKernel {
                kernel: cell.kernel.to_string(),
                arch: Arch::X86_64,
            });
            out.extend(build_files(cell));
            out.push(Requirement::KernelRepo {
                kernel: cell.kernel.to_string(),
                repo: g.repo().to_owned(),
            });
        }
    }
    if matches!(
        out.last(),
        Some(
            Requirement::GuestKernel { .. }
                | Requirement::GuestImage(_)
                | Requirement::KernelRepo { .. }
        )
    ) {
        // The guest brings the workload (the matrix admits only those guests
        // carry) and applies the state inside itself: the host's own tools,
        // CPUs and cgroups do not matter.
        return out;
    }
    if let Some(w) = &cell.workload {
        out.push(Requirement::Workload(w.name.clone()));
    }
    // Competing loads run on the same agent, so it must have them too.
    for l in &cell.loads {
        let r = Requirement::Workload(l.name.clone());
        if !out.contains(&r) {
            out.push(r);
        }
    }
    if let Some(s) = &cell.state {
        if let Some(plan) = &s.hotplug {
            out.push(Requirement::State(StateKind::Hotplug));
            out.push(Requirement::Hotplug(plan.cpus.clone()));
        }
        for (set, kind) in [
            (s.cgroup.is_some(), StateKind::Cgroup),
            (s.autogroup.is_some(), StateKind::Autogroup),
            (!s.sched_features.is_empty(), StateKind::SchedFeatures),
            (!s.sched_tunables.is_empty(), StateKind::SchedTunables),
            (s.numa_balancing.is_some(), StateKind::NumaBalancing),
            (!s.cmdline.is_empty(), StateKind::Cmdline),
        ] {
            if set {
                out.push(Requirement::State(kind));
            }
        }
        // Each feature and tunable the agent's kernel must have, by the
        // names it advertised (the agent checks again before writing).
        out.extend(s.sched_features.iter().map(|f| Requirement::SchedKnob {
            kind: KnobKind::Feature,
            name: f.name().to_owned(),
        }));
        out.extend(
            s.sched_tunables
                .iter()
                .map(|(t, _)| Requirement::SchedKnob {
                    kind: KnobKind::Tunable,
                    name: t.to_string(),
                }),
        );
    }
    out
}

pub fn satisfies(reqs: &[Requirement], caps: &Capabilities) -> bool {
    reqs.iter().all(|r| r.holds(caps))
}

/// Why no agent among `agents` can serve a cell with these requirements, or
/// `None` when one can (it may be busy).
pub fn waiting_reason<'a>(
    reqs: &[Requirement],
    agents: impl IntoIterator<Item = &'a Capabilities>,
) -> Option<String> {
    let agents: Vec<&Capabilities> = agents.into_iter().collect();
    if agents.is_empty() {
        return Some("no agent connected".to_string());
    }
    if agents.iter().any(|a| satisfies(reqs, a)) {
        return None;
    }
    let missing: Vec<String> = reqs
        .iter()
        .filter(|r| !agents.iter().any(|a| r.holds(a)))
        .map(|r| format!("no agent with {r}"))
        .collect();
    if !missing.is_empty() {
        return Some(missing.join("; "));
    }
    let all: Vec<String> = reqs.iter().map(ToString::to_string).collect();
    Some(format!("no single agent has {}", all.join(" and ")))
}

#[cfg(test)]
mod tests;
