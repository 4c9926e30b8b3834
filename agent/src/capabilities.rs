//! Capabilities discovery: what this machine is, and what the agent may change on it.
//!
//! The agent sends the result with `Register`; the coordinator pushes a cell only to an
//! agent whose capabilities satisfy it (arch, CPUs, NUMA nodes, executor, state kinds).
//! [`discover`] reads /proc and /sys below a root directory: "/" in production, a fake
//! tree in tests. The parsing is pure and lives in [`parse`]; this module only reads
//! files and puts the pieces together.
//!
//! Where each field comes from (paths below the root):
//!
//! | field | source |
//! |---|---|
//! | `arch` | `uname -m` of the running kernel ([`Probe::arch`]) |
//! | `kernel_release` | `/proc/sys/kernel/osrelease` (what `uname -r` prints) |
//! | `hostname` | `/proc/sys/kernel/hostname` |
//! | `online_cpus`, `cpus_online`, `cpus_possible` | `/sys/devices/system/cpu/{online,possible}` |
//! | `numa_nodes` | `/sys/devices/system/node/node<N>/cpulist` |
//! | `virtualization`, `hypervisor` | see [`parse::classify_virtualization`] |
//! | `cgroup_*` | `/proc/self/mounts`, and `cgroup.controllers` of the cgroup2 mount |
//! | `root` | [`Probe::euid`] |
//! | `sys_writable` | `/sys` is a sysfs mounted read-write |
//! | `hotpluggable_cpus` | possible CPUs with a `cpu<N>/online` file, when root may write /sys |
//! | `sysctl_writable` | root, `/proc/sys` mounted read-write, `kernel/sched_autogroup_enabled` present |
//! | `sched_features`, `sched_tunables` | root, `/sys/kernel/debug/sched/features` and the tunables' files read (a locked-down debugfs refuses even root: none) |
//! | `numa_balancing_writable` | root, `/proc/sys` mounted read-write, `kernel/numa_balancing` present |
//! | `workloads` | the built-in catalogue; the agent adds the external programs it found |
//!
//! A file that every Linux kernel has (osrelease, hostname, the cpu lists, the mount
//! table) is mandatory: missing or malformed, it is an [`Error`]. The others are evidence
//! that may be absent (no DMI in Firecracker, no NUMA nodes in sysfs on s390x); an
//! absent or unreadable one is skipped.

pub mod parse;
#[cfg(test)]
mod tests;

use std::io;
use std::path::{Path, PathBuf};

use farm_proto::{Capabilities, NumaNode};

pub use parse::{ParseError, parse_cpu_list};

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A mandatory file could not be read or did not parse. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// Displays as "/sys/devices/system/cpu/online: bad cpu list "0-x": ...".
    #[error("{}: {kind}", path.display())]
    Parse { path: PathBuf, kind: ParseError },
}

/// Directory of the CPU files, below the root.
const CPU_DIR: &str = "/sys/devices/system/cpu";
/// Where debugfs shows the scheduler's features and tunables.
pub const SCHED_DEBUG_DIR: &str = "/sys/kernel/debug/sched";
/// Directory of the NUMA node files, below the root.
const NODE_DIR: &str = "/sys/devices/system/node";

/// Discovers the capabilities of the machine whose filesystem starts at `root`, as the
/// user this process runs as.
pub fn discover(root: &Path) -> Result<Capabilities> {
    Probe::new(root).discover()
}

/// What discovery needs besides the files, so that tests can fake all of it.
#[derive(Debug, Clone)]
pub struct Probe {
    /// Where the filesystem starts: "/" in production, a fake /proc and /sys tree in tests.
    pub root: PathBuf,
    /// The effective uid the agent runs as. Hotplug, cgroups and sysctls need root; a
    /// field rather than a `geteuid()` call so that one fake tree can be probed as root
    /// and as a user.
    pub euid: u32,
    /// `uname -m`. No file carries it on every kernel (`/proc/sys/kernel/arch` is
    /// recent), so it is asked of the running kernel; tests of another arch's tree set it.
    pub arch: String,
}

