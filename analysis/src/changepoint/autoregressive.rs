//! Serially correlated noise: change points that AR(1) noise around a line
//! explains.
//!
//! Noise whose deviations persist (`εₜ = φ εₜ₋₁ + ηₜ`) wanders away from its
//! mean for runs of points, and a staircase follows those runs. The
//! dependence stage ([`super::serial`]) sees the persistence only in the
//! residuals around the segments binary segmentation found, and those
//! segments already follow the runs: in the benchmark's 100-point series of
//! AR(1) noise (φ 0.3–0.8) its gate stayed shut on most of them, leaving 2.2
//! false change points per 1,000 points. Here the series is judged as a
//! whole, as for a wander ([`super::level`]): a constant and a drift plus
//! the steps that still pay for themselves, under AR(1) noise with `φ` by
//! maximum likelihood.
//!
//! The likelihood is the exact one (Prais–Winsten): the first value scaled
//! by `√(1 − φ²)`, every later one differenced, `yₜ − φ yₜ₋₁`, and least
//! squares on the transformed values. The constant is diffuse, as the
//! first point of the local-level filter is, so that at `φ = 0` the
//! deviance is the staircase's (`staircase_cost` in [`super::staircase`]).
//!
//! Cost: every sum least squares needs — of the transformed values, the
//! constant, the drift and each step column — is a closed form in `φ` over
//! prefix sums of the series and of its lagged products, taken once. A
//! value of `φ` costs O(k²) for `k` steps, not O(n).

/// Sums of the series that the transformed least squares needs at any `φ`,
/// the series centred on its mean (the constant absorbs it; the products
/// stay small).
pub(super) struct Lagged {
    n: usize,
    /// `Σ_{u < t} yᵤ`.
    prefix: Vec<f64>,
    /// `y₀`.
    first: f64,
    /// `Σ_{t ≥ 1} yₜ²`, `Σ_{t ≥ 1} yₜ yₜ₋₁` and `Σ_{t ≤ n−2} yₜ²`.
    yy_now: f64,
    yy_lag: f64,
    yy_before: f64,
    /// `Σ_{t ≥ 1} t yₜ` and `Σ_{t ≤ n−2} t yₜ`.
    ty_now: f64,
    ty_before: f64,
}

impl Lagged {
    /// The sums of `y` (at least two values).
    pub(super) fn new(y: &[f64]) -> Lagged {
        let n = y.len();
        let mean = y.iter().sum::<f64>() / n as f64;
        let mut prefix = vec![0.0; n + 1];
        let (mut yy_now, mut yy_lag, mut ty_now) = (0.0, 0.0, 0.0);
        let mut previous = y[0] - mean;
        for (t, &v) in y.iter().enumerate() {
            let v = v - mean;
            prefix[t + 1] = prefix[t] + v;
            if t > 0 {
                yy_now += v * v;
                yy_lag += v * previous;
                ty_now += t as f64 * v;
            }
            previous = v;
        }
        let first = y[0] - mean;
        let last = y[n - 1] - mean;
        Lagged {
            n,
            first,
            yy_before: yy_now + first * first - last * last,
            ty_before: ty_now - (n - 1) as f64 * last,
            yy_now,
            yy_lag,
            ty_now,
            prefix,
        }
    }

    /// `Σ_{a ≤ t < b} yₜ`.
    fn sum(&self, a: usize, b: usize) -> f64 {
        self.prefix[b] - self.prefix[a]
    }

    /// The deviance (`−2 ln L` up to the constant every model here shares)
    /// of a constant, a drift and a step at each of `steps` (all in
    /// `1..n`) under AR(1) noise of coefficient `phi` (in `[0, 1)`), the
    /// noise variance by maximum likelihood; `None` when the steps make the
    /// fit singular.
    pub(super) fn deviance(&self, phi: f64, steps: &[usize]) -> Option<f64> {
        let n = self.n;
        let m = (n - 1) as f64;
        let r = 1.0 - phi;
        let s2 = 1.0 - phi * phi;
        // Transformed columns: the constant is √(1−φ²) at 0 and r after;
        // the drift 0 at 0 and r t + φ after; a step at s, 0 before it, 1
        // at s and r after.
        let t1 = m * n as f64 / 2.0; // Σ_{t=1}^{n−1} t
        let t2 = m * n as f64 * (2.0 * m + 1.0) / 6.0; // Σ t²
        let drift_from = |a: usize| {
            // Σ_{t=a}^{n−1} (r t + φ)
            let count = (n - a) as f64;
            let sum_t = (a + n - 1) as f64 * count / 2.0;
            r * sum_t + phi * count
        };
        // Σ_{t ≥ a} ỹₜ for a ≥ 1: Σ_{t=a}^{n−1} yₜ − φ Σ_{t=a−1}^{n−2} yₜ.
        let y_from = |a: usize| self.sum(a, n) - phi * self.sum(a - 1, n - 1);
        let y_all = y_from(1);
        let k = steps.len() + 2;
        let mut a = vec![0.0; k * k];
        let mut b = vec![0.0; k];
        let cc = s2 + m * r * r;
        a[0] = cc;
        a[1] = r * (r * t1 + phi * m);
        a[k] = a[1];
        a[k + 1] = r * r * t2 + 2.0 * r * phi * t1 + phi * phi * m;
        b[0] = s2 * self.first + r * y_all;
        b[1] = r * (self.ty_now - phi * (self.ty_before + self.sum(0, n - 1))) + phi * y_all;
        let yy = s2 * self.first * self.first + self.yy_now - 2.0 * phi * self.yy_lag
            + phi * phi * self.yy_before;
        for (i, &si) in steps.iter().enumerate() {
            let row = i + 2;
            let c = r + r * r * (n - 1 - si) as f64;
            let x = (r * si as f64 + phi) + r * drift_from(si + 1);
            a[row * k] = c;
            a[row] = c;
            a[row * k + 1] = x;
            a[k + row] = x;
            let after = if si + 1 < n { y_from(si + 1) } else { 0.0 };
            b[row] = (self.sum(si, si + 1) - phi * self.sum(si - 1, si)) + r * after;
            for (j, &sj) in steps.iter().enumerate() {
                let later = si.max(sj);
                let tail = r * r * (n - 1 - later) as f64;
                a[row * k + j + 2] = if si == sj { 1.0 + tail } else { r + tail };
            }
        }
        // ln|Σ| = −ln(1 − φ²) in units of the innovations' variance; the
        // diffuse constant adds the log of its transformed sum of squares
        // (ln n at φ = 0, as the running mean's Σ ln F); the rest is the
        // local level's profile over the regression.
        super::least_squares::profile(-s2.ln() + cc.ln(), yy, a, b, n)
    }
}

