//! The verdict's test: an adaptive two-sample rank test in the manner of
//! Hogg, Fisher and Randles (1975) and Büning.
//!
//! The scores are chosen by a selector computed on the *pooled* sample, so
//! that under "no change" (the two sides exchangeable) the choice does not
//! depend on which value came from which side: given the pooled values the
//! selection is fixed and the chosen linear rank statistic keeps its own
//! permutation distribution, hence its level. No look at the sides is made
//! before choosing.
//!
//! The selector is Hogg's pair of tail measures, on the analysis scale
//! (logarithms, usually), with `U_p`, `L_p` and `M_p` the means of the
//! largest, smallest and middle fractions p of the pooled values (the
//! boundary value weighted by its fractional part):
//!
//! - tail weight `Q2 = (U_0.05 − L_0.05) / (U_0.5 − L_0.5)`: 2.59 for normal
//!   noise, 3.3 for double-exponential, more with outliers;
//! - skewness `Q1 = (U_0.05 − M_0.5) / (M_0.5 − L_0.05)`: 1 for symmetric
//!   noise, 3–13 (5%–95% of pooled samples of 60) when one run in ten is hit
//!   by a neighbour.
//!
//! The choice:
//!
//! - normal scores (van der Waerden: the score of rank i of N is
//!   Φ⁻¹(i / (N + 1))) when the pooled sample looks normal-tailed and
//!   symmetric (`Q2` ≤ [`Q2_MAX`], `Q1` within [1 / [`Q1_MAX`], [`Q1_MAX`]]),
//!   has no ties, and each side has at least [`NORMAL_MIN_SIDE`] values. Under
//!   normal noise this test is as efficient as the t-test (ARE 1), against
//!   3/π for Mann-Whitney: that is the power the 30-runs target needs;
//! - Mann-Whitney (Wilcoxon scores, module `mann_whitney`) otherwise: heavy
//!   or skewed tails, where it keeps its power and the t-test (and normal
//!   scores) lose theirs; ties; and small samples, where its distribution is
//!   exact.
//!
//! The null distribution of the normal-scores statistic S (the candidate's
//! sum of scores) is that of a sample of n of the N scores drawn without
//! replacement. Its mean and variance, and its fourth cumulant, are computed
//! exactly from the power sums of the scores; the scores are symmetric, so
//! the distribution is too and its third cumulant is 0. The tail is the
//! normal one with a Cornish-Fisher correction for the (negative) excess
//! kurtosis γ₂: z' = z − γ₂/24 · (z³ − 3z). The statistic takes C(N, n)
//! values almost all distinct, so no continuity correction is needed. Checked
//! against random permutations (tests), and by the level in
//! `examples/power.rs`.

use super::mann_whitney::{self, upper_normal, upper_normal_quantile};

/// Largest tail weight `Q2` of the pooled sample for normal scores (normal
/// noise: 2.9 at the 95th percentile and 3.1 at the 99th with 60 values).
pub(crate) const Q2_MAX: f64 = 3.2;

/// Largest skewness `Q1` (or 1/`Q1`) of the pooled sample for normal scores
/// (normal noise: 1.3 at the 95th percentile and 1.5 at the 99th with 60
/// values; one run in ten hit by a neighbour: 3.0 at the 1st).
pub(crate) const Q1_MAX: f64 = 2.0;

/// Fewest values on each side for normal scores; below, exact Mann-Whitney.
pub(crate) const NORMAL_MIN_SIDE: usize = 15;

/// The scores the test used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scores {
    /// Mann-Whitney (Wilcoxon scores), exact where it can be.
    Wilcoxon,
    /// Van der Waerden's normal scores, Cornish-Fisher tail.
    Normal,
}

/// The outcome of the test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Adaptive {
    pub scores: Scores,
    /// One-sided p-value against "the candidate tends to be larger".
    pub p_greater: f64,
    /// One-sided p-value against "the candidate tends to be smaller".
    pub p_less: f64,
}

impl Adaptive {
    /// Twice the smaller one-sided p-value, at most 1.
    pub fn p_two_sided(&self) -> f64 {
        (2.0 * self.p_greater.min(self.p_less)).min(1.0)
    }
}

/// Tests sorted `candidate` against sorted `baseline`, both finite.
pub(crate) fn test(baseline: &[f64], candidate: &[f64]) -> Adaptive {
    let pooled = merge(baseline, candidate);
    match select(&pooled, baseline.len(), candidate.len()) {
        Scores::Normal => {
            let (p_greater, p_less) = normal_scores(&pooled);
            Adaptive {
                scores: Scores::Normal,
                p_greater,
                p_less,
            }
        }
        Scores::Wilcoxon => {
            let t = mann_whitney::test(baseline, candidate);
            Adaptive {
                scores: Scores::Wilcoxon,
                p_greater: t.p_greater,
                p_less: t.p_less,
            }
        }
    }
}

