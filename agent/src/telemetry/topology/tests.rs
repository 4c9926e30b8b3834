//! Fixtures are real trees written as `grep . <files>` prints them (`path:content`):
//! `*_x86_qemu_2node*` from a Debian 6.1 guest under QEMU TCG with two NUMA nodes
//! (cpus 0-1 and 2-3) booted with `sched_verbose`, at boot, with cpu1 offline, and
//! after cpu1 came back; `*_s390x_tcg_4cpu` from a Debian 6.1 s390x guest;
//! `sysfs_x86_kvm_2cpu` from a farm host (which shows no sched domains).

use std::path::Path;

use super::{
    Domains, Files, Level, Source, Topology, TopologyChange, diff, format_cpu_list, parse_domains,
    read, synthesize,
};
use crate::capabilities::parse_cpu_list;

const DEBUGFS_BOOT: &str = include_str!("fixtures/debugfs_x86_qemu_2node_boot.txt");
const DEBUGFS_CPU1_OFFLINE: &str = include_str!("fixtures/debugfs_x86_qemu_2node_cpu1_offline.txt");
const DEBUGFS_AFTER_CYCLE: &str = include_str!("fixtures/debugfs_x86_qemu_2node_after_cycle.txt");
const DEBUGFS_S390X: &str = include_str!("fixtures/debugfs_s390x_tcg_4cpu.txt");
const SYSFS_2NODE: &str = include_str!("fixtures/sysfs_x86_qemu_2node.txt");
const SYSFS_2NODE_CPU1_OFFLINE: &str =
    include_str!("fixtures/sysfs_x86_qemu_2node_cpu1_offline.txt");
const SYSFS_KVM: &str = include_str!("fixtures/sysfs_x86_kvm_2cpu.txt");
const SYSFS_S390X: &str = include_str!("fixtures/sysfs_s390x_tcg_4cpu.txt");

const MC_FLAGS: &str = "SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE SD_SHARE_PKG_RESOURCES SD_PREFER_SIBLING";
const NUMA_FLAGS: &str = "SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE SD_SERIALIZE SD_OVERLAP SD_NUMA";

/// A tree from `grep .` output: each line is `path:content`.
fn files(grep: &str) -> Files {
    grep.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(path, content)| (path.to_owned(), format!("{content}\n")))
        .collect()
}

fn level(name: &str, flags: &str, span: &str) -> Level {
    Level {
        name: name.to_owned(),
        flags: flags.split_whitespace().map(str::to_owned).collect(),
        span: parse_cpu_list(span).unwrap(),
    }
}

/// Checks `got` against `(cpu, levels)` rows.
fn check_domains(got: &Domains, want: &[(u32, Vec<Level>)]) {
    let want: Domains = Domains {
        per_cpu: want.iter().cloned().collect(),
    };
    assert_eq!(got, &want);
}

fn debugfs(grep: &str) -> Topology {
    Topology {
        source: Source::Debugfs,
        domains: parse_domains(&files(grep)).unwrap_or_else(|e| panic!("{e}")),
    }
}

fn sysfs(grep: &str) -> Topology {
    Topology {
        source: Source::Sysfs,
        domains: synthesize(&files(grep)).unwrap_or_else(|e| panic!("{e}")),
    }
}

fn check_diff(before: &Topology, after: &Topology, want: &[&str]) {
    let got: Vec<String> = diff(before, after).iter().map(|c| c.to_string()).collect();
    assert_eq!(got, want);
}

#[test]
fn parses_debugfs_trees() {
    let mc_numa = || vec![level("MC", MC_FLAGS, ""), level("NUMA", NUMA_FLAGS, "")];
    check_domains(
        &debugfs(DEBUGFS_BOOT).domains,
        &[
            (0, mc_numa()),
            (1, mc_numa()),
            (2, mc_numa()),
            (3, mc_numa()),
        ],
    );
    // With cpu1 offline, cpu0 is alone in node 0: its MC level is degenerate.
    check_domains(
        &debugfs(DEBUGFS_CPU1_OFFLINE).domains,
        &[
            (0, vec![level("NUMA", NUMA_FLAGS, "")]),
            (2, mc_numa()),
            (3, mc_numa()),
        ],
    );
    let die = || {
        vec![level(
            "DIE",
            "SD_BALANCE_NEWIDLE SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE SD_PREFER_SIBLING",
            "",
        )]
    };
    check_domains(
        &debugfs(DEBUGFS_S390X).domains,
        &[(0, die()), (1, die()), (2, die()), (3, die())],
    );
    // The sysctl tree of old kernels: numeric flags, seed 002's level names, and
    // files this parser does not need.
    let old = files(
        "cpu0/domain0/name:SIBLING\ncpu0/domain0/flags:1071\ncpu0/domain0/imbalance_pct:110\n\
         cpu0/domain1/name:MC\ncpu0/domain1/flags:1071\ncpu0/domain2/name:NODE\ncpu0/domain2/flags:1071\n\
         cpu0/domain10/name:WIDE\ncpu0/max_newidle_lb_cost:5\n",
    );
    check_domains(
        &parse_domains(&old).unwrap(),
        &[(
            0,
            vec![
                level("SIBLING", "1071", ""),
                level("MC", "1071", ""),
                level("NODE", "1071", ""),
                // domain10 comes after domain2.
                level("WIDE", "", ""),
            ],
        )],
    );
}

