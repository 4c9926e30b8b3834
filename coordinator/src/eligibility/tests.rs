use super::*;
use farm_proto::{Cell, HostSelector, MachineState, NumaNode, Workload};

/// A cell's requirements, the cell written as the wire has it and
/// converted as it enters the coordinator.
fn requirements(c: &Cell) -> Vec<Requirement> {
    super::requirements(&crate::cell::Cell::try_from(c).unwrap())
}

fn caps(arch: &str, cpus: u32, nodes: usize, release: &str) -> Capabilities {
    Capabilities {
        arch: arch.into(),
        cpus_online: cpus,
        kernel_release: release.into(),
        numa_nodes: (0..nodes)
            .map(|i| NumaNode {
                id: i as u32,
                cpus: vec![],
            })
            .collect(),
        executors: vec!["host".into()],
        workloads: vec!["lu".into(), "cpu-hog".into()],
        ..Default::default()
    }
}

fn cell(arch: &str, min_cpus: u32, nodes: u32, kernel: &str, hotplug: &str) -> Cell {
    Cell {
        kernel: kernel.into(),
        workload: Some(Workload {
            name: "lu".into(),
            params: vec![],
        }),
        host: Some(HostSelector {
            arch: arch.into(),
            min_cpus,
            min_numa_nodes: nodes,
            ..Default::default()
        }),
        state: Some(MachineState {
            hotplug: hotplug.into(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn waiting_reasons() {
    let x86 = caps("x86_64", 2, 1, "6.1.0-47-amd64");
    let big = caps("x86_64", 64, 4, "6.1.0-57-amd64");
    let hot = Capabilities {
        online_cpus: vec![0, 1, 2, 3],
        hotpluggable_cpus: vec![1, 2, 3],
        state_kinds: vec!["hotplug".into()],
        ..caps("x86_64", 4, 1, "6.1.0-57-amd64")
    };
    let cases: &[(Cell, &[&Capabilities], Option<&str>)] = &[
        (
            cell("", 0, 0, "running", ""),
            &[],
            Some("no agent connected"),
        ),
        (cell("", 0, 0, "running", ""), &[&x86], None),
        (
            cell("s390x", 0, 0, "running", ""),
            &[&x86, &big],
            Some("no agent with arch=s390x"),
        ),
        (
            cell("x86_64", 4, 0, "running", ""),
            &[&x86],
            Some("no agent with cpus>=4"),
        ),
        (
            cell("", 0, 2, "running", ""),
            &[&x86],
            Some("no agent with numa_nodes>=2"),
        ),
        (cell("", 0, 2, "running", ""), &[&x86, &big], None),
        (
            cell("", 0, 0, "6.1.0-47-amd64", ""),
            &[&big],
            Some("no agent with kernel=6.1.0-47-amd64"),
        ),
        (
            cell("", 4, 0, "6.1.0-47-amd64", ""),
            &[&x86, &big],
            Some("no single agent has cpus>=4 and kernel=6.1.0-47-amd64 and workload=lu"),
        ),
        (
            cell("", 0, 0, "running", "cycle:1"),
            &[&x86],
            Some("no agent with state=hotplug; no agent with hotplug of cpu 1"),
        ),
        (
            cell("s390x", 0, 0, "running", "cycle:1"),
            &[&x86],
            Some(
                "no agent with arch=s390x; no agent with state=hotplug; no agent with hotplug of cpu 1",
            ),
        ),
        (cell("", 0, 0, "running", "cycle:1"), &[&hot], None),
        (cell("", 0, 0, "running", "offline:1-3"), &[&hot], None),
        (
            cell("", 0, 0, "running", "offline:0-3"),
            &[&hot],
            Some("no agent with hotplug of cpus 0-3"),
        ),
        (
            cell("", 0, 0, "running", "cycle:7"),
            &[&hot],
            Some("no agent with hotplug of cpu 7"),
        ),
        (
            // 99,999 CPUs: the reason stays one range, not a megabyte.
            cell("", 0, 0, "running", "offline:1-99999"),
            &[&hot],
            Some("no agent with hotplug of cpus 1-99999"),
        ),
    ];
    for (c, agents, want) in cases {
        let got = waiting_reason(&requirements(c), agents.iter().copied());
        assert_eq!(got.as_deref(), *want, "cell {c:?}");
    }
}

#[test]
fn zero_numa_nodes_count_as_one() {
    let s390 = caps("s390x", 2, 0, "6.1.0-50-s390x");
    assert!(satisfies(
        &requirements(&cell("s390x", 2, 1, "running", "")),
        &s390
    ));
}

#[test]
fn guest_kernels_go_to_agents_that_boot_guests_of_their_arch() {
    let plain = caps("x86_64", 4, 1, "6.1.0-47-amd64");
    let tcg = Capabilities {
        guest_arches: vec!["x86_64".into(), "s390x".into()],
        guest_accelerators: vec!["tcg".into()],
        ..caps("x86_64", 4, 1, "6.1.0-47-amd64")
    };
    let debian = cell("", 0, 0, "debian:6.1.0-57-cloud-amd64", "");
    let reqs = requirements(&debian);
    assert!(reqs.contains(&Requirement::GuestKernel {
        kernel: "debian:6.1.0-57-cloud-amd64".into(),
        arch: farm_spec::Arch::X86_64
    }));
    assert!(!satisfies(&reqs, &plain));
    assert!(satisfies(&reqs, &tcg));
    assert_eq!(
        waiting_reason(&reqs, [&plain]).as_deref(),
        Some(
            "no agent with kernel=debian:6.1.0-57-cloud-amd64 (an agent that boots x86_64 guests)"
        )
    );
    // An s390x kernel needs s390x guests, whatever the host's own arch.
    let s390 = requirements(&cell("", 0, 0, "debian:6.1.0-50-s390x", ""));
    assert!(satisfies(&s390, &tcg));
    let x86_only = Capabilities {
        guest_arches: vec!["x86_64".into()],
        ..tcg.clone()
    };
    assert!(!satisfies(&s390, &x86_only));
    // The guest applies the state and brings its tools: an agent without
    // hotpluggable CPUs or stress-ng of its own serves such a cell.
    let mut cycled = cell("", 0, 0, "debian:6.1.0-50-s390x", "cycle:1");
    cycled.workload = Some(Workload {
        name: "stress-ng".into(),
        params: vec![],
    });
    let reqs = requirements(&cycled);
    assert!(
        reqs.iter()
            .all(|r| matches!(r, Requirement::GuestKernel { .. })),
        "{reqs:?}"
    );
    assert!(satisfies(&reqs, &tcg));
    // A `file:` image goes only where the agent lists it.
    let image = requirements(&cell("", 0, 0, "file:/srv/kernels/vmlinuz-rc1", ""));
    assert!(!satisfies(&image, &tcg));
    let has_it = Capabilities {
        guest_kernels: vec!["file:/srv/kernels/vmlinuz-rc1".into()],
        ..tcg.clone()
    };
    assert!(satisfies(&image, &has_it));
    assert_eq!(
        waiting_reason(&image, [&tcg]).as_deref(),
        Some(
            "no agent with kernel=file:/srv/kernels/vmlinuz-rc1 (an agent with that image in \
             its --kernel-dir)"
        )
    );
    // A `git:` kernel goes only where its repository is, to be built and
    // booted in an x86_64 guest there.
    let tree = requirements(&cell("", 0, 0, "git:tip@sched/urgent", ""));
    assert!(!satisfies(&tree, &tcg));
    let builds = Capabilities {
        kernel_repos: vec!["linux".into(), "tip".into()],
        ..tcg.clone()
    };
    assert!(satisfies(&tree, &builds));
    let no_guests = Capabilities {
        kernel_repos: vec!["tip".into()],
        ..plain.clone()
    };
    assert!(!satisfies(&tree, &no_guests));
    assert_eq!(
        waiting_reason(&tree, [&tcg]).as_deref(),
        Some(
            "no agent with kernel=git:tip@sched/urgent (an agent with the repository `tip` in \
             its --kernel-repo)"
        )
    );
    // A `[build]` that names the operator's files goes only where they are.
    let mut patched = cell("", 0, 0, "git:tip@sched/urgent", "");
    patched.build = Some(farm_proto::KernelBuild {
        config: "fleet.config".into(),
        fragments: vec!["CONFIG_HZ_1000=y".into()],
        patches: vec!["fix.patch".into()],
    });
    let patched = requirements(&patched);
    assert!(!satisfies(&patched, &builds));
    let with_files = Capabilities {
        build_configs: vec!["fleet.config".into()],
        build_patches: vec!["fix.patch".into(), "other.patch".into()],
        ..builds.clone()
    };
    assert!(satisfies(&patched, &with_files));
    let no_patch = Capabilities {
        build_patches: vec!["other.patch".into()],
        ..with_files.clone()
    };
    assert_eq!(
        waiting_reason(&patched, [&no_patch]).as_deref(),
        Some("no agent with build patch `fix.patch` (an agent with it in its --build-patches)")
    );
}

#[test]
fn hotplug_sets_stay_ranges_and_state_kinds_are_typed() {
    let reqs = requirements(&cell("", 0, 0, "running", "offline:1-99998"));
    assert_eq!(
        reqs[1..],
        [
            Requirement::State(farm_spec::StateKind::Hotplug),
            Requirement::Hotplug(farm_spec::CpuSet::from_ranges([(1, 99_998)])),
        ]
    );
    if let Requirement::Hotplug(cpus) = &reqs[2] {
        assert_eq!(cpus.ranges().len(), 1);
    }
    // An agent with four CPUs cannot hotplug 99,998 of them: refused without
    // walking the set.
    let hot = Capabilities {
        online_cpus: vec![0, 1, 2, 3],
        hotpluggable_cpus: vec![1, 2, 3],
        state_kinds: vec!["hotplug".into()],
        ..caps("x86_64", 4, 1, "6.1.0-57-amd64")
    };
    assert!(!satisfies(&reqs, &hot));
    // Every Debian flavour's arch, from the one table the agent uses too.
    for (kernel, arch) in [
        ("debian:6.1.0-57-arm64", farm_spec::Arch::Aarch64),
        ("debian:6.1.0-57-powerpc64le", farm_spec::Arch::Ppc64le),
        ("debian:6.1.0-50-s390x", farm_spec::Arch::S390x),
    ] {
        assert_eq!(
            requirements(&cell("", 0, 0, kernel, "")),
            [Requirement::GuestKernel {
                kernel: kernel.into(),
                arch
            }]
        );
    }
}

#[test]
fn sched_knobs_go_to_agents_whose_kernel_has_them() {
    let eevdf = Capabilities {
        state_kinds: vec!["sched_features".into(), "sched_tunables".into()],
        sched_features: vec!["RUN_TO_PARITY".into(), "HRTICK".into()],
        sched_tunables: vec!["base_slice_ns".into()],
        ..caps("x86_64", 4, 1, "6.12.0")
    };
    let locked = caps("x86_64", 4, 1, "6.18.0");
    let knobs = |features: &[&str], tunables: &[&str]| Cell {
        state: Some(MachineState {
            sched_features: features.iter().map(|s| s.to_string()).collect(),
            sched_tunables: tunables.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }),
        ..cell("", 0, 0, "running", "")
    };
    let reason = |c: &Cell, agents: &[&Capabilities]| {
        waiting_reason(&requirements(c), agents.iter().copied())
    };
    let c = knobs(&["NO_RUN_TO_PARITY"], &["base_slice_ns=3000000"]);
    assert_eq!(reason(&c, &[&eevdf]), None);
    assert_eq!(
        reason(&c, &[&locked]).as_deref(),
        Some(
            "no agent with state=sched_features; no agent with state=sched_tunables; \
             no agent with sched feature RUN_TO_PARITY (an agent whose kernel has it); \
             no agent with sched tunable base_slice_ns (an agent whose kernel has it)"
        )
    );
    let cfs = knobs(&[], &["min_granularity_ns=1000000"]);
    assert_eq!(
        reason(&cfs, &[&eevdf]).as_deref(),
        Some("no agent with sched tunable min_granularity_ns (an agent whose kernel has it)")
    );
}
