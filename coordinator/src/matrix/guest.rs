//! `[guest]`, and what a kernel booted in a guest cannot run yet.

use std::ops::RangeInclusive;

use farm_proto::{GuestShape, Workload};
use farm_spec::{Arch, Kernel};
use farm_workload::catalogue::{self, WorkloadSpec};
use toml::Spanned;

use super::checks::bounded;
use super::location::{Checked, Issue};
use super::raw::RawMatrix;
use super::workloads::Axis;

/// The `[guest]` table: the machine guest kernels boot in, a field left
/// out taking the arch's default (`farm_spec::guest::default_for`: x86_64
/// 4 vCPUs on 2 nodes, s390x 2 vCPUs, 512 MiB). `None` without the table.
/// The shape must fit every guest kernel's arch (a `file:` image's is known
/// only to its agent, which checks again: checked here as x86_64).
pub(super) fn guest_shape(raw: &RawMatrix, kernels: &[Kernel]) -> Checked<Option<GuestShape>> {
    use farm_spec::guest::{CPUS, MEMORY_MIB, NUMA_NODES};
    let Some(table) = &raw.guest else {
        return Ok(None);
    };
    let g = table.get_ref();
    let range = |r: &RangeInclusive<u32>| i64::from(*r.start())..=i64::from(*r.end());
    let shape = GuestShape {
        cpus: bounded(g.cpus.as_ref(), "guest.cpus", range(&CPUS), 0)?,
        numa_nodes: bounded(
            g.numa_nodes.as_ref(),
            "guest.numa_nodes",
            range(&NUMA_NODES),
            0,
        )?,
        memory_mib: bounded(
            g.memory_mib.as_ref(),
            "guest.memory_mib",
            range(&MEMORY_MIB),
            0,
        )?,
    };
    let mut any = false;
    for k in kernels {
        let Some(arch) = guest_arch(k) else {
            continue;
        };
        any = true;
        if let Err(why) = farm_spec::guest::resolve(Some(&(&shape).into()), arch.uname()) {
            return Err(Issue::new(
                table.span(),
                "guest",
                format!("for `{k}` ({arch}; fields left out take its default): {why}"),
            ));
        }
    }
    if !any {
        return Err(Issue::new(
            table.span(),
            "guest",
            "no kernel of the matrix boots in a guest (`debian:<version>` or `file:<path>`)",
        ));
    }
    Ok(Some(shape))
}

/// External tools that guests carry (Debian's builds, of the guest's arch).
const GUEST_TOOLS: &[&str] = &[
    "stress-ng",
    "sysbench-cpu",
    "sysbench-threads",
    "rt-hackbench",
];

/// What guests cannot do yet, refused up front rather than run by run:
/// competing loads (guests run the workload alone), external tools other
/// than [`GUEST_TOOLS`], and on any arch but x86_64 the farm's built-in
/// workloads (its binaries exist for x86_64 only). Hotplug, autogroup and
/// cgroup states are applied inside guests.
pub(super) fn guest_limits(
    raw: &RawMatrix,
    kernels: &[Kernel],
    workloads: &[(&'static WorkloadSpec, Vec<Axis>)],
    loads: &[Workload],
) -> Checked<()> {
    for (i, kernel) in kernels.iter().enumerate() {
        // A `file:` image's arch is known only to the agent that has it,
        // which refuses a built-in workload for a non-x86_64 image itself.
        let Some(arch) = guest_arch(kernel) else {
            continue;
        };
        let why = if !loads.is_empty() {
            Some("competing loads cannot run there yet: guests run the workload alone".to_owned())
        } else {
            workloads.iter().find_map(|(spec, _)| match spec.origin {
                catalogue::Origin::BuiltIn if arch != Arch::X86_64 => Some(format!(
                    "`{}` is built into the farm, whose binaries exist for x86_64 only; {arch} \
                     guests run {}",
                    spec.name,
                    GUEST_TOOLS.join(", ")
                )),
                catalogue::Origin::External { .. } if !GUEST_TOOLS.contains(&spec.name) => {
                    Some(format!(
                        "`{}` is not carried into guests; they run the built-in workloads \
                         (x86_64) and {}",
                        spec.name,
                        GUEST_TOOLS.join(", ")
                    ))
                }
                _ => None,
            })
        };
        let Some(why) = why else { continue };
        let span = raw
            .kernels
            .as_ref()
            .and_then(|k| k.get_ref().get(i))
            .map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            format!("kernels[{i}]"),
            format!("`{kernel}` runs in a guest: {why}"),
        ));
    }
    Ok(())
}

/// The arch a kernel boots a guest of, `None` for one that runs on the host:
/// a `debian:` kernel's flavour's, and x86_64 for a `file:` image, whose arch
/// only its agent knows (and checks again), and for a `git:` kernel, which
/// is built for x86_64 guests.
fn guest_arch(kernel: &Kernel) -> Option<Arch> {
    match kernel {
        Kernel::Debian(d) => Some(d.arch()),
        Kernel::File(_) | Kernel::Git(_) => Some(Arch::X86_64),
        Kernel::Running | Kernel::Release(_) => None,
    }
}
