//! A level that wanders: the local-level model, with interventions.
//!
//! The local-level model (Harvey 1989; the model of DeCAFS, Romano et al.
//! 2022, without its AR part): `yₜ = μₜ + εₜ`, `μₜ₊₁ = μₜ + ηₜ`,
//! `Var η / Var ε = q`, plus a drift and steps (interventions) by
//! generalised least squares on the filter's innovations; the noise
//! variance by maximum likelihood. [`super::alternatives`] compares it,
//! with the change points it keeps, against the staircase.
//!
//! Cost: one Kalman filter pass per value of `q` (the local level's filter
//! is scalar), and every intervention's effect on it in closed form: the
//! filter's innovations of a step dummy decay by `1 − Kₜ` from the step on,
//! so their cross-products are suffix sums ([`Filter`]), O(n + k²) per `q`
//! for `k` change points; with few, one pass carrying them through the
//! filter ([`deviance_at`]). `q` by Brent's method on `ln q`
//! ([`super::minimise`]).

use super::least_squares::profile;

/// The filter of the local-level model with signal-to-noise ratio `q`, in
/// units of the noise variance, from the second point on (the first sets
/// the diffuse level), with the suffix sums the interventions need.
struct Filter {
    /// `Σ ln Fₜ` (innovation variances, in units of the noise variance).
    log_f: f64,
    /// `Σ vₜ² / Fₜ`.
    vv: f64,
    /// An intervention at `t` decays by `Π_{t ≤ u < t'} (1 − K_u)` by `t'`,
    /// and `1 − K_u = 1 / F_u`: that product is `exp(base[t / BLOCK] −
    /// base[t' / BLOCK]) · scale[t] / scale[t']`, `base` the sum of `ln F`
    /// before each block and `scale` the product of `F` within it so far.
    /// A logarithm per block, not per point.
    base: Vec<f64>,
    scale: Vec<f64>,
    /// `Σ_{t' ≥ t} (Π_{t ≤ u < t'} (1 − K_u))² / F_{t'}`.
    dd: Vec<f64>,
    /// `Σ_{t' ≥ t} Π_{t ≤ u < t'} (1 − K_u) · v_{t'} / F_{t'}`.
    dv: Vec<f64>,
    /// The same with the innovations of the drift column (`xₜ = t`).
    dx: Vec<f64>,
    /// `Σ xₜ² / F` and `Σ xₜ vₜ / F` of the drift's innovations.
    xx: f64,
    xv: f64,
}

impl Filter {
    fn run(y: &[f64], q: f64) -> Filter {
        let n = y.len();
        let mut inv_f = vec![0.0; n];
        let mut v = vec![0.0; n];
        let mut x = vec![0.0; n];
        let mut base = vec![0.0; n / BLOCK + 1];
        let mut scale = vec![1.0; n + 1];
        // The drift column starts at 0 where the series starts at y[0].
        let (mut level, mut drift, mut p) = (y[0], 0.0, 1.0 + q);
        let (mut vv, mut xx, mut xv) = (0.0, 0.0, 0.0);
        let mut product: f64 = 1.0;
        for t in 1..n {
            if t % BLOCK == 0 {
                base[t / BLOCK] = base[t / BLOCK - 1] + product.ln();
                product = 1.0;
            }
            scale[t] = product;
            let ft = p + 1.0;
            let inv = 1.0 / ft;
            let gain = p * inv;
            p = p * inv + q;
            product *= ft;
            let vt = y[t] - level;
            let xt = t as f64 - drift;
            level += gain * vt;
            drift += gain * xt;
            inv_f[t] = inv;
            v[t] = vt;
            x[t] = xt;
            vv += vt * vt * inv;
            xx += xt * xt * inv;
            xv += xt * vt * inv;
        }
        let log_f = base[(n - 1) / BLOCK] + product.ln();
        let (mut dd, mut dv, mut dx) = (vec![0.0; n + 1], vec![0.0; n + 1], vec![0.0; n + 1]);
        for t in (1..n).rev() {
            let inv = inv_f[t];
            dd[t] = inv + inv * inv * dd[t + 1];
            dv[t] = inv * (v[t] + dv[t + 1]);
            dx[t] = inv * (x[t] + dx[t + 1]);
        }
        Filter {
            log_f,
            vv,
            base,
            scale,
            dd,
            dv,
            dx,
            xx,
            xv,
        }
    }

    /// `Σ xᵢ xⱼ / F` of the innovations of interventions at `i ≤ j`.
    fn cross(&self, i: usize, j: usize) -> f64 {
        let (i, j) = (i.min(j), i.max(j));
        let blocks = self.base[i / BLOCK] - self.base[j / BLOCK];
        blocks.exp() * self.scale[i] / self.scale[j] * self.dd[j]
    }
}

/// Points whose `F`s are multiplied before one logarithm is taken: each
/// `F` is below `2 + q ≤ 2 + e²` ([`LOG_Q`]), so 32 of them stay far
/// inside a double.
const BLOCK: usize = 32;

