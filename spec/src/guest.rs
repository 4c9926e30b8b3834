//! Guest machines: the shape a run's QEMU guest has (vCPUs, NUMA nodes,
//! memory), the defaults per arch and the limits, which the coordinator
//! checks at submit and the agent again before it boots one.
//!
//! A field left at zero is unset and takes the arch's default, as on the
//! wire (`farm.v1.GuestShape`, converted in `farm_proto::spec`).

use std::fmt;
use std::ops::RangeInclusive;

/// vCPUs: TCG runs one host thread per vCPU.
pub const CPUS: RangeInclusive<u32> = 1..=64;
pub const NUMA_NODES: RangeInclusive<u32> = 1..=16;
/// At least what a Debian kernel and an image need to boot.
pub const MEMORY_MIB: RangeInclusive<u32> = 256..=65_536;
pub const MIN_MIB_PER_NODE: u32 = 128;

/// A guest machine; a zero field is unset (see [`resolve`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GuestShape {
    pub cpus: u32,
    pub numa_nodes: u32,
    pub memory_mib: u32,
}

/// Why a guest shape does not fit an arch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShapeError {
    Cpus(u32),
    NumaNodes(u32),
    Memory(u32),
    /// NUMA nodes asked of an arch whose guests have none.
    NoNuma {
        arch: String,
        nodes: u32,
    },
    Uneven {
        cpus: u32,
        nodes: u32,
    },
    TooLittlePerNode {
        mib: u32,
        nodes: u32,
    },
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShapeError::Cpus(cpus) => write!(f, "{cpus} vCPUs are out of range 1..=64"),
            ShapeError::NumaNodes(nodes) => {
                write!(f, "{nodes} NUMA nodes are out of range 1..=16")
            }
            ShapeError::Memory(mib) => write!(f, "{mib} MiB are out of range 256..=65536"),
            ShapeError::NoNuma { arch, nodes } => write!(
                f,
                "{arch} guests have no NUMA nodes ({nodes} asked; only x86_64 guests have them)"
            ),
            ShapeError::Uneven { cpus, nodes } => write!(
                f,
                "{cpus} vCPUs do not split evenly over {nodes} NUMA nodes"
            ),
            ShapeError::TooLittlePerNode { mib, nodes } => write!(
                f,
                "{mib} MiB over {nodes} NUMA nodes leaves less than {MIN_MIB_PER_NODE} MiB a node"
            ),
        }
    }
}

impl std::error::Error for ShapeError {}

/// The machine of an arch (`uname -m`) when a matrix says nothing:
/// x86_64 gets 2 NUMA nodes, the topology the farm's hosts lack; s390x
/// shows no NUMA nodes in sysfs at all.
pub fn default_for(arch: &str) -> GuestShape {
    match arch {
        "s390x" => GuestShape {
            cpus: 2,
            numa_nodes: 1,
            memory_mib: 512,
        },
        _ => GuestShape {
            cpus: 4,
            numa_nodes: 2,
            memory_mib: 512,
        },
    }
}

/// `shape` with its unset (zero) fields taken from the arch's default,
/// checked; the error says what does not fit.
pub fn resolve(shape: Option<&GuestShape>, arch: &str) -> Result<GuestShape, ShapeError> {
    let d = default_for(arch);
    let pick = |v: u32, default: u32| if v == 0 { default } else { v };
    let s = match shape {
        None => d,
        Some(s) => GuestShape {
            cpus: pick(s.cpus, d.cpus),
            numa_nodes: pick(s.numa_nodes, d.numa_nodes),
            memory_mib: pick(s.memory_mib, d.memory_mib),
        },
    };
    let (cpus, nodes, mib) = (s.cpus, s.numa_nodes, s.memory_mib);
    if !CPUS.contains(&cpus) {
        return Err(ShapeError::Cpus(cpus));
    }
    if !NUMA_NODES.contains(&nodes) {
        return Err(ShapeError::NumaNodes(nodes));
    }
    if !MEMORY_MIB.contains(&mib) {
        return Err(ShapeError::Memory(mib));
    }
    if nodes > 1 && arch != "x86_64" {
        return Err(ShapeError::NoNuma {
            arch: arch.to_owned(),
            nodes,
        });
    }
    if !cpus.is_multiple_of(nodes) {
        return Err(ShapeError::Uneven { cpus, nodes });
    }
    if mib / nodes < MIN_MIB_PER_NODE {
        return Err(ShapeError::TooLittlePerNode { mib, nodes });
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(shape: &GuestShape, arch: &str) -> String {
        resolve(Some(shape), arch).unwrap_err().to_string()
    }

    #[test]
    fn unset_fields_take_the_arch_default() {
        let only_memory = GuestShape {
            memory_mib: 1024,
            ..Default::default()
        };
        let x = resolve(Some(&only_memory), "x86_64").unwrap();
        assert_eq!((x.cpus, x.numa_nodes, x.memory_mib), (4, 2, 1024));
        let s = resolve(Some(&only_memory), "s390x").unwrap();
        assert_eq!((s.cpus, s.numa_nodes, s.memory_mib), (2, 1, 1024));
        assert_eq!(resolve(None, "s390x").unwrap(), default_for("s390x"));
        let odd = GuestShape {
            cpus: 3,
            ..Default::default()
        };
        // x86_64's 2 nodes do not take 3 vCPUs; s390x's 1 does.
        assert!(refusal(&odd, "x86_64").contains("split evenly"));
        assert_eq!(resolve(Some(&odd), "s390x").unwrap().cpus, 3);
        let numa = GuestShape {
            cpus: 8,
            numa_nodes: 4,
            memory_mib: 0,
        };
        assert!(refusal(&numa, "s390x").contains("no NUMA"));
        let tight = GuestShape {
            cpus: 16,
            numa_nodes: 4,
            memory_mib: 256,
        };
        assert!(refusal(&tight, "x86_64").contains("128 MiB a node"));
        let huge = GuestShape {
            cpus: 65,
            ..Default::default()
        };
        assert!(refusal(&huge, "x86_64").contains("out of range"));
    }
}
