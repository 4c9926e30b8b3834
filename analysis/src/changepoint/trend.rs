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

use super::serial::critical_z;

/// Fewest change points in a run for it to be compared with a trend: two,
/// the shortest staircase. (Three was tried: a trend of 100 points then
/// kept 4.6 false change points per 1,000, against 1.2.)
pub(super) const MIN_RUN: usize = 2;

/// The penalty of the trend's slope: one parameter, at the level of a
/// two-sided test at about 1% (`2.5²`).
const SLOPE_PENALTY: f64 = 6.25;

/// One column of a least-squares design over a stretch: `α + β t` from
/// index `from` on, 0 before.
#[derive(Debug, Clone, Copy)]
struct Column {
    from: usize,
    alpha: f64,
    beta: f64,
}

impl Column {
    const CONSTANT: Column = Column {
        from: 0,
        alpha: 1.0,
        beta: 0.0,
    };
    /// A level shift at `s`.
    fn step(s: usize) -> Column {
        Column {
            from: s,
            alpha: 1.0,
            beta: 0.0,
        }
    }
    /// A change of slope at `s`: `(t − s)` from `s` on.
    fn bend(s: usize) -> Column {
        Column {
            from: s,
            alpha: -(s as f64),
            beta: 1.0,
        }
    }
}

/// Sums over one stretch that least squares with a constant, a slope, and
/// steps and bends at chosen positions needs; positions are relative to the
/// stretch's start.
pub(super) struct Stretch {
    len: usize,
    mean: f64,
    centre: f64,
    /// Suffix sums from each position: of `y` and of `(t − centre) · y`,
    /// `y` centred on the stretch's mean.
    y_from: Vec<f64>,
    ty_from: Vec<f64>,
    /// `Σ y²` (centred).
    yy: f64,
}

impl Stretch {
    pub(super) fn new(x: &[f64]) -> Self {
        let len = x.len();
        let mean = x.iter().sum::<f64>() / len as f64;
        let centre = (len as f64 - 1.0) / 2.0;
        let mut y_from = vec![0.0; len + 1];
        let mut ty_from = vec![0.0; len + 1];
        for t in (0..len).rev() {
            let y = x[t] - mean;
            y_from[t] = y_from[t + 1] + y;
            ty_from[t] = ty_from[t + 1] + (t as f64 - centre) * y;
        }
        Stretch {
            len,
            mean,
            centre,
            yy: x.iter().map(|v| (v - mean).powi(2)).sum(),
            y_from,
            ty_from,
        }
    }

    /// `Σ f g` over the stretch, in closed form: both are linear in `t`
    /// from the later of their starts; `t` is taken about the centre.
    fn dot(&self, f: Column, g: Column) -> f64 {
        let from = f.from.max(g.from);
        if from >= self.len {
            return 0.0;
        }
        let n = (self.len - from) as f64;
        let d = from as f64 - self.centre;
        let s1 = n * d + n * (n - 1.0) / 2.0;
        let s2 = n * d * d + d * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0;
        let (a1, a2) = (
            f.alpha + f.beta * self.centre,
            g.alpha + g.beta * self.centre,
        );
        a1 * a2 * n + (a1 * g.beta + a2 * f.beta) * s1 + f.beta * g.beta * s2
    }

    /// `Σ f y`.
    fn dot_y(&self, f: Column) -> f64 {
        if f.from >= self.len {
            return 0.0;
        }
        (f.alpha + f.beta * self.centre) * self.y_from[f.from] + f.beta * self.ty_from[f.from]
    }

    /// The normal equations `(a, b)` of least squares on a constant, a
    /// slope, a step at each of `steps` and a bend at each of `bends`, in
    /// that order of columns.
    pub(super) fn normal_equations(
        &self,
        steps: &[usize],
        bends: &[usize],
    ) -> (Vec<f64>, Vec<f64>) {
        let mut cols = vec![Column::CONSTANT, Column::bend(0)];
        cols.extend(steps.iter().map(|&s| Column::step(s)));
        cols.extend(bends.iter().map(|&s| Column::bend(s)));
        let p = cols.len();
        let mut a = vec![0.0; p * p];
        let b: Vec<f64> = cols.iter().map(|&c| self.dot_y(c)).collect();
        for (i, &f) in cols.iter().enumerate() {
            for (j, &g) in cols.iter().enumerate() {
                a[i * p + j] = self.dot(f, g);
            }
        }
        (a, b)
    }