/// The local-level model's deviance (`−2 ln L`, up to a constant both
/// models share) at the filter's `q` with interventions at `steps` (all in
/// `1..n`): the drift and the steps by generalised least squares on the
/// filter's innovations, the noise variance by maximum likelihood.
fn deviance(filter: &Filter, n: usize, steps: &[usize]) -> Option<f64> {
    // Column 0 is the drift, both models have it: a step on a slope is
    // still a step, and a slope is not a wander.
    let k = steps.len() + 1;
    let mut a = vec![0.0; k * k];
    let mut b = vec![filter.xv];
    b.extend(steps.iter().map(|&s| filter.dv[s]));
    a[0] = filter.xx;
    for (i, &si) in steps.iter().enumerate() {
        a[i + 1] = filter.dx[si];
        a[(i + 1) * k] = filter.dx[si];
        for (j, &sj) in steps.iter().enumerate() {
            a[(i + 1) * k + j + 1] = filter.cross(si, sj);
        }
    }
    profile(filter.log_f, filter.vv, a, b, n)
}

/// [`deviance`] in one forward pass that carries the regression columns
/// through the filter (the augmented Kalman filter), keeping nothing per
/// point: O(n k²) for `k` columns, against [`Filter::run`]'s O(n) with
/// seven arrays and a backward pass. The search for `q` evaluates dozens of
/// `q`s with few interventions; this is what it runs.
fn deviance_at(y: &[f64], q: f64, steps: &[usize]) -> Option<f64> {
    let n = y.len();
    let k = steps.len() + 1;
    // Each column's filtered value; column 0 is the drift `t`, the others
    // a step's `1[t ≥ s]`.
    let mut filtered = vec![0.0; k];
    let mut u = vec![0.0; k];
    let mut a = vec![0.0; k * k];
    let mut b = vec![0.0; k];
    let (mut level, mut p) = (y[0], 1.0 + q);
    let (mut log_f, mut vv) = (0.0, 0.0);
    // `Σ ln F` as the logarithm of products of up to [`BLOCK`] `F`s: each is at
    // most 2 + e², so a product stays far inside a double, and a logarithm
    // per point was a third of the search's time.
    let mut product = 1.0;
    // The drift alone (the search for q before any step has joined) in
    // scalars: the general loop below costs several times as much.
    let (mut drift, mut xx, mut xv) = (0.0, 0.0, 0.0);
    // Once the variance has settled, `F` and `K` are constants: no more
    // divisions, whose latency bounds the loop, and `Σ ln F` grows by
    // `ln F` a point.
    let (mut ft, mut inv, mut gain) = (0.0, 0.0, 0.0);
    let mut settled_at: Option<usize> = None;
    for (t, &yt) in y.iter().enumerate().skip(1) {
        if settled_at.is_none() {
            ft = p + 1.0;
            inv = 1.0 / ft;
            gain = p * inv;
            let next = p * inv + q;
            if (next - p).abs() <= 1e-12 * p {
                settled_at = Some(t);
            }
            p = next;
            product *= ft;
            if t % BLOCK == 0 {
                log_f += product.ln();
                product = 1.0;
            }
        }
        let vt = yt - level;
        level += gain * vt;
        vv += vt * vt * inv;
        if k == 1 {
            let xt = t as f64 - drift;
            drift += gain * xt;
            xx += xt * xt * inv;
            xv += xt * vt * inv;
            continue;
        }
        u[0] = t as f64 - filtered[0];
        for (j, &s) in steps.iter().enumerate() {
            u[j + 1] = if t >= s { 1.0 } else { 0.0 } - filtered[j + 1];
        }
        for i in 0..k {
            filtered[i] += gain * u[i];
            let ui = u[i] * inv;
            if ui == 0.0 {
                continue;
            }
            b[i] += ui * vt;
            for j in 0..=i {
                a[i * k + j] += ui * u[j];
            }
        }
    }
    log_f += product.ln();
    if let Some(from) = settled_at {
        // The point that settled it was counted in the products.
        log_f += (n - 1 - from) as f64 * ft.ln();
    }
    if k == 1 {
        return profile(log_f, vv, vec![xx], vec![xv], n);
    }
    for i in 0..k {
        for j in 0..i {
            a[j * k + i] = a[i * k + j];
        }
    }
    profile(log_f, vv, a, b, n)
}

/// Bounds of `ln q` searched: from a level that barely moves over a
/// million points to one that moves more than the noise at every point.
const LOG_Q: (f64, f64) = (-16.0, 2.0);

