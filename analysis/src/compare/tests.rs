use super::adaptive;
use super::mann_whitney::{self, Method};
use super::*;
use proptest::prelude::*;

// ---- Generated data with a known truth -------------------------------------

fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

use crate::normal::draw as gauss;

/// `n` runs around `centre` with coefficient of variation `cv`.
fn normal(rng: &mut StdRng, n: usize, centre: f64, cv: f64) -> Vec<f64> {
    (0..n).map(|_| centre * (1.0 + cv * gauss(rng))).collect()
}

fn log_normal(rng: &mut StdRng, n: usize, centre: f64, sigma: f64) -> Vec<f64> {
    (0..n)
        .map(|_| centre * (sigma * gauss(rng)).exp())
        .collect()
}

fn verdict(baseline: &[f64], candidate: &[f64], direction: Direction) -> Verdict {
    compare(baseline, candidate, direction, &Options::default())
        .unwrap()
        .verdict
}

// ---- Mann-Whitney: exact distribution --------------------------------------

/// U of every one of the C(m+n, m) ways to split ranks 1..=m+n, counted.
fn brute_counts(m: usize, n: usize) -> Vec<i128> {
    let mut counts = vec![0i128; m * n + 1];
    for mask in 0u32..(1 << (m + n)) {
        if mask.count_ones() as usize != n {
            continue;
        }
        // Candidate = the set bits; U = pairs (baseline below candidate).
        let mut u = 0;
        let mut below = 0;
        for pos in 0..m + n {
            if mask & (1 << pos) != 0 {
                u += below;
            } else {
                below += 1;
            }
        }
        counts[u] += 1;
    }
    counts
}

#[test]
fn exact_distribution_matches_enumeration() {
    for m in 1..=7 {
        for n in 1..=7 {
            assert_eq!(
                mann_whitney::u_counts(m, n),
                brute_counts(m, n),
                "m={m} n={n}"
            );
        }
    }
}

#[test]
fn exact_counts_sum_to_binomial() {
    // C(100, 50), the largest total handled exactly.
    let c: i128 = mann_whitney::u_counts(50, 50).iter().sum();
    assert_eq!(c, 100_891_344_545_564_193_334_812_497_256);
    let c: i128 = mann_whitney::u_counts(3, 97).iter().sum();
    assert_eq!(c, 100 * 99 * 98 / 6);
}

#[test]
fn critical_values_match_published_tables() {
    // Largest U with P(U ≤ u) ≤ alpha, n = m = 3..=10, from the standard
    // tables (one-tailed 0.05 and 0.01; two-tailed 0.05 and 0.01).
    let tables: [(f64, [Option<u64>; 8]); 4] = [
        (
            0.05,
            [
                Some(0),
                Some(1),
                Some(4),
                Some(7),
                Some(11),
                Some(15),
                Some(21),
                Some(27),
            ],
        ),
        (
            0.025,
            [
                None,
                Some(0),
                Some(2),
                Some(5),
                Some(8),
                Some(13),
                Some(17),
                Some(23),
            ],
        ),
        (
            0.01,
            [
                None,
                None,
                Some(1),
                Some(3),
                Some(6),
                Some(9),
                Some(14),
                Some(19),
            ],
        ),
        (
            0.005,
            [
                None,
                None,
                Some(0),
                Some(2),
                Some(4),
                Some(7),
                Some(11),
                Some(16),
            ],
        ),
    ];
    for (alpha, row) in tables {
        for (i, want) in row.iter().enumerate() {
            let n = i + 3;
            assert_eq!(
                mann_whitney::lower_critical(n, n, alpha),
                *want,
                "n=m={n} alpha={alpha}"
            );
        }
    }
}

#[test]
fn exact_p_values_known_cases() {
    // Complete separation, 5 vs 5: one arrangement in C(10, 5) = 252.
    let b = [1.0, 2.0, 3.0, 4.0, 5.0];
    let c = [6.0, 7.0, 8.0, 9.0, 10.0];
    let t = mann_whitney::test(&b, &c);
    assert_eq!(t.method, Method::Exact);
    assert_eq!(t.u, 25.0);
    assert_eq!(t.p_greater, 1.0 / 252.0);
    assert_eq!(t.p_less, 1.0);
    assert_eq!(t.p_two_sided(), 2.0 / 252.0);
    // U = 1, 3 vs 3: P(U ≤ 1) = 2/20.
    let t = mann_whitney::test(&[1.0, 3.0, 4.0], &[2.0, 5.0, 6.0]);
    assert_eq!(t.u, 7.0);
    let t = mann_whitney::test(&[2.0, 5.0, 6.0], &[1.0, 3.0, 4.0]);
    assert_eq!(t.u, 2.0);
    assert!((t.p_less - 4.0 / 20.0).abs() < 1e-15, "{t:?}");
}

