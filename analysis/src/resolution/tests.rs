use super::*;
use crate::Direction;
use crate::compare::{self, Comparison, Verdict};

/// `n` values from `low` to `high`, evenly.
fn side(low: f64, high: f64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| low + (high - low) * i as f64 / (n - 1) as f64)
        .collect()
}

fn comparison(verdict: Verdict, interval: (f64, f64), n: (usize, usize)) -> Comparison {
    Comparison {
        verdict,
        ratio: 1.8,
        ci_low: 0.9,
        ci_high: 3.0,
        p_value: 0.2,
        n_baseline: n.0,
        n_candidate: n.1,
        findings: Vec::new(),
        shift: 1.6,
        shift_low: interval.0,
        shift_high: interval.1,
    }
}

/// Issue 35's host: a 2-vCPU TCG guest on a 2-CPU host whose load was 5-7,
/// and which ran 4.6 to 7.9 times slower than its host.
fn tcg_on_busy_host() -> Conditions {
    Conditions {
        load: Some(Range {
            low: 5.1,
            high: 7.0,
        }),
        host_cpus: Some(Range {
            low: 2.0,
            high: 2.0,
        }),
        guest_cpus: Some(2),
        executor: Some("tcg".into()),
        steal_pct: Some(Range {
            low: 0.0,
            high: 0.0,
        }),
        slowdown: Some(Range {
            low: 4.6,
            high: 7.9,
        }),
    }
}

struct Case {
    what: &'static str,
    verdict: Verdict,
    interval: (f64, f64),
    n: (usize, usize),
    baseline: (f64, f64),
    candidate: (f64, f64),
    min_effect: f64,
    max_runs: u32,
    conditions: Conditions,
    line: Option<&'static str>,
}

