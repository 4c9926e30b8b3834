//! How far a step must stand out when its position was chosen among a
//! stretch's `m`: a normal `z`, two-sided, Bonferroni over the positions.
//! The dependence stage ([`super::serial`]) tests steps under its noise
//! with these, and the trend stage ([`super::trend`]) admits a step on top
//! of a line with [`critical_z`].

use statrs::distribution::{ContinuousCDF, Normal};

/// `|z|` a step must reach in a stretch of `m` points at level `alpha`:
/// Bonferroni over the stretch's `m` possible positions, two-sided. The
/// positions are strongly correlated, so this is conservative.
pub(super) fn critical_z(m: usize, alpha: f64) -> f64 {
    let normal = Normal::standard();
    normal.inverse_cdf(1.0 - alpha / (2.0 * m.max(1) as f64))
}

/// The two-sided p-value of `z`, Bonferroni over `m` positions, at most 1.
pub(super) fn p_value(z: f64, m: usize) -> f64 {
    let normal = Normal::standard();
    (2.0 * m.max(1) as f64 * normal.cdf(-z.abs())).min(1.0)
}
