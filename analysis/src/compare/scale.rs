//! The scale the tests and estimates work on, and the order statistics they share.

/// The scale the tests and estimates work on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Scale {
    /// Every value positive: logarithms, effects are ratios.
    Log,
    /// Some value zero or negative: the values themselves, effects relative
    /// to the baseline median's magnitude.
    Linear,
}

impl Scale {
    pub(super) fn of(baseline: &[f64], candidate: &[f64]) -> Scale {
        if baseline.iter().chain(candidate).all(|&v| v > 0.0) {
            Scale::Log
        } else {
            Scale::Linear
        }
    }

    pub(super) fn apply(self, v: f64) -> f64 {
        match self {
            Scale::Log => v.ln(),
            Scale::Linear => v,
        }
    }

    /// `values` on this scale, sorted.
    pub(super) fn sorted(self, values: &[f64]) -> Vec<f64> {
        let mut v: Vec<f64> = values.iter().map(|&v| self.apply(v)).collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// A difference on this scale as a relative change (0.05 is 5% more).
    pub(super) fn relative(self, d: f64, baseline_median: f64) -> f64 {
        match self {
            Scale::Log => d.exp_m1(),
            // A zero difference is no change even against a zero median;
            // any other against a zero median is infinitely large.
            Scale::Linear if d == 0.0 => 0.0,
            Scale::Linear => d / baseline_median.abs(),
        }
    }
}

pub(super) fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The median of a sorted, non-empty slice.
pub(super) fn median_sorted(v: &[f64]) -> f64 {
    let mid = v.len() / 2;
    if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    }
}
