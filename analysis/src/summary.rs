//! Central values of a sample and their comparison.

/// The median of `values`, ignoring NaNs; `None` when nothing is left.
///
/// With an even count it is the mean of the two middle values, the usual
/// convention, so that a 2-run cell still has a centre.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// `candidate / baseline`, or `None` when the baseline is zero or either side
/// is not finite, since such a ratio says nothing.
pub fn ratio(candidate: f64, baseline: f64) -> Option<f64> {
    if baseline == 0.0 || !baseline.is_finite() || !candidate.is_finite() {
        return None;
    }
    Some(candidate / baseline)
}

#[cfg(test)]
mod tests;
