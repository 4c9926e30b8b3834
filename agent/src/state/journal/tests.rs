use super::*;

#[test]
fn entries_round_trip() {
    let cases = [
        Entry::CpuOnline { cpu: 3, was: true },
        Entry::CpuOnline { cpu: 1, was: false },
        Entry::Sysctl {
            key: "kernel/sched_autogroup_enabled".into(),
            was: "1".into(),
        },
        Entry::Cgroup {
            path: "/sys/fs/cgroup/cpu/farm/r1/workload".into(),
        },
        Entry::SubtreeControl {
            path: "/sys/fs/cgroup".into(),
            controller: "cpu".into(),
        },
        Entry::Process {
            pid: 4242,
            start_time: 99,
        },
    ];
    for e in cases {
        assert_eq!(Entry::parse(&e.to_line()), Ok(e.clone()), "{}", e.to_line());
    }
}

#[test]
fn foreign_paths_and_garbage_are_refused() {
    let cases = [
        ("sysctl kernel/panic 0", "allowed"),
        ("cgroup /etc", "ours"),
        ("cgroup /sys/fs/cgroup/cpu/user.slice", "ours"),
        ("cgroup relative/sys/fs/cgroup/farm/x", "ours"),
        ("cpu-online one 1", "number"),
        ("cpu-online 1 2", "0 or 1"),
        ("subtree-control /etc cpu", "outside"),
        ("rm -rf /", "unknown"),
    ];
    for (line, want) in cases {
        let err = Entry::parse(line).unwrap_err();
        assert!(err.contains(want), "{line}: {err}");
    }
}

/// A fake /sys and /proc: cpu1 online, autogroup 1.
fn fake_root() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let cpu = dir.path().join("sys/devices/system/cpu/cpu1");
    fs::create_dir_all(&cpu).unwrap();
    fs::write(cpu.join("online"), "1\n").unwrap();
    let k = dir.path().join("proc/sys/kernel");
    fs::create_dir_all(&k).unwrap();
    fs::write(k.join("sched_autogroup_enabled"), "1\n").unwrap();
    dir
}

#[test]
fn restore_undoes_in_reverse_and_empties_the_journal() {
    let root = fake_root();
    let jpath = root.path().join("state/journal");
    let mut j = Journal::open(&jpath, root.path()).unwrap();
    // cpu1 is taken offline, then autogroup switched off, as a run would.
    j.record(&Entry::CpuOnline { cpu: 1, was: true }).unwrap();
    fs::write(cpu_online_path(root.path(), 1), "0").unwrap();
    j.record(&Entry::Sysctl {
        key: SYSCTLS[0].into(),
        was: "1".into(),
    })
    .unwrap();
    fs::write(sysctl_path(root.path(), SYSCTLS[0]), "0").unwrap();
    // A fresh handle, as after a crash.
    drop(j);
    let mut j = Journal::open(&jpath, root.path()).unwrap();
    assert_eq!(j.entries().unwrap().len(), 2);
    assert_eq!(j.restore().unwrap(), 2);
    assert_eq!(
        fs::read_to_string(cpu_online_path(root.path(), 1))
            .unwrap()
            .trim(),
        "1"
    );
    assert_eq!(
        fs::read_to_string(sysctl_path(root.path(), SYSCTLS[0]))
            .unwrap()
            .trim(),
        "1"
    );
    assert!(j.is_empty().unwrap());
    // Restoring again is harmless.
    assert_eq!(j.restore().unwrap(), 0);
}

#[test]
fn a_torn_last_line_is_ignored_but_a_bad_middle_line_is_an_error() {
    let root = fake_root();
    let jpath = root.path().join("journal");
    fs::write(&jpath, "cpu-online 1 1\ncpu-onl").unwrap();
    let j = Journal::open(&jpath, root.path()).unwrap();
    assert_eq!(
        j.entries().unwrap(),
        vec![Entry::CpuOnline { cpu: 1, was: true }]
    );
    fs::write(&jpath, "bogus\ncpu-online 1 1\n").unwrap();
    let err = j.entries().unwrap_err().to_string();
    assert!(err.contains(":1:") && err.contains("bogus"), "{err}");
}

#[test]
fn start_time_is_read_past_a_comm_with_spaces_and_parens() {
    let root = tempfile::tempdir().unwrap();
    let p = root.path().join("proc/77");
    fs::create_dir_all(&p).unwrap();
    let fields: Vec<String> = (4..=52).map(|i| i.to_string()).collect();
    fs::write(
        p.join("stat"),
        format!("77 (a (b) c) S {}", fields.join(" ")),
    )
    .unwrap();
    // Field 22 is the start time.
    assert_eq!(process_start_time(root.path(), 77), Some(22));
    assert_eq!(process_start_time(root.path(), 78), None);
}
