//! A seasonal swing: a sinusoid of free period, amplitude and phase around
//! a line, with steps, fitted by least squares.
//!
//! A swing of one to five periods in a short history is cut by binary
//! segmentation at its steepest stretches into a staircase that goes up and
//! down; the local level ([`super::level`]) explains little of it at 100
//! points, because a level that moves fast enough to follow the swing also
//! follows the noise. Three parameters do: in the benchmark's 100-point
//! seasonal series the staircase that the stages before had found lost to
//! the *known* sinusoid by Schwarz's criterion in all but one of 122.
//!
//! The period is searched: on a grid of frequencies `1/n` apart (a peak of
//! the periodogram is `2/n` wide at its base, so the grid cannot step over
//! one), from one period in the series to one of [`MIN_PERIOD`] points,
//! then refined by Brent's method within one spacing of the best grid
//! point. For one period the columns' sums
//! over the series are taken once ([`Wave`]); a set of steps then costs
//! a solve of the normal equations ([`super::least_squares`]).

use super::least_squares::{Stretch, profile};

/// Shortest period searched: a swing shorter than two of the detector's
/// shortest segments (five points) is not cut into steps, so there is no
/// staircase for it to explain.
const MIN_PERIOD: f64 = 10.0;

/// Grid points per `1/n` of frequency. Two made the same detections in
/// the benchmark with twice the evaluations.
const GRID: f64 = 1.0;

/// Evaluations of Brent's refinement around the best grid point, at most:
/// it brackets a single smooth minimum, which parabolic steps find in a
/// few.
const REFINE_EVALUATIONS: usize = 10;

/// The series as least squares on a line, steps and a sinusoid needs it.
pub(super) struct Swing<'a> {
    series: &'a [f64],
    stretch: Stretch,
}

/// The sums over the series of a sinusoid's two columns at one period:
/// with the constant, the drift, each step (suffix sums), each other and
/// the (centred) series.
pub(super) struct Wave {
    /// `Σ_{t ≥ s} cos ωt` and `Σ_{t ≥ s} sin ωt`, for `s` in `0..=n`.
    cos_from: Vec<f64>,
    sin_from: Vec<f64>,
    /// `Σ t cos ωt`, `Σ t sin ωt`.
    t_cos: f64,
    t_sin: f64,
    /// `Σ cos²`, `Σ sin²`, `Σ cos sin`.
    cos_cos: f64,
    sin_sin: f64,
    cos_sin: f64,
    /// `Σ cos ωt (yₜ − ȳ)`, `Σ sin ωt (yₜ − ȳ)`.
    cos_y: f64,
    sin_y: f64,
}

impl<'a> Swing<'a> {
    pub(super) fn new(series: &'a [f64]) -> Swing<'a> {
        Swing {
            series,
            stretch: Stretch::new(series),
        }
    }

    /// The sums at `period` points (the columns advanced by a rotation at
    /// each point rather than a call of `sin_cos`).
    pub(super) fn wave(&self, period: f64) -> Wave {
        let n = self.series.len();
        let (step_sin, step_cos) = (std::f64::consts::TAU / period).sin_cos();
        let (mut c, mut s) = (1.0f64, 0.0f64);
        let mean = self.stretch.mean();
        let mut cos_from = vec![0.0; n + 1];
        let mut sin_from = vec![0.0; n + 1];
        let [
            mut t_cos,
            mut t_sin,
            mut cos_cos,
            mut sin_sin,
            mut cos_sin,
            mut cos_y,
            mut sin_y,
        ] = [0.0; 7];
        for (t, &v) in self.series.iter().enumerate() {
            cos_from[t] = c;
            sin_from[t] = s;
            let y = v - mean;
            t_cos += t as f64 * c;
            t_sin += t as f64 * s;
            cos_cos += c * c;
            sin_sin += s * s;
            cos_sin += c * s;
            cos_y += c * y;
            sin_y += s * y;
            (c, s) = (c * step_cos - s * step_sin, s * step_cos + c * step_sin);
        }
        for t in (0..n).rev() {
            cos_from[t] += cos_from[t + 1];
            sin_from[t] += sin_from[t + 1];
        }
        Wave {
            cos_from,
            sin_from,
            t_cos,
            t_sin,
            cos_cos,
            sin_sin,
            cos_sin,
            cos_y,
            sin_y,
        }
    }

    /// `−2 ln L` of a line, a step at each of `steps` and the sinusoid of
    /// `wave`, white noise around them, on the scale of
    /// [`super::alternatives`]' staircase (the sinusoid at amplitude 0 is
    /// that staircase): `ln n + (n − 1) ln(RSS / (n − 1))`.
    pub(super) fn deviance(&self, wave: &Wave, steps: &[usize]) -> Option<f64> {
        let n = self.series.len();
        let (a, b) = self.stretch.normal_equations(steps, &[]);
        let p = b.len();
        let q = p + 2;
        let mut big = vec![0.0; q * q];
        for i in 0..p {
            big[i * q..i * q + p].copy_from_slice(&a[i * p..(i + 1) * p]);
        }
        // The columns of `normal_equations`: the constant, the drift `t`,
        // then the steps.
        let cos_col: Vec<f64> = [wave.cos_from[0], wave.t_cos]
            .into_iter()
            .chain(steps.iter().map(|&s| wave.cos_from[s.min(n)]))
            .chain([wave.cos_cos, wave.cos_sin])
            .collect();
        let sin_col: Vec<f64> = [wave.sin_from[0], wave.t_sin]
            .into_iter()
            .chain(steps.iter().map(|&s| wave.sin_from[s.min(n)]))
            .chain([wave.cos_sin, wave.sin_sin])
            .collect();
        for i in 0..q {
            big[i * q + p] = cos_col[i];
            big[p * q + i] = cos_col[i];
            big[i * q + p + 1] = sin_col[i];
            big[(p + 1) * q + i] = sin_col[i];
        }
        let mut rhs = b;
        rhs.extend([wave.cos_y, wave.sin_y]);
        // At q = 0 the local level's profile is this least squares.
        profile((n as f64).ln(), self.stretch.yy(), big, rhs, n)
    }

    /// The period of least deviance with steps at `steps`, and that
    /// deviance; `None` when the series is too short for a period of
    /// [`MIN_PERIOD`] and one of the whole series to differ.
    pub(super) fn best_period(&self, steps: &[usize]) -> Option<(f64, f64)> {
        let n = self.series.len() as f64;
        let (lo, hi) = (1.0 / n, 1.0 / MIN_PERIOD);
        if lo >= hi {
            return None;
        }
        let at = |f: f64| {
            self.deviance(&self.wave(1.0 / f), steps)
                .unwrap_or(f64::INFINITY)
        };
        let spacing = 1.0 / (GRID * n);
        let points = ((hi - lo) / spacing).floor() as usize;
        let (f, d) = (0..=points)
            .map(|k| lo + k as f64 * spacing)
            .map(|f| (f, at(f)))
            .min_by(|x, y| x.1.total_cmp(&y.1))?;
        let (rf, rd) = super::minimise::brent(
            at,
            (f - spacing).max(lo),
            (f + spacing).min(hi),
            spacing / 8.0,
            REFINE_EVALUATIONS,
        );
        let (f, d) = if rd < d { (rf, rd) } else { (f, d) };
        d.is_finite().then_some((1.0 / f, d))
    }
}

#[cfg(test)]
mod tests {
    use super::super::least_squares::solve;
    use super::*;

