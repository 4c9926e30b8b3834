//! Pure parsers of the /proc and /sys files that capabilities discovery reads.
//!
//! Every function here takes a file's content (or facts already parsed from files) and
//! returns plain data; none knows a path or touches the filesystem. The I/O layer in
//! [`super`] reads the files and attaches the path to a [`ParseError`].

use std::collections::BTreeSet;

use farm_proto::{CgroupLayout, Virtualization};
use farm_spec::CpuSet;
use farm_spec::cpuset::CpuSetError;

/// CPU numbers in a cpu list are below this: one more than the largest
/// [`CpuSet`] holds.
pub const MAX_CPUS: u32 = CpuSet::MAX_CPU + 1;

/// What was wrong with a file's content. It names the content, not the file: the caller
/// knows the file (see [`super::Error::Parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("bad cpu list {content:?}: {source}")]
    CpuList {
        content: String,
        source: CpuSetError,
    },
    #[error("bad mount line {line:?}: expected 6 fields, found {fields}")]
    MountLine { line: String, fields: usize },
    #[error("empty, expected {expected}")]
    Empty { expected: &'static str },
}

/// Parses the kernel's cpulist format ("0-3,5,7-8"), as in
/// `/sys/devices/system/cpu/{online,possible}` and `node<N>/cpulist`, with
/// [`CpuSet::parse_kernel_list`], into the CPU numbers the capabilities
/// list: sorted and without duplicates; an empty list is valid (a
/// memory-only node, or `cpu/offline` with every CPU online).
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>, ParseError> {
    CpuSet::parse_kernel_list(s)
        .map(|set| set.iter().collect())
        .map_err(|source| ParseError::CpuList {
            content: excerpt(s.trim()),
            source,
        })
}

/// A one-line file such as `/proc/sys/kernel/osrelease`, trimmed; empty is an error.
pub fn parse_value(s: &str, expected: &'static str) -> Result<String, ParseError> {
    match s.trim() {
        "" => Err(ParseError::Empty { expected }),
        value => Ok(value.to_owned()),
    }
}