/// The pooled values in ascending order, each with whether it is the
/// candidate's.
fn merge(x: &[f64], y: &[f64]) -> Vec<(f64, bool)> {
    let mut pooled: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, false))
        .chain(y.iter().map(|&v| (v, true)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    pooled
}

/// The scores for `pooled` (sorted) of `m` baseline and `n` candidate
/// values: a function of the pooled values and the sizes only.
pub(crate) fn select(pooled: &[(f64, bool)], m: usize, n: usize) -> Scores {
    if m.min(n) < NORMAL_MIN_SIDE || pooled.windows(2).any(|w| w[0].0 == w[1].0) {
        return Scores::Wilcoxon;
    }
    let values: Vec<f64> = pooled.iter().map(|p| p.0).collect();
    let (q1, q2) = hogg(&values);
    // Written so that NaN (a zero denominator) selects Mann-Whitney.
    if q2 <= Q2_MAX && q1 <= Q1_MAX && q1 * Q1_MAX >= 1.0 {
        Scores::Normal
    } else {
        Scores::Wilcoxon
    }
}

/// Hogg's skewness `Q1` and tail weight `Q2` of sorted `v`.
pub(crate) fn hogg(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let u05 = window_mean(v, (1.0 - 0.05) * n, n);
    let l05 = window_mean(v, 0.0, 0.05 * n);
    let u50 = window_mean(v, 0.5 * n, n);
    let l50 = window_mean(v, 0.0, 0.5 * n);
    let m50 = window_mean(v, 0.25 * n, 0.75 * n);
    ((u05 - m50) / (m50 - l05), (u05 - l05) / (u50 - l50))
}

/// The mean of sorted `v` over positions [from, to) of the continuous
/// index, value i occupying [i, i + 1).
fn window_mean(v: &[f64], from: f64, to: f64) -> f64 {
    let sum: f64 = v
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let overlap = ((i + 1) as f64).min(to) - (i as f64).max(from);
            overlap.max(0.0) * x
        })
        .sum();
    sum / (to - from)
}

/// One-sided p-values (candidate larger, candidate smaller) of the
/// normal-scores test for sorted `pooled` without ties.
pub(crate) fn normal_scores(pooled: &[(f64, bool)]) -> (f64, f64) {
    let total = pooled.len();
    let scores = van_der_waerden(total);
    let n = pooled.iter().filter(|p| p.1).count();
    let observed: f64 = pooled
        .iter()
        .zip(&scores)
        .filter(|(p, _)| p.1)
        .map(|(_, a)| a)
        .sum();
    let (sd, excess) = sample_sum_moments(&scores, n);
    if sd.is_nan() || sd <= 0.0 {
        return (1.0, 1.0);
    }
    let z = observed / sd;
    (
        cornish_fisher_upper(z, excess),
        cornish_fisher_upper(-z, excess),
    )
}

/// Van der Waerden's scores Φ⁻¹(i / (N + 1)), i = 1..=N, centred (their sum
/// is 0 up to rounding, and exactly 0 after centring).
pub(crate) fn van_der_waerden(total: usize) -> Vec<f64> {
    let step = 1.0 / (total + 1) as f64;
    let mut a: Vec<f64> = (1..=total)
        .map(|i| -upper_normal_quantile(i as f64 * step))
        .collect();
    let mean = a.iter().sum::<f64>() / total as f64;
    a.iter_mut().for_each(|v| *v -= mean);
    a
}

/// Standard deviation and excess kurtosis of the sum of a sample of `n`
/// drawn without replacement from `scores` (which sum to 0).
///
/// With s_r = Σ aʳ and p_d = n(n−1)…(n−d+1) / (N(N−1)…(N−d+1)) the
/// probability that d given scores are all drawn, summing E[S⁴] over the
/// patterns of equal indices (s_1 = 0):
/// E[S²] = (p₁ − p₂)·s₂ and
/// E[S⁴] = p₁s₄ − 4p₂s₄ + 3p₂(s₂² − s₄) + 6p₃(2s₄ − s₂²) + p₄(3s₂² − 6s₄).
pub(crate) fn sample_sum_moments(scores: &[f64], n: usize) -> (f64, f64) {
    let total = scores.len() as f64;
    let n = n as f64;
    let s2: f64 = scores.iter().map(|a| a * a).sum();
    let s4: f64 = scores.iter().map(|a| a.powi(4)).sum();
    let p1 = n / total;
    let p2 = p1 * (n - 1.0) / (total - 1.0);
    let p3 = p2 * (n - 2.0) / (total - 2.0);
    let p4 = p3 * (n - 3.0) / (total - 3.0);
    let var = (p1 - p2) * s2;
    let m4 = p1 * s4 - 4.0 * p2 * s4
        + 3.0 * p2 * (s2 * s2 - s4)
        + 6.0 * p3 * (2.0 * s4 - s2 * s2)
        + p4 * (3.0 * s2 * s2 - 6.0 * s4);
    (var.sqrt(), m4 / (var * var) - 3.0)
}

/// P(S ≥ z) for a standardised symmetric S of excess kurtosis `excess`, by
/// the first Cornish-Fisher term.
pub(crate) fn cornish_fisher_upper(z: f64, excess: f64) -> f64 {
    upper_normal(z - excess / 24.0 * (z * z * z - 3.0 * z))
}
