//! Fixtures are real files: `x86_kvm_2cpu*` from a farm host (a KVM guest, AMD EPYC),
//! `x86_qemu_4cpu*` from a Debian 6.1 guest under QEMU TCG before and after cpu1 went
//! offline, `s390x_tcg_*` likewise from a Debian 6.1 s390x guest. `arm64_4cpu` is
//! written from the arm64 format (no arm64 machine was at hand).

use std::collections::BTreeMap;
use std::path::Path;

use super::{IpiKind, IpiTotals, IrqDelta, Line, classify, delta, ipi_totals, parse, read};

const X86_KVM: &str = include_str!("fixtures/x86_kvm_2cpu.txt");
const X86_KVM_LATER: &str = include_str!("fixtures/x86_kvm_2cpu_later.txt");
const X86_QEMU: &str = include_str!("fixtures/x86_qemu_4cpu.txt");
const X86_QEMU_CPU1_OFFLINE: &str = include_str!("fixtures/x86_qemu_4cpu_cpu1_offline.txt");
const S390X: &str = include_str!("fixtures/s390x_tcg_2cpu.txt");
const S390X_CPU1_OFFLINE: &str = include_str!("fixtures/s390x_tcg_cpu1_offline.txt");
const ARM64: &str = include_str!("fixtures/arm64_4cpu.txt");

fn line(name: &str, counts: &[u64], description: &str) -> Line {
    Line {
        name: name.to_owned(),
        counts: counts.to_vec(),
        description: description.to_owned(),
    }
}

/// Parses `text` and checks its CPUs, its number of lines and the lines named in `want`.
fn check_parse(text: &str, cpus: &[u32], n_lines: usize, want: &[Line]) {
    let parsed = parse(text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.cpus, cpus);
    assert_eq!(parsed.lines.len(), n_lines);
    for w in want {
        let got = parsed.lines.iter().find(|l| l.name == w.name);
        assert_eq!(got, Some(w), "line {}", w.name);
    }
}

#[test]
fn parses_real_files() {
    check_parse(
        X86_KVM,
        &[0, 1],
        35,
        &[
            line("24", &[1, 0], "IO-APIC   5-edge      ACPI:Ged"),
            line(
                "28",
                &[0, 0],
                "PCI-MSIX-0000:00:01.0   0-edge      virtio0-config",
            ),
            line("RES", &[278225, 235210], "Rescheduling interrupts"),
            line("CAL", &[474339, 462845], "Function call interrupts"),
            line("TLB", &[206567, 208149], "TLB shootdowns"),
            line("HYP", &[80, 42], "Hypervisor callback interrupts"),
            line("ERR", &[0], ""),
            line("MIS", &[0], ""),
        ],
    );
    check_parse(
        X86_QEMU_CPU1_OFFLINE,
        &[0, 2, 3],
        21,
        &[
            line("4", &[144, 0, 0], "IO-APIC   4-edge      ttyS0"),
            line("RES", &[31, 21, 16], "Rescheduling interrupts"),
            line("ERR", &[0], ""),
        ],
    );
    check_parse(
        S390X,
        &[0, 1],
        36,
        &[
            // The main classes have no description, only a trailing space.
            line("EXT", &[525, 482], ""),
            line("I/O", &[2, 4], ""),
            line("EXC", &[29, 18], "[EXT] External Call"),
            line("EMS", &[65, 75], "[EXT] Emergency Signal"),
            line("IUC", &[0, 0], "[EXT] IUCV"),
            line("CMS", &[0, 0], "[EXT] CPU-Measurement: Sampling"),
        ],
    );
    check_parse(
        S390X_CPU1_OFFLINE,
        &[0],
        36,
        &[line("EXC", &[31], "[EXT] External Call")],
    );
    check_parse(
        ARM64,
        &[0, 1, 2, 3],
        11,
        &[
            // The GIC's hardware irq number is a number after the counts.
            line(
                "11",
                &[23044, 19932, 21075, 20318],
                "GICv3  27 Level     arch_timer",
            ),
            line(
                "48",
                &[1203, 0, 0, 0],
                "ITS-MSI 524288 Edge      virtio1-input.0",
            ),
            line("IPI0", &[4315, 5120, 3877, 4090], "Rescheduling interrupts"),
            line("Err", &[0], ""),
        ],
    );
}

