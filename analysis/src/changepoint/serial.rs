//! Serially dependent noise: what keeps a wander or correlated noise from
//! passing for steps.
//!
//! The permutation test of [`super::significance`] is exact when the values
//! of a segment are exchangeable. Fleet histories often are not: noise is
//! correlated from one matrix to the next (AR(1)), or wanders (a random
//! walk), or repeats. Under such noise every ordering is no longer equally
//! likely, the permutation test is far too confident, and binary
//! segmentation cuts the noise into steps.
//!
//! So when the residuals around binary segmentation's segments show serial
//! correlation ([`dependent`]), each change point is checked again: the
//! variance of a contrast `Σ wₜ xₜ` whose weights sum to zero is
//! `−Σᵢ Σⱼ wᵢ wⱼ γ(|i − j|)` for any noise with stationary increments, where
//! `γ(h) = ½ E[(xₜ₊ₕ − xₜ)²]` is the semivariogram ([`Variogram`]). White
//! noise has a flat `γ` and gives back the usual `σ² (1/a + 1/b)`; AR(1)
//! noise a `γ` that rises to its sill within a few lags, and so the
//! long-run variance. A step must reach a Bonferroni `z` over its stretch
//! under that variance ([`confirm`]).
//!
//! The variogram is estimated from lag-`h` differences within the segments
//! (never across a change point), as the squared MAD about their median:
//! the median removes a linear trend's constant difference, the MAD is
//! robust to outliers and to a missed step. Trends are [`super::trend`]'s.

use super::bonferroni::{critical_z, p_value};
use super::robust::{mad, median_of};
use super::staircase::{bounds, staircase_cost};

/// The residuals' lag-one autocorrelation, standardised (`r₁ √N`), above
/// which a series is treated as serially dependent. Under white noise it is
/// about standard normal, so 3 lets one white series in 700 through: that
/// one only meets a stricter test, it does not lose its change points.
pub(super) const DEPENDENCE_Z: f64 = 3.0;

/// Fewest lag-`h` differences for `γ(h)` to be estimated; longer lags are
/// extrapolated. 30 differences give the MAD a relative error of about 25%.
const MIN_PAIRS: usize = 30;

/// The residuals' lag-one autocorrelation around the means of the segments
/// `bounds` (`0, …, n`), pairs within a segment only, and how many pairs.
fn lag_one(series: &[f64], bounds: &[usize]) -> (f64, usize) {
    let (mut num, mut den, mut pairs) = (0.0, 0.0, 0usize);
    for w in bounds.windows(2) {
        let part = &series[w[0]..w[1]];
        if part.is_empty() {
            continue;
        }
        let mean = part.iter().sum::<f64>() / part.len() as f64;
        den += part.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
        num += part
            .windows(2)
            .map(|p| (p[0] - mean) * (p[1] - mean))
            .sum::<f64>();
        pairs += part.len() - 1;
    }
    if den <= 0.0 || pairs == 0 {
        return (0.0, pairs);
    }
    (num / den, pairs)
}

/// Whether the residuals around the segments' means are serially
/// correlated, positively, beyond chance ([`DEPENDENCE_Z`]).
pub(super) fn dependent(series: &[f64], bounds: &[usize]) -> bool {
    let (r1, pairs) = lag_one(series, bounds);
    r1 * (pairs as f64).sqrt() > DEPENDENCE_Z
}

/// The noise's semivariogram, fitted as white noise plus AR(1):
/// `γ(h) = white + ar · (1 − φʰ)` for `h ≥ 1`, `γ(0) = 0`.
///
/// A model, not the raw estimates: the variance of a contrast of long
/// segments is a sum over thousands of lags whose terms cancel to a
/// thousandth of their size, so any estimation noise at long lags would
/// swamp it. AR(1) with `φ` up to [`MAX_PHI`] also stands in for a slow
/// wander (a random walk rises like an AR(1) with `φ` near one over the
/// lags that can be estimated) and for a seasonal pattern (its variogram
/// rises over half a period).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Variogram {
    white: f64,
    ar: f64,
    phi: f64,
}

