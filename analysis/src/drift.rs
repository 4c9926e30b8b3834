//! Drift: a history whose level moves steadily rather than in a step.
//!
//! Hosts age, firmware and microcode change, a kernel series improves a
//! little with every release. [`changepoint`](crate::changepoint) does not
//! cut such a history into steps; this module says how fast it moves: the
//! least-squares slope over the last points since the last change point,
//! with a 95% interval that allows for serially correlated noise.
//!
//! The interval is Student's t with `n − 2` degrees of freedom on the
//! slope's standard error, inflated by `(1 + r₁) / (1 − r₁)`, the long-run
//! variance of AR(1) noise with the residuals' lag-one autocorrelation `r₁`
//! (taken as 0 when negative, at most [`MAX_R1`]): a wander, whose
//! neighbouring points move together, must move further to be called a
//! drift than independent noise would.
//!
//! The coordinator makes a drift a regression only when the fitted level
//! moved the wrong way over the window by at least the cell's minimum
//! effect (`results::drift_regressions`, one alert per drifting regime);
//! otherwise it is shown, not alerted on.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// A drift found over the last points of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct Drift {
    /// Index of the window's first point, and how many points it holds.
    pub start: usize,
    pub points: usize,
    /// Slope per point, with its 95% interval.
    pub slope: f64,
    pub slope_low: f64,
    pub slope_high: f64,
    /// The fitted line at the window's first and last points.
    pub level_start: f64,
    pub level_end: f64,
}

impl Drift {
    /// The fitted level at the window's end over its start: how much the
    /// series moved over the window.
    pub fn ratio(&self) -> f64 {
        self.level_end / self.level_start
    }

    /// The slope as a fraction of the level at the window's start, per
    /// point; with its interval.
    pub fn per_point(&self) -> (f64, f64, f64) {
        let l = self.level_start;
        (self.slope / l, self.slope_low / l, self.slope_high / l)
    }
}

/// Fewest points over which a drift is judged: fewer give a slope whose
/// interval spans anything.
pub const MIN_POINTS: usize = 10;

/// The window of points a drift is judged over by default: the last 30,
/// a month of daily matrices.
pub const DEFAULT_WINDOW: usize = 30;

/// Largest lag-one autocorrelation allowed for (see the module's
/// documentation): beyond, the inflation (19 at 0.9) would say nothing.
pub const MAX_R1: f64 = 0.9;

