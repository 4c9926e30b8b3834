//! Least squares over a stretch of a series, shared by the stages that
//! compare models by their fit: a design of a constant, a slope, steps and
//! bends ([`Stretch`], its normal equations in closed form from suffix
//! sums), their solution ([`solve`]), and a Gaussian deviance from
//! generalised least squares' sums ([`profile`]).

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

/// The deviance (`−2 ln L`, up to a constant) of innovations `v` with
/// variances proportional to `F` (a Kalman filter's, or a whitening's)
/// once regression columns `x` are fitted by generalised least squares
/// and the variance by maximum likelihood, from the sums: `Σ ln F`,
/// `Σ v² / F`, and the columns' `Σ x x' / F` (`a`, `k × k`) and
/// `Σ x v / F` (`b`).
pub(super) fn profile(log_f: f64, vv: f64, a: Vec<f64>, b: Vec<f64>, n: usize) -> Option<f64> {
    let beta = solve(a, b.clone())?;
    let explained: f64 = beta.iter().zip(&b).map(|(x, y)| x * y).sum();
    let rss = (vv - explained).max(f64::MIN_POSITIVE);
    let dof = (n - 1) as f64;
    Some(log_f + dof * (rss / dof).ln())
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
}