#[test]
fn domain_parse_errors_name_the_file() {
    let cases: &[(&str, &str)] = &[
        (
            "cpu0/domain0/flags:SD_BALANCE_EXEC\n",
            r#"cpu0/domain0/name line 1: missing beside flags: """#,
        ),
        (
            "cpu3/domain1/name:M C\n",
            r#"cpu3/domain1/name line 1: not a domain name: "M C""#,
        ),
        (
            "cpu3/domain1/name:\n",
            r#"cpu3/domain1/name line 1: not a domain name: """#,
        ),
    ];
    for (grep, want) in cases {
        let e = parse_domains(&files(grep)).unwrap_err();
        assert_eq!(e.to_string(), *want, "{grep:?}");
    }
}

#[test]
fn diffs_of_debugfs_trees() {
    let boot = debugfs(DEBUGFS_BOOT);
    check_diff(&boot, &debugfs(DEBUGFS_AFTER_CYCLE), &[]);
    check_diff(
        &boot,
        &debugfs(DEBUGFS_CPU1_OFFLINE),
        &[
            "cpu0: sched domain level MC missing after (was MC NUMA, now NUMA)",
            "cpu1: no sched domains after (was MC NUMA)",
        ],
    );
    check_diff(
        &debugfs(DEBUGFS_CPU1_OFFLINE),
        &boot,
        &[
            "cpu0: sched domain level MC added after (was NUMA, now MC NUMA)",
            "cpu1: sched domains appeared after (now MC NUMA)",
        ],
    );
    // Seed 000: a hotplug cycle that does not rebuild cpu1's NUMA level.
    let mut broken = files(DEBUGFS_AFTER_CYCLE);
    broken.retain(|path, _| !path.starts_with("cpu1/domain1/"));
    check_diff(
        &boot,
        &Topology {
            source: Source::Debugfs,
            domains: parse_domains(&broken).unwrap(),
        },
        &["cpu1: sched domain level NUMA missing after (was MC NUMA, now MC)"],
    );
    // Seed 002: SD_BALANCE_NEWIDLE differs on a level.
    let mut newidle = files(DEBUGFS_AFTER_CYCLE);
    newidle.insert(
        "cpu3/domain0/flags".to_owned(),
        "SD_BALANCE_EXEC SD_BALANCE_FORK SD_WAKE_AFFINE SD_SHARE_PKG_RESOURCES SD_PREFER_SIBLING SD_ASYM_PACKING \n"
            .to_owned(),
    );
    check_diff(
        &boot,
        &Topology {
            source: Source::Debugfs,
            domains: parse_domains(&newidle).unwrap(),
        },
        &["cpu3: flags of MC changed: -SD_BALANCE_NEWIDLE +SD_ASYM_PACKING"],
    );
    // Snapshots from different sources are not compared level by level.
    check_diff(
        &boot,
        &sysfs(SYSFS_2NODE),
        &[
            "topology read from debugfs sched domains before and from sysfs topology after, not compared",
        ],
    );
}

#[test]
fn synthesizes_levels_from_sysfs() {
    // The guest's sysfs gives the levels its kernel built (see parses_debugfs_trees).
    check_domains(
        &sysfs(SYSFS_2NODE).domains,
        &[
            (0, vec![level("MC", "", "0-1"), level("NUMA", "", "0-3")]),
            (1, vec![level("MC", "", "0-1"), level("NUMA", "", "0-3")]),
            (2, vec![level("MC", "", "2-3"), level("NUMA", "", "0-3")]),
            (3, vec![level("MC", "", "2-3"), level("NUMA", "", "0-3")]),
        ],
    );
    // cpu1 offline: sysfs still lists it among cpu0's cache sharers; it is clipped.
    check_domains(
        &sysfs(SYSFS_2NODE_CPU1_OFFLINE).domains,
        &[
            (0, vec![level("NUMA", "", "0,2-3")]),
            (2, vec![level("MC", "", "2-3"), level("NUMA", "", "0,2-3")]),
            (3, vec![level("MC", "", "2-3"), level("NUMA", "", "0,2-3")]),
        ],
    );
    // A farm host: two cores sharing an L3, one node.
    check_domains(
        &sysfs(SYSFS_KVM).domains,
        &[
            (0, vec![level("MC", "", "0-1")]),
            (1, vec![level("MC", "", "0-1")]),
        ],
    );
    // s390x under TCG: every CPU its own core, book and drawer, no caches, no nodes;
    // the kernel's only level spans all CPUs (it calls it DIE).
    let pkg = || vec![level("PKG", "", "0-3")];
    check_domains(
        &sysfs(SYSFS_S390X).domains,
        &[(0, pkg()), (1, pkg()), (2, pkg()), (3, pkg())],
    );
}

