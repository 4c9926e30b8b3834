use super::*;

#[test]
fn refuses_what_it_cannot_do() {
    let cases = [
        (0, 1, 1),
        (1, 0, 1),
        (1, 1, 0),
        (1, usize::MAX, 1),
        (usize::MAX, 1, 1),
    ];
    for (instances, size_mb, ntimes) in cases {
        let error = run(instances, size_mb, ntimes).expect_err("refused");
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "{instances} instances of {size_mb} MiB, {ntimes} times"
        );
    }
}

#[test]
fn refuses_more_memory_than_is_available() {
    // (bytes required, /proc/meminfo text, refused)
    let cases = [
        (MIB, "MemTotal: 4096 kB\nMemAvailable:    2048 kB\n", false),
        (2 * MIB, "MemAvailable: 2048 kB\n", false),
        (2 * MIB + 1, "MemAvailable: 2048 kB\n", true),
        (usize::MAX, "MemAvailable: 0 kB\n", true),
        // No `MemAvailable` (before Linux 3.14) or an unreadable one: the
        // allocation itself is the only check left.
        (usize::MAX, "MemTotal: 4096 kB\nMemFree: 2048 kB\n", false),
        (usize::MAX, "MemAvailable: lots\n", false),
        (usize::MAX, "", false),
    ];
    for (required, meminfo, refused) in cases {
        let outcome = check_memory(required, meminfo);
        assert_eq!(outcome.is_err(), refused, "{required} bytes, {meminfo:?}");
        if let Err(error) = outcome {
            assert_eq!(error.kind(), io::ErrorKind::OutOfMemory);
        }
    }
}

#[test]
fn expects_what_stream_computes() {
    // Each repetition multiplies `a` by 15: c = a, b = 3a, c = 4a, a = 15a.
    let cases = [
        (0, (1.0, 2.0, 0.0)),
        (1, (15.0, 3.0, 4.0)),
        (2, (225.0, 45.0, 60.0)),
    ];
    for (ntimes, (a, b, c)) in cases {
        assert_eq!(expected(ntimes), Values { a, b, c }, "{ntimes} repetitions");
    }
}

#[test]
fn reports_aggregates_then_each_instance() {
    let instance = |runtime_ms, triad_ms| Instance {
        runtime: Duration::from_millis(runtime_ms),
        best: [
            Duration::from_millis(1),
            Duration::from_millis(1),
            Duration::from_millis(1),
            Duration::from_millis(triad_ms),
        ],
        array_bytes: 1_000_000,
    };
    let outcome = Outcome {
        instances: vec![instance(500, 3), instance(250, 6)],
    };
    let lines: Vec<String> = outcome.metrics().iter().map(Metric::to_line).collect();
    // Triad moves three arrays of 1 MB: 3 MB in 3 ms is 1000 MB/s.
    assert_eq!(
        lines,
        [
            "metric sum_inv_runtime 6 1/s higher",
            "metric best_triad_mbs 1500 MB/s higher",
            "metric instance0_triad_mbs 1000 MB/s higher",
            "metric instance0_runtime_s 0.5 s lower",
            "metric instance1_triad_mbs 500 MB/s higher",
            "metric instance1_runtime_s 0.25 s lower",
        ]
    );
}

#[test]
fn a_small_run_reports_sane_rates() {
    // (instances, MiB per array, repetitions)
    let cases = [(1, 1, 1), (2, 1, 3)];
    for (instances, size_mb, ntimes) in cases {
        let outcome = run(instances, size_mb, ntimes).expect("stream runs");
        assert_eq!(outcome.instances.len(), instances);
        for instance in &outcome.instances {
            assert_eq!(instance.array_bytes, size_mb * MIB);
            for kernel in Kernel::ALL {
                let rate = instance.rate_mbs(kernel);
                assert!(rate.is_finite() && rate > 0.0, "{} {rate}", kernel.name());
            }
        }
        let metrics = outcome.metrics();
        assert_eq!(metrics.len(), 2 + 2 * instances);
        assert!(
            metrics.iter().all(|m| m.value.is_finite() && m.value > 0.0),
            "{metrics:?}"
        );
    }
}