/// Largest AR(1) coefficient fitted: beyond, the lags that can be estimated
/// cannot tell `φ` from one.
const MAX_PHI: f64 = 0.98;

/// Lags at which the variogram is estimated: all up to eight, then
/// spreading out to 64, which AR(1) with `φ = 0.9` needs to come within 1%
/// of its sill.
const LAGS: [usize; 17] = [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64];

impl Variogram {
    /// Fitted to the squared MADs of lag-`h` differences within the
    /// segments `bounds` (see [`LAGS`]; a lag is used while it has at least
    /// [`MIN_PAIRS`] differences), by least squares over a grid of `φ`
    /// with `white` and `ar` not negative.
    fn estimate(series: &[f64], bounds: &[usize]) -> Variogram {
        let mut points: Vec<(f64, f64)> = Vec::new();
        let mut diffs: Vec<f64> = Vec::new();
        for &h in &LAGS {
            diffs.clear();
            for w in bounds.windows(2) {
                let part = &series[w[0]..w[1]];
                if part.len() > h {
                    diffs.extend(part.windows(h + 1).map(|p| p[h] - p[0]));
                }
            }
            if diffs.len() < MIN_PAIRS {
                break;
            }
            // MAD · 1.4826 estimates the differences' standard deviation.
            points.push((h as f64, 0.5 * (1.4826 * mad(&mut diffs)).powi(2)));
        }
        fit(&points)
    }

    /// `γ(h)`.
    fn at(&self, h: usize) -> f64 {
        if h == 0 {
            0.0
        } else {
            self.white + self.ar * (1.0 - self.phi.powi(h.min(i32::MAX as usize) as i32))
        }
    }

    /// The marginal variance, `γ` at infinity.
    pub(super) fn sill(&self) -> f64 {
        self.white + self.ar
    }
}

/// The white-plus-AR(1) variogram closest to `points` (lag, estimate).
fn fit(points: &[(f64, f64)]) -> Variogram {
    let flat = |points: &[(f64, f64)]| Variogram {
        white: points.iter().map(|p| p.1).sum::<f64>() / points.len().max(1) as f64,
        ar: 0.0,
        phi: 0.0,
    };
    if points.len() < 3 {
        return flat(points);
    }
    let sse = |v: &Variogram| -> f64 {
        points
            .iter()
            .map(|&(h, g)| (v.at(h as usize) - g).powi(2))
            .sum()
    };
    let mut best = flat(points);
    let mut best_sse = sse(&best);
    for step in 1..=49 {
        let phi = (f64::from(step) * 0.02).min(MAX_PHI);
        // g ≈ white + ar · u, u = 1 − φʰ: least squares in (white, ar).
        let k = points.len() as f64;
        let (su, sg) = points.iter().fold((0.0, 0.0), |(su, sg), &(h, g)| {
            (su + 1.0 - phi.powf(h), sg + g)
        });
        let (mu, mg) = (su / k, sg / k);
        let (mut sxy, mut sxx) = (0.0, 0.0);
        for &(h, g) in points {
            let u = 1.0 - phi.powf(h) - mu;
            sxy += u * (g - mg);
            sxx += u * u;
        }
        if sxx <= 0.0 {
            continue;
        }
        let ar = (sxy / sxx).max(0.0);
        let white = mg - ar * mu;
        let v = if white < 0.0 {
            // Through the origin: all of it AR.
            let (suu, sug) = points.iter().fold((0.0, 0.0), |(a, b), &(h, g)| {
                let u = 1.0 - phi.powf(h);
                (a + u * u, b + u * g)
            });
            Variogram {
                white: 0.0,
                ar: (sug / suu).max(0.0),
                phi,
            }
        } else {
            Variogram { white, ar, phi }
        };
        let e = sse(&v);
        if e < best_sse {
            best = v;
            best_sse = e;
        }
    }
    best
}