/// Largest `φ` searched: noise this persistent over 100 points is a
/// wander, the local-level model's to explain.
const MAX_PHI: f64 = 0.98;

/// How closely `φ` is found; the deviance is flat near its minimum.
const PHI_TOLERANCE: f64 = 0.005;

/// Evaluations of the likelihood per search for `φ`, at most.
const MAX_EVALUATIONS: usize = 40;

/// The maximum-likelihood `φ` in `[0, MAX_PHI]` with steps at `steps`, and
/// its deviance; `φ = 0` when white noise is likelier still.
pub(super) fn best_phi(sums: &Lagged, steps: &[usize]) -> Option<(f64, f64)> {
    let (phi, deviance) = super::minimise::brent(
        |phi| sums.deviance(phi, steps).unwrap_or(f64::INFINITY),
        0.0,
        MAX_PHI,
        PHI_TOLERANCE,
        MAX_EVALUATIONS,
    );
    let zero = sums.deviance(0.0, steps)?;
    if !deviance.is_finite() || zero <= deviance {
        return Some((0.0, zero));
    }
    Some((phi, deviance))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};

    /// The deviance straight from its definition: transform, then least
    /// squares on the transformed columns.
    fn direct(y: &[f64], phi: f64, steps: &[usize]) -> f64 {
        let n = y.len();
        let s = (1.0 - phi * phi).sqrt();
        let column = |f: &dyn Fn(usize) -> f64| -> Vec<f64> {
            (0..n)
                .map(|t| {
                    if t == 0 {
                        s * f(0)
                    } else {
                        f(t) - phi * f(t - 1)
                    }
                })
                .collect()
        };
        let mut cols = vec![column(&|_| 1.0), column(&|t| t as f64)];
        for &st in steps {
            cols.push(column(&move |t| if t >= st { 1.0 } else { 0.0 }));
        }
        let yt = column(&|t| y[t]);
        let k = cols.len();
        let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
        let mut a = vec![0.0; k * k];
        for i in 0..k {
            for j in 0..k {
                a[i * k + j] = dot(&cols[i], &cols[j]);
            }
        }
        let b: Vec<f64> = cols.iter().map(|c| dot(c, &yt)).collect();
        let beta = super::super::least_squares::solve(a, b.clone()).unwrap();
        let rss = dot(&yt, &yt) - beta.iter().zip(&b).map(|(x, y)| x * y).sum::<f64>();
        let m = (n - 1) as f64;
        -(1.0 - phi * phi).ln() + dot(&cols[0], &cols[0]).ln() + m * (rss / m).ln()
    }

    #[test]
    fn the_closed_forms_are_the_transformed_least_squares() {
        let y: Vec<f64> = (0..40)
            .map(|t| 100.0 + (t as f64 * 0.7).sin() * 3.0 + if t >= 17 { 5.0 } else { 0.0 })
            .collect();
        let sums = Lagged::new(&y);
        for phi in [0.0, 0.3, 0.8] {
            for steps in [&[][..], &[17], &[1, 17, 39]] {
                let (fast, slow) = (sums.deviance(phi, steps).unwrap(), direct(&y, phi, steps));
                assert!(
                    (fast - slow).abs() < 1e-7 * slow.abs().max(1.0),
                    "φ {phi}, steps {steps:?}: {fast} against {slow}"
                );
            }
        }
    }

    #[test]
    fn persistent_noise_is_found_and_white_noise_is_not() {
        // AR(1) of φ = 0.7 over seeded uniform innovations.
        let mut rng = StdRng::seed_from_u64(12345);
        let white: Vec<f64> = (0..2000).map(|_| rng.random::<f64>() - 0.5).collect();
        let mut e = 0.0;
        let ar: Vec<f64> = white
            .iter()
            .map(|w| {
                e = 0.7 * e + w;
                e
            })
            .collect();
        let (phi, _) = best_phi(&Lagged::new(&ar), &[]).unwrap();
        assert!((phi - 0.7).abs() < 0.05, "φ̂ {phi}");
        let (phi, _) = best_phi(&Lagged::new(&white), &[]).unwrap();
        assert!(phi < 0.05, "φ̂ {phi} on white noise");
    }
}
