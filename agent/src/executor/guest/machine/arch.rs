//! The architectures guests are booted for, and what differs between them:
//! the QEMU binary, the console, the report channel, the Debian arch of the
//! packages, and what runs inside.

use std::fmt;

/// A guest architecture.
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
    /// The executor name results carry.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        }
    }
}

impl GuestArch {
    pub const ALL: [GuestArch; 2] = [GuestArch::X86_64, GuestArch::S390x];

    /// `uname -m` inside the guest.
    pub fn uname(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "x86_64",
            GuestArch::S390x => "s390x",
        }
    }

    /// The arch of Debian's packages (`dpkg --print-architecture`).
    pub fn deb_arch(self) -> &'static str {
        match self {
            GuestArch::X86_64 => "amd64",
            GuestArch::S390x => "s390x",
        }
    }

    /// The QEMU system emulator, and the Debian package installing it.
    pub fn qemu(self) -> (&'static str, &'static str) {
        match self {
            GuestArch::X86_64 => ("/usr/bin/qemu-system-x86_64", "qemu-system-x86"),
            GuestArch::S390x => ("/usr/bin/qemu-system-s390x", "qemu-system-misc"),
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

    /// The arch a Debian kernel version runs on, by its flavour's suffix
    /// (`6.1.0-57-cloud-amd64`, `6.1.0-50-s390x`). The coordinator checks the
    /// same suffixes when a matrix is submitted.
    pub fn of_debian_version(version: &str) -> Option<GuestArch> {
        if version.ends_with("-amd64") {
            Some(GuestArch::X86_64)
        } else if version.ends_with("-s390x") {
            Some(GuestArch::S390x)
        } else {
            None
        }
    }

    /// The arch named by `uname -m`.
    pub fn from_uname(name: &str) -> Option<GuestArch> {
        GuestArch::ALL.into_iter().find(|a| a.uname() == name)
    }
}

impl fmt::Display for GuestArch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.uname())
    }
}

#[cfg(test)]
mod tests;