/// The maximum-likelihood `q` for interventions at `steps` and its fit:
/// Brent's search over `ln q` in [`LOG_Q`], then `q = 0` (white noise
/// around the steps) if that is better still.
pub(super) fn best_q(y: &[f64], steps: &[usize]) -> Option<(f64, f64)> {
    let eval = |q: f64| deviance_at(y, q, steps);
    let (log_q, deviance) = super::minimise::brent(
        |x| eval(x.exp()).unwrap_or(f64::INFINITY),
        LOG_Q.0,
        LOG_Q.1,
        LOG_Q_TOLERANCE,
        MAX_EVALUATIONS,
    );
    let zero = eval(0.0)?;
    if !deviance.is_finite() || zero <= deviance {
        return Some((0.0, zero));
    }
    Some((log_q.exp(), deviance))
}

/// How closely `ln q` is found: `q` to about 10%, where the likelihood is
/// flat (hundredths of a unit of deviance, against penalties of ten; the
/// benchmark's detections were the same at 5%).
const LOG_Q_TOLERANCE: f64 = 0.1;

/// Evaluations of the likelihood per search for `q`, at most.
const MAX_EVALUATIONS: usize = 30;

/// Change points up to which forward selection runs the one-pass filter
/// for each candidate set rather than [`Filter::run`] once: with two, at
/// most three sets of at most three columns, which cost less than the
/// suffix sums' seven arrays.
const FEW: usize = 2;

/// The deviance of interventions (any subset of `candidates`, in order) at
/// `q`: by the suffix sums of one filter pass for many candidates, by one
/// augmented pass per set for few.
pub(super) fn at_q(
    series: &[f64],
    q: f64,
    candidates: &[usize],
) -> impl Fn(&[usize]) -> Option<f64> {
    let filter = (candidates.len() > FEW).then(|| Filter::run(series, q));
    move |with: &[usize]| match &filter {
        Some(filter) => deviance(filter, series.len(), with),
        None => deviance_at(series, q, with),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With `q = 0` the filter is a running mean and the fit least
    /// squares on a constant, the drift and the steps: the deviance is
    /// `Σ ln Fₜ + (n − 1) ln(RSS / (n − 1))`, `Fₜ = (t + 1) / t`.
    #[test]
    fn without_a_wander_the_fit_is_least_squares_on_a_line_and_the_steps() {
        // A line 2 + 0.5 t, a step of 6 at 4, and ±1 alternating: least
        // squares recovers line and step, the residuals are what the ±1
        // leaves once a constant, a slope and the step have taken theirs.
        let y: Vec<f64> = (0..9)
            .map(|t| {
                let t = t as f64;
                2.0 + 0.5 * t
                    + if t >= 4.0 { 6.0 } else { 0.0 }
                    + if (t as usize).is_multiple_of(2) {
                        1.0
                    } else {
                        -1.0
                    }
            })
            .collect();
        // The same least squares, by its normal equations.
        let cols = |t: usize| [1.0, t as f64, if t >= 4 { 1.0 } else { 0.0 }];
        let mut a = vec![0.0; 9];
        let mut b = vec![0.0; 3];
        for (t, &yt) in y.iter().enumerate() {
            let x = cols(t);
            for i in 0..3 {
                b[i] += x[i] * yt;
                for j in 0..3 {
                    a[i * 3 + j] += x[i] * x[j];
                }
            }
        }
        let beta = super::super::least_squares::solve(a, b).unwrap();
        let rss: f64 = y
            .iter()
            .enumerate()
            .map(|(t, &yt)| {
                (yt - cols(t).iter().zip(&beta).map(|(x, c)| x * c).sum::<f64>()).powi(2)
            })
            .sum();
        let log_f: f64 = (1..9).map(|t| ((t + 1) as f64 / t as f64).ln()).sum();
        let d = deviance(&Filter::run(&y, 0.0), y.len(), &[4]).unwrap();
        let expected = log_f + 8.0 * (rss / 8.0).ln();
        assert!((d - expected).abs() < 1e-9, "{d} {expected}");
        // Without the step, the fit is far worse.
        let without = deviance(&Filter::run(&y, 0.0), y.len(), &[]).unwrap();
        assert!(without > d + 10.0);
    }

    /// The one-pass augmented filter and the suffix sums of [`Filter::run`]
    /// are two ways to one deviance.
    #[test]
    fn both_ways_to_the_deviance_agree() {
        let y: Vec<f64> = (0..300)
            .map(|t| {
                let t = t as f64;
                100.0
                    + 0.02 * t
                    + (t * 0.37).sin() * 3.0
                    + (t * 1.91).cos() * 2.0
                    + if t >= 120.0 { 5.0 } else { 0.0 }
            })
            .collect();
        for q in [0.0, 1e-7, 1e-3, 0.05, 2.0] {
            for steps in [vec![], vec![120], vec![40, 120, 250], vec![1, 299]] {
                let slow = deviance(&Filter::run(&y, q), y.len(), &steps).unwrap();
                let fast = deviance_at(&y, q, &steps).unwrap();
                assert!(
                    (slow - fast).abs() < 1e-6 * slow.abs().max(1.0),
                    "q {q} steps {steps:?}: {slow} {fast}"
                );
            }
        }
    }
}
