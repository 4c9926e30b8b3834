//! A change of spread (seed 003: GROUP runs of ~20 s became anywhere from 30
//! to 432 s: the variance is itself the regression).
//!
//! Each side's absolute deviations from its own median (on the analysis
//! scale, so relative deviations when values are positive) are compared with
//! the Mann-Whitney test: a rank version of the Brown-Forsythe test, so that
//! a few wild runs count as "large deviations" rather than dominating a mean
//! of squares, and with the same exact small-sample machinery as the verdict.
//! Centring on each side's median takes out any shift of location.
//!
//! The size of the change is the ratio of the median absolute deviations
//! (MAD), a scale that half the runs can be wild without moving. A finding
//! needs both: the test significant at `alpha` (two-sided) and the ratio
//! beyond [`MIN_RATIO`] either way, since with many runs a 10% change of
//! spread is significant and of no interest.

use super::finding::Finding;
use super::mann_whitney;
use super::scale::median_sorted;

/// The smallest change of spread reported, as a ratio either way.
pub(crate) const MIN_RATIO: f64 = 1.5;

/// The spread finding for sorted `x` (baseline) and `y` (candidate) on the
/// analysis scale, if there is one.
pub(crate) fn find(x: &[f64], y: &[f64], alpha: f64) -> Option<Finding> {
    let (dx, dy) = (deviations(x), deviations(y));
    let ratio = match (median(&dx), median(&dy)) {
        (b, c) if b == 0.0 && c == 0.0 => 1.0,
        (b, c) => c / b,
    };
    if ratio < MIN_RATIO && ratio > 1.0 / MIN_RATIO {
        return None;
    }
    let p_value = mann_whitney::test(&dx, &dy).p_two_sided();
    (p_value < alpha).then_some(Finding::Spread { ratio, p_value })
}

/// Absolute deviations of sorted `v` from its median, sorted.
fn deviations(v: &[f64]) -> Vec<f64> {
    let centre = median(v);
    let mut d: Vec<f64> = v.iter().map(|&x| (x - centre).abs()).collect();
    d.sort_by(f64::total_cmp);
    d
}

fn median(sorted: &[f64]) -> f64 {
    median_sorted(sorted)
}
