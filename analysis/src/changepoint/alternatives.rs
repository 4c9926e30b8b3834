//! Change points against models of the whole series that have none: a
//! level that wanders, and noise that persists.
//!
//! A staircase fits a random walk, a slow seasonal swing, or the runs of
//! serially correlated noise so closely that the residuals around its
//! segments look white: nothing measured *within* the segments sees them.
//! What gives them away is the series as a whole, as for a trend
//! ([`super::trend`]): one parameter explains what the staircase needs a
//! level and a position per step for.
//!
//! So the change points are judged by a penalised likelihood between four
//! models of the whole series, all with a constant and a drift (a step on
//! a slope is still a step, and a slope is neither a wander nor
//! dependence):
//!
//! - **steps**: white noise around the best staircase through the change
//!   points: theirs, plus the splits least squares adds while each pays for
//!   itself ([`staircase_cost`]), so that a step binary segmentation missed
//!   does not make another model look likelier;
//! - **wander**: the local-level model ([`level`]), a level that moves `q`
//!   noise variances a point;
//! - **persistence**: AR(1) noise, `εₜ = φ εₜ₋₁ + ηₜ`
//!   ([`autoregressive`]; with the wander, the two parts of DeCAFS,
//!   Romano et al. 2022, taken one at a time);
//! - **swing**: a sinusoid of free period ([`season`]), up to
//!   [`SWING_MAX_LEN`] points;
//!
//! the last three each with those of the change points that are still
//! abrupt shifts under them (interventions), added by forward selection
//! while each pays for itself ([`forward_select`]), their parameter by
//! maximum likelihood before each of two passes.
//!
//! Each model costs `−2 ln L` plus `2 ln n` per step (a level and a
//! position, Schwarz's criterion as in [`super::trend`]), the wander and
//! persistence `2 ln n` more for `q` or `φ` (with `ln n`, real steps of
//! 100-point series that binary segmentation had found beside a missed one
//! were lost to the wander; persistence with `ln n` cost 100-point steps
//! 0.001 of F1), the swing `2 ln n` for amplitude and phase and
//! [`SWING_EXTRA`] times that for its period. When the cheapest of the
//! three costs less than the steps, the change points it did not keep are
//! dropped. Gross outliers are pulled in first ([`clipped`]).

use super::robust::median_of;
use super::staircase::staircase_cost;
use super::{autoregressive, level, season};

/// Shortest series judged. At 100 points the wander alone kept every step
/// the stages before it found in the benchmark and took seasonal swings
/// from 25 to 17 false change points per 1,000 points, AR(1) noise from
/// 3.6 to 2.2 (persistence then took that to 0.85; random walks stay at
/// 5: at that length a walk of steps of 0.3 under noise of 3 is hardly a
/// wander). Below 100, not measured; under 50 the likelihood of `q` or `φ`
/// rests on too few differences for a month of nightly runs to be judged
/// this way.
const MIN_LEN: usize = 50;

/// Passes of forward selection, each at the parameter the previous one
/// left.
const SELECTION_PASSES: usize = 2;

/// The series with gross outliers pulled in: each value at most [`CLIP`]
/// robust standard deviations from the median of the five around it (a
/// running median keeps steps sharp). The likelihoods here are normal
/// ones: one value thirty noise deviations off made a wander likelier than
/// the steps the rank test had found, and dropped them all.
fn clipped(series: &[f64]) -> Vec<f64> {
    let n = series.len();
    let medians: Vec<f64> = (0..n)
        .map(|t| {
            let part = &series[t.saturating_sub(2)..(t + 3).min(n)];
            let mut w = [0.0; 5];
            w[..part.len()].copy_from_slice(part);
            median_of(&mut w[..part.len()])
        })
        .collect();
    let mut deviations: Vec<f64> = series
        .iter()
        .zip(&medians)
        .map(|(y, m)| (y - m).abs())
        .collect();
    let scale = 1.4826 * median_of(&mut deviations);
    let limit = CLIP * scale;
    if limit <= 0.0 {
        return series.to_vec();
    }
    series
        .iter()
        .zip(&medians)
        .map(|(&y, &m)| y.clamp(m - limit, m + limit))
        .collect()
}

