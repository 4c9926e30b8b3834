use super::*;

#[test]
fn features_parse_as_the_kernel_writes_them() {
    let f: SchedFeature = "NO_DELAY_DEQUEUE".parse().unwrap();
    assert_eq!((f.name(), f.on()), ("DELAY_DEQUEUE", false));
    assert_eq!(f.to_string(), "NO_DELAY_DEQUEUE");
    let f: SchedFeature = "HRTICK".parse().unwrap();
    assert_eq!((f.name(), f.on()), ("HRTICK", true));
    for bad in ["", "NO_", "hrtick", "HR TICK", "1HRTICK", "HRTICK;reboot"] {
        let e = bad.parse::<SchedFeature>().unwrap_err().to_string();
        assert!(e.starts_with("bad sched feature `"), "{bad}: {e}");
    }
    let long = "A".repeat(100);
    let e = long.parse::<SchedFeature>().unwrap_err().to_string();
    assert!(e.len() < 140, "quotes a prefix only: {e}");
    assert_eq!(
        SchedFeatures::parse(&["HRTICK", "NO_HRTICK"])
            .unwrap_err()
            .to_string(),
        "sched feature `HRTICK` is given twice"
    );
    let fs = SchedFeatures::parse(&["NO_RUN_TO_PARITY", "HRTICK"]).unwrap();
    assert_eq!(fs.words(), ["NO_RUN_TO_PARITY", "HRTICK"]);
    let many: Vec<String> = (0..65).map(|i| format!("F{i}")).collect();
    assert_eq!(
        SchedFeatures::parse(&many).unwrap_err().to_string(),
        "more than 64 sched features"
    );
}

#[test]
fn tunables_are_named_and_bounded() {
    let t = SchedTunables::parse(&["migration_cost_ns=500000", "base_slice_ns=3000000"]).unwrap();
    // In the tunables' own order, whatever the order given.
    assert_eq!(
        t.words(),
        ["base_slice_ns=3000000", "migration_cost_ns=500000"]
    );
    assert_eq!(
        SchedTunables::parse(&["base_slice_ns=10"])
            .unwrap_err()
            .to_string(),
        "base_slice_ns 10 is out of range 100000..=100000000"
    );
    let e = SchedTunables::parse(&["sched_nr_latency=8"])
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("unknown sched tunable `sched_nr_latency` (known: base_slice_ns, "),
        "{e}"
    );
    assert_eq!(
        SchedTunables::parse(&["nr_migrate"])
            .unwrap_err()
            .to_string(),
        "bad sched tunable `nr_migrate`: expected `name=value`, the value a whole number"
    );
    assert_eq!(
        SchedTunables::parse(&["nr_migrate=8", "nr_migrate=9"])
            .unwrap_err()
            .to_string(),
        "sched tunable `nr_migrate` is given twice"
    );
    for t in Tunable::ALL {
        assert_eq!(t.as_str().parse::<Tunable>(), Ok(t));
    }
}

#[test]
fn numa_balancing_is_0_1_or_2() {
    assert_eq!(NumaBalancing::try_from(2), Ok(NumaBalancing::MemoryTiering));
    assert_eq!(
        NumaBalancing::try_from(3).unwrap_err().to_string(),
        "numa_balancing 3 is out of range 0..=2"
    );
}

#[test]
fn cmdline_words_come_from_the_grammar() {
    for (word, canonical) in [
        ("isolcpus=1", "isolcpus=1"),
        ("isolcpus=nohz,domain,1-3", "isolcpus=nohz,domain,1-3"),
        ("isolcpus=2,3", "isolcpus=2-3"),
        ("nohz_full=1-3", "nohz_full=1-3"),
        ("preempt=full", "preempt=full"),
        ("relax_domain_level=2", "relax_domain_level=2"),
        ("nosmt", "nosmt"),
    ] {
        let w: CmdlineWord = word.parse().unwrap();
        assert_eq!(w.to_string(), canonical, "{word}");
        assert_eq!(canonical.parse::<CmdlineWord>().unwrap(), w);
    }
    for bad in [
        "console=ttyS0",
        "init=/bin/sh",
        "preempt=lazy",
        "isolcpus=nohz",
        "isolcpus=1 init=/bin/sh",
        "nosmt=1",
        "quiet",
    ] {
        let e = bad.parse::<CmdlineWord>().unwrap_err().to_string();
        assert!(e.starts_with("bad cmdline word `"), "{bad}: {e}");
    }
    assert_eq!(
        "relax_domain_level=9"
            .parse::<CmdlineWord>()
            .unwrap_err()
            .to_string(),
        "relax_domain_level 9 is out of range 0..=5"
    );
    assert_eq!(
        KernelCmdline::parse(&["isolcpus=1", "isolcpus=2"])
            .unwrap_err()
            .to_string(),
        "cmdline word `isolcpus` is given twice"
    );
}

#[test]
fn the_kernels_features_file() {
    // In the form of Debian 6.12's (its features, in its order).
    let text = "PLACE_LAG PLACE_DEADLINE_INITIAL PLACE_REL_DEADLINE RUN_TO_PARITY \
PREEMPT_SHORT NO_NEXT_BUDDY CACHE_HOT_BUDDY DELAY_DEQUEUE DELAY_ZERO WAKEUP_PREEMPTION \
NO_HRTICK NO_HRTICK_DL NO_DOUBLE_TICK NONTASK_CAPACITY TTWU_QUEUE SIS_UTIL NO_WARN_DOUBLE_CLOCK \
RT_PUSH_IPI NO_RT_RUNTIME_SHARE NO_LB_MIN ATTACH_AGE_LOAD WA_IDLE WA_WEIGHT WA_BIAS UTIL_EST \
LATENCY_WARN HZ_BW \n";
    let f = parse_features_file(text).unwrap();
    assert_eq!(f.len(), 27);
    assert_eq!(f[5].to_string(), "NO_NEXT_BUDDY");
    assert!(!f[5].on());
    assert!(parse_features_file("HRTICK rm -rf").is_err());
}
