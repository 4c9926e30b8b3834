//! The `farm.v1` gRPC contract: the only thing coordinator, agents and farmctl share.
#![deny(rust_2018_idioms)]

/// Generated messages and services of package `farm.v1`.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic)]
    tonic::include_proto!("farm.v1");
}

pub use v1::*;

pub mod coordinators;
pub mod metrics_http;
pub mod secret;
pub mod spec;
pub mod tls;
pub mod trace;

/// The metadata key every RPC carries its token in, as `Bearer <token>`.
pub const AUTHORIZATION: &str = "authorization";

/// The largest message an agent sends (a result with its telemetry) and the
/// coordinator decodes: both sides set it explicitly, so that neither
/// relies on a library default. An agent fails a result that does not fit,
/// once and with its size, rather than send what the coordinator refuses.
pub const MAX_AGENT_MESSAGE_BYTES: usize = 4 << 20;

/// The most commits an agent lists for one git range (`ListCommits`): a
/// bisection over more is 14 steps and longer; first-parent commits between
/// two releases are about a thousand. With subjects cut to
/// [`MAX_COMMIT_SUBJECT_BYTES`] the answer stays within
/// [`MAX_AGENT_MESSAGE_BYTES`].
pub const MAX_RANGE_COMMITS: usize = 10_000;

/// The most bytes of a commit's subject an agent sends.
pub const MAX_COMMIT_SUBJECT_BYTES: usize = 160;

/// Guest machines: the defaults per arch and the limits, which the
/// coordinator checks at submit and the agent again before it boots one.
pub mod guest {
    use super::GuestShape;

    /// vCPUs: TCG runs one host thread per vCPU.
    pub const CPUS: std::ops::RangeInclusive<u32> = 1..=64;
    pub const NUMA_NODES: std::ops::RangeInclusive<u32> = 1..=16;
    /// At least what a Debian kernel and an image need to boot.
    pub const MEMORY_MIB: std::ops::RangeInclusive<u32> = 256..=65_536;
    pub const MIN_MIB_PER_NODE: u32 = 128;

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
    pub fn resolve(shape: Option<&GuestShape>, arch: &str) -> Result<GuestShape, String> {
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
            return Err(format!("{cpus} vCPUs are out of range 1..=64"));
        }
        if !NUMA_NODES.contains(&nodes) {
            return Err(format!("{nodes} NUMA nodes are out of range 1..=16"));
        }
        if !MEMORY_MIB.contains(&mib) {
            return Err(format!("{mib} MiB are out of range 256..=65536"));
        }
        if nodes > 1 && arch != "x86_64" {
            return Err(format!(
                "{arch} guests have no NUMA nodes ({nodes} asked; only x86_64 guests have them)"
            ));
        }
        if !cpus.is_multiple_of(nodes) {
            return Err(format!(
                "{cpus} vCPUs do not split evenly over {nodes} NUMA nodes"
            ));
        }
        if mib / nodes < MIN_MIB_PER_NODE {
            return Err(format!(
                "{mib} MiB over {nodes} NUMA nodes leaves less than {MIN_MIB_PER_NODE} MiB a node"
            ));
        }
        Ok(s)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

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
            assert!(
                resolve(Some(&odd), "x86_64")
                    .unwrap_err()
                    .contains("split evenly")
            );
            assert_eq!(resolve(Some(&odd), "s390x").unwrap().cpus, 3);
            let numa = GuestShape {
                cpus: 8,
                numa_nodes: 4,
                memory_mib: 0,
            };
            assert!(
                resolve(Some(&numa), "s390x")
                    .unwrap_err()
                    .contains("no NUMA")
            );
            let tight = GuestShape {
                cpus: 16,
                numa_nodes: 4,
                memory_mib: 256,
            };
            assert!(
                resolve(Some(&tight), "x86_64")
                    .unwrap_err()
                    .contains("128 MiB a node")
            );
            let huge = GuestShape {
                cpus: 65,
                ..Default::default()
            };
            assert!(
                resolve(Some(&huge), "x86_64")
                    .unwrap_err()
                    .contains("out of range")
            );
        }
    }
}