/// The noise variance, from the differences of neighbouring points within
/// the segments `bounds` (a step between segments is no noise; a series too
/// short for the variogram still has a noise level): half their variance,
/// each squared difference capped at [`WINSOR`] robust standard deviations
/// (the MAD · 1.4826) from their median, so that an outlier counts as a
/// large difference, not as thirty of them. 0 with none.
///
/// Half the squared MAD alone, as before, varies too much at 100 points:
/// on normal noise its spread is 26% of the variance, and one series in
/// ten reads under 70% of it (capped squares: 17%, one in thirty). The
/// trend stage divides every sum of squares by this variance, and a low
/// reading made the staircases of trends look better than their lines:
/// the benchmark's 100-point trends kept 1.6 false change points per 1,000
/// points with it, 1.0 with the capped squares.
pub(super) fn noise(series: &[f64], bounds: &[usize]) -> f64 {
    let mut diffs: Vec<f64> = bounds
        .windows(2)
        .flat_map(|w| series[w[0]..w[1]].windows(2).map(|p| p[1] - p[0]))
        .collect();
    if diffs.is_empty() {
        return 0.0;
    }
    half_variance(&mut diffs)
}

/// Half the variance of `diffs` (reordered): the mean of their squares
/// about their median, each capped at [`WINSOR`] robust standard
/// deviations, made a normal variance.
fn half_variance(diffs: &mut [f64]) -> f64 {
    let centre = median_of(diffs);
    let mut deviations: Vec<f64> = diffs.iter().map(|d| (d - centre).abs()).collect();
    let cap = (WINSOR * 1.4826 * median_of(&mut deviations)).powi(2);
    let squares: f64 = diffs.iter().map(|d| (d - centre).powi(2).min(cap)).sum();
    0.5 * squares / diffs.len() as f64 / WINSOR_NORMAL
}

/// Where a difference's square is capped, in robust standard deviations.
/// On the benchmark at 100 points: at 2 or 2.5, trends kept 1.4 and 1.25
/// false change points per 1,000 points; at 3, 3.5 and 4, 1.0. From 2.5
/// to 3.5 one real step of 633 under outlier noise went (at 4, four); at
/// every cap t₃ noise had one false change point more.
const WINSOR: f64 = 3.0;

/// `E[min(Z², WINSOR²)]` for a standard normal `Z`, `(2Φ(3) − 1) − 6φ(3) +
/// 9 · 2(1 − Φ(3))`: what makes the capped mean of squares a normal
/// variance.
const WINSOR_NORMAL: f64 = 0.995_007_278_034_453_7;

/// Weights `p + q (t − c)` over one part of a stretch.
#[derive(Debug, Clone, Copy)]
struct Linear {
    p: f64,
    q: f64,
    c: f64,
}

/// `Σ_{t0 ≤ t < t1} (p₁ + q₁ (t − c₁)) (p₂ + q₂ (t + h − c₂))`, in closed
/// form (the sums of `u` and `u²` over a run of consecutive integers).
fn pair_sum(w1: Linear, w2: Linear, h: usize, t0: usize, t1: usize) -> f64 {
    if t1 <= t0 {
        return 0.0;
    }
    let n = (t1 - t0) as f64;
    let d = t0 as f64 - w1.c;
    let s1 = n * d + n * (n - 1.0) / 2.0;
    let s2 = n * d * d + d * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
    let p2 = w2.p + w2.q * (w1.c + h as f64 - w2.c);
    w1.p * p2 * n + (w1.p * w2.q + w1.q * p2) * s1 + w1.q * w2.q * s2
}