#[test]
fn parse_errors_name_the_line_and_its_content() {
    let cases: &[(&str, &str)] = &[
        ("", r#"/proc/interrupts line 1: no CPU header: """#),
        (
            "  CPU0 CPUx\n",
            r#"/proc/interrupts line 1: header column "CPUx" is not CPU<n>: "  CPU0 CPUx""#,
        ),
        (
            "  CPU0 CPU0\n",
            r#"/proc/interrupts line 1: CPU0 appears twice in the header: "  CPU0 CPU0""#,
        ),
        (
            "\n   CPU0 CPU1\nRES: 1 2 Rescheduling interrupts\nCAL 1 2\n",
            r#"/proc/interrupts line 4: no colon after the interrupt name: "CAL 1 2""#,
        ),
        (
            "   CPU0 CPU1\nRES: 1 Rescheduling interrupts\n",
            r#"/proc/interrupts line 2: expected 2 per-CPU counts, found 1: "RES: 1 Rescheduling interrupts""#,
        ),
        (
            "   CPU0 CPU1\n: 1 2\n",
            r#"/proc/interrupts line 2: bad interrupt name "": ": 1 2""#,
        ),
        (
            "   CPU0\nLOC: 99999999999999999999 Local timer interrupts\n",
            r#"/proc/interrupts line 2: count "99999999999999999999" does not fit in 64 bits: "LOC: 99999999999999999999 Local timer interrupts""#,
        ),
    ];
    for (input, want) in cases {
        match parse(input) {
            Ok(got) => panic!("{input:?} parsed as {got:?}"),
            Err(e) => assert_eq!(e.to_string(), *want, "input {input:?}"),
        }
    }
}

#[test]
fn classifies_ipis_per_architecture() {
    let cases: &[(&str, &str, Option<IpiKind>)] = &[
        (
            "RES",
            "Rescheduling interrupts",
            Some(IpiKind::Rescheduling),
        ),
        (
            "CAL",
            "Function call interrupts",
            Some(IpiKind::FunctionCall),
        ),
        ("TLB", "TLB shootdowns", Some(IpiKind::TlbShootdown)),
        ("IWI", "IRQ work interrupts", Some(IpiKind::Other)),
        ("LOC", "Local timer interrupts", None),
        ("HYP", "Hypervisor callback interrupts", None),
        ("ERR", "", None),
        ("24", "IO-APIC   5-edge      ACPI:Ged", None),
        ("EXC", "[EXT] External Call", Some(IpiKind::Mixed)),
        ("EMS", "[EXT] Emergency Signal", Some(IpiKind::Mixed)),
        ("IUC", "[EXT] IUCV", None),
        ("EXT", "", None),
        ("CLK", "[EXT] Clock Comparator", None),
        ("EXC", "some other arch's EXC", None),
        (
            "IPI0",
            "Rescheduling interrupts",
            Some(IpiKind::Rescheduling),
        ),
        (
            "IPI1",
            "Function call interrupts",
            Some(IpiKind::FunctionCall),
        ),
        (
            "IPI3",
            "Single function call interrupts",
            Some(IpiKind::FunctionCall),
        ),
        ("IPI2", "CPU stop interrupts", Some(IpiKind::Other)),
        ("IPI", "Inter-processor interrupts", None),
    ];
    for (name, description, want) in cases {
        assert_eq!(classify(name, description), *want, "{name}: {description}");
    }
}

/// The delta of the line `name`.
fn find<'a>(deltas: &'a [IrqDelta], name: &str) -> &'a IrqDelta {
    deltas
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no delta for {name}"))
}

/// A line's expected delta: name, `(cpu, growth)` pairs, total.
type Want<'a> = (&'a str, &'a [(u32, u64)], u64);

