//! The bootstrap interval of the ratio of medians.
//!
//! Each side is resampled with replacement on its own (the runs of the two
//! sides are independent), and the interval is the percentile one: the
//! 2.5% and 97.5% quantiles of the resampled ratios.
//!
//! Percentile rather than BCa: BCa's acceleration is estimated with the
//! jackknife, which is inconsistent for the median (deleting one value moves
//! it by at most one order statistic), and at 10 runs the bootstrap
//! distribution of a median takes only a handful of values anyway, which no
//! correction makes smooth. The interval is reported, not decided on: the
//! verdict uses the Moses interval of the Hodges-Lehmann shift, which is
//! exact at any size (see `shift`).

use rand::RngExt as _;
use rand::rngs::StdRng;

/// The percentile interval at `confidence` of median(candidate) /
/// median(baseline) over `resamples` resamples drawn from `rng`.
///
/// With a fixed seed the result is reproducible for a given build: `StdRng`
/// may change algorithm between major versions of `rand`, which the lock file
/// pins.
pub(crate) fn median_ratio_interval(
    baseline: &[f64],
    candidate: &[f64],
    resamples: usize,
    confidence: f64,
    rng: &mut StdRng,
) -> (f64, f64) {
    let mut b = vec![0.0; baseline.len()];
    let mut c = vec![0.0; candidate.len()];
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let mb = resampled_median(baseline, &mut b, rng);
        let mc = resampled_median(candidate, &mut c, rng);
        ratios.push(mc / mb);
    }
    // NaN (0/0) sorts last and is taken as +∞ would be: above everything.
    ratios.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    (quantile(&ratios, tail), quantile(&ratios, 1.0 - tail))
}

/// The median of a resample of `values` drawn into `buf` (same length).
fn resampled_median(values: &[f64], buf: &mut [f64], rng: &mut StdRng) -> f64 {
    for slot in buf.iter_mut() {
        *slot = values[rng.random_range(0..values.len())];
    }
    let mid = buf.len() / 2;
    let even = buf.len().is_multiple_of(2);
    let (below, &mut upper, _) = buf.select_nth_unstable_by(mid, f64::total_cmp);
    if even {
        let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lower + upper) / 2.0
    } else {
        upper
    }
}

/// The `p` quantile of sorted, non-empty `v`, interpolating linearly between
/// order statistics (the usual "type 7" definition).
fn quantile(v: &[f64], p: f64) -> f64 {
    let h = p * (v.len() - 1) as f64;
    let (i, frac) = (h.floor() as usize, h.fract());
    if i + 1 >= v.len() || frac == 0.0 {
        v[i.min(v.len() - 1)]
    } else {
        v[i] + frac * (v[i + 1] - v[i])
    }
}