/// The variance of `Σ wₜ xₜ` over a stretch of `a + b` points whose weights
/// are `left` on the first `a` and `right` on the last `b`, and sum to zero:
/// `−2 Σ_{h ≥ 1} γ(h) Σₜ wₜ wₜ₊ₕ`, which for `γ(h) = sill − ar · φʰ` is
/// `sill · Σ wₜ² + 2 ar Σ_{h ≥ 1} φʰ Σₜ wₜ wₜ₊ₕ` (the weights summing to
/// zero, `Σ_{h ≥ 1} Σₜ wₜ wₜ₊ₕ = −½ Σ wₜ²`). The second sum stops once `φʰ`
/// is negligible: O(min(a + b, 1 / (1 − φ))).
fn variance(v: &Variogram, a: usize, b: usize, left: Linear, right: Linear) -> f64 {
    let m = a + b;
    let squares = pair_sum(left, left, 0, 0, a) + pair_sum(right, right, 0, a, m);
    let mut total = v.sill() * squares;
    if v.ar > 0.0 && v.phi > 0.0 {
        let mut decay = 1.0;
        for h in 1..m {
            decay *= v.phi;
            if decay < 1e-12 {
                break;
            }
            let mut acf = pair_sum(left, left, h, 0, a.saturating_sub(h));
            acf += pair_sum(left, right, h, a.saturating_sub(h), a.min(m - h));
            if h < b {
                acf += pair_sum(right, right, h, a, m - h);
            }
            total += 2.0 * v.ar * decay * acf;
        }
    }
    total.max(0.0)
}

/// The step at change point `i` of `at` (in order) over its standard error
/// under the variogram `v`: the difference of the means of the segments on
/// either side. `None` when a side has fewer than two points or the
/// variance vanishes.
fn step_z(series: &[f64], at: &[usize], v: &Variogram, i: usize) -> Option<f64> {
    let lo = if i == 0 { 0 } else { at[i - 1] };
    let hi = at.get(i + 1).copied().unwrap_or(series.len());
    let tau = at[i];
    let (a, b) = (tau - lo, hi - tau);
    if a < 2 || b < 2 {
        return None;
    }
    let mean = |part: &[f64]| part.iter().sum::<f64>() / part.len() as f64;
    let step = mean(&series[tau..hi]) - mean(&series[lo..tau]);
    let var = variance(
        v,
        a,
        b,
        Linear {
            p: -1.0 / a as f64,
            q: 0.0,
            c: (a as f64 - 1.0) / 2.0,
        },
        Linear {
            p: 1.0 / b as f64,
            q: 0.0,
            c: a as f64 + (b as f64 - 1.0) / 2.0,
        },
    );
    if var <= 0.0 {
        // Noiseless segments: any step is certain, no step is none.
        return (step != 0.0).then_some(step.signum() * f64::INFINITY);
    }
    Some(step / var.sqrt())
}

/// The change points `found` (index, p-value; in order) of a series with
/// dependent noise that remain steps under it: each step's `|z|` under the
/// variogram must reach [`critical_z`] of the stretch between its
/// neighbours. The weakest that fails is dropped, one at a time (dropping
/// one widens its neighbours' stretches), until none does. The p-value of
/// each is the larger of its permutation p-value and [`p_value`] of its `z`.
pub(super) fn confirm(series: &[f64], found: Vec<(usize, f64)>, alpha: f64) -> Vec<(usize, f64)> {
    let n = series.len();
    let mut kept = found;
    // The variogram is fitted within the segments, and a staircase of
    // false change points hides the slow part of the noise it cut up: once
    // some are dropped, the longer segments show more of it. A few rounds
    // settle it. The segments are also cut where a step binary
    // segmentation missed stands out far beyond the noise
    // ([`MISSED_STEP_PENALTY`]): across such a step the differences look
    // like slow noise, which then drops the real steps found.
    let missed = MISSED_STEP_PENALTY * 2.0 * (n as f64).ln();
    for _ in 0..VARIOGRAM_ROUNDS {
        let at: Vec<usize> = kept.iter().map(|&(at, _)| at).collect();
        let (_, cuts) = staircase_cost(series, &at, missed);
        let v = Variogram::estimate(series, &bounds(n, cuts));
        let before = kept.len();
        kept = drop_weakest(series, kept, &v, alpha);
        if kept.len() == before {
            break;
        }
    }
    kept
}