/// The drift of `series` over its last `window` points from `since` on
/// (the index of its last change point, or 0), when the slope's 95%
/// interval excludes zero. `None` with fewer than [`MIN_POINTS`] points, a
/// non-finite value or a level at the start that is not positive (a ratio
/// of levels means nothing then).
pub fn drift(series: &[f64], since: usize, window: usize) -> Option<Drift> {
    let start = since.max(series.len().saturating_sub(window));
    let y = series.get(start..)?;
    let n = y.len();
    if n < MIN_POINTS || y.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let nf = n as f64;
    let tc = (nf - 1.0) / 2.0;
    let mean = y.iter().sum::<f64>() / nf;
    let sxx: f64 = (0..n).map(|t| (t as f64 - tc).powi(2)).sum();
    let sxy: f64 = y
        .iter()
        .enumerate()
        .map(|(t, v)| (t as f64 - tc) * (v - mean))
        .sum();
    let slope = sxy / sxx;
    let residuals: Vec<f64> = y
        .iter()
        .enumerate()
        .map(|(t, v)| v - mean - slope * (t as f64 - tc))
        .collect();
    let rss: f64 = residuals.iter().map(|r| r * r).sum();
    let r1 = if rss > 0.0 {
        residuals.windows(2).map(|w| w[0] * w[1]).sum::<f64>() / rss
    } else {
        0.0
    };
    // Residuals of a fitted line understate the noise's autocorrelation by
    // about (1 + 4 r₁) / n (Kendall's bias of the lag-one estimate, which
    // a 30-point window makes large: 0.8 reads as about 0.6).
    let r1 = (r1 + (1.0 + 4.0 * r1.max(0.0)) / nf).clamp(0.0, MAX_R1);
    let inflation = (1.0 + r1) / (1.0 - r1);
    let se = (rss / (nf - 2.0) / sxx * inflation).sqrt();
    let t = StudentsT::new(0.0, 1.0, nf - 2.0).ok()?.inverse_cdf(0.975);
    let (low, high) = (slope - t * se, slope + t * se);
    let level_start = mean - slope * tc;
    let level_end = mean + slope * tc;
    let found = (low > 0.0 || high < 0.0) && level_start > 0.0;
    found.then_some(Drift {
        start,
        points: n,
        slope,
        slope_low: low,
        slope_high: high,
        level_start,
        level_end,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use crate::normal::draw as gauss;

    #[test]
    fn a_clean_line_drifts_exactly() {
        let y: Vec<f64> = (0..40).map(|t| 100.0 + 0.5 * t as f64).collect();
        let d = drift(&y, 0, 30).unwrap();
        assert_eq!((d.start, d.points), (10, 30));
        assert!((d.slope - 0.5).abs() < 1e-12, "{d:?}");
        assert!((d.level_start - 105.0).abs() < 1e-9, "{d:?}");
        assert!((d.level_end - 119.5).abs() < 1e-9, "{d:?}");
        assert!((d.ratio() - 119.5 / 105.0).abs() < 1e-12);
    }

    #[test]
    fn the_window_starts_at_the_last_change_point() {
        let mut y = vec![50.0; 25];
        y.extend((0..15).map(|t| 100.0 + t as f64));
        let d = drift(&y, 25, 30).unwrap();
        assert_eq!((d.start, d.points), (25, 15));
        assert!((d.slope - 1.0).abs() < 1e-12);
        // Too few points after the change.
        assert_eq!(drift(&y, 32, 30), None);
    }

    #[test]
    fn flat_noise_rarely_drifts_and_a_slope_in_noise_does() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut flat = 0;
        for _ in 0..200 {
            let y: Vec<f64> = (0..30).map(|_| 100.0 + 3.0 * gauss(&mut rng)).collect();
            flat += usize::from(drift(&y, 0, 30).is_some());
        }
        // A 95% interval: about 10 of 200 by chance.
        assert!(flat <= 20, "{flat} of 200 flat series drift");
        let (mut found, mut covered) = (0, 0);
        for _ in 0..50 {
            // 0.4% of the level per point, noise of 1%.
            let y: Vec<f64> = (0..30)
                .map(|t| 100.0 * (1.0 + 0.004 * t as f64) + gauss(&mut rng))
                .collect();
            if let Some(d) = drift(&y, 0, 30) {
                found += 1;
                covered += usize::from(d.slope_low < 0.4 && 0.4 < d.slope_high);
            }
        }
        assert_eq!(found, 50);
        // A 95% interval: about 47 of 50 hold the true slope.
        assert!(covered >= 44, "{covered} of 50 intervals hold the slope");
    }

    #[test]
    fn correlated_noise_is_called_a_drift_less_often() {
        // AR(1) noise with φ = 0.8 and no trend: over 30 points it wanders
        // and a naive interval calls most series drifting.
        let mut rng = StdRng::seed_from_u64(11);
        let (mut found, mut naive) = (0, 0);
        for _ in 0..200 {
            let mut e = 0.0;
            let y: Vec<f64> = (0..30)
                .map(|_| {
                    e = 0.8 * e + gauss(&mut rng);
                    100.0 + e
                })
                .collect();
            found += usize::from(drift(&y, 0, 30).is_some());
            naive += usize::from(naive_drift(&y));
        }
        assert!(
            found * 2 < naive,
            "{found} with the correction, {naive} without"
        );
    }

    /// Whether a plain 95% interval (independent noise) excludes zero.
    fn naive_drift(y: &[f64]) -> bool {
        let n = y.len() as f64;
        let tc = (n - 1.0) / 2.0;
        let mean = y.iter().sum::<f64>() / n;
        let sxx: f64 = (0..y.len()).map(|t| (t as f64 - tc).powi(2)).sum();
        let slope = y
            .iter()
            .enumerate()
            .map(|(t, v)| (t as f64 - tc) * (v - mean))
            .sum::<f64>()
            / sxx;
        let rss: f64 = y
            .iter()
            .enumerate()
            .map(|(t, v)| (v - mean - slope * (t as f64 - tc)).powi(2))
            .sum();
        let t = StudentsT::new(0.0, 1.0, n - 2.0)
            .unwrap()
            .inverse_cdf(0.975);
        slope.abs() > t * (rss / (n - 2.0) / sxx).sqrt()
    }

    #[test]
    fn bad_input_is_no_drift() {
        assert_eq!(drift(&[1.0; 5], 0, 30), None);
        let mut y: Vec<f64> = (0..20).map(f64::from).collect();
        y[3] = f64::NAN;
        assert_eq!(drift(&y, 0, 30), None);
        assert_eq!(drift(&y, 40, 30), None);
    }
}