/// The number of a `node<N>` directory under `/sys/devices/system/node`, or `None` for
/// its other entries (`online`, `possible`, `has_cpu`, ...).
pub fn node_id(dir_name: &str) -> Option<u32> {
    let digits = dir_name.strip_prefix("node")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One line of `/proc/self/mounts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub source: String,
    /// Absolute, with the kernel's octal escapes (`\040` for a space) decoded.
    pub mount_point: String,
    pub fs_type: String,
    pub options: Vec<String>,
}

impl Mount {
    pub fn is_read_only(&self) -> bool {
        self.options.iter().any(|o| o == "ro")
    }
}

/// Parses `/proc/self/mounts` (the fstab format: source, mount point, type, options,
/// dump, pass). Blank lines are skipped; a line without six fields is an error.
pub fn parse_mounts(s: &str) -> Result<Vec<Mount>, ParseError> {
    let mut mounts = Vec::new();
    for line in s.lines().filter(|l| !l.trim().is_empty()) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [source, mount_point, fs_type, options, _dump, _pass] = fields[..] else {
            return Err(ParseError::MountLine {
                line: excerpt(line),
                fields: fields.len(),
            });
        };
        mounts.push(Mount {
            source: unescape(source),
            mount_point: unescape(mount_point),
            fs_type: fs_type.to_owned(),
            options: options.split(',').map(str::to_owned).collect(),
        });
    }
    Ok(mounts)
}

/// Decodes the kernel's `\ooo` octal escapes (it escapes space, tab, newline and
/// backslash in mount table fields); any other backslash is kept as it is.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                let value = u32::from(d[0] - b'0') * 64
                    + u32::from(d[1] - b'0') * 8
                    + u32::from(d[2] - b'0');
                // "\777" is not a byte; keep such a sequence verbatim.
                match u8::try_from(value) {
                    Ok(byte) => out.push(byte),
                    Err(_) => out.extend_from_slice(&bytes[i..i + 4]),
                }
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount that the absolute `path` lives on: the one with the longest mount point that
/// is `path` or one of its parents. Of mounts on the same point the last wins, because it
/// hides the earlier ones.
pub fn mount_of<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| {
            let point = m.mount_point.as_str();
            point == "/"
                || path == point
                || path
                    .strip_prefix(point)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|m| m.mount_point.len())
}

/// Every cgroup v1 controller the kernel has (`include/linux/cgroup_subsys.h`; `blkio` is
/// v1's name for `io`). A v1 mount's options mix controllers with mount flags (`rw`,
/// `nosuid`, `clone_children`, `release_agent=...`) and named hierarchies
/// (`name=systemd`), so controllers are recognised by name. v1 is frozen: the list does
/// not grow.
pub const V1_CONTROLLERS: &[&str] = &[
    "blkio",
    "cpu",
    "cpuacct",
    "cpuset",
    "debug",
    "devices",
    "freezer",
    "hugetlb",
    "memory",
    "misc",
    "net_cls",
    "net_prio",
    "perf_event",
    "pids",
    "rdma",
];

/// The cgroup hierarchies found in a mount table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroups {
    pub layout: CgroupLayout,
    /// Controllers of all `cgroup` (v1) mounts, sorted, without duplicates.
    pub v1_controllers: Vec<String>,
    /// Where the cgroup2 hierarchy is mounted: `/sys/fs/cgroup` on a v2 machine,
    /// usually `/sys/fs/cgroup/unified` on a hybrid one. Its enabled controllers are in
    /// `cgroup.controllers` there, which the I/O layer reads.
    pub v2_mount_point: Option<String>,
}

/// Tells the cgroup layout from the mount table.
///
/// A v1 mount counts only if it carries a controller: a named hierarchy such as
/// `name=systemd` beside a cgroup2 mount is still a v2 machine for the scheduler.
/// v1 controllers plus a cgroup2 mount is hybrid; with several cgroup2 mounts (bind
/// mounts in containers) the first, the one mounted earliest, is reported.
pub fn cgroups(mounts: &[Mount]) -> Cgroups {
    let v1_controllers: BTreeSet<&str> = mounts
        .iter()
        .filter(|m| m.fs_type == "cgroup")
        .flat_map(|m| m.options.iter().map(String::as_str))
        .filter(|o| V1_CONTROLLERS.contains(o))
        .collect();
    let v2_mount_point = mounts
        .iter()
        .find(|m| m.fs_type == "cgroup2")
        .map(|m| m.mount_point.clone());
    let layout = match (v1_controllers.is_empty(), v2_mount_point.is_some()) {
        (true, false) => CgroupLayout::None,
        (true, true) => CgroupLayout::V2,
        (false, false) => CgroupLayout::V1,
        (false, true) => CgroupLayout::Hybrid,
    };
    Cgroups {
        layout,
        v1_controllers: v1_controllers.into_iter().map(str::to_owned).collect(),
        v2_mount_point,
    }
}

/// Parses a cgroup2 `cgroup.controllers` file ("cpuset cpu io memory pids"), sorted.
pub fn parse_cgroup_controllers(s: &str) -> Vec<String> {
    let mut controllers: Vec<String> = s.split_whitespace().map(str::to_owned).collect();
    controllers.sort_unstable();
    controllers.dedup();
    controllers
}

/// Whether `/proc/cpuinfo` carries the x86 `hypervisor` CPUID flag, which every x86
/// hypervisor sets for its guests. Other architectures have no such flag.
pub fn cpuinfo_has_hypervisor_flag(s: &str) -> bool {
    s.lines()
        .filter_map(|l| l.split_once(':'))
        .any(|(key, value)| {
            key.trim() == "flags" && value.split_whitespace().any(|flag| flag == "hypervisor")
        })
}

/// The control program hosting an s390x guest, from `/proc/sysinfo`'s
/// `VM00 Control Program:` line ("KVM/Linux", "z/VM    7.3.0"). An LPAR has no such line.
pub fn sysinfo_control_program(s: &str) -> Option<String> {
    s.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(key, _)| key.trim() == "VM00 Control Program")
        .map(|(_, value)| value.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|value| !value.is_empty())
}

/// Everything that can betray a hypervisor, each from one file (`None`: file absent).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VirtEvidence {
    /// s390x `/proc/sysinfo`, see [`sysinfo_control_program`].
    pub control_program: Option<String>,
    /// `/sys/devices/system/clocksource/clocksource0/available_clocksource`.
    pub clocksources: Option<String>,
    /// `/sys/hypervisor/type` (Xen).
    pub hypervisor_type: Option<String>,
    /// `/sys/class/dmi/id/sys_vendor`.
    pub dmi_sys_vendor: Option<String>,
    /// `/sys/class/dmi/id/product_name`.
    pub dmi_product_name: Option<String>,
    /// See [`cpuinfo_has_hypervisor_flag`].
    pub cpuid_hypervisor_flag: bool,
}

/// DMI strings of virtual machines: (sys_vendor prefix, product_name prefix, hypervisor).
/// Both given prefixes must match. The first matching row wins.
const DMI: &[(Option<&str>, Option<&str>, &str)] = &[
    (None, Some("KVM"), "kvm"),
    (Some("QEMU"), None, "qemu"),
    (Some("VMware"), None, "vmware"),
    (None, Some("VMware"), "vmware"),
    (Some("innotek GmbH"), None, "virtualbox"),
    (None, Some("VirtualBox"), "virtualbox"),
    (Some("Xen"), None, "xen"),
    (
        Some("Microsoft Corporation"),
        Some("Virtual Machine"),
        "hyperv",
    ),
    (Some("Amazon EC2"), None, "amazon"),
    (Some("Google"), Some("Google Compute Engine"), "google"),
    (Some("Parallels"), None, "parallels"),
    (Some("BHYVE"), None, "bhyve"),
    (Some("Bochs"), None, "bochs"),
];

/// Decides whether this machine is a guest, and of which hypervisor.
///
/// Strongest evidence first:
/// 1. s390x `/proc/sysinfo` names the control program outright.
/// 2. A paravirtual clocksource (`kvm-clock`, `xen`, `hyperv_clocksource_*`) shows the
///    interface the kernel talks to. This is what separates QEMU with KVM from QEMU with
///    TCG, which have the same DMI strings; it is also the only trace of KVM in a guest
///    without DMI (Firecracker, like the farm's own CI machines).
/// 3. `/sys/hypervisor/type`.
/// 4. DMI vendor and product strings, see [`DMI`].
/// 5. The x86 `hypervisor` CPUID flag alone: a guest of an unnamed hypervisor.
///
/// Known gaps: a KVM guest started with `-cpu ...,-kvmclock` reports "qemu"; an arm64 KVM
/// guest is recognised only when its DMI product name starts with "KVM"; a Xen dom0
/// reports itself as a Xen guest.
pub fn classify_virtualization(e: &VirtEvidence) -> (Virtualization, String) {
    let guest = |hypervisor: &str| {
        let kind = if hypervisor == "kvm" {
            Virtualization::KvmGuest
        } else {
            Virtualization::OtherGuest
        };
        (kind, hypervisor.to_owned())
    };
    if let Some(program) = &e.control_program {
        return if program.contains("KVM") {
            guest("kvm")
        } else if program.starts_with("z/VM") {
            guest("zvm")
        } else {
            let name = program.split(['/', ' ']).next().unwrap_or_default();
            guest(&name.to_ascii_lowercase())
        };
    }
    if let Some(clocksources) = &e.clocksources {
        for source in clocksources.split_whitespace() {
            match source {
                "kvm-clock" => return guest("kvm"),
                "xen" => return guest("xen"),
                s if s.starts_with("hyperv_clocksource") => return guest("hyperv"),
                _ => {}
            }
        }
    }
    if let Some(kind) = e
        .hypervisor_type
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return guest(&kind.to_ascii_lowercase());
    }
    let vendor = e.dmi_sys_vendor.as_deref().unwrap_or_default().trim();
    let product = e.dmi_product_name.as_deref().unwrap_or_default().trim();
    let matches = |prefix: Option<&str>, value: &str| prefix.is_none_or(|p| value.starts_with(p));
    if let Some((_, _, name)) = DMI
        .iter()
        .find(|(v, p, _)| matches(*v, vendor) && matches(*p, product))
    {
        return guest(name);
    }
    if e.cpuid_hypervisor_flag {
        // The flag proves a guest but not whose; an empty name says "unknown".
        return (Virtualization::OtherGuest, String::new());
    }
    (Virtualization::Host, String::new())
}

/// At most 64 characters of `s`, so that an error quoting a garbage file stays readable.
fn excerpt(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        None => s.to_owned(),
        Some((cut, _)) => format!("{}...", &s[..cut]),
    }
}