/// Sixteen CPUs, four nodes of four, SMT pairs, an L3 per node; nodes 0-1 and 2-3 are
/// near each other (distance 16), far from the others (32).
fn big_machine(with_distances: bool) -> String {
    let mut grep = String::from("cpu/online:0-15\n");
    for cpu in 0..16 {
        let smt = cpu & !1;
        let node = cpu / 4;
        grep += &format!(
            "cpu/cpu{cpu}/topology/thread_siblings_list:{smt}-{}\n",
            smt + 1
        );
        grep += &format!("cpu/cpu{cpu}/topology/core_siblings_list:0-15\n");
        for (index, level, kind, shared) in [
            (0, 1, "Data", format!("{smt}-{}", smt + 1)),
            (1, 1, "Instruction", format!("{smt}-{}", smt + 1)),
            (2, 2, "Unified", format!("{smt}-{}", smt + 1)),
            (3, 3, "Unified", format!("{}-{}", 4 * node, 4 * node + 3)),
        ] {
            let dir = format!("cpu/cpu{cpu}/cache/index{index}");
            grep += &format!(
                "{dir}/level:{level}\n{dir}/type:{kind}\n{dir}/shared_cpu_list:{shared}\n"
            );
        }
    }
    let distances = ["10 16 32 32", "16 10 32 32", "32 32 10 16", "32 32 16 10"];
    for (node, distance) in distances.iter().enumerate() {
        grep += &format!("node/node{node}/cpulist:{}-{}\n", 4 * node, 4 * node + 3);
        if with_distances {
            grep += &format!("node/node{node}/distance:{distance}\n");
        }
    }
    grep
}

#[test]
fn synthesizes_smt_and_numa_distance_levels() {
    let domains = synthesize(&files(&big_machine(true))).unwrap();
    assert_eq!(
        domains.per_cpu[&0],
        [
            level("SMT", "", "0-1"),
            level("MC", "", "0-3"),
            level("NUMA", "", "0-7"),
            level("NUMA", "", "0-15"),
        ]
    );
    assert_eq!(
        domains.per_cpu[&10],
        [
            level("SMT", "", "10-11"),
            level("MC", "", "8-11"),
            level("NUMA", "", "8-15"),
            level("NUMA", "", "0-15"),
        ]
    );
    // Without distance files: one NUMA level over all CPUs.
    let domains = synthesize(&files(&big_machine(false))).unwrap();
    assert_eq!(
        domains.per_cpu[&5],
        [
            level("SMT", "", "4-5"),
            level("MC", "", "4-7"),
            level("NUMA", "", "0-15"),
        ]
    );
    // Without cache files, MC falls back to the core siblings (here the package,
    // which spans all nodes) clipped to the node.
    let mut no_caches = files(&big_machine(true));
    no_caches.retain(|path, _| !path.contains("/cache/"));
    assert_eq!(
        synthesize(&no_caches).unwrap().per_cpu[&0],
        [
            level("SMT", "", "0-1"),
            level("MC", "", "0-3"),
            level("NUMA", "", "0-7"),
            level("NUMA", "", "0-15"),
        ]
    );
}

#[test]
fn synthesize_errors_name_the_file() {
    let cases: &[(&str, &str)] = &[
        (
            "node/node0/cpulist:0-1\n",
            r#"/sys/devices/system/cpu/online line 1: missing: """#,
        ),
        (
            "cpu/online:0-x\n",
            r#"/sys/devices/system/cpu/online line 1: bad cpu list "0-x": `x` in `0-x` is not a CPU number: "0-x""#,
        ),
        (
            "cpu/online:0\ncpu/cpu0/topology/thread_siblings_list:0,\n",
            r#"/sys/devices/system/cpu/cpu0/topology/thread_siblings_list line 1: bad cpu list "0,": `` in `0,` is not a CPU number: "0,""#,
        ),
        (
            "cpu/online:0\ncpu/cpu0/cache/index3/level:L3\ncpu/cpu0/cache/index3/shared_cpu_list:0\n",
            r#"/sys/devices/system/cpu/cpu0/cache/index3/level line 1: not a cache level: "L3""#,
        ),
        (
            "cpu/online:0-1\nnode/node0/cpulist:0-1\nnode/node0/distance:10 far\n",
            r#"/sys/devices/system/node/node0/distance line 1: not distances: "10 far""#,
        ),
    ];
    for (grep, want) in cases {
        let e = synthesize(&files(grep)).unwrap_err();
        assert_eq!(e.to_string(), *want, "{grep:?}");
    }
}