/// Robust standard deviations from the running median beyond which a value
/// is pulled in. At 5, real steps under t₃ noise were lost (its tails
/// reach that far); from 6 to 8 the benchmark did not change; at 3,
/// bimodal noise lost steps.
const CLIP: f64 = 6.0;

/// What a swing costs beyond its own `2 ln n` (amplitude and phase, as a
/// step's level and position), in units of that penalty: its period is
/// searched, and a swing of one or two periods is also the shape of a
/// regression followed by its fix. On the benchmark's 100-point series of
/// steps (200 per noise): at 1.0, 11 of 2,982 real steps went; at 1.25,
/// none, but 4 on the same families drawn from another seed; at 1.5, none
/// on either. Seasonal swings there: 17.0 false change points per 1,000
/// points without the swing, 2.7 / 4.5 / 6.05 with it.
const SWING_EXTRA: f64 = 1.5;

/// Longest series a swing is tried on: from 1,000 points on, the wander
/// already took the benchmark's seasonal swings to no false change point,
/// and the search over periods grows with the square of the length.
const SWING_MAX_LEN: usize = 500;

/// Change points this close to one of `at` are the same step: the
/// staircase's own splits that persistent noise may keep are those farther
/// than this from every change point (the detector's minimum segment).
const NEAR: usize = 5;

/// The change points `at` (in order, all in `1..n`) that remain once a
/// wandering level and persistent noise are allowed for: all of them when
/// the staircase costs less than either, else those the cheaper one keeps
/// as interventions.
pub(super) fn resolve(series: &[f64], at: Vec<usize>) -> Vec<usize> {
    let n = series.len();
    if at.is_empty() || n < MIN_LEN {
        return at;
    }
    let cleaned = clipped(series);
    let series = &cleaned[..];
    let pen = 2.0 * (n as f64).ln();
    let (steps_cost, staircase) = staircase_cost(series, &at, pen);
    // A wander with q̂ = 0 is white noise: which steps white noise supports
    // is the permutation test's to say, not a normal likelihood's.
    let wander_fit = |steps: &[usize]| level::best_q(series, steps);
    let wander = forward_select(&at, pen, false, wander_fit, |q| level::at_q(series, q, &at));
    // Persistent noise may keep the staircase's own splits as well as the
    // change points: AR(1) noise's runs are what those splits follow, and
    // with the change points only, the staircase at its best beat it on
    // 100-point series of φ up to 0.8 (2.2 false change points per 1,000
    // points against 0.85). The wander may not: with them, 1,000-point
    // steps under t₃ noise lost 0.009 of F1.
    let candidates: Vec<usize> = staircase
        .into_iter()
        .filter(|&s| at.contains(&s) || at.iter().all(|&a| a.abs_diff(s) > NEAR))
        .collect();
    let lagged = autoregressive::Lagged::new(series);
    // φ must pay for itself beside the interventions it keeps: a φ̂ of 0.05
    // is white noise, and its model then only re-judged the rank test's
    // steps by a normal likelihood (a real step under skewed noise went).
    let persistent = forward_select(
        &candidates,
        pen,
        true,
        |steps| autoregressive::best_phi(&lagged, steps),
        |phi| {
            let lagged = &lagged;
            move |with: &[usize]| lagged.deviance(phi, with)
        },
    )
    .filter(|fit| {
        fit.param > 0.0
            && lagged
                .deviance(0.0, &fit.kept)
                .is_some_and(|white| fit.deviance + pen < white)
    });
    let swing = (n <= SWING_MAX_LEN).then(|| season::Swing::new(series));
    let swung = swing.as_ref().and_then(|swing| {
        forward_select(
            &at,
            pen,
            true,
            |steps| swing.best_period(steps),
            |period| {
                let wave = swing.wave(period);
                move |with: &[usize]| swing.deviance(&wave, with)
            },
        )
        .map(|mut fit| {
            fit.cost += SWING_EXTRA * pen;
            fit
        })
    });
    // A wander that kept every change point was left at the `q` it chose
    // them at, its cost an upper bound: re-estimating `q` with all of them
    // took a quarter of the detector's time on series of steps, and only
    // matters when a rival that drops some would beat it.
    let rival = [&persistent, &swung]
        .into_iter()
        .flatten()
        .map(|fit| fit.cost)
        .fold(f64::INFINITY, f64::min);
    let wander = wander
        .and_then(|fit| {
            if !fit.settled && rival < fit.cost && rival < steps_cost {
                let (param, deviance) = wander_fit(&fit.kept)?;
                Some(Fit::new(param, deviance, fit.kept, pen, true))
            } else {
                Some(fit)
            }
        })
        .filter(|fit| fit.param > 0.0);
    let best = [wander, persistent, swung]
        .into_iter()
        .flatten()
        .filter(|fit| fit.cost < steps_cost)
        .min_by(|a, b| a.cost.total_cmp(&b.cost));
    match best {
        Some(fit) => at.into_iter().filter(|c| fit.kept.contains(c)).collect(),
        None => at,
    }
}