#[test]
fn normal_approximation_agrees_with_exact_for_large_samples() {
    let (m, n) = (50, 50);
    let counts = mann_whitney::u_counts(m, n);
    let all: i128 = counts.iter().sum();
    let mut worst: f64 = 0.0;
    for u in (0..=m * n).step_by(25) {
        let exact = counts[u..].iter().sum::<i128>() as f64 / all as f64;
        let (approx, _) = mann_whitney::normal(u as f64, m, n, 0.0);
        worst = worst.max((exact - approx).abs());
    }
    assert!(worst < 1e-3, "largest difference {worst}");
    // And in the tail that matters, relatively.
    let u = 1550;
    let exact = counts[u..].iter().sum::<i128>() as f64 / all as f64;
    let (approx, _) = mann_whitney::normal(u as f64, m, n, 0.0);
    assert!(
        exact < 0.02 && (approx / exact - 1.0).abs() < 0.05,
        "{exact} {approx}"
    );
}

#[test]
fn large_samples_use_the_approximation() {
    let mut r = rng(1);
    let b = normal(&mut r, 60, 100.0, 0.05);
    let c = normal(&mut r, 60, 103.0, 0.05);
    let t = mann_whitney::test(&b, &c);
    assert_eq!(t.method, Method::Normal);
    assert!(t.p_greater < 0.05, "{t:?}");
}

/// One-sided p-values by enumerating every split of the pooled values.
fn brute_with_ties(b: &[f64], c: &[f64]) -> (f64, f64) {
    let pooled: Vec<f64> = b.iter().chain(c).copied().collect();
    let (m, n) = (b.len(), c.len());
    let u_of = |cand: &[f64], base: &[f64]| -> f64 {
        let mut u = 0.0;
        for &y in cand {
            for &x in base {
                u += if y > x {
                    1.0
                } else if y == x {
                    0.5
                } else {
                    0.0
                };
            }
        }
        u
    };
    let observed = u_of(c, b);
    let (mut ge, mut le, mut all) = (0.0, 0.0, 0.0);
    for mask in 0u32..(1 << (m + n)) {
        if mask.count_ones() as usize != n {
            continue;
        }
        let (cand, base): (Vec<_>, Vec<_>) = (0..m + n).partition(|&i| mask & (1 << i) != 0);
        let cand: Vec<f64> = cand.iter().map(|&i| pooled[i]).collect();
        let base: Vec<f64> = base.iter().map(|&i| pooled[i]).collect();
        let u = u_of(&cand, &base);
        all += 1.0;
        if u >= observed - 1e-9 {
            ge += 1.0;
        }
        if u <= observed + 1e-9 {
            le += 1.0;
        }
    }
    (ge / all, le / all)
}

#[test]
fn exact_with_ties_matches_enumeration() {
    let cases: [(&[f64], &[f64]); 5] = [
        (&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 3.0, 4.0, 5.0]),
        (&[0.0, 0.0, 1.0, 1.0, 1.0, 2.0], &[1.0, 2.0, 2.0, 2.0]),
        (&[5.0, 5.0, 5.0], &[5.0, 5.0, 6.0, 7.0, 7.0, 4.0]),
        (&[3.0, 1.0, 2.0, 2.0, 9.0, 9.0, 9.0], &[9.0, 9.0, 1.0]),
        (&[1.0, 1.0], &[1.0, 1.0, 1.0]),
    ];
    for (b, c) in cases {
        let t = mann_whitney::test(b, c);
        assert_eq!(t.method, Method::ExactWithTies);
        let (ge, le) = brute_with_ties(b, c);
        assert!(
            (t.p_greater - ge).abs() < 1e-12,
            "{b:?} {c:?}: {t:?} vs {ge}"
        );
        assert!((t.p_less - le).abs() < 1e-12, "{b:?} {c:?}: {t:?} vs {le}");
    }
}

#[test]
fn exact_with_ties_reduces_to_exact_without_ties() {
    let mut r = rng(2);
    for (m, n) in [(4, 9), (10, 10), (13, 7)] {
        let b = normal(&mut r, m, 10.0, 0.1);
        let c = normal(&mut r, n, 10.5, 0.1);
        let exact = mann_whitney::test(&b, &c);
        assert_eq!(exact.method, Method::Exact);
        let ranks = mann_whitney::Ranks::of(&b, &c);
        let (g, l) = mann_whitney::exact_with_ties(&ranks, m, n);
        assert!((g - exact.p_greater).abs() < 1e-12 && (l - exact.p_less).abs() < 1e-12);
    }
}

// ---- Hodges-Lehmann shift and Moses interval -------------------------------

fn sorted_differences(x: &[f64], y: &[f64]) -> Vec<f64> {
    let mut d: Vec<f64> = y
        .iter()
        .flat_map(|&b| x.iter().map(move |&a| b - a))
        .collect();
    d.sort_by(f64::total_cmp);
    d
}

