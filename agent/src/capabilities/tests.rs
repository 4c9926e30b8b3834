//! Parsers are checked with data tables, one `check_*` helper per parser; discovery is
//! checked on fake /proc and /sys trees and, once, on this machine.

use std::path::Path;

use farm_proto::{Capabilities, CgroupLayout, NumaNode, Virtualization};
use tempfile::TempDir;

use super::parse::{self, Mount, ParseError, VirtEvidence};
use super::{Error, Probe, discover, parse_cpu_list};

// ------------------------------------------------------------------ cpu lists

fn check_cpu_list(input: &str, expect: Result<&[u32], &str>) {
    let got = parse_cpu_list(input);
    match (got, expect) {
        (Ok(cpus), Ok(want)) => assert_eq!(cpus, want, "input {input:?}"),
        (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "input {input:?}"),
        (got, want) => panic!("input {input:?}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn cpu_lists() {
    let ok: &[(&str, &[u32])] = &[
        ("0", &[0]),
        ("0-1\n", &[0, 1]),
        ("0-3,5,7-8", &[0, 1, 2, 3, 5, 7, 8]),
        ("0-0", &[0]),
        ("", &[]),
        ("\n", &[]),
        ("3,1,2", &[1, 2, 3]),
        ("0-2,1-3", &[0, 1, 2, 3]),
        ("1,1", &[1]),
        ("65534-65535", &[65534, 65535]),
        ("99998-99999", &[99998, 99999]),
    ];
    for (input, want) in ok {
        check_cpu_list(input, Ok(want));
    }
    // The messages are farm_spec's (`CpuSet::parse_kernel_list`), the one
    // parser of CPU lists, behind the content quoted here.
    let bad: &[(&str, &str)] = &[
        (
            "0-x",
            r#"bad cpu list "0-x": `x` in `0-x` is not a CPU number"#,
        ),
        (
            "abc",
            r#"bad cpu list "abc": `abc` in `abc` is not a CPU number"#,
        ),
        ("3-1", r#"bad cpu list "3-1": range `3-1` runs backwards"#),
        (
            "1,,2",
            r#"bad cpu list "1,,2": `` in `1,,2` is not a CPU number"#,
        ),
        (",", r#"bad cpu list ",": `` in `,` is not a CPU number"#),
        ("-1", r#"bad cpu list "-1": `` in `-1` is not a CPU number"#),
        ("1-", r#"bad cpu list "1-": `` in `1-` is not a CPU number"#),
        (
            "1-2-3",
            r#"bad cpu list "1-2-3": `2-3` in `1-2-3` is not a CPU number"#,
        ),
        (
            "+1",
            r#"bad cpu list "+1": `+1` in `+1` is not a CPU number"#,
        ),
        (
            "0, 1",
            r#"bad cpu list "0, 1": ` 1` in `0, 1` is not a CPU number"#,
        ),
        (
            "0-7:2/4",
            r#"bad cpu list "0-7:2/4": `7:2/4` in `0-7:2/4` is not a CPU number"#,
        ),
        (
            "100000",
            r#"bad cpu list "100000": CPU 100000 is beyond the largest supported CPU number 99999"#,
        ),
        (
            "0-99999999999",
            r#"bad cpu list "0-99999999999": CPU 99999999999 is beyond the largest supported CPU number 99999"#,
        ),
    ];
    for (input, want) in bad {
        check_cpu_list(input, Err(want));
    }
}

#[test]
fn errors_name_the_file_and_the_content() {
    let kind = parse_cpu_list("0-x").unwrap_err();
    let error = Error::Parse {
        path: "/sys/devices/system/cpu/online".into(),
        kind,
    };
    assert_eq!(
        error.to_string(),
        r#"/sys/devices/system/cpu/online: bad cpu list "0-x": `x` in `0-x` is not a CPU number"#
    );
    let long = "x".repeat(1000);
    let shown = parse_cpu_list(&long).unwrap_err().to_string();
    assert!(shown.len() < 200, "garbage is quoted in full: {shown}");
}

#[test]
fn values_and_node_dirs() {
    assert_eq!(
        parse::parse_value("6.1.0-57-amd64\n", "a kernel release"),
        Ok("6.1.0-57-amd64".to_owned())
    );
    assert_eq!(
        parse::parse_value(" \n", "a host name")
            .unwrap_err()
            .to_string(),
        "empty, expected a host name"
    );
    let cases: &[(&str, Option<u32>)] = &[
        ("node0", Some(0)),
        ("node12", Some(12)),
        ("node", None),
        ("nodex", None),
        ("node-1", None),
        ("possible", None),
        ("has_cpu", None),
    ];
    for (name, want) in cases {
        assert_eq!(parse::node_id(name), *want, "{name}");
    }
}

// ------------------------------------------------------------------ mounts and cgroups

/// The mount table of the farm's CI machines (see FACTS.md): cgroup v1 hybrid.
const HYBRID_MOUNTS: &str = "\
proc /proc proc rw,relatime 0 0
sysfs /sys sysfs rw,relatime 0 0
/dev/vda / ext4 rw,relatime,discard 0 0
tmpfs /sys/fs/cgroup tmpfs rw,relatime,mode=755 0 0
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup /sys/fs/cgroup/devices cgroup rw,relatime,devices 0 0
cgroup /sys/fs/cgroup/freezer cgroup rw,relatime,freezer 0 0
cgroup /sys/fs/cgroup/blkio cgroup rw,relatime,blkio 0 0
cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,relatime,name=systemd 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
";

/// A systemd machine with the unified hierarchy only.
const V2_MOUNTS: &str = "\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
/dev/sda1 / ext4 rw,relatime 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate,memory_recursiveprot 0 0
";

/// An older distribution: v1 with co-mounted controllers and no cgroup2 at all.
const V1_MOUNTS: &str = "\
sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0
proc /proc proc rw,nosuid,nodev,noexec,relatime 0 0
tmpfs /sys/fs/cgroup tmpfs ro,nosuid,nodev,noexec,mode=755 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,nosuid,nodev,noexec,relatime,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd 0 0
cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,nosuid,nodev,noexec,relatime,cpu,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,nosuid,nodev,noexec,relatime,cpuset,clone_children 0 0
cgroup /sys/fs/cgroup/net_cls,net_prio cgroup rw,nosuid,nodev,noexec,relatime,net_cls,net_prio 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,nosuid,nodev,noexec,relatime,memory 0 0
";

/// A minimal initramfs: nothing mounted but proc and sysfs.
const NO_CGROUP_MOUNTS: &str = "\
rootfs / rootfs rw 0 0
proc /proc proc rw,relatime 0 0
sysfs /sys sysfs rw,relatime 0 0
";

/// v2 with a named v1 hierarchy beside it (what `systemd.legacy_systemd_cgroup_controller`
/// leaves): no v1 controller, so still v2.
const V2_NAMED_V1_MOUNTS: &str = "\
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0
cgroup /sys/fs/cgroup/systemd cgroup rw,nosuid,nodev,noexec,relatime,xattr,name=systemd 0 0
";

fn check_cgroups(mounts: &str, layout: CgroupLayout, v1: &[&str], v2_mount_point: Option<&str>) {
    let parsed = parse::parse_mounts(mounts).expect("mount table parses");
    let got = parse::cgroups(&parsed);
    assert_eq!(got.layout, layout, "mounts:\n{mounts}");
    assert_eq!(got.v1_controllers, v1, "mounts:\n{mounts}");
    assert_eq!(
        got.v2_mount_point.as_deref(),
        v2_mount_point,
        "mounts:\n{mounts}"
    );
}

#[test]
fn cgroup_layouts() {
    let all_hybrid = [
        "blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids",
    ];
    check_cgroups(
        HYBRID_MOUNTS,
        CgroupLayout::Hybrid,
        &all_hybrid,
        Some("/sys/fs/cgroup/unified"),
    );
    check_cgroups(V2_MOUNTS, CgroupLayout::V2, &[], Some("/sys/fs/cgroup"));
    let v1 = ["cpu", "cpuacct", "cpuset", "memory", "net_cls", "net_prio"];
    check_cgroups(V1_MOUNTS, CgroupLayout::V1, &v1, None);
    check_cgroups(NO_CGROUP_MOUNTS, CgroupLayout::None, &[], None);
    check_cgroups("", CgroupLayout::None, &[], None);
    check_cgroups(
        V2_NAMED_V1_MOUNTS,
        CgroupLayout::V2,
        &[],
        Some("/sys/fs/cgroup"),
    );
}

#[test]
fn mount_lines() {
    let mounts =
        parse::parse_mounts("/dev/sdb1 /mnt/my\\040disk\\134x ext4 ro,relatime 0 0\n\n").unwrap();
    assert_eq!(
        mounts,
        [Mount {
            source: "/dev/sdb1".to_owned(),
            mount_point: "/mnt/my disk\\x".to_owned(),
            fs_type: "ext4".to_owned(),
            options: vec!["ro".to_owned(), "relatime".to_owned()],
        }]
    );
    assert!(mounts[0].is_read_only());
    assert_eq!(
        parse::parse_mounts("a\\9b /x\\777 t rw 0 0").unwrap()[0].mount_point,
        "/x\\777"
    );
    assert_eq!(
        parse::parse_mounts("a\\9b /x t rw 0 0").unwrap()[0].source,
        "a\\9b"
    );
    assert_eq!(
        parse::parse_mounts("proc /proc proc rw 0 0\nsysfs /sys\n"),
        Err(ParseError::MountLine {
            line: "sysfs /sys".to_owned(),
            fields: 2
        })
    );
}

fn check_mount_of(mounts: &str, path: &str, expect: Option<(&str, &str, bool)>) {
    let parsed = parse::parse_mounts(mounts).unwrap();
    let got = parse::mount_of(&parsed, path)
        .map(|m| (m.mount_point.as_str(), m.fs_type.as_str(), m.is_read_only()));
    assert_eq!(got, expect, "path {path}");
}

#[test]
fn mount_of_a_path() {
    check_mount_of(HYBRID_MOUNTS, "/sys", Some(("/sys", "sysfs", false)));
    check_mount_of(
        HYBRID_MOUNTS,
        "/sys/devices/system/cpu/cpu1/online",
        Some(("/sys", "sysfs", false)),
    );
    check_mount_of(
        HYBRID_MOUNTS,
        "/sys/fs/cgroup/cpu/farm",
        Some(("/sys/fs/cgroup/cpu", "cgroup", false)),
    );
    check_mount_of(HYBRID_MOUNTS, "/proc/sys", Some(("/proc", "proc", false)));
    check_mount_of(HYBRID_MOUNTS, "/system", Some(("/", "ext4", false)));
    check_mount_of(V2_NAMED_V1_MOUNTS, "/sys", None);
    // A container runtime's read-only /proc/sys, and a later mount hiding an earlier one.
    let container = "\
proc /proc proc rw 0 0
proc /proc/sys proc ro,relatime 0 0
sysfs /sys sysfs rw 0 0
sysfs /sys sysfs ro 0 0
";
    check_mount_of(
        container,
        "/proc/sys/kernel/sched_autogroup_enabled",
        Some(("/proc/sys", "proc", true)),
    );
    check_mount_of(container, "/proc/1/stat", Some(("/proc", "proc", false)));
    check_mount_of(container, "/sys", Some(("/sys", "sysfs", true)));
}

#[test]
fn cgroup_controllers_file() {
    assert_eq!(
        parse::parse_cgroup_controllers("cpuset cpu io memory pids\n"),
        ["cpu", "cpuset", "io", "memory", "pids"]
    );
    assert!(parse::parse_cgroup_controllers("\n").is_empty());
}

// ------------------------------------------------------------------ virtualization

const X86_CPUINFO_GUEST: &str = "\
processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm rep_good nopl cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy
bugs\t\t: sysret_ss_attrs null_seg spectre_v1 spectre_v2

processor\t: 1
";

const X86_CPUINFO_HOST: &str = "\
processor\t: 0
flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep hypervisor_like_but_not lahf_lm
";

const S390X_CPUINFO: &str = "\
vendor_id       : IBM/S390
# processors    : 2
bogomips per cpu: 3241.00
max thread id   : 0
features\t: esan3 zarch stfle msa ldisp eimm dfp edat etf3eh highgprs te vx sie
facilities      : 0 1 2 3 4 6 7 8 9 10 12 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 30 31 32 33
";

#[test]
fn cpuinfo_hypervisor_flag() {
    let cases = [
        (X86_CPUINFO_GUEST, true),
        (X86_CPUINFO_HOST, false),
        (S390X_CPUINFO, false),
        ("", false),
    ];
    for (cpuinfo, want) in cases {
        assert_eq!(
            parse::cpuinfo_has_hypervisor_flag(cpuinfo),
            want,
            "cpuinfo:\n{cpuinfo}"
        );
    }
}

const SYSINFO_KVM: &str = "\
Manufacturer:         IBM
Type:                 8561
LPAR Number:          47
LPAR Name:            LP01

VM00 Name:            s390guest
VM00 Control Program: KVM/Linux
VM00 Adjustment:      1000
VM00 CPUs Total:      2
";

const SYSINFO_ZVM: &str = "\
LPAR Name:            LP02
VM00 Name:            LINUX01
VM00 Control Program: z/VM    7.3.0
VM00 CPUs Total:      4
";

const SYSINFO_LPAR: &str = "\
Manufacturer:         IBM
Type:                 3931
LPAR Number:          12
LPAR Name:            PROD1
LPAR CPUs Total:      16
";

#[test]
fn sysinfo_control_programs() {
    let cases = [
        (SYSINFO_KVM, Some("KVM/Linux")),
        (SYSINFO_ZVM, Some("z/VM 7.3.0")),
        (SYSINFO_LPAR, None),
        ("VM00 Control Program:   \n", None),
        ("", None),
    ];
    for (sysinfo, want) in cases {
        assert_eq!(
            parse::sysinfo_control_program(sysinfo).as_deref(),
            want,
            "sysinfo:\n{sysinfo}"
        );
    }
}

fn check_virtualization(evidence: VirtEvidence, kind: Virtualization, hypervisor: &str) {
    let got = parse::classify_virtualization(&evidence);
    assert_eq!(got, (kind, hypervisor.to_owned()), "evidence {evidence:?}");
}

#[test]
fn virtualization() {
    use Virtualization::{Host, KvmGuest, OtherGuest};
    let s = |v: &str| Some(v.to_owned());
    let none = VirtEvidence::default;

    check_virtualization(none(), Host, "");
    // Bare metal: real DMI strings, the TSC as the only clocksource.
    check_virtualization(
        VirtEvidence {
            clocksources: s("tsc hpet acpi_pm \n"),
            dmi_sys_vendor: s("Dell Inc.\n"),
            ..none()
        },
        Host,
        "",
    );
    // The farm's CI machines (Firecracker): no DMI, only the KVM clock and the CPUID flag.
    check_virtualization(
        VirtEvidence {
            clocksources: s("tsc kvm-clock \n"),
            cpuid_hypervisor_flag: true,
            ..none()
        },
        KvmGuest,
        "kvm",
    );
    // QEMU with KVM, and the same machine type under TCG.
    let qemu = VirtEvidence {
        dmi_sys_vendor: s("QEMU\n"),
        dmi_product_name: s("Standard PC (i440FX + PIIX, 1996)\n"),
        cpuid_hypervisor_flag: true,
        ..none()
    };
    check_virtualization(
        VirtEvidence {
            clocksources: s("kvm-clock tsc acpi_pm"),
            ..qemu.clone()
        },
        KvmGuest,
        "kvm",
    );
    check_virtualization(
        VirtEvidence {
            clocksources: s("tsc hpet acpi_pm"),
            ..qemu
        },
        OtherGuest,
        "qemu",
    );
    // arm64 KVM: no kvm-clock, no CPUID flag, but DMI says so.
    check_virtualization(
        VirtEvidence {
            dmi_sys_vendor: s("QEMU"),
            dmi_product_name: s("KVM Virtual Machine"),
            ..none()
        },
        KvmGuest,
        "kvm",
    );
    // s390x: sysinfo wins over everything.
    check_virtualization(
        VirtEvidence {
            control_program: s("KVM/Linux"),
            ..none()
        },
        KvmGuest,
        "kvm",
    );
    check_virtualization(
        VirtEvidence {
            control_program: s("z/VM 7.3.0"),
            ..none()
        },
        OtherGuest,
        "zvm",
    );
    check_virtualization(
        VirtEvidence {
            control_program: s("ACME-VM 2.1"),
            ..none()
        },
        OtherGuest,
        "acme-vm",
    );
    check_virtualization(
        VirtEvidence {
            hypervisor_type: s("xen\n"),
            ..none()
        },
        OtherGuest,
        "xen",
    );
    check_virtualization(
        VirtEvidence {
            clocksources: s("hyperv_clocksource_tsc_page tsc"),
            ..none()
        },
        OtherGuest,
        "hyperv",
    );
    check_virtualization(
        VirtEvidence {
            dmi_sys_vendor: s("Microsoft Corporation"),
            dmi_product_name: s("Virtual Machine"),
            ..none()
        },
        OtherGuest,
        "hyperv",
    );
    check_virtualization(
        VirtEvidence {
            dmi_sys_vendor: s("Microsoft Corporation"),
            dmi_product_name: s("Surface Book"),
            ..none()
        },
        Host,
        "",
    );
    check_virtualization(
        VirtEvidence {
            dmi_sys_vendor: s("VMware, Inc."),
            cpuid_hypervisor_flag: true,
            ..none()
        },
        OtherGuest,
        "vmware",
    );
    check_virtualization(
        VirtEvidence {
            cpuid_hypervisor_flag: true,
            ..none()
        },
        OtherGuest,
        "",
    );
}

// ------------------------------------------------------------------ fake trees

/// A fake root holding `files`, each given by its absolute path on the faked machine.
fn tree(files: &[(&str, &str)]) -> TempDir {
    let root = tempfile::tempdir().expect("temp dir");
    for (path, content) in files {
        let path = root.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(path.parent().expect("a file has a parent")).expect("create dirs");
        std::fs::write(&path, content).expect("write file");
    }
    root
}

fn probe(root: &TempDir, euid: u32, arch: &str) -> Probe {
    Probe {
        root: root.path().to_owned(),
        euid,
        arch: arch.to_owned(),
    }
}

fn catalogue() -> Vec<String> {
    farm_workload::catalogue::CATALOGUE
        .iter()
        .map(|w| w.name.to_owned())
        .collect()
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

/// The QEMU guest the farm boots for multi-node tests: 4 vCPUs on 2 nodes, plus a
/// memory-only node, cgroup v1 hybrid, KVM.
fn two_node_kvm_guest() -> TempDir {
    tree(&[
        ("/proc/sys/kernel/osrelease", "6.1.0-57-cloud-amd64\n"),
        ("/proc/sys/kernel/hostname", "guest\n"),
        ("/proc/sys/kernel/sched_autogroup_enabled", "1\n"),
        ("/proc/self/mounts", HYBRID_MOUNTS),
        ("/proc/cpuinfo", X86_CPUINFO_GUEST),
        ("/sys/devices/system/cpu/online", "0-3\n"),
        ("/sys/devices/system/cpu/possible", "0-7\n"),
        ("/sys/devices/system/cpu/cpu1/online", "1\n"),
        ("/sys/devices/system/cpu/cpu2/online", "1\n"),
        ("/sys/devices/system/cpu/cpu3/online", "1\n"),
        ("/sys/devices/system/node/online", "0-2\n"),
        ("/sys/devices/system/node/possible", "0-2\n"),
        ("/sys/devices/system/node/node0/cpulist", "0-1\n"),
        ("/sys/devices/system/node/node1/cpulist", "2-3\n"),
        ("/sys/devices/system/node/node2/cpulist", "\n"),
        (
            "/sys/devices/system/clocksource/clocksource0/available_clocksource",
            "kvm-clock tsc acpi_pm \n",
        ),
        ("/sys/class/dmi/id/sys_vendor", "QEMU\n"),
        (
            "/sys/class/dmi/id/product_name",
            "Standard PC (i440FX + PIIX, 1996)\n",
        ),
        ("/sys/fs/cgroup/unified/cgroup.controllers", ""),
        ("/proc/sys/kernel/numa_balancing", "0\n"),
        (
            "/sys/kernel/debug/sched/features",
            "RUN_TO_PARITY NO_HRTICK\n",
        ),
        ("/sys/kernel/debug/sched/base_slice_ns", "3000000\n"),
        ("/sys/kernel/debug/sched/migration_cost_ns", "500000\n"),
        // Not a number: as good as absent.
        ("/sys/kernel/debug/sched/nr_migrate", "lots\n"),
    ])
}

#[test]
fn two_node_hybrid_kvm_guest_as_root() {
    let root = two_node_kvm_guest();
    let got = probe(&root, 0, "x86_64").discover().expect("discovers");
    let want = Capabilities {
        hostname: "guest".to_owned(),
        arch: "x86_64".to_owned(),
        kernel_release: "6.1.0-57-cloud-amd64".to_owned(),
        cpus_online: 4,
        cpus_possible: 8,
        online_cpus: vec![0, 1, 2, 3],
        numa_nodes: vec![
            NumaNode {
                id: 0,
                cpus: vec![0, 1],
            },
            NumaNode {
                id: 1,
                cpus: vec![2, 3],
            },
        ],
        virtualization: Virtualization::KvmGuest as i32,
        hypervisor: "kvm".to_owned(),
        cgroup_layout: CgroupLayout::Hybrid as i32,
        cgroup_v1_controllers: strings(&[
            "blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "memory", "pids",
        ]),
        cgroup_v2_controllers: vec![],
        root: true,
        sys_writable: true,
        hotpluggable_cpus: vec![1, 2, 3],
        sysctl_writable: true,
        sched_features: strings(&["RUN_TO_PARITY", "HRTICK"]),
        sched_tunables: strings(&["base_slice_ns", "migration_cost_ns"]),
        numa_balancing_writable: true,
        executors: strings(&["host"]),
        workloads: catalogue(),
        state_kinds: vec![],
        guest_arches: vec![],
        guest_accelerators: vec![],
        guest_kernels: vec![],
        kernel_repos: vec![],
        build_configs: vec![],
        build_patches: vec![],
        built_kernels: vec![],
    };
    assert_eq!(got, want);
}

#[test]
fn the_same_guest_as_a_user_may_change_nothing() {
    let root = two_node_kvm_guest();
    let got = probe(&root, 1000, "x86_64").discover().expect("discovers");
    assert!(!got.root);
    assert!(
        got.sys_writable,
        "the mount is rw; the user just may not write"
    );
    assert_eq!(got.hotpluggable_cpus, Vec::<u32>::new());
    assert!(!got.sysctl_writable);
    assert!(!got.numa_balancing_writable);
    assert!(got.sched_features.is_empty() && got.sched_tunables.is_empty());
}

#[test]
fn s390x_kvm_guest_without_numa_nodes() {
    let root = tree(&[
        ("/proc/sys/kernel/osrelease", "6.1.0-50-s390x\n"),
        ("/proc/sys/kernel/hostname", "zguest\n"),
        ("/proc/sys/kernel/sched_autogroup_enabled", "1\n"),
        // No /proc/self: the mount table is found at /proc/mounts.
        ("/proc/mounts", V2_MOUNTS),
        ("/proc/cpuinfo", S390X_CPUINFO),
        ("/proc/sysinfo", SYSINFO_KVM),
        ("/sys/devices/system/cpu/online", "0-1\n"),
        ("/sys/devices/system/cpu/possible", "0-3\n"),
        ("/sys/devices/system/cpu/cpu0/online", "1\n"),
        ("/sys/devices/system/cpu/cpu1/online", "1\n"),
        (
            "/sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory pids\n",
        ),
    ]);
    let got = probe(&root, 0, "s390x").discover().expect("discovers");
    let want = Capabilities {
        hostname: "zguest".to_owned(),
        arch: "s390x".to_owned(),
        kernel_release: "6.1.0-50-s390x".to_owned(),
        cpus_online: 2,
        cpus_possible: 4,
        online_cpus: vec![0, 1],
        numa_nodes: vec![],
        virtualization: Virtualization::KvmGuest as i32,
        hypervisor: "kvm".to_owned(),
        cgroup_layout: CgroupLayout::V2 as i32,
        cgroup_v1_controllers: vec![],
        cgroup_v2_controllers: strings(&["cpu", "cpuset", "io", "memory", "pids"]),
        root: true,
        sys_writable: true,
        // s390x can take cpu0 offline too.
        hotpluggable_cpus: vec![0, 1],
        sysctl_writable: true,
        sched_features: vec![],
        sched_tunables: vec![],
        numa_balancing_writable: false,
        executors: strings(&["host"]),
        workloads: catalogue(),
        state_kinds: vec![],
        guest_arches: vec![],
        guest_accelerators: vec![],
        guest_kernels: vec![],
        kernel_repos: vec![],
        build_configs: vec![],
        build_patches: vec![],
        built_kernels: vec![],
    };
    assert_eq!(got, want);
}

#[test]
fn read_only_sys_and_proc_sys_leave_root_unable_to_change_state() {
    let root = tree(&[
        ("/proc/sys/kernel/osrelease", "6.12.0\n"),
        ("/proc/sys/kernel/hostname", "box\n"),
        ("/proc/sys/kernel/sched_autogroup_enabled", "1\n"),
        (
            "/proc/self/mounts",
            "proc /proc proc rw 0 0\nproc /proc/sys proc ro 0 0\nsysfs /sys sysfs ro,nosuid 0 0\n",
        ),
        ("/sys/devices/system/cpu/online", "0-1\n"),
        ("/sys/devices/system/cpu/possible", "0-1\n"),
        ("/sys/devices/system/cpu/cpu1/online", "1\n"),
    ]);
    let got = probe(&root, 0, "x86_64").discover().expect("discovers");
    assert!(got.root);
    assert!(!got.sys_writable);
    assert_eq!(got.hotpluggable_cpus, Vec::<u32>::new());
    assert!(!got.sysctl_writable);
    assert_eq!(got.virtualization, Virtualization::Host as i32);
    assert_eq!(got.cgroup_layout, CgroupLayout::None as i32);
}

#[test]
fn a_bad_or_missing_mandatory_file_is_an_error_naming_it() {
    let base = [
        ("/proc/sys/kernel/osrelease", "6.12.0\n"),
        ("/proc/sys/kernel/hostname", "box\n"),
        ("/proc/self/mounts", NO_CGROUP_MOUNTS),
        ("/sys/devices/system/cpu/possible", "0-1\n"),
    ];
    let with_online = |online: &str| {
        let mut files = base.to_vec();
        files.push(("/sys/devices/system/cpu/online", online));
        tree(&files)
    };

    let root = with_online("0-x\n");
    let error = probe(&root, 0, "x86_64").discover().unwrap_err();
    let path = root.path().join("sys/devices/system/cpu/online");
    assert_eq!(
        error.to_string(),
        format!(
            r#"{}: bad cpu list "0-x": `x` in `0-x` is not a CPU number"#,
            path.display()
        )
    );

    let root = tree(&base);
    match probe(&root, 0, "x86_64").discover() {
        Err(Error::Read { path: p, source }) => {
            assert_eq!(p, path_in(&root, "/sys/devices/system/cpu/online"));
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("want a read error, got {other:?}"),
    }

    let root = with_online("0-1\n");
    std::fs::write(root.path().join("proc/self/mounts"), "sysfs /sys\n").unwrap();
    let error = probe(&root, 0, "x86_64").discover().unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#"proc/self/mounts: bad mount line "sysfs /sys""#),
        "{error}"
    );

    let root = with_online("0-1\n");
    std::fs::write(root.path().join("proc/sys/kernel/osrelease"), "\n").unwrap();
    let error = probe(&root, 0, "x86_64").discover().unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("proc/sys/kernel/osrelease: empty, expected a kernel release"),
        "{error}"
    );
}

fn path_in(root: &TempDir, abs: &str) -> std::path::PathBuf {
    root.path().join(abs.trim_start_matches('/'))
}

// ------------------------------------------------------------------ this machine

/// Reads the real /proc and /sys: only facts every Linux machine has are asserted.
#[test]
fn this_machine() {
    let caps = discover(Path::new("/")).expect("discovers this machine");
    assert!(!caps.arch.is_empty());
    assert!(!caps.kernel_release.is_empty());
    assert!(!caps.hostname.is_empty());
    assert!(caps.cpus_online >= 1);
    assert_eq!(caps.cpus_online as usize, caps.online_cpus.len());
    assert!(caps.cpus_possible >= caps.cpus_online);
    let possible =
        parse_cpu_list(&std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap())
            .unwrap();
    assert!(
        caps.online_cpus.iter().all(|cpu| possible.contains(cpu)),
        "online {:?} ⊄ possible {possible:?}",
        caps.online_cpus
    );
    for node in &caps.numa_nodes {
        assert!(
            node.cpus.iter().all(|cpu| caps.online_cpus.contains(cpu)),
            "node {node:?}"
        );
    }
    assert!(
        caps.hotpluggable_cpus
            .iter()
            .all(|cpu| possible.contains(cpu))
    );
    assert_ne!(caps.virtualization, Virtualization::Unspecified as i32);
    assert_ne!(caps.cgroup_layout, CgroupLayout::Unspecified as i32);
    assert_eq!(caps.workloads, catalogue());
}