fn check_delta(before: &str, after: &str, want: &[Want<'_>], totals: IpiTotals) {
    let deltas = delta(&parse(before).unwrap(), &parse(after).unwrap()).unwrap();
    for (name, per_cpu, total) in want {
        let d = find(&deltas, name);
        let per_cpu: BTreeMap<u32, u64> = per_cpu.iter().copied().collect();
        assert_eq!(d.per_cpu, per_cpu, "{name}");
        assert_eq!(d.total, *total, "{name}");
    }
    assert_eq!(ipi_totals(&deltas), totals);
}

#[test]
fn deltas_match_columns_by_cpu_across_hotplug() {
    // x86: cpu1 went offline between the samples; its column is left out.
    check_delta(
        X86_QEMU,
        X86_QEMU_CPU1_OFFLINE,
        &[
            ("RES", &[(0, 3), (2, 5), (3, 1)], 9),
            ("CAL", &[(0, 24), (2, 29), (3, 17)], 70),
            ("TLB", &[(0, 0), (2, 0), (3, 1)], 1),
            ("LOC", &[(0, 67), (2, 106), (3, 100)], 273),
            // ttyS0's interrupt moved to cpu0 when cpu1 left.
            ("4", &[(0, 144), (2, 0), (3, 0)], 144),
            ("ERR", &[], 0),
        ],
        IpiTotals {
            rescheduling: 9,
            function_call: 70,
            tlb_shootdown: 1,
            mixed: 0,
            other: 0,
        },
    );
    // The other way round: cpu1 came online, and has nothing to compare with.
    let back = delta(
        &parse(X86_QEMU_CPU1_OFFLINE).unwrap(),
        &parse(X86_QEMU_CPU1_OFFLINE).unwrap(),
    )
    .unwrap();
    assert_eq!(
        find(&back, "RES").per_cpu.keys().collect::<Vec<_>>(),
        [&0, &2, &3]
    );
    // s390x: reschedules and function calls together, in EXC and EMS.
    check_delta(
        S390X,
        S390X_CPU1_OFFLINE,
        &[
            ("EXC", &[(0, 2)], 2),
            ("EMS", &[(0, 7)], 7),
            ("EXT", &[(0, 32)], 32),
        ],
        IpiTotals {
            mixed: 9,
            ..IpiTotals::default()
        },
    );
    // Two samples of a farm host, a little apart.
    let deltas = delta(&parse(X86_KVM).unwrap(), &parse(X86_KVM_LATER).unwrap()).unwrap();
    let totals = ipi_totals(&deltas);
    assert_eq!(totals.rescheduling, find(&deltas, "RES").total);
    assert!(totals.rescheduling > 0, "{totals:?}");
    assert_eq!(totals.get(IpiKind::FunctionCall), totals.function_call);
}

#[test]
fn lines_that_come_and_go() {
    let before = "   CPU0 CPU1\n 24: 5 6 IO-APIC 5-edge ACPI:Ged\n 25: 1 1 IO-APIC 6-edge gone\nRES: 10 20 Rescheduling interrupts\n";
    let after = "   CPU0 CPU1\n 24: 7 6 IO-APIC 5-edge ACPI:Ged\n 26: 3 4 IO-APIC 4-edge new\nRES: 11 29 Rescheduling interrupts\n";
    let deltas = delta(&parse(before).unwrap(), &parse(after).unwrap()).unwrap();
    let got: Vec<(&str, u64)> = deltas.iter().map(|d| (d.name.as_str(), d.total)).collect();
    // In the order of `after`; "25" is gone, "26" counts from zero.
    assert_eq!(got, [("24", 2), ("26", 7), ("RES", 10)]);
}

#[test]
fn counters_going_backwards() {
    let sample = |res: &str| {
        parse(&format!(
            "   CPU0 CPU1\nRES: {res} Rescheduling interrupts\nERR: 3\n"
        ))
        .unwrap()
    };
    // A 32-bit counter that wrapped: 4294967000 -> 200 is 496 more.
    let wrapped = delta(&sample("4294967000 5"), &sample("200 6")).unwrap();
    assert_eq!(
        find(&wrapped, "RES").per_cpu,
        BTreeMap::from([(0, 496), (1, 1)])
    );
    // Anything else is an error naming the line and the CPU.
    let e = delta(&sample("1000 5"), &sample("500 6")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/proc/interrupts: RES on cpu0 went backwards from 1000 to 500"
    );
    let e = delta(&sample("1 5"), &sample("1 4294967296")).map(|_| ());
    assert!(e.is_ok(), "64-bit growth is growth: {e:?}");
    let e = delta(&sample("1 4294967296"), &sample("1 5")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/proc/interrupts: RES on cpu1 went backwards from 4294967296 to 5"
    );
    let err_line = |n: u64| parse(&format!("   CPU0 CPU1\nERR: {n}\n")).unwrap();
    let e = delta(&err_line(9), &err_line(3)).unwrap_err();
    assert_eq!(
        e.to_string(),
        "/proc/interrupts: ERR went backwards from 9 to 3"
    );
}

#[test]
fn machine_wide_line_with_one_cpu_online() {
    // With one CPU online, ERR looks like a per-CPU line; compared with a two-CPU
    // sample, its totals are compared.
    let one = parse("   CPU0\nERR: 4\n").unwrap();
    let two = parse("   CPU0 CPU1\nERR: 6\n").unwrap();
    let deltas = delta(&one, &two).unwrap();
    assert_eq!(find(&deltas, "ERR").total, 2);
    assert!(find(&deltas, "ERR").per_cpu.is_empty());
}

/// Reads this machine's file (slow-ish: real I/O, but only /proc).
#[test]
fn reads_this_machine() {
    let first = read(Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
    let second = read(Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!first.cpus.is_empty());
    let deltas = delta(&first, &second).unwrap_or_else(|e| panic!("{e}"));
    if cfg!(target_arch = "x86_64") {
        assert!(deltas.iter().any(|d| d.ipi == Some(IpiKind::Rescheduling)));
    }
}

#[test]
fn reader_errors_name_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = read(dir.path()).unwrap_err();
    assert_eq!(
        missing.to_string(),
        format!("cannot read {}/proc/interrupts", dir.path().display())
    );
    std::fs::create_dir(dir.path().join("proc")).unwrap();
    std::fs::write(dir.path().join("proc/interrupts"), "   CPU0\nRES 1\n").unwrap();
    let bad = read(dir.path()).unwrap_err();
    assert_eq!(
        bad.to_string(),
        format!(
            "{}/proc/interrupts line 2: no colon after the interrupt name: \"RES 1\"",
            dir.path().display()
        )
    );
}
