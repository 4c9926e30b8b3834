//! Robust location and scale, unmoved by outliers and a missed step: the
//! median and the median absolute deviation, both computed in place.

/// The median absolute deviation about the median; reorders `v`.
pub(super) fn mad(v: &mut [f64]) -> f64 {
    let median = median_of(v);
    for x in v.iter_mut() {
        *x = (*x - median).abs();
    }
    median_of(v)
}

/// The median of `v` (the upper one of an even count); reorders `v`.
pub(super) fn median_of(v: &mut [f64]) -> f64 {
    let mid = v.len() / 2;
    let (_, m, _) = v.select_nth_unstable_by(mid, f64::total_cmp);
    *m
}