impl Probe {
    /// Probes `root` as this process: its effective uid and the running kernel's arch.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        let arch = nix::sys::utsname::uname()
            .map(|u| u.machine().to_string_lossy().into_owned())
            // uname(2) fails only on a bad pointer. The compile-time arch has the same
            // name as `uname -m` on the farm's x86_64 and s390x.
            .unwrap_or_else(|_| std::env::consts::ARCH.to_owned());
        Probe {
            root: root.into(),
            euid: nix::unistd::geteuid().as_raw(),
            arch,
        }
    }

    pub fn discover(&self) -> Result<Capabilities> {
        let kernel_release = self.read_parsed("/proc/sys/kernel/osrelease", |s| {
            parse::parse_value(s, "a kernel release")
        })?;
        let hostname = self.read_parsed("/proc/sys/kernel/hostname", |s| {
            parse::parse_value(s, "a host name")
        })?;
        let online_cpus = self.read_parsed(&format!("{CPU_DIR}/online"), parse_cpu_list)?;
        let possible_cpus = self.read_parsed(&format!("{CPU_DIR}/possible"), parse_cpu_list)?;
        let numa_nodes = self.numa_nodes()?;
        let (virtualization, hypervisor) = parse::classify_virtualization(&self.virt_evidence());

        let mounts = self.mounts()?;
        let cgroups = parse::cgroups(&mounts);
        let cgroup_v2_controllers = match &cgroups.v2_mount_point {
            Some(point) => self
                .read_optional(&format!(
                    "{}/cgroup.controllers",
                    point.trim_end_matches('/')
                ))
                .map(|s| parse::parse_cgroup_controllers(&s))
                .unwrap_or_default(),
            None => Vec::new(),
        };

        let root = self.euid == 0;
        let mounted_rw = |path: &str, fs_type: &str| {
            parse::mount_of(&mounts, path)
                .is_some_and(|m| m.fs_type == fs_type && !m.is_read_only())
        };
        let sys_writable = mounted_rw("/sys", "sysfs");
        let hotpluggable_cpus = if root && sys_writable {
            let mut cpus = Vec::new();
            for &cpu in &possible_cpus {
                if self.exists(&format!("{CPU_DIR}/cpu{cpu}/online"))? {
                    cpus.push(cpu);
                }
            }
            cpus
        } else {
            Vec::new()
        };
        let sysctl_writable = root
            && mounted_rw("/proc/sys", "proc")
            && self.exists("/proc/sys/kernel/sched_autogroup_enabled")?;
        let numa_balancing_writable = root
            && mounted_rw("/proc/sys", "proc")
            && self.exists("/proc/sys/kernel/numa_balancing")?;
        let (sched_features, sched_tunables) = if root {
            self.sched_knobs()
        } else {
            (Vec::new(), Vec::new())
        };

        let capabilities = Capabilities {
            hostname,
            arch: self.arch.clone(),
            kernel_release,
            cpus_online: count(&online_cpus),
            cpus_possible: count(&possible_cpus),
            online_cpus,
            numa_nodes,
            virtualization: virtualization as i32,
            hypervisor,
            cgroup_layout: cgroups.layout as i32,
            cgroup_v1_controllers: cgroups.v1_controllers,
            cgroup_v2_controllers,
            root,
            sys_writable,
            hotpluggable_cpus,
            sysctl_writable,
            sched_features,
            sched_tunables,
            numa_balancing_writable,
            executors: vec![farm_spec::Executor::Host.to_string()],
            // The built-in workloads, which run anywhere. External ones depend
            // on the programs installed, which are not under `root`: the agent
            // adds those it found (`Options::build`).
            workloads: farm_workload::catalogue::CATALOGUE
                .iter()
                .map(|w| w.name.to_owned())
                .collect(),
            // Machine states (hotplug, cgroup, autogroup) are not implemented yet. A kind
            // listed here is a promise that the agent can apply it and always restore it,
            // so none is listed until its state module exists.
            state_kinds: Vec::new(),
            // Guests are the agent's to add (they need its cache and tools).
            guest_arches: Vec::new(),
            guest_accelerators: Vec::new(),
            guest_kernels: Vec::new(),
            // None until the agent builds kernels from trees.
            kernel_repos: Vec::new(),
            build_configs: Vec::new(),
            build_patches: Vec::new(),
            built_kernels: Vec::new(),
        };
        tracing::debug!(?capabilities, root = %self.root.display(), "capabilities discovered");
        Ok(capabilities)
    }

    /// The NUMA nodes that have CPUs, by id. A machine without `node<N>` directories
    /// (s390x, or a kernel without `CONFIG_NUMA`) has none; the coordinator treats zero
    /// nodes as one. A node without CPUs (memory only, such as CXL memory) is not a
    /// place the scheduler puts tasks, so it is left out.
    fn numa_nodes(&self) -> Result<Vec<NumaNode>> {
        let dir = self.path(NODE_DIR);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(Error::Read { path: dir, source }),
        };
        let mut nodes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| Error::Read {
                path: dir.clone(),
                source,
            })?;
            let Some(id) = entry.file_name().to_str().and_then(parse::node_id) else {
                continue;
            };
            let cpus = self.read_parsed(&format!("{NODE_DIR}/node{id}/cpulist"), parse_cpu_list)?;
            if !cpus.is_empty() {
                nodes.push(NumaNode { id, cpus });
            }
        }
        nodes.sort_by_key(|n| n.id);
        Ok(nodes)
    }

    fn virt_evidence(&self) -> parse::VirtEvidence {
        parse::VirtEvidence {
            control_program: self
                .read_optional("/proc/sysinfo")
                .and_then(|s| parse::sysinfo_control_program(&s)),
            clocksources: self.read_optional(
                "/sys/devices/system/clocksource/clocksource0/available_clocksource",
            ),
            hypervisor_type: self.read_optional("/sys/hypervisor/type"),
            dmi_sys_vendor: self.read_optional("/sys/class/dmi/id/sys_vendor"),
            dmi_product_name: self.read_optional("/sys/class/dmi/id/product_name"),
            cpuid_hypervisor_flag: self
                .read_optional("/proc/cpuinfo")
                .is_some_and(|s| parse::cpuinfo_has_hypervisor_flag(&s)),
        }
    }

    /// The mount table of this process; `/proc/mounts` where `/proc/self` is missing.
    fn mounts(&self) -> Result<Vec<parse::Mount>> {
        let file = if self.exists("/proc/self/mounts")? {
            "/proc/self/mounts"
        } else {
            "/proc/mounts"
        };
        self.read_parsed(file, parse::parse_mounts)
    }

    /// `abs`, an absolute path on the probed machine, as a path on this one.
    fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// The scheduler features the running kernel has, and those of the
    /// farm's tunables it has, from debugfs; a file that does not read or
    /// parse counts as absent (logged).
    fn sched_knobs(&self) -> (Vec<String>, Vec<String>) {
        let features = self
            .read_optional(&format!("{SCHED_DEBUG_DIR}/features"))
            .and_then(|text| match farm_spec::sched::parse_features_file(&text) {
                Ok(f) => Some(f.iter().map(|f| f.name().to_string()).collect()),
                Err(e) => {
                    tracing::warn!(error = %e, "sched features unreadable, ignored");
                    None
                }
            })
            .unwrap_or_default();
        let tunables = farm_spec::Tunable::ALL
            .iter()
            .filter(|t| {
                self.read_optional(&format!("{SCHED_DEBUG_DIR}/{t}"))
                    .is_some_and(|v| v.trim().parse::<u64>().is_ok())
            })
            .map(|t| t.to_string())
            .collect();
        (features, tunables)
    }

    fn exists(&self, abs: &str) -> Result<bool> {
        let path = self.path(abs);
        path.try_exists()
            .map_err(|source| Error::Read { path, source })
    }

    /// Reads and parses a mandatory file; the error names it.
    fn read_parsed<T>(
        &self,
        abs: &str,
        parse: impl FnOnce(&str) -> Result<T, ParseError>,
    ) -> Result<T> {
        let path = self.path(abs);
        match std::fs::read_to_string(&path) {
            Ok(content) => parse(&content).map_err(|kind| Error::Parse { path, kind }),
            Err(source) => Err(Error::Read { path, source }),
        }
    }

    /// Reads an optional file. Absent is normal; unreadable (a sysfs attribute that
    /// returns EIO, a container that hides it) is logged and treated as absent, because
    /// evidence that cannot be read must not keep the agent from registering.
    fn read_optional(&self, abs: &str) -> Option<String> {
        let path = self.path(abs);
        match std::fs::read_to_string(&path) {
            Ok(content) => Some(content),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read, ignored");
                None
            }
        }
    }
}

/// A CPU count. Cpu lists hold fewer than [`parse::MAX_CPUS`] entries, so it always fits.
fn count(cpus: &[u32]) -> u32 {
    u32::try_from(cpus.len()).unwrap_or(u32::MAX)
}
