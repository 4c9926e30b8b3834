//! The guest machine: its architecture ([`arch`]: what differs between
//! x86_64 and s390x guests, and TCG/KVM), QEMU booting it ([`qemu`]: the
//! console to a log and the report on a channel of its own, virtio-serial
//! where the kernel has the driver and ttyS1 otherwise, with a timeout and cancellation that kill and
//! reap QEMU), and whether KVM really boots guests here ([`kvm`]: probed
//! once, kept). [`available`] says whether this machine can boot guests of
//! an arch at all; [`of_assignment`] is the machine a run asks for.

pub mod kvm;
pub mod qemu;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use farm_proto::RunAssignment;

use super::arch::{Accel, GuestArch};
use super::image::initramfs::BUSYBOX;

/// Why this machine boots no guests of an arch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("cannot run /usr/bin/ldd: {0}")]
    Ldd(String),
    #[error("missing {}", .0.join(", "))]
    Missing(Vec<String>),
}

/// A guest machine the assignment asks for that this agent will not boot;
/// the reason is `farm_spec::guest::resolve`'s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("guest machine refused: {0}")]
pub struct Refused(#[from] farm_spec::guest::ShapeError);

/// The guest machine the assignment asks for (the matrix's `[guest]`, a
/// field left out taking the arch's default: x86_64 4 vCPUs on 2 NUMA
/// nodes, the topology the farm's hosts lack; s390x 2 vCPUs, no NUMA),
/// checked again here: an agent trusts nothing it receives.
pub fn of_assignment(
    a: &RunAssignment,
    arch: GuestArch,
    accel: Accel,
    timeout: Duration,
) -> Result<qemu::Machine, Refused> {
    let asked = a.guest.as_ref().map(farm_spec::GuestShape::from);
    let shape = farm_spec::guest::resolve(asked.as_ref(), arch.uname())?;
    Ok(qemu::Machine {
        arch,
        accel,
        cpus: shape.cpus,
        memory_mib: shape.memory_mib,
        nodes: shape.numa_nodes,
        timeout,
        cmdline: Vec::new(),
        // The executor picks virtio-serial where the kernel has its driver.
        channel: match arch {
            GuestArch::X86_64 => qemu::Channel::Serial,
            GuestArch::S390x => qemu::Channel::VirtioSerial,
        },
    })
}

/// Why this machine cannot boot guests of `arch`, if it cannot: the
/// programs guests need (QEMU, a static busybox, apt and dpkg for kernels
/// and packages, gzip, ldd or readelf, sha256sum, gcc for the arch), each named with its
/// Debian package, and for a foreign arch its registration with dpkg.
pub fn available(arch: GuestArch) -> Result<(), Unavailable> {
    let mut missing = Vec::new();
    let mut needed = vec![
        arch.qemu(),
        ("/usr/bin/apt-get", "apt"),
        ("/usr/bin/dpkg-deb", "dpkg"),
        ("/usr/bin/gzip", "gzip"),
        ("/usr/bin/sha256sum", "coreutils"),
        // The external tools' libraries, from Debian's packages of the arch.
        ("/usr/bin/readelf", "binutils"),
        // The in-guest sampler, a static C program built for the arch.
        arch.gcc(),
    ];
    match arch {
        // The farm's own binaries with their libraries, and the host's busybox.
        GuestArch::X86_64 => {
            needed.extend([(BUSYBOX, "busybox-static"), ("/usr/bin/ldd", "libc-bin")])
        }
        // Debian's s390x packages only (busybox-static:s390x included).
        GuestArch::S390x => {}
    }
    for (path, package) in needed {
        if !Path::new(path).is_file() {
            missing.push(format!("{path} ({package})"));
        }
    }
    // Debian's dynamically linked `busybox` installs /bin/busybox too, and
    // a guest has no libraries for it.
    if missing.is_empty() && arch == GuestArch::X86_64 {
        let ldd = Command::new("/usr/bin/ldd")
            .arg(BUSYBOX)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Unavailable::Ldd(e.to_string()))?;
        if ldd.status.success() {
            missing.push(format!("a static {} (busybox-static)", BUSYBOX));
        }
    }
    if missing.is_empty() && Some(arch) != kvm::host_arch() && !foreign_arch(arch.deb_arch()) {
        missing.push(format!(
            "{0} packages (dpkg --add-architecture {0} && apt-get update)",
            arch.deb_arch()
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(Unavailable::Missing(missing))
    }
}

/// Whether dpkg lists `deb_arch` among its foreign architectures.
fn foreign_arch(deb_arch: &str) -> bool {
    Command::new("/usr/bin/dpkg")
        .arg("--print-foreign-architectures")
        .stdin(Stdio::null())
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l.trim() == deb_arch)
        })
        .unwrap_or(false)
}