#[test]
fn the_line_says_why_with_the_figures_only_when_the_spread_is_the_reason() {
    let quiet_host = Conditions {
        load: Some(Range {
            low: 1.04,
            high: 1.04,
        }),
        host_cpus: Some(Range {
            low: 8.0,
            high: 8.0,
        }),
        executor: Some("host".into()),
        ..Default::default()
    };
    let kvm_stolen = Conditions {
        load: Some(Range {
            low: 3.0,
            high: 3.4,
        }),
        host_cpus: Some(Range {
            low: 4.0,
            high: 16.0,
        }),
        guest_cpus: Some(4),
        executor: Some("kvm".into()),
        steal_pct: Some(Range {
            low: 2.5,
            high: 12.3,
        }),
        // About the host's speed: nothing said of it.
        slowdown: Some(Range {
            low: 1.02,
            high: 1.31,
        }),
    };
    let cases = [
        Case {
            what: "issue 35: tenfold runs in a TCG guest as wide as its busy host",
            verdict: Verdict::Inconclusive,
            interval: (0.92, 3.03),
            n: (15, 15),
            baseline: (0.68, 6.56),
            candidate: (0.93, 13.3),
            min_effect: 0.02,
            max_runs: 15,
            conditions: tcg_on_busy_host(),
            // ln(3.03/0.92) / ln(1.02/0.98) = 29.79; 15 · 29.79² = 13,316.
            line: Some(
                "runs vary ×9.65 (0.680–6.56 s) in the baseline, ×14.3 (0.930–13.3 s) in the \
                 candidate: too much to resolve ±2% with 15 runs a side (about 13,316 would, \
                 beyond the 1,000 a cell may have); the host's load average was 5.1–7.0 on 2 \
                 CPUs during the runs; the guest ran ×4.6–7.9 slower than the host under tcg; \
                 might help: a guest with fewer vCPUs than the host's 2 CPUs (it had 2, under \
                 tcg), a quieter host",
            ),
        },
        Case {
            what: "noisy host runs that more runs would resolve: no vCPU or host advice",
            verdict: Verdict::Inconclusive,
            interval: (0.95, 1.12),
            n: (10, 10),
            baseline: (0.8, 1.25),
            candidate: (0.85, 1.4),
            min_effect: 0.02,
            max_runs: 30,
            conditions: quiet_host,
            // ln(1.12/0.95) / ln(1.02/0.98) = 4.115; 10 · 4.115² = 169.3.
            line: Some(
                "runs vary ×1.56 (0.800–1.25 s) in the baseline, ×1.65 (0.850–1.40 s) in the \
                 candidate: too much to resolve ±2% with 10 runs a side (about 170 would); the \
                 host's load average was 1.0 on 8 CPUs during the runs; might help: more runs \
                 (max_runs in [verdict], now 30)",
            ),
        },
        Case {
            what: "the same interval against a 5% band is within twice its width",
            verdict: Verdict::Inconclusive,
            interval: (0.95, 1.12),
            n: (10, 10),
            baseline: (0.8, 1.25),
            candidate: (0.85, 1.4),
            min_effect: 0.05,
            max_runs: 30,
            conditions: Conditions::default(),
            line: None,
        },
        Case {
            what: "tight runs with an effect near the minimum: the width is not the reason",
            verdict: Verdict::Inconclusive,
            interval: (1.01, 1.03),
            n: (10, 10),
            baseline: (0.99, 1.01),
            candidate: (1.01, 1.03),
            min_effect: 0.02,
            max_runs: 30,
            conditions: tcg_on_busy_host(),
            line: None,
        },
        Case {
            what: "a decided verdict needs no why, however wide",
            verdict: Verdict::Regression,
            interval: (1.5, 4.0),
            n: (15, 15),
            baseline: (0.68, 6.56),
            candidate: (2.0, 30.0),
            min_effect: 0.02,
            max_runs: 15,
            conditions: tcg_on_busy_host(),
            line: None,
        },
        Case {
            what: "too few runs to bound the interval: their number is the reason",
            verdict: Verdict::Inconclusive,
            interval: (0.0, f64::INFINITY),
            n: (2, 2),
            baseline: (0.68, 6.56),
            candidate: (0.93, 13.3),
            min_effect: 0.02,
            max_runs: 15,
            conditions: tcg_on_busy_host(),
            line: None,
        },
        Case {
            what: "a KVM guest that lost time to steal on hosts of 4 and 16 CPUs",
            verdict: Verdict::Inconclusive,
            interval: (0.9, 1.3),
            n: (12, 20),
            baseline: (1.95, 3.1),
            candidate: (2.1, 3.3),
            min_effect: 0.02,
            max_runs: 0,
            conditions: kvm_stolen,
            // ln(1.3/0.9) / ln(1.02/0.98) = 9.19; 15 · 9.19² = 1,268 (15:
            // the harmonic mean of 12 and 20).
            line: Some(
                "runs vary ×1.59 (1.95–3.10 s) in the baseline, ×1.57 (2.10–3.30 s) in the \
                 candidate: too much to resolve ±2% with 12 baseline and 20 candidate runs \
                 (about 1,268 would, beyond the 1,000 a cell may have); the host's load average \
                 was 3.0–3.4 on 4–16 CPUs during the runs; the guest lost 2.5–12.3% of its CPU \
                 time to steal; might help: a guest with fewer vCPUs than the host's 4 CPUs (it \
                 had 4, under kvm)",
            ),
        },
        Case {
            what: "TCG guests on a quiet host, of mixed executors: the slowdown is said",
            verdict: Verdict::Inconclusive,
            interval: (0.9, 1.3),
            n: (10, 10),
            baseline: (1.95, 3.1),
            candidate: (2.1, 3.3),
            min_effect: 0.02,
            max_runs: 30,
            conditions: Conditions {
                load: Some(Range {
                    low: 1.9,
                    high: 1.9,
                }),
                host_cpus: Some(Range {
                    low: 8.0,
                    high: 8.0,
                }),
                guest_cpus: Some(2),
                executor: None,
                steal_pct: None,
                slowdown: Some(Range {
                    low: 6.34,
                    high: 8.42,
                }),
            },
            // ln(1.3/0.9) / ln(1.02/0.98) = 9.19; 10 · 9.19² = 845.
            line: Some(
                "runs vary ×1.59 (1.95–3.10 s) in the baseline, ×1.57 (2.10–3.30 s) in the \
                 candidate: too much to resolve ±2% with 10 runs a side (about 845 would); the \
                 host's load average was 1.9 on 8 CPUs during the runs; the guest ran ×6.3–8.4 \
                 slower than the host; might help: more runs (max_runs in [verdict], now 30)",
            ),
        },
        Case {
            what: "a slowdown alone, the same in every run, in whole times",
            verdict: Verdict::Inconclusive,
            interval: (0.9, 1.3),
            n: (10, 10),
            baseline: (1.95, 3.1),
            candidate: (2.1, 3.3),
            min_effect: 0.02,
            max_runs: 0,
            conditions: Conditions {
                executor: Some("tcg".into()),
                slowdown: Some(Range {
                    low: 12.2,
                    high: 12.4,
                }),
                ..Default::default()
            },
            line: Some(
                "runs vary ×1.59 (1.95–3.10 s) in the baseline, ×1.57 (2.10–3.30 s) in the \
                 candidate: too much to resolve ±2% with 10 runs a side (about 845 would); the \
                 guest ran ×12 slower than the host under tcg; might help: more runs (max_runs \
                 in [verdict])",
            ),
        },
        Case {
            what: "values around zero, runs recorded nothing of their host",
            verdict: Verdict::Inconclusive,
            interval: (-0.5, 1.5),
            n: (10, 10),
            baseline: (-3.0, 4.0),
            candidate: (-2.5, 6.0),
            min_effect: 0.02,
            max_runs: 30,
            conditions: Conditions::default(),
            // (1.5 + 0.5) / 0.04 = 50; 10 · 50² = 25,000.
            line: Some(
                "runs vary from -3 to 4 s in the baseline, from -2.50 to 6 s in the candidate: \
                 too much to resolve ±2% with 10 runs a side (about 25,000 would, beyond the \
                 1,000 a cell may have)",
            ),
        },
    ];
    for case in cases {
        let c = comparison(case.verdict, case.interval, case.n);
        let (baseline, candidate) = (
            side(case.baseline.0, case.baseline.1, case.n.0),
            side(case.candidate.0, case.candidate.1, case.n.1),
        );
        let q = Question {
            comparison: &c,
            baseline: &baseline,
            candidate: &candidate,
            unit: "s",
            min_effect: case.min_effect,
            max_runs: case.max_runs,
            runs_limit: 1000,
        };
        assert_eq!(
            why_undecided(&q, &case.conditions).as_deref(),
            case.line,
            "{}",
            case.what
        );
    }
}

