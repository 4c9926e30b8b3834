use super::*;

#[test]
fn refuses_what_it_cannot_do() {
    let cases = [
        (0, 1.0, 16),
        (1, 1.0, 0),
        (1, -1.0, 16),
        (1, f64::NAN, 16),
        (1, f64::INFINITY, 16),
    ];
    for (threads, seconds, tables) in cases {
        let error = run(threads, seconds, tables).expect_err("refused");
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "{threads} threads, {seconds} s, {tables} tables"
        );
    }
}

#[test]
fn buckets_hold_their_values_closely() {
    let values = [
        0,
        1,
        31,
        32,
        63,
        64,
        65,
        1000,
        123_456_789,
        1 << 40,
        (1 << 40) - 1,
        u64::MAX,
    ];
    for value in values {
        let index = bucket(value);
        assert!(index < BUCKETS, "{value}");
        let (low, width) = bounds(index);
        assert!(
            low <= value && value - low < width,
            "{value} in {low}+{width}"
        );
        assert!(width == 1 || width <= low / 32, "{value}: {low}+{width}");
    }
}

#[test]
fn percentiles_are_nearest_rank_midpoints() {
    let one_to_a_hundred: Vec<u64> = (1..=100).collect();
    // (values, percent, expected): values below 64 have buckets of width 1;
    // 64..128 of width 2, so 99 is in 98..=99 and reported as 98.5.
    let cases: &[(&[u64], f64, Option<f64>)] = &[
        (&[], 50.0, None),
        (&[7], 50.0, Some(7.0)),
        (&[7], 99.0, Some(7.0)),
        (&[1, 2, 3, 4], 50.0, Some(2.0)),
        (&[1, 2, 3, 4], 51.0, Some(3.0)),
        (&[1, 2, 3, 4], 100.0, Some(4.0)),
        (&one_to_a_hundred, 50.0, Some(50.0)),
        (&one_to_a_hundred, 95.0, Some(94.5)),
        (&one_to_a_hundred, 99.0, Some(98.5)),
        (&[1_000_000; 3], 99.0, Some(999_424.0 + 16_383.0 / 2.0)),
    ];
    for (values, percent, expected) in cases {
        let mut histogram = Histogram::new();
        for value in *values {
            histogram.record(*value);
        }
        assert_eq!(
            histogram.percentile(*percent),
            *expected,
            "p{percent} of {values:?}"
        );
    }
}

#[test]
fn merged_histograms_count_both() {
    let (mut a, mut b) = (Histogram::new(), Histogram::new());
    a.record(1);
    b.record(3);
    b.record(3);
    a.merge(&b);
    assert_eq!(a.percentile(33.0), Some(1.0));
    assert_eq!(a.percentile(34.0), Some(3.0));
}

#[test]
fn reports_throughput_and_latency_in_ms() {
    let mut latency = Histogram::new();
    // Below 64 ns every value has a bucket of its own.
    for nanos in [16, 32, 48, 63] {
        latency.record(nanos);
    }
    let outcome = Outcome {
        transactions: 300,
        elapsed: Duration::from_millis(1500),
        latency,
    };
    let lines: Vec<String> = outcome.metrics().iter().map(Metric::to_line).collect();
    assert_eq!(
        lines,
        [
            "metric tps 200 txn/s higher",
            "metric latency_p50_ms 0.000032 ms lower",
            "metric latency_p95_ms 0.000063 ms lower",
            "metric latency_p99_ms 0.000063 ms lower",
        ]
    );
}

#[test]
fn a_short_run_commits_transactions() {
    // (threads, tables)
    for (threads, tables) in [(1, 1), (2, 16), (5, 2)] {
        let outcome = run(threads, 0.2, tables).expect("oltp runs");
        assert!(outcome.transactions > 0, "{outcome:?}");
        let metrics = outcome.metrics();
        let values: Vec<f64> = metrics.iter().map(|m| m.value).collect();
        let [tps, p50, p95, p99] = values[..] else {
            panic!("{metrics:?}");
        };
        assert!(tps > 0.0 && p50 > 0.0, "{metrics:?}");
        assert!(p50 <= p95 && p95 <= p99, "{metrics:?}");
    }
}