    /// `Σ (y − ȳ)²`: what least squares on the columns explains part of.
    pub(super) fn yy(&self) -> f64 {
        self.yy
    }

    /// `ȳ`, which the sums here are centred on.
    pub(super) fn mean(&self) -> f64 {
        self.mean
    }

    /// The residuals of `x` (the values this stretch was made of) around
    /// the least-squares line with a step at each of `steps`; `None` when
    /// the fit is singular.
    pub(super) fn residuals(&self, x: &[f64], steps: &[usize]) -> Option<Vec<f64>> {
        let (a, b) = self.normal_equations(steps, &[]);
        let beta = solve(a, b)?;
        // Each step's coefficient joins the fit from its position on.
        let mut joins = vec![0.0; self.len + 1];
        for (&s, &c) in steps.iter().zip(&beta[2..]) {
            joins[s.min(self.len)] += c;
        }
        let mut level = beta[0];
        Some(
            x.iter()
                .enumerate()
                .map(|(t, &v)| {
                    level += joins[t];
                    v - self.mean - level - beta[1] * t as f64
                })
                .collect(),
        )
    }

    /// The residual sum of squares of a line with a step at each of `steps`
    /// and a bend at each of `bends`.
    pub(super) fn rss(&self, steps: &[usize], bends: &[usize]) -> f64 {
        let (a, b) = self.normal_equations(steps, bends);
        match solve(a, b.clone()) {
            Some(beta) => (self.yy - beta.iter().zip(&b).map(|(x, y)| x * y).sum::<f64>()).max(0.0),
            None => self.yy,
        }
    }
}

/// Solves `a x = b` (`a` row-major, square) by Gaussian elimination with
/// partial pivoting; `None` when it is singular.
pub(super) fn solve(mut a: Vec<f64>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let p = b.len();
    let scale = a
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    for col in 0..p {
        let pivot =
            (col..p).max_by(|&i, &j| a[i * p + col].abs().total_cmp(&a[j * p + col].abs()))?;
        if a[pivot * p + col].abs() <= 1e-12 * scale {
            return None;
        }
        for k in 0..p {
            a.swap(col * p + k, pivot * p + k);
        }
        b.swap(col, pivot);
        for row in col + 1..p {
            let f = a[row * p + col] / a[col * p + col];
            for k in col..p {
                a[row * p + k] -= f * a[col * p + k];
            }
            b[row] -= f * b[col];
        }
    }
    let mut x = vec![0.0; p];
    for row in (0..p).rev() {
        let s: f64 = (row + 1..p).map(|k| a[row * p + k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row * p + row];
    }
    Some(x)
}

/// The change points `at` (in order) left once every run a trend explains
/// has lost the steps the trend does not need; `sigma2` is the noise
/// variance.
pub(super) fn resolve(series: &[f64], mut at: Vec<usize>, sigma2: f64, alpha: f64) -> Vec<usize> {
    if sigma2 <= 0.0 {
        return at;
    }
    loop {
        let bounds = super::bounds(series.len(), at.iter().copied());
        let means = super::segment_means(series, &bounds);
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
    fn least_squares_with_steps_fits_exactly_what_it_can() {
        // A line with a step at 6: the model with that step fits exactly.
        let x: Vec<f64> = (0..12)
            .map(|t| 2.0 + 0.5 * t as f64 + if t >= 6 { 3.0 } else { 0.0 })
            .collect();
        let s = Stretch::new(&x);
        assert!(s.rss(&[6], &[]) < 1e-9, "{}", s.rss(&[6], &[]));
        assert!(s.rss(&[], &[]) > 1.0);
        // A step elsewhere helps, but not fully.
        assert!(s.rss(&[4], &[]) > 1e-3 && s.rss(&[4], &[]) < s.rss(&[], &[]));
        // A bend at 6 as well changes nothing: the slope is the same.
        assert!(s.rss(&[6], &[6]) < 1e-9);
        // The residuals of the exact fit are zero; with a step elsewhere,
        // their squares add up to its RSS.
        let r = s.residuals(&x, &[6]).unwrap();
        assert!(r.iter().all(|v| v.abs() < 1e-9), "{r:?}");
        let r = s.residuals(&x, &[4]).unwrap();
        let squares: f64 = r.iter().map(|v| v * v).sum();
        assert!((squares - s.rss(&[4], &[])).abs() < 1e-9);
    }

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