#[test]
fn diffs_of_sysfs_topologies_show_spans() {
    check_diff(
        &sysfs(SYSFS_2NODE),
        &sysfs(SYSFS_2NODE_CPU1_OFFLINE),
        &[
            "cpu0: sched domain level MC missing after (was MC NUMA, now NUMA)",
            "cpu0: span of NUMA changed (was 0-3, now 0,2-3)",
            "cpu1: no sched domains after (was MC NUMA)",
            "cpu2: span of NUMA changed (was 0-3, now 0,2-3)",
            "cpu3: span of NUMA changed (was 0-3, now 0,2-3)",
        ],
    );
    check_diff(&sysfs(SYSFS_2NODE), &sysfs(SYSFS_2NODE), &[]);
    let change = TopologyChange::LevelAdded {
        cpu: 4,
        level: "NUMA".to_owned(),
        was: vec![],
        now: vec!["NUMA".to_owned()],
    };
    assert_eq!(
        change.to_string(),
        "cpu4: sched domain level NUMA added after (was none, now NUMA)"
    );
}

#[test]
fn formats_cpu_lists() {
    let cases: &[(&[u32], &str)] = &[
        (&[], ""),
        (&[0], "0"),
        (&[0, 1], "0-1"),
        (&[0, 2, 3], "0,2-3"),
        (&[5, 1, 2, 3, 9, 9], "1-3,5,9"),
    ];
    for (cpus, want) in cases {
        assert_eq!(format_cpu_list(cpus), *want);
        assert_eq!(parse_cpu_list(want).unwrap(), {
            let mut c = cpus.to_vec();
            c.sort_unstable();
            c.dedup();
            c
        });
    }
}

/// Writes a `grep .`-style tree below `dir`.
fn write_tree(dir: &Path, grep: &str) {
    for (path, content) in files(grep) {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
}

#[test]
fn reads_the_best_source_below_a_root() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    write_tree(&root.join("sys/devices/system"), SYSFS_2NODE);
    // debugfs mounted but without sched_verbose: empty cpu directories.
    std::fs::create_dir_all(root.join("sys/kernel/debug/sched/domains/cpu0")).unwrap();
    let got = read(root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, sysfs(SYSFS_2NODE));

    write_tree(
        &root.join("proc/sys/kernel/sched_domain"),
        "cpu0/domain0/name:MC\ncpu0/domain0/flags:4655\n",
    );
    let got = read(root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.source, Source::Sysctl);
    assert_eq!(got.domains.per_cpu[&0], [level("MC", "4655", "")]);

    write_tree(&root.join("sys/kernel/debug/sched/domains"), DEBUGFS_BOOT);
    let got = read(root).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, debugfs(DEBUGFS_BOOT));

    // Errors name the file below the root.
    write_tree(
        &root.join("sys/kernel/debug/sched/domains"),
        "cpu2/domain1/name:N U M A\n",
    );
    let e = read(root).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}/sys/kernel/debug/sched/domains/cpu2/domain1/name line 1: not a domain name: \"N U M A\"",
            root.display()
        )
    );
    let bare = tempfile::tempdir().unwrap();
    write_tree(
        &bare.path().join("sys/devices/system"),
        "cpu/online:0-1\ncpu/cpu0/topology/thread_siblings_list:zero\n",
    );
    let e = read(bare.path()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}/sys/devices/system/cpu/cpu0/topology/thread_siblings_list line 1: bad cpu list \"zero\": `zero` in `zero` is not a CPU number: \"zero\"",
            bare.path().display()
        )
    );
}

#[test]
fn reads_this_machine() {
    let topology = read(Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
    if topology.source == Source::Sysfs {
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
        let online = parse_cpu_list(&online).unwrap();
        assert_eq!(
            topology.domains.per_cpu.keys().copied().collect::<Vec<_>>(),
            online
        );
    }
    // This machine with cpu0 in an MC domain, and then in a NUMA one too:
    // the added level is the whole difference, the rest of the machine none.
    let cpu0_in = |levels: &[&str]| {
        let mut t = topology.clone();
        let levels = levels.iter().map(|name| level(name, "", "")).collect();
        t.domains.per_cpu.insert(0, levels);
        t
    };
    check_diff(
        &cpu0_in(&["MC"]),
        &cpu0_in(&["MC", "NUMA"]),
        &["cpu0: sched domain level NUMA added after (was MC, now MC NUMA)"],
    );
}
