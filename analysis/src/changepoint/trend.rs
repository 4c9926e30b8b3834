//! A staircase that a line explains: change points that a smooth trend
//! across their neighbouring segments accounts for.
//!
//! Binary segmentation cuts a trend into a staircase of steps that all go
//! the same way, and the cuts fall where the noise happens to jump, so each
//! segment of the staircase looks flat: a slope measured within the
//! segments is biased towards zero, and no test of one step against its
//! neighbours' slope can see the trend. What gives the trend away is the
//! staircase as a whole: a line through it fits about as well with two
//! parameters as the staircase does with one level and one position per
//! step.
//!
//! So every *run* — consecutive change points stepping the same way, at
//! least [`MIN_RUN`] of them — is judged by a penalised likelihood between
//! two models of the stretch it spans:
//!
//! - **steps**: the staircase as found, a level per segment;
//! - **trend**: a line, plus those of the run's steps that still improve on
//!   it by more than a change point's `z²` (Bonferroni over the stretch's
//!   positions), added greedily, strongest first (a step on top of a trend
//!   stays a step); the line may change its slope where one of the run's
//!   own steps is kept (a regression followed by a drift is one step, not
//!   a staircase), not at the neighbours (bending there too let a line
//!   follow any three levels: five real steps of 100 points went).
//!
//! Each model costs its residual sum of squares over the noise variance,
//! plus `2 ln m` per step over a stretch of `m` points (Schwarz's criterion
//! for a level and a position) and [`SLOPE_PENALTY`] for the slope. When
//! the trend costs less, the run's steps it did not keep are dropped.
//! Stricter per-step penalties (Bonferroni over the stretch's positions)
//! were tried: they cost real steps of the benchmark's 100-point series
//! (F1 0.935 → 0.910) for no fewer false ones on trends.
//!
//! A run of one is left alone: against a single step in the middle of its
//! stretch a line recovers three quarters of the step's fit, and the
//! comparison would drop real steps up to `z ≈ 6`.

use super::bonferroni::critical_z;
use super::least_squares::Stretch;
use super::staircase::{bounds, segment_means};

/// Fewest change points in a run for it to be compared with a trend: two,
/// the shortest staircase. (Three was tried: a trend of 100 points then
/// kept 4.6 false change points per 1,000, against 1.2.)
pub(super) const MIN_RUN: usize = 2;

/// The penalty of the trend's slope: one parameter, at the level of a
/// two-sided test at about 1% (`2.5²`).
const SLOPE_PENALTY: f64 = 6.25;

/// The change points `at` (in order) left once every run a trend explains
/// has lost the steps the trend does not need; `sigma2` is the noise
/// variance.
pub(super) fn resolve(series: &[f64], mut at: Vec<usize>, sigma2: f64, alpha: f64) -> Vec<usize> {
    if sigma2 <= 0.0 {
        return at;
    }
    loop {
        let bounds = bounds(series.len(), at.iter().copied());
        let means = segment_means(series, &bounds);
        let up = |i: usize| means[i + 1] > means[i];
        let mut drop: Vec<usize> = Vec::new();
        let mut first = 0;
        while first < at.len() {
            let mut last = first;
            while last + 1 < at.len() && up(last + 1) == up(first) {
                last += 1;
            }
            if last + 1 - first >= MIN_RUN {
                drop.extend(explained(
                    series,
                    &bounds,
                    &means,
                    (first, last),
                    sigma2,
                    alpha,
                ));
            }
            first = last + 1;
        }
        if drop.is_empty() {
            return at;
        }
        let mut i = 0;
        at.retain(|_| {
            i += 1;
            !drop.contains(&(i - 1))
        });
    }
}

/// The change points `first..=last` (a run) that a trend across the
/// stretch they span explains better than the staircase, by index into the
/// change points; none when the staircase costs less.
fn explained(
    series: &[f64],
    bounds: &[usize],
    means: &[f64],
    (first, last): (usize, usize),
    sigma2: f64,
    alpha: f64,
) -> Vec<usize> {
    // The stretch reaches one change point past the run on either side,
    // which both models keep: a run next to a step the other way (a step on
    // a trend) is judged with the trend on both sides of it.
    let count_all = bounds.len() - 2;
    let outer_first = first.saturating_sub(1);
    let outer_last = (last + 1).min(count_all - 1);
    let (lo, hi) = (bounds[outer_first], bounds[outer_last + 2]);
    let stretch = Stretch::new(&series[lo..hi]);
    let pen = 2.0 * ((hi - lo) as f64).ln();
    // A step joins the trend only when it is a change point against the
    // line at the detector's level, its position chosen among the
    // stretch's: the run's steps were chosen where the noise helped.
    let admit = critical_z(hi - lo, alpha).powi(2);
    let staircase: f64 = (outer_first..=outer_last + 1)
        .map(|s| {
            series[bounds[s]..bounds[s + 1]]
                .iter()
                .map(|v| (v - means[s]).powi(2))
                .sum::<f64>()
        })
        .sum();
    let count = last + 1 - first;
    let steps_cost = staircase / sigma2 + count as f64 * pen;
    // The run's steps, relative to the stretch.
    let positions: Vec<usize> = (first..=last).map(|i| bounds[i + 1] - lo).collect();
    let forced: Vec<usize> = (outer_first..=outer_last)
        .filter(|i| !(first..=last).contains(i))
        .map(|i| bounds[i + 1] - lo)
        .collect();
    // The neighbours step in both models; only the run's own steps the
    // trend keeps may also bend it (bending at the neighbours too would let
    // a line follow any three levels).
    let mut chosen: Vec<usize> = Vec::new();
    let with_forced = |chosen: &[usize]| -> f64 {
        let mut steps = forced.clone();
        steps.extend_from_slice(chosen);
        stretch.rss(&steps, chosen)
    };
    let mut rss = with_forced(&chosen);
    loop {
        let mut best: Option<(usize, f64)> = None;
        for (j, &p) in positions.iter().enumerate() {
            if chosen.contains(&p) {
                continue;
            }
            let mut with = chosen.clone();
            with.push(p);
            let r = with_forced(&with);
            if best.is_none_or(|(_, b)| r < b) {
                best = Some((j, r));
            }
        }
        match best {
            Some((j, r)) if (rss - r) / sigma2 > admit => {
                chosen.push(positions[j]);
                rss = r;
            }
            _ => break,
        }
    }
    // Each step the trend keeps also bends it: a slope parameter more.
    let trend_cost = rss / sigma2 + chosen.len() as f64 * (pen + SLOPE_PENALTY) + SLOPE_PENALTY;
    if trend_cost >= steps_cost {
        return Vec::new();
    }
    (first..=last)
        .filter(|&i| !chosen.contains(&(bounds[i + 1] - lo)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staircase_on_a_line_is_explained_and_real_steps_are_not() {
        // A noiseless line cut into three: the trend fits exactly.
        let line: Vec<f64> = (0..60).map(|t| 100.0 + 0.3 * t as f64).collect();
        assert_eq!(resolve(&line, vec![20, 40], 1.0, 0.01), Vec::<usize>::new());
        // Two flat steps up: the staircase fits exactly, the line does not.
        let steps: Vec<f64> = (0..60)
            .map(|t| 100.0 + if t >= 20 { 6.0 } else { 0.0 } + if t >= 40 { 6.0 } else { 0.0 })
            .collect();
        assert_eq!(resolve(&steps, vec![20, 40], 1.0, 0.01), vec![20, 40]);
    }
}
