//! The architectures guests are booted for, and what differs between them:
//! the QEMU binary, the console, the report channel, the Debian arch of the
//! packages, and what runs inside.

use std::fmt;

use farm_spec::{Arch, Executor};

/// A guest architecture: the [`Arch`]s this agent boots guests of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GuestArch {
    X86_64,
    S390x,
}

/// How QEMU executes the guest's instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// QEMU's translator: slow, works everywhere.
    Tcg,
    /// Hardware virtualisation, only for the host's own arch and only once a
    /// probe has seen a guest boot with it (nested KVM often hangs).
    Kvm,
}

impl Accel {
    /// The executor results carry.
    pub fn executor(self) -> Executor {
        match self {
            Accel::Tcg => Executor::Tcg,
            Accel::Kvm => Executor::Kvm,
        }
    }

    /// The executor's name, as QEMU's `-accel` takes it too.
    pub fn name(self) -> &'static str {
        self.executor().as_str()
    }
}

/// An arch this agent boots no guests of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no guest for arch {0} (this agent boots x86_64 and s390x guests)")]
pub struct NoGuest(pub Arch);

impl TryFrom<Arch> for GuestArch {
    type Error = NoGuest;

    fn try_from(arch: Arch) -> Result<GuestArch, NoGuest> {
        match arch {
            Arch::X86_64 => Ok(GuestArch::X86_64),
            Arch::S390x => Ok(GuestArch::S390x),
            other => Err(NoGuest(other)),
        }
    }
}

impl GuestArch {
    pub const ALL: [GuestArch; 2] = [GuestArch::X86_64, GuestArch::S390x];

    /// The arch, as every part of the farm names it.
    pub fn arch(self) -> Arch {
        match self {
            GuestArch::X86_64 => Arch::X86_64,
            GuestArch::S390x => Arch::S390x,
        }
    }

    /// `uname -m` inside the guest.
    pub fn uname(self) -> &'static str {
        self.arch().uname()
    }

    /// The arch of Debian's packages (`dpkg --print-architecture`).
    pub fn deb_arch(self) -> &'static str {
        self.arch().deb_arch()
    }

    /// The QEMU system emulator, and the Debian package installing it.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            GuestArch::X86_64 => ("/usr/bin/qemu-system-x86_64", "qemu-system-x86"),
            GuestArch::S390x => ("/usr/bin/qemu-system-s390x", "qemu-system-misc"),
        }
    }

    /// The C compiler that builds static programs for this arch (the
    /// in-guest sampler), and the Debian packages it takes: the native gcc
    /// on an x86_64 host is also `x86_64-linux-gnu-gcc`; s390x takes
    /// Debian's cross compiler and its C library.
    pub fn gcc(self) -> (&'static str, &'static str) {
        match self {
            GuestArch::X86_64 => ("/usr/bin/x86_64-linux-gnu-gcc", "gcc libc6-dev"),
            GuestArch::S390x => (
                "/usr/bin/s390x-linux-gnu-gcc",
                "gcc-s390x-linux-gnu libc6-dev-s390x-cross",
            ),
        }
    }

    /// The guest's console device (`console=` on the kernel command line).
    pub fn console(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "ttyS0",
            GuestArch::S390x => "ttysclp0",
        }
    }

    /// Whether the farm's own Rust binaries run in this guest: only the x86_64
    /// target is installed on the farm's hosts, so an s390x guest runs
    /// Debian's builds of the external tools only.
    pub fn runs_built_ins(self) -> bool {
        self == GuestArch::X86_64
    }

    /// Whether the guest can have several NUMA nodes: s390x shows none in
    /// sysfs, whatever QEMU is told.
    pub fn has_numa(self) -> bool {
        self == GuestArch::X86_64
    }
}

impl fmt::Display for GuestArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.uname())
    }
}

#[cfg(test)]
mod tests;
