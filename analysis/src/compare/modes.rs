//! Two modes in one side's runs (seed 001: instances either alone on a node
//! or sharing one).
//!
//! The runs, sorted (on the analysis scale), are split into a low and a high
//! group where the split leaves the least within-group sum of squares: the
//! exact 2-means of one-dimensional data, one pass over the split points.
//! Each group must hold at least [`MIN_SHARE`] of the runs and at least
//! [`MIN_RUNS`]: one slow run is an outlier, not a mode. The separation is
//! the distance between the group means in pooled within-group standard
//! deviations (Ashman's D with the variances pooled, so that a group of two
//! close runs cannot inflate it).
//!
//! Ashman's rule of thumb, D > 2, is no use here: the best split of a
//! *normal* sample already has D ≈ 2.65 in the limit, and far more with few
//! runs (the 99.9% quantile is 8.0 at 10 runs, 4.4 at 30). So D is compared
//! with that quantile, from 20,000–100,000 simulated normal samples at each
//! size in [`CRITICAL`] (rounded up), which makes a false "bimodal" about one
//! side in a thousand on normal or log-normal noise. Two modes such as seed
//! 001's, with 1–3% noise within each and 20% or more apart, give D of 10 and
//! more.
//!
//! A fifth or more of the runs slowed together, say by a neighbour on the
//! node, is a mode in this sense, and reported: it is seed 001's situation.
//! One or two wild runs in ten or thirty are not.

use super::finding::Finding;
use super::scale::{Scale, median_sorted};

/// The smallest share of the runs in each mode.
pub(crate) const MIN_SHARE: f64 = 0.2;
/// The smallest number of runs in each mode.
pub(crate) const MIN_RUNS: usize = 2;
/// Fewer runs than this are not examined: at 5, the 99.9% quantile of D on
/// normal samples passes 30, and no finding could be believed.
pub(crate) const MIN_SAMPLE: usize = 6;

/// (runs, critical D): the 99.9% quantile of D on normal samples of that
/// size, rounded up. In between, linear interpolation (above the convex
/// curve, so on the safe side); beyond the last, its value (the quantile
/// keeps falling towards 2.65).
const CRITICAL: [(usize, f64); 18] = [
    (6, 17.5),
    (7, 14.0),
    (8, 11.0),
    (9, 9.7),
    (10, 8.4),
    (12, 7.3),
    (15, 6.3),
    (20, 5.4),
    (25, 5.0),
    (30, 4.7),
    (40, 4.3),
    (50, 4.1),
    (75, 3.8),
    (100, 3.6),
    (150, 3.4),
    (200, 3.3),
    (300, 3.2),
    (500, 3.1),
];

/// The critical separation for `n` runs (`n` ≥ [`MIN_SAMPLE`]).
pub(crate) fn critical(n: usize) -> f64 {
    let last = CRITICAL[CRITICAL.len() - 1];
    if n >= last.0 {
        return last.1;
    }
    let i = CRITICAL
        .iter()
        .position(|&(size, _)| size >= n)
        .unwrap_or(0);
    let (n1, d1) = CRITICAL[i];
    if n1 == n || i == 0 {
        return d1;
    }
    let (n0, d0) = CRITICAL[i - 1];
    d0 + (d1 - d0) * (n - n0) as f64 / (n1 - n0) as f64
}

/// The best split of sorted values `v` on the analysis scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Split {
    /// Runs in the low group: `v[..low]`.
    pub low: usize,
    /// Separation in pooled within-group standard deviations.
    pub separation: f64,
}

/// The split of sorted `v` with the least within-group sum of squares,
/// among those that respect the minimum share and count; `None` when none
/// does.
pub(crate) fn best_split(v: &[f64]) -> Option<Split> {
    let n = v.len();
    let smallest = MIN_RUNS.max((MIN_SHARE * n as f64).ceil() as usize);
    if n < MIN_SAMPLE || 2 * smallest > n {
        return None;
    }
    // Centre first, so that the sums of squares do not cancel.
    let centre = v[n / 2];
    let (mut s, mut q) = (vec![0.0; n + 1], vec![0.0; n + 1]);
    for (i, &x) in v.iter().enumerate() {
        let d = x - centre;
        s[i + 1] = s[i] + d;
        q[i + 1] = q[i] + d * d;
    }
    let within = |from: usize, to: usize| {
        let (sum, k) = (s[to] - s[from], (to - from) as f64);
        ((q[to] - q[from]) - sum * sum / k).max(0.0)
    };
    let (low, w) = (smallest..=n - smallest)
        .map(|k| (k, within(0, k) + within(k, n)))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    let mean_low = (s[low] - s[0]) / low as f64;
    let mean_high = (s[n] - s[low]) / (n - low) as f64;
    let pooled_sd = (w / (n - 2) as f64).sqrt();
    let gap = mean_high - mean_low;
    let separation = if gap == 0.0 { 0.0 } else { gap / pooled_sd };
    Some(Split { low, separation })
}

/// The finding for one side's sorted original `values`, if it is bimodal.
pub(crate) fn find(values: &[f64], scale: Scale, candidate: bool) -> Option<Finding> {
    let v: Vec<f64> = values.iter().map(|&x| scale.apply(x)).collect();
    let split = best_split(&v)?;
    if split.separation <= critical(values.len()) {
        return None;
    }
    let (low, high) = values.split_at(split.low);
    Some(Finding::Bimodal {
        candidate,
        low: median_sorted(low),
        high: median_sorted(high),
        low_share: split.low as f64 / values.len() as f64,
    })
}