    /// Least squares from its definition: the columns written out, the
    /// normal equations solved.
    fn direct(y: &[f64], period: f64, steps: &[usize]) -> f64 {
        let n = y.len();
        let omega = std::f64::consts::TAU / period;
        let cols: Vec<Vec<f64>> = [
            (0..n).map(|_| 1.0).collect(),
            (0..n).map(|t| t as f64).collect(),
            (0..n).map(|t| (omega * t as f64).cos()).collect(),
            (0..n).map(|t| (omega * t as f64).sin()).collect(),
        ]
        .into_iter()
        .chain(
            steps
                .iter()
                .map(|&s| (0..n).map(|t| if t >= s { 1.0 } else { 0.0 }).collect()),
        )
        .collect();
        let p = cols.len();
        let mut a = vec![0.0; p * p];
        for i in 0..p {
            for j in 0..p {
                a[i * p + j] = (0..n).map(|t| cols[i][t] * cols[j][t]).sum();
            }
        }
        let b: Vec<f64> = cols
            .iter()
            .map(|c| (0..n).map(|t| c[t] * y[t]).sum())
            .collect();
        let beta = solve(a, b).unwrap();
        let rss: f64 = (0..n)
            .map(|t| {
                let fit: f64 = (0..p).map(|i| beta[i] * cols[i][t]).sum();
                (y[t] - fit).powi(2)
            })
            .sum();
        let dof = (n - 1) as f64;
        (n as f64).ln() + dof * (rss / dof).ln()
    }

    fn noisy(n: usize, f: impl Fn(usize) -> f64) -> Vec<f64> {
        // A fixed, irregular noise: the fractional parts of multiples of
        // the golden ratio, centred (no generator needed for agreement).
        (0..n)
            .map(|t| f(t) + 3.0 * (((t as f64 * 0.618_033_988_75).fract()) - 0.5))
            .collect()
    }

    #[test]
    fn the_sums_are_least_squares_on_the_columns() {
        let y = noisy(120, |t| {
            100.0 + 0.05 * t as f64 + 4.0 * (t as f64 / 7.0).sin() + if t >= 70 { 5.0 } else { 0.0 }
        });
        let swing = Swing::new(&y);
        for (period, steps) in [(44.0, vec![]), (31.5, vec![70]), (12.2, vec![20, 70, 100])] {
            let got = swing.deviance(&swing.wave(period), &steps).unwrap();
            let want = direct(&y, period, &steps);
            assert!(
                (got - want).abs() < 1e-6,
                "period {period} steps {steps:?}: {got} against {want}"
            );
        }
    }

    #[test]
    fn the_period_of_a_swing_is_found() {
        let y = noisy(100, |t| {
            100.0 + 5.0 * (std::f64::consts::TAU * t as f64 / 37.0 + 1.0).sin()
        });
        let (period, _) = Swing::new(&y).best_period(&[]).unwrap();
        assert!((period - 37.0).abs() < 1.0, "period {period}");
    }
}
