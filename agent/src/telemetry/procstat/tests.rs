//! Fixtures are real files: `x86_kvm_2cpu*` from a farm host, `x86_qemu_4cpu*` from a
//! Debian 6.1 guest under QEMU TCG before and after cpu1 went offline, `s390x_tcg_2cpu`
//! from a Debian 6.1 s390x guest under TCG, whose cpu1 reports 129 years of system time
//! and 13 of steal: garbage that must parse, and that nothing here relies on.

use std::path::Path;

use super::{CpuTimes, ProcStat, delta, idle_seconds, parse, read, user_hz};

const X86_KVM: &str = include_str!("fixtures/x86_kvm_2cpu.txt");
const X86_KVM_LATER: &str = include_str!("fixtures/x86_kvm_2cpu_later.txt");
const X86_QEMU: &str = include_str!("fixtures/x86_qemu_4cpu.txt");
const X86_QEMU_CPU1_OFFLINE: &str = include_str!("fixtures/x86_qemu_4cpu_cpu1_offline.txt");
const S390X: &str = include_str!("fixtures/s390x_tcg_2cpu.txt");

/// `CpuTimes` from the ten columns in file order.
fn t(c: [u64; 10]) -> CpuTimes {
    CpuTimes::from(c)
}

fn check_parse(text: &str, total: [u64; 10], per_cpu: &[(u32, [u64; 10])]) {
    let got = parse(text).unwrap_or_else(|e| panic!("{e}"));
    let want = ProcStat {
        total: t(total),
        per_cpu: per_cpu.iter().map(|&(cpu, c)| (cpu, t(c))).collect(),
    };
    assert_eq!(got, want);
}

#[test]
fn parses_real_files() {
    check_parse(
        X86_KVM,
        [316462, 0, 79791, 107811, 1023, 0, 1810, 152, 0, 0],
        &[
            (0, [155379, 0, 40984, 55804, 236, 0, 975, 72, 0, 0]),
            (1, [161083, 0, 38807, 52006, 786, 0, 834, 79, 0, 0]),
        ],
    );
    check_parse(
        X86_QEMU_CPU1_OFFLINE,
        // The total still counts the offline cpu1.
        [8, 0, 488, 1059, 0, 0, 33, 0, 0, 0],
        &[
            (0, [1, 0, 194, 205, 0, 0, 7, 0, 0, 0]),
            (2, [0, 0, 95, 277, 0, 0, 8, 0, 0, 0]),
            (3, [3, 0, 142, 223, 0, 0, 7, 0, 0, 0]),
        ],
    );
    check_parse(
        S390X,
        [3, 0, 407125407194, 101, 0, 21, 9, 43234556103, 0, 0],
        &[
            (0, [1, 0, 474, 21, 0, 6, 4, 0, 0, 0]),
            (1, [1, 0, 407125406720, 80, 0, 15, 4, 43234556103, 0, 0]),
        ],
    );
    // A 2.6.18 kernel's eight columns; the missing guest columns read as zero.
    check_parse(
        "cpu  2255 34 2290 22625563 6290 127 456 0\ncpu0 1132 34 1441 11311718 3675 127 438 0\nintr 114930548 113199788 3 0 5 263\n",
        [2255, 34, 2290, 22625563, 6290, 127, 456, 0, 0, 0],
        &[(0, [1132, 34, 1441, 11311718, 3675, 127, 438, 0, 0, 0])],
    );
    // A column a future kernel might add is ignored.
    check_parse(
        "cpu  1 2 3 4 5 6 7 8 9 10 11\n",
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        &[],
    );
}

#[test]
fn parse_errors_name_the_line_and_its_content() {
    let cases: &[(&str, &str)] = &[
        (
            "intr 1 2\nctxt 5\n",
            "/proc/stat line 1: no \"cpu\" line: \"intr 1 2\\nctxt 5\\n\"",
        ),
        (
            "cpu  1 2 3 4\ncpu0 1 2 3\n",
            r#"/proc/stat line 2: expected at least 4 time columns, found 3: "cpu0 1 2 3""#,
        ),
        (
            "cpu  1 2 3 4\ncpu0 1 2 -3 4\n",
            r#"/proc/stat line 2: "-3" is not a tick count: "cpu0 1 2 -3 4""#,
        ),
        (
            "cpu  1 2 3 4\ncpux 1 2 3 4\n",
            r#"/proc/stat line 2: "cpux" is not cpu<N>: "cpux 1 2 3 4""#,
        ),
        (
            "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu0 1 2 3 4\n",
            r#"/proc/stat line 3: second line for cpu0: "cpu0 1 2 3 4""#,
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
fn deltas() {
    // cpu1 went offline in between: only CPUs online at both samples are compared.
    let d = delta(
        &parse(X86_QEMU).unwrap(),
        &parse(X86_QEMU_CPU1_OFFLINE).unwrap(),
    );
    assert_eq!(d.per_cpu.keys().copied().collect::<Vec<_>>(), [0, 2, 3]);
    assert_eq!(d.per_cpu[&0], t([0, 0, 12, 29, 0, 0, 2, 0, 0, 0]));
    assert_eq!(idle_seconds(&d.per_cpu[&0], 100), 0.29);
    assert_eq!(d.total, t([4, 0, 42, 133, 0, 0, 9, 0, 0, 0]));

    // A farm host, busy: no idle time at all between these two samples.
    let d = delta(&parse(X86_KVM).unwrap(), &parse(X86_KVM_LATER).unwrap());
    assert_eq!(d.per_cpu[&1], t([451, 0, 288, 0, 0, 0, 1, 0, 0, 0]));
    assert_eq!(idle_seconds(&d.per_cpu[&1], 100), 0.0);

    // iowait (and idle) may go backwards: the delta saturates at zero.
    let before = parse("cpu  0 0 0 100 50 0 0 0 0 0\ncpu0 0 0 0 100 50 0 0 0 0 0\n").unwrap();
    let after = parse("cpu  5 0 0 130 40 0 0 0 0 0\ncpu0 5 0 0 130 40 0 0 0 0 0\n").unwrap();
    let d = delta(&before, &after);
    assert_eq!(d.per_cpu[&0], t([5, 0, 0, 30, 0, 0, 0, 0, 0, 0]));
    // Idle is idle plus iowait.
    let with_iowait = t([0, 0, 0, 30, 20, 0, 0, 0, 0, 0]);
    assert_eq!(idle_seconds(&with_iowait, 100), 0.5);
    assert_eq!(idle_seconds(&with_iowait, 250), 0.2);
    assert_eq!(with_iowait.total(), 50);
}

#[test]
fn reads_this_machine() {
    let first = read(Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
    let second = read(Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
    assert!(!first.per_cpu.is_empty());
    let d = delta(&first, &second);
    assert_eq!(
        d.per_cpu.len(),
        first.per_cpu.len().min(second.per_cpu.len())
    );
    assert_eq!(user_hz(), 100);
}