#[test]
fn kth_difference_matches_sorting() {
    let mut r = rng(3);
    for trial in 0..40 {
        let (m, n) = (2 + trial % 7, 2 + (trial * 3) % 11);
        let mut x: Vec<f64> = (0..m)
            .map(|_| (gauss(&mut r) * 4.0).round() / 2.0)
            .collect();
        let mut y: Vec<f64> = (0..n).map(|_| gauss(&mut r) * 3.0 - 1.0).collect();
        x.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        let d = sorted_differences(&x, &y);
        for k in 1..=d.len() {
            assert_eq!(
                shift::kth_difference(&x, &y, k as u64),
                d[k - 1],
                "k={k} {x:?} {y:?}"
            );
        }
    }
}

#[test]
fn hodges_lehmann_and_moses_interval() {
    let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
    let y = [3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5, 10.5];
    let d = sorted_differences(&x, &y);
    let s = shift::estimate(&x, &y, 0.05);
    assert_eq!(s.estimate, (d[31] + d[32]) / 2.0);
    assert_eq!(s.estimate, 2.5);
    // P(U ≤ 15) ≤ 0.05 for 8 vs 8: the interval runs from the 16th to the
    // 49th difference.
    assert_eq!((s.low, s.high), (d[15], d[48]));
    // Too few runs to bound the shift at all.
    let s = shift::estimate(&[1.0, 2.0], &[3.0, 4.0], 0.05);
    assert_eq!((s.low, s.high), (f64::NEG_INFINITY, f64::INFINITY));
}

#[test]
fn the_interval_is_the_tests_own() {
    // Without ties, the one-sided test rejects at alpha exactly when the
    // interval at 1 − 2·alpha lies above zero.
    let mut r = rng(4);
    for trial in 0..300 {
        let n = 5 + trial % 20;
        let mut x = normal(&mut r, n, 10.0, 0.05);
        let mut y = normal(
            &mut r,
            n + trial % 3,
            10.0 * (1.0 + 0.01 * (trial % 7) as f64),
            0.05,
        );
        x.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        let t = mann_whitney::test(&x, &y);
        let s = shift::estimate(&x, &y, 0.01);
        assert_eq!(
            t.p_greater <= 0.01,
            s.low > 0.0,
            "trial {trial}: {t:?} {s:?}"
        );
        assert_eq!(t.p_less <= 0.01, s.high < 0.0, "trial {trial}: {t:?} {s:?}");
    }
}

#[test]
fn approximate_critical_values_follow_the_exact_ones() {
    // At the exact limit the approximation, which takes over past it, is
    // off by one at most, two for very unequal sizes.
    for alpha in [0.01, 0.05, 0.1] {
        for (m, n) in [(50, 50), (30, 70), (10, 90)] {
            let exact = mann_whitney::lower_critical(m, n, alpha).unwrap() as i64;
            let approx = mann_whitney::lower_critical_normal(m, n, alpha).unwrap() as i64;
            assert!(
                (approx - exact).abs() <= 2,
                "{m} {n} {alpha}: {exact} {approx}"
            );
        }
    }
}

// ---- Verdicts --------------------------------------------------------------

#[test]
fn clear_changes_both_directions() {
    let mut r = rng(5);
    let base = normal(&mut r, 10, 100.0, 0.02);
    let slower = normal(&mut r, 10, 120.0, 0.02);
    let faster = normal(&mut r, 10, 80.0, 0.02);
    use Direction::*;
    assert_eq!(verdict(&base, &slower, LowerIsBetter), Verdict::Regression);
    assert_eq!(verdict(&base, &faster, LowerIsBetter), Verdict::Improvement);
    // A throughput going up is an improvement, down a regression.
    assert_eq!(
        verdict(&base, &slower, HigherIsBetter),
        Verdict::Improvement
    );
    assert_eq!(verdict(&base, &faster, HigherIsBetter), Verdict::Regression);

    let c = compare(&base, &slower, LowerIsBetter, &Options::default()).unwrap();
    assert!((c.ratio - 1.2).abs() < 0.03, "{c:?}");
    assert!(c.ci_low < c.ratio && c.ratio < c.ci_high, "{c:?}");
    assert!(c.ci_low > 1.1 && c.ci_high < 1.3, "{c:?}");
    assert!(c.shift_low > 1.1 && c.shift_high < 1.3, "{c:?}");
    assert!(c.p_value < 1e-4, "{c:?}");
    assert_eq!((c.n_baseline, c.n_candidate), (10, 10));
    assert!(c.findings.is_empty(), "{:?}", c.findings);
}

#[test]
fn identical_samples_are_no_change() {
    let constant = [20.0; 8];
    let c = compare(
        &constant,
        &constant,
        Direction::LowerIsBetter,
        &Options::default(),
    )
    .unwrap();
    assert_eq!(c.verdict, Verdict::NoChange);
    assert_eq!(
        (c.ratio, c.ci_low, c.ci_high, c.p_value),
        (1.0, 1.0, 1.0, 1.0)
    );
    assert!(c.findings.is_empty());

    let mut r = rng(6);
    let quiet = normal(&mut r, 20, 20.0, 0.005);
    assert_eq!(
        verdict(&quiet, &quiet, Direction::LowerIsBetter),
        Verdict::NoChange
    );
    assert_eq!(
        verdict(&quiet, &quiet, Direction::HigherIsBetter),
        Verdict::NoChange
    );
}