/// A model without change points of its own (a wandering level, persistent
/// noise) with the interventions that pay for themselves under it.
#[derive(Debug)]
struct Fit {
    /// Its parameter (`q`, `φ`) by maximum likelihood; 0 when white noise
    /// around the interventions is likelier.
    param: f64,
    /// `−2 ln L`.
    deviance: f64,
    /// The deviance plus the penalties of the interventions and the
    /// parameter.
    cost: f64,
    /// The interventions, in order.
    kept: Vec<usize>,
    /// Whether `param` is the maximum-likelihood one for `kept` (see
    /// [`forward_select`]).
    settled: bool,
}

impl Fit {
    fn new(param: f64, deviance: f64, kept: Vec<usize>, pen: f64, settled: bool) -> Fit {
        Fit {
            param,
            deviance,
            cost: deviance + (kept.len() + 1) as f64 * pen,
            kept,
            settled,
        }
    }
}

/// Forward selection of interventions among `candidates`: the one that
/// lowers the deviance most joins while it pays for itself (`pen`), at
/// the parameter estimated before the pass; then the parameter again with
/// what joined (`fit`), and a second pass from there. (Re-estimating after
/// every step chose the same steps in the benchmark at several times the
/// cost.) `at_param(p)` gives the deviance of a set of interventions at
/// parameter `p`. When every candidate has joined, the parameter is
/// estimated again only if `settle_all` (else the fit is not `settled`).
fn forward_select<D>(
    candidates: &[usize],
    pen: f64,
    settle_all: bool,
    fit: impl Fn(&[usize]) -> Option<(f64, f64)>,
    at_param: impl Fn(f64) -> D,
) -> Option<Fit>
where
    D: Fn(&[usize]) -> Option<f64>,
{
    let mut kept: Vec<usize> = Vec::new();
    let (mut param, mut current) = fit(&kept)?;
    for _ in 0..SELECTION_PASSES {
        let before = kept.len();
        let with_steps = at_param(param);
        loop {
            let mut best: Option<(usize, f64)> = None;
            for &c in candidates {
                if kept.contains(&c) {
                    continue;
                }
                let mut with = kept.clone();
                with.push(c);
                if let Some(d) = with_steps(&with)
                    && best.is_none_or(|(_, b)| d < b)
                {
                    best = Some((c, d));
                }
            }
            match best {
                Some((c, d)) if current - d > pen => {
                    kept.push(c);
                    current = d;
                }
                _ => break,
            }
        }
        if kept.len() == before {
            break;
        }
        let all = kept.len() == candidates.len();
        if all && !settle_all {
            kept.sort_unstable();
            return Some(Fit::new(param, current, kept, pen, false));
        }
        (param, current) = fit(&kept)?;
        if all {
            break;
        }
    }
    kept.sort_unstable();
    Some(Fit::new(param, current, kept, pen, true))
}
