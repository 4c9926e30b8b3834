//! The Mann-Whitney U test (Wilcoxon rank-sum), exact where it can be.
//!
//! `U` here is the candidate's: the number of (baseline, candidate) pairs in
//! which the candidate value is the larger, ties counting one half.
//!
//! Three ways to its null distribution, the most exact that is affordable:
//!
//! - no ties and at most [`EXACT_MAX_TOTAL`] values in all: the exact
//!   distribution, counted as the coefficients of the Gaussian binomial
//!   coefficient `[m+n choose m]_q` in exact 128-bit integers. This is the
//!   classical table, for any sizes (tests check it against brute force and
//!   published critical values), in O(m·n·min(m, n)) operations;
//! - ties and at most [`EXACT_TIES_MAX_TOTAL`] values: the exact permutation
//!   distribution of the sum of mid-ranks given the ties, counted by dynamic
//!   programming over the doubled mid-ranks (integers). The normal
//!   approximation is at its worst exactly there, with few values and heavy
//!   ties (counts, rounded times);
//! - otherwise: the normal approximation with the tie correction of the
//!   variance and a continuity correction of one half, accurate to a few
//!   thousandths at these sizes.

use statrs::function::erf::{erfc, erfc_inv};

/// Largest m + n tested exactly when there are no ties. `C(100, 50)` ≈ 1e29
/// keeps every count, and every intermediate of the product, within `i128`.
pub(crate) const EXACT_MAX_TOTAL: usize = 100;

/// Largest m + n tested exactly when there are ties: the dynamic programme
/// costs O(N · min(m, n) · N · min(m, n)), a few milliseconds at 60.
pub(crate) const EXACT_TIES_MAX_TOTAL: usize = 60;

/// How a p-value was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Exact,
    ExactWithTies,
    Normal,
}

/// The outcome of the test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MannWhitney {
    /// The candidate's U.
    pub u: f64,
    /// One-sided p-value against "the candidate tends to be larger".
    pub p_greater: f64,
    /// One-sided p-value against "the candidate tends to be smaller".
    pub p_less: f64,
    pub method: Method,
}

impl MannWhitney {
    /// Twice the smaller one-sided p-value, at most 1.
    pub fn p_two_sided(&self) -> f64 {
        (2.0 * self.p_greater.min(self.p_less)).min(1.0)
    }
}

/// Tests `candidate` against `baseline`; both non-empty and finite, in any
/// order.
pub(crate) fn test(baseline: &[f64], candidate: &[f64]) -> MannWhitney {
    let (m, n) = (baseline.len(), candidate.len());
    let ranks = Ranks::of(baseline, candidate);
    // Doubled U of the candidate: 2·(rank sum) − n(n+1).
    let u2 = ranks.candidate_sum2 - (n * (n + 1)) as u64;
    let u = u2 as f64 / 2.0;
    let total = m + n;
    if !ranks.ties && total <= EXACT_MAX_TOTAL {
        let u = (u2 / 2) as usize;
        let counts = u_counts(m, n);
        let all: i128 = counts.iter().sum();
        let upper: i128 = counts[u..].iter().sum();
        let lower: i128 = counts[..=u].iter().sum();
        MannWhitney {
            u: u as f64,
            p_greater: upper as f64 / all as f64,
            p_less: lower as f64 / all as f64,
            method: Method::Exact,
        }
    } else if ranks.ties && total <= EXACT_TIES_MAX_TOTAL {
        let (p_greater, p_less) = exact_with_ties(&ranks, m, n);
        MannWhitney {
            u,
            p_greater,
            p_less,
            method: Method::ExactWithTies,
        }
    } else {
        let (p_greater, p_less) = normal(u, m, n, ranks.tie_term);
        MannWhitney {
            u,
            p_greater,
            p_less,
            method: Method::Normal,
        }
    }
}

