//! The part of an agent's capabilities that changes while it runs: the
//! guest kernels it can boot (Debian kernels in its cache, images dropped in
//! a `--kernel-dir`) and the accelerators (KVM, once a probe saw it boot a
//! guest). The session looks again every [`RESCAN`] and after each run, and
//! sends the whole new set when it differs: continuous matrices trigger on
//! a kernel that appears, and placement sees it at once.

use std::time::Duration;

use farm_proto::Capabilities;

use crate::executor::WorkloadCommand;
use crate::executor::guest::arch::Accel;
use crate::executor::guest::image::kernels;
use crate::executor::guest::machine::kvm;

/// How often the catalogue is looked at by default: a directory listing and
/// a few bytes of each image.
pub const RESCAN: Duration = Duration::from_secs(10);

/// Recomputes the catalogue part of `caps` (guest kernels, accelerators and
/// the executors they give) for an agent whose `guest_arches` are set.
pub fn refresh(caps: &mut Capabilities, workload: &WorkloadCommand) {
    let accel_names = [Accel::Tcg, Accel::Kvm].map(|a| a.name());
    caps.executors
        .retain(|e| !accel_names.contains(&e.as_str()));
    caps.guest_accelerators.clear();
    caps.guest_kernels.clear();
    let Some(cache) = &workload.guest_cache else {
        return;
    };
    if caps.guest_arches.is_empty() {
        return;
    }
    // KVM only once a probe saw it boot a guest (the first guest run probes
    // when no verdict is kept yet); TCG always.
    let mut accels = vec![Accel::Tcg];
    if let Some(kvm::Verdict::Works) = kvm::kept_verdict(cache) {
        accels.push(Accel::Kvm);
    }
    for a in accels {
        caps.guest_accelerators.push(a.name().to_owned());
        caps.executors.push(a.name().to_owned());
    }
    caps.guest_kernels = kernels::cached(cache);
    // Built kernels boot in x86_64 guests.
    if caps.guest_arches.iter().any(|a| a == "x86_64")
        && let Some(t) = &workload.trees
    {
        caps.kernel_repos = t.names();
        use crate::kernel::files::Kind;
        caps.build_configs = t.file_names(Kind::Config);
        caps.build_patches = t.file_names(Kind::Patch);
        caps.built_kernels = crate::kernel::build::kept(cache);
    }
    // Only images of an arch it boots, so that no cell comes here to fail.
    let arches = caps.guest_arches.clone();
    caps.guest_kernels.extend(
        kernels::file_kernels(&workload.kernel_dirs)
            .into_iter()
            .filter(|(_, arch)| arches.iter().any(|a| a == arch.uname()))
            .map(|(name, _)| name),
    );
}
