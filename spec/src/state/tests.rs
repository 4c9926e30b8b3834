use super::*;

fn strings(f: impl FnOnce(&mut StateStrings<'static>)) -> StateStrings<'static> {
    let mut s = StateStrings {
        name: "s",
        ..Default::default()
    };
    f(&mut s);
    s
}

fn check(s: StateStrings<'static>, expect: Result<&str, (&str, &str)>) {
    match (MachineState::from_strings(s), expect) {
        (Ok(state), Ok(kinds)) => {
            let got: Vec<&str> = state.kinds().iter().map(|k| k.as_str()).collect();
            assert_eq!(got.join(","), kinds, "{s:?}");
            // Round trip through the strings.
            let back = state.to_strings();
            assert_eq!(MachineState::from_strings(back.as_strings()), Ok(state));
        }
        (Err(e), Err((field, why))) => {
            assert_eq!((e.field(), e.to_string().as_str()), (field, why), "{s:?}");
        }
        (got, expect) => panic!("{s:?}: got {got:?}, expected {expect:?}"),
    }
}

#[test]
fn states() {
    check(strings(|_| {}), Ok(""));
    check(strings(|s| s.hotplug = "cycle:1"), Ok("hotplug"));
    check(
        strings(|s| {
            s.cgroup = "separate";
            s.cpu_weight = 50;
            s.cpu_max = "50000 100000";
            s.cpuset = "0-1";
            s.autogroup = Some(1);
            s.hotplug = "offline:1";
        }),
        Ok("hotplug,cgroup,autogroup"),
    );
    check(
        strings(|s| s.cgroup = "both"),
        Err((
            "cgroup",
            "unknown cgroup layout `both` (known: shared, separate)",
        )),
    );
    check(
        strings(|s| s.cpu_weight = 5),
        Err((
            "cgroup_cpu_weight",
            "cgroup_cpu_weight needs cgroup = \"shared\" or \"separate\" in the same state \
             (the limit is set on the run's cgroups)",
        )),
    );
    check(
        strings(|s| {
            s.cgroup = "shared";
            s.cpu_weight = 10_001;
        }),
        Err((
            "cgroup_cpu_weight",
            "cpu weight 10001 is out of range 1..=10000",
        )),
    );
    check(
        strings(|s| s.autogroup = Some(2)),
        Err(("autogroup", "autogroup 2 is out of range 0..=1")),
    );
    check(
        strings(|s| {
            s.cgroup = "shared";
            s.cpuset = "1-2";
            s.hotplug = "offline:1-3";
        }),
        Err((
            "cgroup_cpuset",
            "every CPU of `1-2` is offline during the run (hotplug = \"offline:...\" in the same \
             state): the cgroup would have no CPU to run on",
        )),
    );
    // A cycle brings the CPUs back before the run: the cpuset has them.
    check(
        strings(|s| {
            s.cgroup = "shared";
            s.cpuset = "1-2";
            s.hotplug = "cycle:1-3";
        }),
        Ok("hotplug,cgroup"),
    );
}
