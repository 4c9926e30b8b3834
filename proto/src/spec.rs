//! Conversions between the wire's strings and the shared vocabulary
//! (`farm_spec`): the wire keeps strings, and each side converts once, at
//! its edge, with these.

use farm_spec::progress::{Estimate, ProgressError};
use farm_spec::state::{StateError, StateStrings};

use crate::{BuildProgress, BuildStep, Direction, GuestShape, KernelBuild, MachineState};

impl TryFrom<&MachineState> for farm_spec::MachineState {
    type Error = StateError;

    fn try_from(s: &MachineState) -> Result<farm_spec::MachineState, StateError> {
        farm_spec::MachineState::from_strings(StateStrings {
            name: &s.name,
            hotplug: &s.hotplug,
            cgroup: &s.cgroup,
            autogroup: s.autogroup,
            cpu_weight: s.cgroup_cpu_weight,
            cpu_max: &s.cgroup_cpu_max,
            cpuset: &s.cgroup_cpuset,
            sched_features: &s.sched_features,
            sched_tunables: &s.sched_tunables,
            numa_balancing: s.numa_balancing,
            cmdline: &s.cmdline,
        })
    }
}

impl From<&farm_spec::MachineState> for MachineState {
    fn from(s: &farm_spec::MachineState) -> MachineState {
        let s = s.to_strings();
        MachineState {
            name: s.name,
            hotplug: s.hotplug,
            cgroup: s.cgroup,
            autogroup: s.autogroup,
            cgroup_cpu_weight: s.cpu_weight,
            cgroup_cpu_max: s.cpu_max,
            cgroup_cpuset: s.cpuset,
            sched_features: s.sched_features,
            sched_tunables: s.sched_tunables,
            numa_balancing: s.numa_balancing,
            cmdline: s.cmdline,
        }
    }
}

impl TryFrom<&KernelBuild> for farm_spec::KernelBuild {
    type Error = farm_spec::build::BuildFieldError;

    fn try_from(b: &KernelBuild) -> Result<farm_spec::KernelBuild, Self::Error> {
        farm_spec::KernelBuild::parse(&b.config, &b.fragments, &b.patches)
    }
}

impl From<&farm_spec::KernelBuild> for KernelBuild {
    fn from(b: &farm_spec::KernelBuild) -> KernelBuild {
        KernelBuild {
            config: b.base.to_string(),
            fragments: b.fragments.iter().map(ToString::to_string).collect(),
            patches: b.patches.iter().map(ToString::to_string).collect(),
        }
    }
}

impl From<farm_spec::Direction> for Direction {
    fn from(d: farm_spec::Direction) -> Direction {
        match d {
            farm_spec::Direction::LowerIsBetter => Direction::LowerIsBetter,
            farm_spec::Direction::HigherIsBetter => Direction::HigherIsBetter,
        }
    }
}

/// A wire direction that is unspecified (or a number this build does not
/// know) has no `farm_spec::Direction`.
impl TryFrom<Direction> for farm_spec::Direction {
    type Error = Direction;

    fn try_from(d: Direction) -> Result<farm_spec::Direction, Direction> {
        match d {
            Direction::LowerIsBetter => Ok(farm_spec::Direction::LowerIsBetter),
            Direction::HigherIsBetter => Ok(farm_spec::Direction::HigherIsBetter),
            Direction::Unspecified => Err(d),
        }
    }
}

/// A report of an unknown step, or with figures beyond
/// `farm_spec::progress::MAX_BUILD_SECONDS`, is no build's.
impl TryFrom<&BuildProgress> for farm_spec::progress::BuildProgress {
    type Error = ProgressError;

    fn try_from(p: &BuildProgress) -> Result<Self, ProgressError> {
        use farm_spec::progress::BuildStep as S;
        let step = match BuildStep::try_from(p.step) {
            Ok(BuildStep::Waiting) => S::Waiting,
            Ok(BuildStep::Source) => S::Source,
            Ok(BuildStep::Configure) => S::Configure,
            Ok(BuildStep::Compile) => S::Compile,
            Ok(BuildStep::Link) => S::Link,
            Ok(BuildStep::Unspecified) | Err(_) => return Err(ProgressError::UnknownStep(p.step)),
        };
        farm_spec::progress::BuildProgress {
            step,
            elapsed_s: p.elapsed_s,
            estimate: (p.estimate_s > 0).then_some(Estimate {
                seconds: p.estimate_s,
                warm: p.warm,
            }),
        }
        .checked()
    }
}

impl From<&farm_spec::progress::BuildProgress> for BuildProgress {
    fn from(p: &farm_spec::progress::BuildProgress) -> BuildProgress {
        use farm_spec::progress::BuildStep as S;
        let step = match p.step {
            S::Waiting => BuildStep::Waiting,
            S::Source => BuildStep::Source,
            S::Configure => BuildStep::Configure,
            S::Compile => BuildStep::Compile,
            S::Link => BuildStep::Link,
        };
        BuildProgress {
            step: step as i32,
            elapsed_s: p.elapsed_s,
            estimate_s: p.estimate.map_or(0, |e| e.seconds),
            warm: p.estimate.is_some_and(|e| e.warm),
        }
    }
}