#[test]
fn tiny_noisy_samples_are_inconclusive() {
    let mut r = rng(7);
    for _ in 0..20 {
        let b = normal(&mut r, 3, 10.0, 0.05);
        let c = normal(&mut r, 3, 11.0, 0.05);
        // 3 vs 3 can never reach p < 0.01 (the least p is 1/20), nor bound
        // the shift within 2%.
        assert_eq!(
            verdict(&b, &c, Direction::LowerIsBetter),
            Verdict::Inconclusive
        );
    }
    let b = normal(&mut r, 10, 10.0, 0.05);
    let c = normal(&mut r, 10, 10.1, 0.05);
    assert_eq!(
        verdict(&b, &c, Direction::LowerIsBetter),
        Verdict::Inconclusive
    );
}

#[test]
fn small_significant_changes_are_no_change() {
    // 0.5% slower, measured precisely: real, significant, and below the
    // 2% minimum effect: no_change, not regression.
    let mut r = rng(8);
    let b = normal(&mut r, 200, 10.0, 0.01);
    let c = normal(&mut r, 200, 10.05, 0.01);
    let cmp = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert!(cmp.p_value < 0.01, "{cmp:?}");
    assert_eq!(cmp.verdict, Verdict::NoChange);

    // 5% slower against a 10% minimum effect, precisely measured.
    let b = normal(&mut r, 40, 10.0, 0.01);
    let c = normal(&mut r, 40, 10.5, 0.01);
    let options = Options {
        min_effect: 0.10,
        ..Options::default()
    };
    assert_eq!(
        compare(&b, &c, Direction::LowerIsBetter, &options)
            .unwrap()
            .verdict,
        Verdict::NoChange
    );
    // The same against 2%: a regression.
    assert_eq!(
        verdict(&b, &c, Direction::LowerIsBetter),
        Verdict::Regression
    );
}

#[test]
fn changes_near_the_minimum_effect_are_inconclusive() {
    // 2% slower at 5% noise with 10 runs: more runs could tell.
    let mut r = rng(9);
    let b = normal(&mut r, 10, 10.0, 0.05);
    let c = normal(&mut r, 10, 10.2, 0.05);
    assert_eq!(
        verdict(&b, &c, Direction::LowerIsBetter),
        Verdict::Inconclusive
    );
}

#[test]
fn more_runs_decide_what_was_inconclusive() {
    // What the coordinator relies on: an inconclusive comparison, given
    // more runs of the same sides, settles on the truth.
    let mut r = rng(19);
    let decide = |r: &mut StdRng, n: usize, slowdown: f64| {
        let b = normal(r, n, 100.0, 0.05);
        let c = normal(r, n, 100.0 * (1.0 + slowdown), 0.05);
        verdict(&b, &c, Direction::LowerIsBetter)
    };
    assert_eq!(decide(&mut r, 5, 0.05), Verdict::Inconclusive);
    assert_eq!(decide(&mut r, 60, 0.05), Verdict::Regression);
    assert_eq!(decide(&mut r, 10, 0.0), Verdict::Inconclusive);
    assert_eq!(decide(&mut r, 300, 0.0), Verdict::NoChange);
}