/// One-sided p-values (candidate larger, candidate smaller) of the
/// candidate's `u` by the normal approximation, `tie_term` being
/// Σ (t³ − t) over groups of t tied values.
pub(super) fn normal(u: f64, m: usize, n: usize, tie_term: f64) -> (f64, f64) {
    let (m, n) = (m as f64, n as f64);
    let nn = m + n;
    let mean = m * n / 2.0;
    let var = m * n / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    if var <= 0.0 {
        // Every value equal: nothing tells the sides apart.
        return (1.0, 1.0);
    }
    let sd = var.sqrt();
    (
        upper_normal((u - mean - 0.5) / sd).min(1.0),
        upper_normal((mean - u - 0.5) / sd).min(1.0),
    )
}

/// The largest `u` with P(U ≤ u) ≤ `alpha` under the null, without ties:
/// the critical value of the one-sided test at `alpha`, and the rank of the
/// pairwise difference that bounds the Moses interval. `None` when even
/// U = 0 is more likely than `alpha` (samples too small).
pub(crate) fn lower_critical(m: usize, n: usize, alpha: f64) -> Option<u64> {
    if m + n <= EXACT_MAX_TOTAL {
        let counts = u_counts(m, n);
        let all: i128 = counts.iter().sum();
        let mut cumulative = 0i128;
        let mut critical = None;
        for (u, &c) in counts.iter().enumerate() {
            cumulative += c;
            if cumulative as f64 / all as f64 > alpha {
                break;
            }
            critical = Some(u as u64);
        }
        critical
    } else {
        lower_critical_normal(m, n, alpha)
    }
}

/// [`lower_critical`] by the normal approximation with continuity
/// correction: P(U ≤ u) ≈ Φ((u + 0.5 − mn/2) / sd) ≤ alpha.
pub(super) fn lower_critical_normal(m: usize, n: usize, alpha: f64) -> Option<u64> {
    let (m, n) = (m as f64, n as f64);
    let sd = (m * n * (m + n + 1.0) / 12.0).sqrt();
    let u = (m * n / 2.0 - 0.5 - upper_normal_quantile(alpha) * sd).floor();
    (u >= 0.0).then_some(u as u64)
}