/// The same three numbers, zero meaning unset on both sides: the limits are
/// checked by `farm_spec::guest::resolve`, which knows the arch.
impl From<&GuestShape> for farm_spec::GuestShape {
    fn from(g: &GuestShape) -> farm_spec::GuestShape {
        farm_spec::GuestShape {
            cpus: g.cpus,
            numa_nodes: g.numa_nodes,
            memory_mib: g.memory_mib,
        }
    }
}

impl From<&farm_spec::GuestShape> for GuestShape {
    fn from(g: &farm_spec::GuestShape) -> GuestShape {
        GuestShape {
            cpus: g.cpus,
            numa_nodes: g.numa_nodes,
            memory_mib: g.memory_mib,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_progress_converts_both_ways_and_is_checked() {
        use farm_spec::progress::{BuildProgress as Typed, BuildStep as S, MAX_BUILD_SECONDS};
        for step in S::ALL {
            for estimate in [None, Some(Estimate::default_for(true))] {
                let typed = Typed {
                    step,
                    elapsed_s: 192,
                    estimate,
                };
                assert_eq!(Typed::try_from(&BuildProgress::from(&typed)), Ok(typed));
            }
        }
        let wire = BuildProgress {
            step: BuildStep::Compile as i32,
            elapsed_s: 192,
            estimate_s: 420,
            warm: false,
        };
        assert_eq!(BuildProgress::from(&Typed::try_from(&wire).unwrap()), wire);
        for step in [0, 6, -1] {
            let bad = BuildProgress { step, ..wire };
            assert_eq!(Typed::try_from(&bad), Err(ProgressError::UnknownStep(step)));
        }
        let long = BuildProgress {
            estimate_s: MAX_BUILD_SECONDS + 1,
            ..wire
        };
        assert_eq!(
            Typed::try_from(&long),
            Err(ProgressError::TooLong {
                what: "estimate",
                seconds: MAX_BUILD_SECONDS + 1
            })
        );
    }

    #[test]
    fn states_convert_both_ways() {
        let wire = MachineState {
            name: "s".into(),
            hotplug: "offline:3,1-2".into(),
            cgroup: "separate".into(),
            autogroup: Some(0),
            cgroup_cpu_weight: 50,
            cgroup_cpu_max: "50000 100000".into(),
            cgroup_cpuset: "0".into(),
            sched_features: vec!["NO_RUN_TO_PARITY".into(), "HRTICK".into()],
            sched_tunables: vec!["base_slice_ns=3000000".into()],
            numa_balancing: Some(2),
            cmdline: vec!["isolcpus=domain,1".into()],
        };
        let typed = farm_spec::MachineState::try_from(&wire).unwrap();
        let back = MachineState::from(&typed);
        // The canonical form of the CPU list; everything else as it was.
        assert_eq!(back.hotplug, "offline:1-3");
        assert_eq!(
            MachineState {
                hotplug: wire.hotplug.clone(),
                ..back
            },
            wire
        );
        let bad = MachineState {
            cgroup_cpuset: "0".into(),
            ..Default::default()
        };
        assert_eq!(
            farm_spec::MachineState::try_from(&bad).unwrap_err().field(),
            "cgroup_cpuset"
        );
        for (bad, field, why) in [
            (
                MachineState {
                    sched_tunables: vec!["nr_migrate=0".into()],
                    ..Default::default()
                },
                "sched_tunables",
                "nr_migrate 0 is out of range 1..=4096",
            ),
            (
                MachineState {
                    cmdline: vec!["init=/bin/sh".into()],
                    ..Default::default()
                },
                "cmdline",
                "bad cmdline word `init=/bin/sh`: expected isolcpus=",
            ),
            (
                MachineState {
                    numa_balancing: Some(7),
                    ..Default::default()
                },
                "numa_balancing",
                "numa_balancing 7 is out of range 0..=2",
            ),
        ] {
            let e = farm_spec::MachineState::try_from(&bad).unwrap_err();
            assert_eq!(e.field(), field);
            assert!(e.to_string().starts_with(why), "{e}");
        }
    }

    #[test]
    fn guest_shapes_convert_both_ways() {
        let wire = GuestShape {
            cpus: 8,
            numa_nodes: 0,
            memory_mib: 1024,
        };
        let typed = farm_spec::GuestShape::from(&wire);
        assert_eq!(
            (typed.cpus, typed.numa_nodes, typed.memory_mib),
            (8, 0, 1024)
        );
        assert_eq!(GuestShape::from(&typed), wire);
    }

    #[test]
    fn directions() {
        for d in [
            farm_spec::Direction::LowerIsBetter,
            farm_spec::Direction::HigherIsBetter,
        ] {
            assert_eq!(farm_spec::Direction::try_from(Direction::from(d)), Ok(d));
        }
        assert_eq!(
            farm_spec::Direction::try_from(Direction::Unspecified),
            Err(Direction::Unspecified)
        );
    }
}
