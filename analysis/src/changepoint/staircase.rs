//! Change points as a staircase: the segments they cut a series into
//! ([`bounds`]), the level of each ([`segment_means`]), and the cost of the
//! best staircase through them ([`staircase_cost`]), against which the
//! dependence stage cuts its variogram and the alternatives stage weighs
//! its models.

use super::least_squares::Stretch;

/// The bounds of the segments that change points `at` (in order) cut a
/// series of `n` values into: `0, at…, n`.
pub(super) fn bounds(n: usize, at: impl IntoIterator<Item = usize>) -> Vec<usize> {
    let mut b = vec![0];
    b.extend(at);
    b.push(n);
    b
}

/// The mean of each segment between `bounds`.
pub(super) fn segment_means(series: &[f64], bounds: &[usize]) -> Vec<f64> {
    bounds
        .windows(2)
        .map(|w| {
            let part = &series[w[0]..w[1]];
            part.iter().sum::<f64>() / part.len() as f64
        })
        .collect()
}

/// The cost of the best staircase through the change points `at`, and its
/// steps: theirs, plus the steps least squares would add while each pays
/// for itself (greedily, each at the split of a segment that lowers the
/// squares of the residuals around the current fit most). Where binary
/// segmentation missed a real step, the staircase without it would lose to
/// a wander that explains the step it lacks; the alternatives must beat
/// the staircase at its best. (The dependence stage cuts its variogram's
/// segments at the steps it adds, at a higher `pen`.)
pub(super) fn staircase_cost(series: &[f64], at: &[usize], pen: f64) -> (f64, Vec<usize>) {
    let n = series.len();
    let stretch = Stretch::new(series);
    let dof = (n - 1) as f64;
    // The staircase is the model at q = 0, where the filter is a running
    // mean: `Σ ln Fₜ = Σ ln((t + 1) / t) = ln n`, and the rest is least
    // squares on a constant, the drift and the steps.
    let cost = |steps: &[usize]| {
        let rss = stretch.rss(steps, &[]).max(f64::MIN_POSITIVE);
        (n as f64).ln() + dof * (rss / dof).ln() + steps.len() as f64 * pen
    };
    let mut steps = at.to_vec();
    let mut best = cost(&steps);
    let mut sums = vec![0.0; n + 1];
    loop {
        // Splits are chosen on the residuals around the current fit: on a
        // steep slope every split of the raw values looks good, and the
        // step on it would not be the one chosen.
        let Some(residuals) = stretch.residuals(series, &steps) else {
            return (best, steps);
        };
        for (t, &r) in residuals.iter().enumerate() {
            sums[t + 1] = sums[t] + r;
        }
        let bounds = bounds(n, steps.iter().copied());
        let mut split: Option<(usize, f64)> = None;
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            for s in lo + MIN_EXTRA..=hi.saturating_sub(MIN_EXTRA) {
                let (a, b) = ((s - lo) as f64, (hi - s) as f64);
                let diff = (sums[hi] - sums[s]) / b - (sums[s] - sums[lo]) / a;
                let gain = diff * diff * a * b / (a + b);
                if split.is_none_or(|(_, g)| gain > g) {
                    split = Some((s, gain));
                }
            }
        }
        let Some((s, _)) = split else {
            return (best, steps);
        };
        let mut with = steps.clone();
        with.push(s);
        with.sort_unstable();
        let c = cost(&with);
        if c >= best {
            return (best, steps);
        }
        best = c;
        steps = with;
    }
}

/// Fewest points on either side of a step the staircase adds. Two, not the
/// detector's five: on a steep slope the stages before may place a step's
/// two sides a few points off it, and the staircase must be able to put
/// the step itself between them, or a wander wins and both go.
const MIN_EXTRA: usize = 2;