/// The comparison's own interval, not a hand-made one: tenfold runs on both
/// sides are far beyond ±2%; runs within ±1% with the same medians are
/// decided (no change) and get no line.
#[test]
fn a_real_comparison_of_tenfold_runs_gets_the_line_and_tight_runs_do_not() {
    // Log-spaced from 0.68 to 6.56 s, and from 0.93 to 13.3 s, shuffled
    // alike (the comparison sorts them anyway).
    let spread = |low: f64, high: f64| -> Vec<f64> {
        (0..15)
            .map(|i| low * (high / low).powf(f64::from((i * 7) % 15) / 14.0))
            .collect()
    };
    let baseline = spread(0.68, 6.56);
    let candidate = spread(0.93, 13.3);
    let options = compare::Options::default();
    let c = compare::compare(&baseline, &candidate, Direction::LowerIsBetter, &options).unwrap();
    assert_eq!(c.verdict, Verdict::Inconclusive);
    let q = Question {
        comparison: &c,
        baseline: &baseline,
        candidate: &candidate,
        unit: "s",
        min_effect: options.min_effect,
        max_runs: 15,
        runs_limit: 1000,
    };
    let b = beyond(&q).unwrap();
    assert!(b.width_ratio > 20.0, "{b:?}");
    let line = why_undecided(&q, &tcg_on_busy_host()).unwrap();
    assert!(
        line.starts_with(
            "runs vary ×9.65 (0.680–6.56 s) in the baseline, ×14.3 (0.930–13.3 s) in the \
             candidate: too much to resolve ±2% with 15 runs a side (about "
        ),
        "{line}"
    );

    let tight = |median: f64| -> Vec<f64> {
        (0..15)
            .map(|i| median * (1.0 + 0.01 * (f64::from((i * 7) % 15) / 7.0 - 1.0)))
            .collect()
    };
    let (baseline, candidate) = (tight(1.0), tight(1.0));
    let c = compare::compare(&baseline, &candidate, Direction::LowerIsBetter, &options).unwrap();
    assert_eq!(c.verdict, Verdict::NoChange);
    let q = Question {
        comparison: &c,
        baseline: &baseline,
        candidate: &candidate,
        ..q
    };
    assert_eq!(beyond(&q), None);
    assert_eq!(why_undecided(&q, &tcg_on_busy_host()), None);
}

#[test]
fn ranges_skip_what_is_not_a_number() {
    assert_eq!(Range::of([]), None);
    assert_eq!(
        Range::of([3.0, f64::NAN, 1.5, 2.0]),
        Some(Range {
            low: 1.5,
            high: 3.0
        })
    );
}