/// P(Z > z) for a standard normal Z.
pub(crate) fn upper_normal(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// The z with P(Z > z) = p.
pub(crate) fn upper_normal_quantile(p: f64) -> f64 {
    std::f64::consts::SQRT_2 * erfc_inv(2.0 * p)
}

/// Counts of each value 0..=m·n of U over the C(m+n, m) equally likely
/// assignments of ranks, without ties.
///
/// They are the coefficients of `[m+n choose k]_q = Π_{i=1..k} (1 − q^{l+i}) /
/// (1 − q^i)` with k = min(m, n), l = max(m, n): each factor is one
/// multiplication by (1 − q^a), a stride-a difference, and one division by
/// (1 − q^i), a stride-i running sum. After step i the polynomial is
/// `[l+i choose i]_q`, so every intermediate stays below 2·C(m+n, m) in
/// magnitude: exact in `i128` up to [`EXACT_MAX_TOTAL`].
pub(crate) fn u_counts(m: usize, n: usize) -> Vec<i128> {
    let (k, l) = (m.min(n), m.max(n));
    // Room for the product's degree k·l + k before the last division.
    let mut c = vec![0i128; k * l + k + 1];
    c[0] = 1;
    for i in 1..=k {
        let a = l + i;
        let top = (i - 1) * l + a;
        for j in (a..=top).rev() {
            c[j] -= c[j - a];
        }
        for j in i..=top {
            c[j] += c[j - i];
        }
    }
    c.truncate(k * l + 1);
    c
}

/// Ranks of the pooled sample.
pub(super) struct Ranks {
    /// Doubled mid-rank of each pooled value, in sorted order, with whether
    /// it is the candidate's.
    doubled: Vec<(u64, bool)>,
    /// Sum of the candidate's doubled mid-ranks.
    candidate_sum2: u64,
    ties: bool,
    /// Σ (t³ − t) over groups of t tied values, for the variance.
    tie_term: f64,
}

impl Ranks {
    pub(super) fn of(baseline: &[f64], candidate: &[f64]) -> Ranks {
        let mut pooled: Vec<(f64, bool)> = baseline
            .iter()
            .map(|&v| (v, false))
            .chain(candidate.iter().map(|&v| (v, true)))
            .collect();
        pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut doubled = Vec::with_capacity(pooled.len());
        let (mut candidate_sum2, mut ties, mut tie_term) = (0u64, false, 0.0);
        let mut start = 0;
        while start < pooled.len() {
            // `==` rather than `total_cmp`, so that −0 and +0 tie.
            let end = start
                + pooled[start..]
                    .iter()
                    .take_while(|p| p.0 == pooled[start].0)
                    .count();
            // Ranks start+1..=end; their mean, doubled, is start+1+end.
            let r2 = (start + 1 + end) as u64;
            let t = (end - start) as f64;
            if end - start > 1 {
                ties = true;
                tie_term += t * t * t - t;
            }
            for p in &pooled[start..end] {
                doubled.push((r2, p.1));
                if p.1 {
                    candidate_sum2 += r2;
                }
            }
            start = end;
        }
        Ranks {
            doubled,
            candidate_sum2,
            ties,
            tie_term,
        }
    }
}

/// One-sided p-values (candidate larger, candidate smaller) from the exact
/// permutation distribution of the doubled mid-rank sum given the ties.
///
/// `ways[j][s]` counts the subsets of j of the values seen so far whose
/// doubled mid-ranks sum to s; the subsets are of the smaller side's size,
/// whose observed sum is then compared with the distribution. Counts are
/// `f64`: only sums of positive terms, so rounding stays relative (1e-16)
/// even above 2^53.
pub(super) fn exact_with_ties(ranks: &Ranks, m: usize, n: usize) -> (f64, f64) {
    let k = m.min(n);
    let candidate_is_small = n <= m;
    let observed: u64 = ranks
        .doubled
        .iter()
        .filter(|d| d.1 == candidate_is_small)
        .map(|d| d.0)
        .sum();
    // The doubled ranks come in ascending order; `prefix[i]` sums the first i.
    let total = ranks.doubled.len();
    let mut prefix = Vec::with_capacity(total + 1);
    prefix.push(0usize);
    for &(r2, _) in &ranks.doubled {
        prefix.push(prefix[prefix.len() - 1] + r2 as usize);
    }
    let max_sum = prefix[total] - prefix[total - k];
    let mut ways = vec![vec![0f64; max_sum + 1]; k + 1];
    ways[0][0] = 1.0;
    for (seen, &(r2, _)) in ranks.doubled.iter().enumerate() {
        let r2 = r2 as usize;
        // Only rows that can still be filled up to k with the values left,
        // and only sums that j of the values seen so far can reach (the
        // largest j of them): a quarter of the full table.
        let left = total - seen - 1;
        for j in (k.saturating_sub(left).max(1)..=k.min(seen + 1)).rev() {
            let reach = prefix[seen + 1] - prefix[seen + 1 - j];
            let (lower, upper) = ways.split_at_mut(j);
            let (from, to) = (&lower[j - 1], &mut upper[0]);
            for s in r2..=reach {
                to[s] += from[s - r2];
            }
        }
    }
    let dist = &ways[k];
    let all: f64 = dist.iter().sum();
    let observed = observed as usize;
    let at_least: f64 = dist[observed..].iter().sum::<f64>() / all;
    let at_most: f64 = dist[..=observed].iter().sum::<f64>() / all;
    if candidate_is_small {
        (at_least, at_most)
    } else {
        // The baseline's sum is small exactly when the candidate's is large.
        (at_most, at_least)
    }
}