#[test]
fn zeros_and_negatives_are_compared_on_their_own_scale() {
    // Migration counts: mostly 0 in the baseline, 3–5 in the candidate.
    let b = [0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
    let c = [3.0, 4.0, 5.0, 3.0, 4.0, 4.0, 5.0, 3.0, 4.0, 4.0];
    let cmp = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert_eq!(cmp.verdict, Verdict::Regression);
    assert!(cmp.ratio.is_infinite());
    // The same counts again: every shift but 0 is ruled out.
    let same = compare(&b, &b, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert_eq!(same.verdict, Verdict::NoChange);
    // Twice as many runs with a migration: no longer sure.
    let more = [0.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0];
    let cmp = compare(&b, &more, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert_eq!(cmp.verdict, Verdict::Inconclusive);
    // Negative values (a signed difference metric).
    let b: Vec<f64> = (0..20).map(|i| -10.0 + 0.01 * i as f64).collect();
    let c: Vec<f64> = b.iter().map(|v| v + 3.0).collect();
    assert_eq!(
        verdict(&b, &c, Direction::LowerIsBetter),
        Verdict::Regression
    );
    assert_eq!(verdict(&b, &b, Direction::LowerIsBetter), Verdict::NoChange);
}

#[test]
fn power_smoke_test() {
    // The benchmark (examples/power.rs) measures this properly; here a quick
    // guard: 10 vs 10 at 5% noise, 10% slower, caught most of the time.
    let mut r = rng(10);
    let options = Options {
        resamples: 0,
        ..Options::default()
    };
    let trials = 200;
    let caught = (0..trials)
        .filter(|_| {
            let b = normal(&mut r, 10, 100.0, 0.05);
            let c = normal(&mut r, 10, 110.0, 0.05);
            compare(&b, &c, Direction::LowerIsBetter, &options)
                .unwrap()
                .verdict
                == Verdict::Regression
        })
        .count();
    assert!(caught >= trials * 85 / 100, "{caught} of {trials}");
}

#[test]
fn few_false_alarms_under_no_change() {
    let mut r = rng(11);
    let options = Options {
        resamples: 0,
        ..Options::default()
    };
    let trials = 1000;
    let mut alarms = 0;
    for i in 0..trials {
        let n = if i % 2 == 0 { 10 } else { 30 };
        let b = log_normal(&mut r, n, 100.0, 0.05);
        let c = log_normal(&mut r, n, 100.0, 0.05);
        let v = compare(&b, &c, Direction::LowerIsBetter, &options)
            .unwrap()
            .verdict;
        alarms += usize::from(v == Verdict::Regression);
    }
    assert!(alarms <= 20, "{alarms} false regressions in {trials}");
}

// ---- Findings --------------------------------------------------------------

#[test]
fn seed_003_spread_is_a_finding() {
    // GROUP runtimes: ~20 s in the baseline, anywhere from 30 to 432 s in
    // the candidate.
    let mut r = rng(12);
    let b = normal(&mut r, 10, 20.0, 0.02);
    let c: Vec<f64> = (0..10)
        .map(|_| 30.0 * (432.0f64 / 30.0).powf(r.random::<f64>()))
        .collect();
    let cmp = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert_eq!(cmp.verdict, Verdict::Regression);
    let spread: Vec<_> = cmp
        .findings
        .iter()
        .filter_map(|f| match f {
            Finding::Spread { ratio, p_value } => Some((*ratio, *p_value)),
            _ => None,
        })
        .collect();
    assert_eq!(spread.len(), 1, "{:?}", cmp.findings);
    let (ratio, p) = spread[0];
    assert!(ratio > 5.0 && p < 0.01, "{ratio} {p}");

    // And a spread change without any shift of the median is still found.
    let b = normal(&mut r, 30, 20.0, 0.02);
    let c = normal(&mut r, 30, 20.0, 0.20);
    let cmp = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert!(
        cmp.findings
            .iter()
            .any(|f| matches!(f, Finding::Spread { ratio, .. } if *ratio > 3.0)),
        "{:?}",
        cmp.findings
    );
    // A narrower candidate, the other way.
    let cmp = compare(&c, &b, Direction::LowerIsBetter, &Options::default()).unwrap();
    assert!(
        cmp.findings
            .iter()
            .any(|f| matches!(f, Finding::Spread { ratio, .. } if *ratio < 0.34)),
        "{:?}",
        cmp.findings
    );
}

#[test]
fn spread_rarely_fires_on_equal_spreads() {
    let mut r = rng(13);
    let trials = 1000;
    let mut fired = 0;
    for i in 0..trials {
        let n = [10, 20, 30][i % 3];
        // Same relative spread, with and without a 10% shift.
        let b = normal(&mut r, n, 100.0, 0.05);
        let c = if i % 2 == 0 {
            normal(&mut r, n, 110.0, 0.05)
        } else {
            log_normal(&mut r, n, 100.0, 0.05)
        };
        let mut x: Vec<f64> = b.iter().map(|v| v.ln()).collect();
        let mut y: Vec<f64> = c.iter().map(|v| v.ln()).collect();
        x.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        fired += usize::from(spread::find(&x, &y, 0.01).is_some());
    }
    assert!(fired <= 10, "{fired} in {trials}");
}

#[test]
fn seed_001_bimodality_is_a_finding() {
    // Instances alone on a node (~10 s) or sharing one (~16 s).
    let mut r = rng(14);
    let b = normal(&mut r, 20, 10.0, 0.02);
    let mut c = normal(&mut r, 12, 10.0, 0.02);
    c.extend(normal(&mut r, 8, 16.0, 0.02));
    let cmp = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    let modes: Vec<_> = cmp
        .findings
        .iter()
        .filter(|f| matches!(f, Finding::Bimodal { .. }))
        .collect();
    assert_eq!(modes.len(), 1, "{:?}", cmp.findings);
    let Finding::Bimodal {
        candidate,
        low,
        high,
        low_share,
    } = modes[0]
    else {
        unreachable!()
    };
    assert!(*candidate);
    assert!((low / 10.0 - 1.0).abs() < 0.02, "{low}");
    assert!((high / 16.0 - 1.0).abs() < 0.02, "{high}");
    assert_eq!(*low_share, 0.6);

    // Both sides bimodal, the baseline reported as such.
    let cmp = compare(&c, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    let sides: Vec<bool> = cmp
        .findings
        .iter()
        .filter_map(|f| match f {
            Finding::Bimodal { candidate, .. } => Some(*candidate),
            _ => None,
        })
        .collect();
    assert_eq!(sides, [false, true]);
}

#[test]
fn bimodality_rarely_fires_on_unimodal_noise() {
    let mut r = rng(15);
    for n in [6, 8, 10, 15, 20, 30, 50] {
        let trials = 1000;
        let mut fired = 0;
        for i in 0..trials {
            let mut v = match i % 3 {
                0 => normal(&mut r, n, 100.0, 0.05),
                1 => log_normal(&mut r, n, 100.0, 0.05),
                // Skewed: 30% log-normal, compared on the log scale.
                _ => log_normal(&mut r, n, 100.0, 0.3),
            };
            v.sort_by(f64::total_cmp);
            fired += usize::from(modes::find(&v, Scale::Log, true).is_some());
        }
        assert!(fired <= 5, "n={n}: {fired} of {trials}");
    }
}

#[test]
fn critical_separation_interpolates() {
    assert_eq!(modes::critical(10), 8.4);
    assert_eq!(modes::critical(11), (8.4 + 7.3) / 2.0);
    assert_eq!(modes::critical(5000), 3.1);
    let mut previous = f64::INFINITY;
    for n in modes::MIN_SAMPLE..600 {
        let c = modes::critical(n);
        assert!(c <= previous, "n={n}");
        previous = c;
    }
}

#[test]
fn one_outlier_is_not_a_mode() {
    let mut r = rng(16);
    let mut v = normal(&mut r, 10, 100.0, 0.02);
    v[3] = 300.0;
    v.sort_by(f64::total_cmp);
    assert_eq!(modes::find(&v, Scale::Log, false), None);
}

// ---- Reproducibility, options and errors -----------------------------------

#[test]
fn same_seed_same_result() {
    let mut r = rng(17);
    let b = normal(&mut r, 15, 50.0, 0.05);
    let c = normal(&mut r, 12, 53.0, 0.05);
    let options = Options::default();
    let first = compare(&b, &c, Direction::LowerIsBetter, &options).unwrap();
    let again = compare(&b, &c, Direction::LowerIsBetter, &options).unwrap();
    assert_eq!(first, again);

    let other = Options {
        seed: 42,
        ..Options::default()
    };
    let reseeded = compare(&b, &c, Direction::LowerIsBetter, &other).unwrap();
    // Only the bootstrap interval depends on the seed.
    assert_ne!(
        (first.ci_low, first.ci_high),
        (reseeded.ci_low, reseeded.ci_high)
    );
    assert_eq!(
        Comparison {
            ci_low: first.ci_low,
            ci_high: first.ci_high,
            ..reseeded
        },
        first
    );
}

#[test]
fn verdict_does_not_depend_on_the_bootstrap() {
    let mut r = rng(18);
    for _ in 0..20 {
        let b = normal(&mut r, 10, 50.0, 0.05);
        let c = normal(&mut r, 10, 53.0, 0.05);
        let with = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
        let without = Options {
            resamples: 0,
            ..Options::default()
        };
        let without = compare(&b, &c, Direction::LowerIsBetter, &without).unwrap();
        assert!(without.ci_low.is_nan() && without.ci_high.is_nan());
        assert_eq!(
            (with.verdict, with.shift, with.p_value),
            (without.verdict, without.shift, without.p_value)
        );
    }
}

#[test]
fn errors_name_the_side_and_position() {
    let ok = [1.0, 2.0, 3.0];
    let d = Direction::LowerIsBetter;
    let o = Options::default();
    assert_eq!(
        compare(&[1.0], &ok, d, &o),
        Err(Error::TooFew {
            side: "baseline",
            n: 1
        })
    );
    assert_eq!(
        compare(&ok, &[], d, &o),
        Err(Error::TooFew {
            side: "candidate",
            n: 0
        })
    );
    assert_eq!(
        compare(&ok, &[1.0, 2.0, f64::NAN], d, &o),
        Err(Error::NotFinite {
            side: "candidate",
            index: 2
        })
    );
    let e = compare(&[f64::INFINITY, 1.0], &ok, d, &o).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the baseline has a value that is not a finite number at position 0"
    );
    for bad in [-0.1, 1.0, f64::NAN] {
        let o = Options {
            min_effect: bad,
            ..Options::default()
        };
        assert!(matches!(
            compare(&ok, &ok, d, &o),
            Err(Error::BadOption {
                name: "min_effect",
                ..
            })
        ));
    }
    let o = Options {
        alpha: 0.0,
        ..Options::default()
    };
    assert!(matches!(
        compare(&ok, &ok, d, &o),
        Err(Error::BadOption { name: "alpha", .. })
    ));
}

#[test]
fn verdict_names() {
    let names: Vec<_> = [
        Verdict::Regression,
        Verdict::Improvement,
        Verdict::NoChange,
        Verdict::Inconclusive,
    ]
    .map(Verdict::as_str)
    .into();
    assert_eq!(
        names,
        ["regression", "improvement", "no_change", "inconclusive"]
    );
}

// ---- Properties ------------------------------------------------------------

fn sample() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(1.0f64..2.0, 2..25)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn direction_flips_regression_and_improvement(b in sample(), c in sample()) {
        let o = Options { resamples: 0, ..Options::default() };
        let lower = compare(&b, &c, Direction::LowerIsBetter, &o).unwrap();
        let higher = compare(&b, &c, Direction::HigherIsBetter, &o).unwrap();
        let flipped = match lower.verdict {
            Verdict::Regression => Verdict::Improvement,
            Verdict::Improvement => Verdict::Regression,
            v => v,
        };
        prop_assert_eq!(higher.verdict, flipped);
        prop_assert_eq!(lower.p_value, higher.p_value);
    }

    #[test]
    fn units_do_not_matter(b in sample(), c in sample(), k in -10i32..10) {
        let o = Options { resamples: 0, ..Options::default() };
        let scale = 2f64.powi(k);
        let b2: Vec<f64> = b.iter().map(|v| v * scale).collect();
        let c2: Vec<f64> = c.iter().map(|v| v * scale).collect();
        let one = compare(&b, &c, Direction::LowerIsBetter, &o).unwrap();
        let two = compare(&b2, &c2, Direction::LowerIsBetter, &o).unwrap();
        prop_assert_eq!(one.p_value, two.p_value);
        prop_assert_eq!(one.ratio, two.ratio);
        prop_assert!((one.shift / two.shift - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_interval_holds_the_estimate(b in sample(), c in sample()) {
        let o = Options { resamples: 200, ..Options::default() };
        let r = compare(&b, &c, Direction::LowerIsBetter, &o).unwrap();
        prop_assert!(r.shift_low <= r.shift && r.shift <= r.shift_high, "{:?}", r);
        prop_assert!(r.ci_low <= r.ci_high, "{:?}", r);
        prop_assert!((0.0..=1.0).contains(&r.p_value));
    }
}

// ---- Adaptive test ---------------------------------------------------------

/// Share of `trials` random assignments of n of m + n ranks to the candidate
/// for which the normal-scores test rejects at `alpha`, each way.
fn normal_scores_level(m: usize, n: usize, alpha: f64, trials: usize, seed: u64) -> (f64, f64) {
    let mut rng = rng(seed);
    let mut sides: Vec<bool> = (0..m + n).map(|i| i >= m).collect();
    let (mut greater, mut less) = (0usize, 0usize);
    for _ in 0..trials {
        for i in (1..sides.len()).rev() {
            let j = rng.random_range(0..=i);
            sides.swap(i, j);
        }
        let pooled: Vec<(f64, bool)> = sides
            .iter()
            .enumerate()
            .map(|(i, &c)| (i as f64, c))
            .collect();
        let (g, l) = adaptive::normal_scores(&pooled);
        greater += usize::from(g < alpha);
        less += usize::from(l < alpha);
    }
    (greater as f64 / trials as f64, less as f64 / trials as f64)
}

#[test]
fn normal_scores_level_by_random_permutations() {
    // The Cornish-Fisher tail against the permutation distribution itself:
    // 100,000 random assignments, standard error 0.03 points at 1%. (At
    // 400,000, in release: 0.98-1.03% each way at 15+15, 15+25, 20+20,
    // 30+30, 15+60, 15+185, 50+50, 40+160 and 100+100.)
    for (m, n, seed) in [(15, 15, 1), (30, 30, 2), (15, 45, 3)] {
        let (g, l) = normal_scores_level(m, n, 0.01, 100_000, seed);
        for rate in [g, l] {
            assert!((0.0088..=0.0112).contains(&rate), "{m}+{n}: {rate}");
        }
    }
}

#[test]
fn sample_sum_moments_match_enumeration() {
    // Every 3- and 4-subset of 9 van der Waerden scores.
    let scores = adaptive::van_der_waerden(9);
    for n in [3usize, 4] {
        let mut sums = Vec::new();
        for mask in 0u32..1 << 9 {
            if mask.count_ones() as usize == n {
                sums.push(
                    (0..9)
                        .filter(|i| mask >> i & 1 == 1)
                        .map(|i| scores[i])
                        .sum::<f64>(),
                );
            }
        }
        let k = sums.len() as f64;
        let mean = sums.iter().sum::<f64>() / k;
        let m2 = sums.iter().map(|s| s * s).sum::<f64>() / k;
        let m4 = sums.iter().map(|s| s.powi(4)).sum::<f64>() / k;
        let (sd, excess) = adaptive::sample_sum_moments(&scores, n);
        assert!(mean.abs() < 1e-12);
        assert!((sd - m2.sqrt()).abs() < 1e-12, "{sd} {}", m2.sqrt());
        assert!((excess - (m4 / (m2 * m2) - 3.0)).abs() < 1e-12);
    }
}

#[test]
fn selector_picks_normal_scores_on_normal_noise() {
    let mut r = rng(21);
    let trials = 200;
    let normal_picked = (0..trials)
        .filter(|i| {
            let b = log_normal(&mut r, 30, 100.0, 0.05);
            // Half of them with a 5% slowdown: the pooled sample of a shift.
            let c = log_normal(&mut r, 30, if i % 2 == 0 { 100.0 } else { 105.0 }, 0.05);
            let (x, y) = (Scale::Log.sorted(&b), Scale::Log.sorted(&c));
            adaptive::test(&x, &y).scores == adaptive::Scores::Normal
        })
        .count();
    assert!(
        normal_picked >= trials * 90 / 100,
        "{normal_picked} of {trials}"
    );
}

#[test]
fn selector_picks_wilcoxon_on_outliers() {
    // One run in ten multiplied by 1.5-3, as in examples/power.rs.
    let mut r = rng(22);
    let side = |r: &mut StdRng, centre: f64| -> Vec<f64> {
        (0..30)
            .map(|_| {
                let hit = if r.random::<f64>() < 0.1 {
                    r.random_range(1.5..3.0)
                } else {
                    1.0
                };
                centre * (1.0 + 0.05 * gauss(r)) * hit
            })
            .map(|v| v.ln())
            .collect()
    };
    let trials = 200;
    let wilcoxon = (0..trials)
        .filter(|_| {
            let mut x = side(&mut r, 100.0);
            let mut y = side(&mut r, 105.0);
            x.sort_by(f64::total_cmp);
            y.sort_by(f64::total_cmp);
            adaptive::test(&x, &y).scores == adaptive::Scores::Wilcoxon
        })
        .count();
    assert!(wilcoxon >= trials * 97 / 100, "{wilcoxon} of {trials}");
}

#[test]
fn selector_keeps_exact_mann_whitney_for_small_samples_and_ties() {
    let mut r = rng(23);
    let x = Scale::Log.sorted(&normal(&mut r, 14, 100.0, 0.05));
    let y = Scale::Log.sorted(&normal(&mut r, 40, 100.0, 0.05));
    let t = adaptive::test(&x, &y);
    assert_eq!(t.scores, adaptive::Scores::Wilcoxon);
    let u = mann_whitney::test(&x, &y);
    assert_eq!((t.p_greater, t.p_less), (u.p_greater, u.p_less));
    // Ties: rounded values.
    let x: Vec<f64> = normal(&mut r, 30, 100.0, 0.05)
        .iter()
        .map(|v| v.round())
        .collect();
    let y: Vec<f64> = normal(&mut r, 30, 100.0, 0.05)
        .iter()
        .map(|v| v.round())
        .collect();
    let t = adaptive::test(&sorted(&x), &sorted(&y));
    assert_eq!(t.scores, adaptive::Scores::Wilcoxon);
}

#[test]
fn selection_does_not_depend_on_the_sides() {
    // The selector sees the pooled values only: swapping values between the
    // sides never changes the scores chosen.
    let mut r = rng(24);
    for _ in 0..50 {
        let b = normal(&mut r, 20, 100.0, 0.05);
        let c = normal(&mut r, 25, 103.0, 0.05);
        let mut pooled: Vec<f64> = b.iter().chain(&c).copied().collect();
        let first = adaptive::test(&sorted(&b), &sorted(&c)).scores;
        for i in (1..pooled.len()).rev() {
            let j = r.random_range(0..=i);
            pooled.swap(i, j);
        }
        let (b2, c2) = pooled.split_at(20);
        assert_eq!(adaptive::test(&sorted(b2), &sorted(c2)).scores, first);
    }
}

#[test]
fn adaptive_level_under_no_change() {
    // The whole verdict under no change, where normal scores are chosen
    // (15 and 20 a side) and where exact Mann-Whitney is (5 and 10): false
    // regressions at most α plus three standard errors.
    let options = Options {
        resamples: 0,
        ..Options::default()
    };
    for (n, seed) in [(5, 31), (10, 32), (15, 33), (20, 34)] {
        let mut r = rng(seed);
        let trials = 10_000;
        let alarms = (0..trials)
            .filter(|_| {
                let b = log_normal(&mut r, n, 100.0, 0.05);
                let c = log_normal(&mut r, n, 100.0, 0.05);
                compare(&b, &c, Direction::LowerIsBetter, &options)
                    .unwrap()
                    .verdict
                    == Verdict::Regression
            })
            .count();
        assert!(
            alarms <= 130,
            "{n} a side: {alarms} false regressions in {trials}"
        );
    }
}

#[test]
fn p_value_is_the_adaptive_tests() {
    let mut r = rng(25);
    let b = normal(&mut r, 30, 100.0, 0.05);
    let c = normal(&mut r, 30, 103.0, 0.05);
    let got = compare(&b, &c, Direction::LowerIsBetter, &Options::default()).unwrap();
    let t = adaptive::test(&Scale::Log.sorted(&b), &Scale::Log.sorted(&c));
    assert_eq!(t.scores, adaptive::Scores::Normal);
    assert_eq!(got.p_value, t.p_two_sided());
}