/// What a step binary segmentation missed must lower `−2 ln L` by to cut
/// the variogram's segments, in units of Schwarz's `2 ln n` (at 100
/// points 23: a step whose `z` is about 4.8), far beyond what the runs of
/// AR(1) noise give. With these cuts, of the benchmark's 100-point steps
/// (550–610 per family), 3, 3, 8 and 3 more were found under heavy,
/// bimodal and lognormal noise and on a trend, at 1 to 3 alike; AR(1)
/// noise at 100 points kept its 0.85 false change points per 1,000 from
/// 1.5 on (1.10 at 1), and drawn from another seed its 3.05 from 2.5 on
/// (3.15 at 2, 3.40 at 1.5).
const MISSED_STEP_PENALTY: f64 = 2.5;

/// Rounds of fitting the variogram and dropping change points.
const VARIOGRAM_ROUNDS: usize = 6;

/// The change points of `kept` left when, under the variogram `v`, the
/// weakest whose `|z|` does not reach [`critical_z`] is dropped, one at a
/// time, until none is; their p-values raised to [`p_value`] of their `z`.
fn drop_weakest(
    series: &[f64],
    mut kept: Vec<(usize, f64)>,
    v: &Variogram,
    alpha: f64,
) -> Vec<(usize, f64)> {
    let n = series.len();
    loop {
        let at: Vec<usize> = kept.iter().map(|c| c.0).collect();
        let mut weakest: Option<(usize, f64)> = None;
        let mut p = Vec::with_capacity(at.len());
        for i in 0..at.len() {
            let m = at.get(i + 1).copied().unwrap_or(n) - if i == 0 { 0 } else { at[i - 1] };
            let z = step_z(series, &at, v, i).unwrap_or(0.0);
            p.push(p_value(z, m));
            let margin = z.abs() / critical_z(m, alpha);
            if margin < 1.0 && weakest.is_none_or(|(_, w)| margin < w) {
                weakest = Some((i, margin));
            }
        }
        match weakest {
            Some((i, _)) => {
                kept.remove(i);
            }
            None => {
                for (c, p) in kept.iter_mut().zip(p) {
                    c.1 = c.1.max(p);
                }
                return kept;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The variance of the contrast by its definition, `O(m²)`.
    fn brute(v: &Variogram, w: &[f64]) -> f64 {
        let mut total = 0.0;
        for i in 0..w.len() {
            for j in 0..w.len() {
                total -= w[i] * w[j] * v.at(i.abs_diff(j));
            }
        }
        total
    }

    fn weights(a: usize, b: usize, left: Linear, right: Linear) -> Vec<f64> {
        (0..a + b)
            .map(|t| {
                let w = if t < a { left } else { right };
                w.p + w.q * (t as f64 - w.c)
            })
            .collect()
    }

    #[test]
    fn the_closed_form_variance_is_the_double_sum() {
        let white = Variogram {
            white: 9.0,
            ar: 0.0,
            phi: 0.0,
        };
        let ar = Variogram {
            white: 1.0,
            ar: 4.0,
            phi: 0.7,
        };
        for v in [&white, &ar] {
            for (a, b) in [(5, 5), (7, 12), (20, 3), (2, 2), (300, 900)] {
                let (cl, cr) = ((a as f64 - 1.0) / 2.0, a as f64 + (b as f64 - 1.0) / 2.0);
                let sxx = ((a * a * a - a) + (b * b * b - b)) as f64 / 12.0;
                let lin = |p, q, c| Linear { p, q, c };
                let cases = [
                    (lin(-1.0 / a as f64, 0.0, cl), lin(1.0 / b as f64, 0.0, cr)),
                    (lin(0.0, 1.0 / sxx, cl), lin(0.0, 1.0 / sxx, cr)),
                ];
                for (l, r) in cases {
                    let w = weights(a, b, l, r);
                    assert!(w.iter().sum::<f64>().abs() < 1e-12);
                    let exact = brute(v, &w);
                    let fast = variance(v, a, b, l, r);
                    assert!(
                        (exact - fast).abs() < 1e-9 * exact.abs().max(1e-6),
                        "{a} {b}: {exact} {fast}"
                    );
                }
            }
        }
        // White noise: the two-sample variance.
        let (a, b) = (30, 70);
        let fast = variance(
            &white,
            a,
            b,
            Linear {
                p: -1.0 / 30.0,
                q: 0.0,
                c: 14.5,
            },
            Linear {
                p: 1.0 / 70.0,
                q: 0.0,
                c: 64.5,
            },
        );
        assert!((fast - 9.0 * (1.0 / 30.0 + 1.0 / 70.0)).abs() < 1e-12);
    }

    #[test]
    fn the_fit_recovers_white_noise_and_ar1() {
        let white: Vec<(f64, f64)> = LAGS.iter().map(|&h| (h as f64, 9.0)).collect();
        let v = fit(&white);
        assert!((v.sill() - 9.0).abs() < 1e-9 && v.ar < 1e-9, "{v:?}");
        let truth = Variogram {
            white: 1.0,
            ar: 8.0,
            phi: 0.8,
        };
        let ar: Vec<(f64, f64)> = LAGS.iter().map(|&h| (h as f64, truth.at(h))).collect();
        let v = fit(&ar);
        assert!(
            (v.phi - 0.8).abs() < 1e-9 && (v.ar - 8.0).abs() < 1e-6,
            "{v:?}"
        );
    }

    /// A level of 100 under normal noise of standard deviation 3.
    fn normal_series(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<f64> {
        (0..n)
            .map(|_| 100.0 + 3.0 * crate::normal::draw(rng))
            .collect()
    }

    #[test]
    fn the_noise_of_a_short_series_is_rarely_read_low_and_an_outlier_hardly_moves_it() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        let (runs, n) = (4000, 100);
        let (mut sum, mut low, mut low_mad) = (0.0, 0, 0);
        for _ in 0..runs {
            let x = normal_series(&mut rng, n);
            let v = noise(&x, &[0, n]);
            sum += v;
            low += usize::from(v < 0.7 * 9.0);
            let mut diffs: Vec<f64> = x.windows(2).map(|p| p[1] - p[0]).collect();
            let by_mad = 0.5 * (1.4826 * mad(&mut diffs)).powi(2);
            low_mad += usize::from(by_mad < 0.7 * 9.0);
        }
        // Unbiased for normal noise: the mean of 4,000 readings of 9 is 9
        // within 2%.
        let mean = sum / runs as f64;
        assert!((mean - 9.0).abs() < 0.18, "mean reading {mean:.3}");
        // Under 70% of the variance: one in thirty (here 131 of 4,000), where
        // half the squared MAD reads that low one in ten (416).
        assert!(low * 100 < 5 * runs, "{low} of {runs} read low");
        assert!(
            low_mad * 100 > 7 * runs,
            "{low_mad} of {runs} read low by the MAD"
        );

        // One point thirty deviations off adds two capped differences: the
        // reading rises by a sixth here (11.1 → 12.7), where uncapped it
        // would double.
        let mut x = normal_series(&mut rng, n);
        let clean = noise(&x, &[0, n]);
        x[50] += 90.0;
        let dirty = noise(&x, &[0, n]);
        assert!(
            dirty > clean && dirty < 1.3 * clean,
            "{clean:.2} -> {dirty:.2}"
        );
    }

    #[test]
    fn a_step_missed_beside_the_ones_found_does_not_pass_for_slow_noise() {
        // Noise of 3, steps of 4 up at 25 and 50, 12 down at 75.
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(23);
        let mut x = normal_series(&mut rng, 100);
        for (t, v) in x.iter_mut().enumerate() {
            *v += if t >= 25 { 4.0 } else { 0.0 } + if t >= 50 { 4.0 } else { 0.0 };
            *v += if t >= 75 { -12.0 } else { 0.0 };
        }
        // Binary segmentation found the two steps up, not the one down.
        // Within the segments it left, the differences across 75 look like
        // slow noise (white 0.75 + AR(1) 76 at φ 0.98): judged under that,
        // both real steps went.
        let found = vec![(25, 0.001), (50, 0.001)];
        let kept: Vec<usize> = confirm(&x, found, 0.01).iter().map(|c| c.0).collect();
        assert_eq!(kept, vec![25, 50]);
    }
}
