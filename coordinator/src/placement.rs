//! Which agent may serve which cell, and, when none may, why.
//!
//! Pure functions over capabilities and cells: the scheduler calls
//! [`satisfies`] on its hot path and [`waiting_reason`] when it reports a
//! matrix's status.

use std::fmt;

use farm_proto::{Capabilities, Cell};

/// The value of a cell's `kernel` that accepts whatever kernel an agent runs.
pub const RUNNING_KERNEL: &str = "running";

/// One thing a cell asks of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Requirement {
    Arch(String),
    MinCpus(u32),
    MinNumaNodes(u32),
    Executor(String),
    Kernel(String),
    /// A kernel booted in a guest: an agent that boots guests of this arch.
    GuestKernel {
        kernel: String,
        arch: String,
    },
    Workload(String),
    /// A machine-state kind the agent must be able to apply and restore.
    State(&'static str),
    /// These CPUs must be hotpluggable there, and one CPU must stay online.
    Hotplug(Vec<u32>),
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Arch(a) => write!(f, "arch={a}"),
            Requirement::MinCpus(n) => write!(f, "cpus>={n}"),
            Requirement::MinNumaNodes(n) => write!(f, "numa_nodes>={n}"),
            Requirement::Executor(e) => write!(f, "executor={e}"),
            Requirement::Kernel(k) => write!(f, "kernel={k}"),
            Requirement::GuestKernel { kernel, .. } if kernel.starts_with("file:") => {
                write!(
                    f,
                    "kernel={kernel} (an agent with that image in its --kernel-dir)"
                )
            }
            Requirement::GuestKernel { kernel, arch } => {
                write!(f, "kernel={kernel} (an agent that boots {arch} guests)")
            }
            Requirement::Workload(w) => write!(f, "workload={w}"),
            Requirement::State(s) => write!(f, "state={s}"),
            Requirement::Hotplug(cpus) => {
                let list: Vec<String> = cpus.iter().map(|c| format!("cpu{c}")).collect();
                write!(f, "hotplug of {}", list.join(","))
            }
        }
    }
}

impl Requirement {
    pub fn holds(&self, caps: &Capabilities) -> bool {
        match self {
            Requirement::Arch(a) => caps.arch == *a,
            Requirement::MinCpus(n) => caps.cpus_online >= *n,
            // s390x and non-NUMA kernels expose no node directory: that is one node.
            Requirement::MinNumaNodes(n) => (caps.numa_nodes.len().max(1) as u32) >= *n,
            Requirement::Executor(e) => caps.executors.iter().any(|x| x == e),
            Requirement::Kernel(k) => k == RUNNING_KERNEL || caps.kernel_release == *k,
            // A `file:` image only where the agent lists it (its own files).
            Requirement::GuestKernel { kernel, .. } if kernel.starts_with("file:") => {
                caps.guest_kernels.iter().any(|k| k == kernel)
            }
            Requirement::GuestKernel { arch, .. } => caps.guest_arches.iter().any(|a| a == arch),
            Requirement::Workload(w) => caps.workloads.iter().any(|x| x == w),
            Requirement::State(s) => caps.state_kinds.iter().any(|x| x == s),
            Requirement::Hotplug(cpus) => {
                cpus.iter().all(|c| caps.hotpluggable_cpus.contains(c))
                    && caps.online_cpus.iter().any(|c| !cpus.contains(c))
            }
        }
    }
}

/// Everything `cell` asks of an agent, in a stable order.
pub fn requirements(cell: &Cell) -> Vec<Requirement> {
    let mut out = Vec::new();
    if let Some(h) = &cell.host {
        if !h.arch.is_empty() {
            out.push(Requirement::Arch(h.arch.clone()));
        }
        if h.min_cpus > 0 {
            out.push(Requirement::MinCpus(h.min_cpus));
        }
        if h.min_numa_nodes > 1 {
            out.push(Requirement::MinNumaNodes(h.min_numa_nodes));
        }
        if !h.executor.is_empty() {
            out.push(Requirement::Executor(h.executor.clone()));
        }
    }
    match crate::matrix::kernel_kind(&cell.kernel) {
        crate::matrix::KernelKind::Running => {}
        crate::matrix::KernelKind::Release => out.push(Requirement::Kernel(cell.kernel.clone())),
        crate::matrix::KernelKind::Debian { arch } => out.push(Requirement::GuestKernel {
            kernel: cell.kernel.clone(),
            arch: arch.to_owned(),
        }),
        // An image of the user's: for the arch of the host selector, else
        // for any arch the agent boots guests of (checked when it boots).
        crate::matrix::KernelKind::File => out.push(Requirement::GuestKernel {
            kernel: cell.kernel.clone(),
            arch: cell
                .host
                .as_ref()
                .map(|h| h.arch.clone())
                .filter(|a| !a.is_empty())
                .unwrap_or_else(|| "x86_64".to_owned()),
        }),
    }
    if matches!(out.last(), Some(Requirement::GuestKernel { .. })) {
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
        if !s.hotplug.is_empty() {
            out.push(Requirement::State("hotplug"));
            out.push(Requirement::Hotplug(crate::matrix::hotplug_cpus(
                &s.hotplug,
            )));
        }
        if !s.cgroup.is_empty() {
            out.push(Requirement::State("cgroup"));
        }
        if s.autogroup.is_some() {
            out.push(Requirement::State("autogroup"));
        }
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
