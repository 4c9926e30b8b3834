//! Brent's minimisation of a function of one variable on an interval
//! (Brent 1973, ch. 5): golden-section steps where a parabola through the
//! last three points cannot be trusted, parabolic steps where it can. On a
//! smooth minimum it needs a third to a half of golden section's
//! evaluations for the same bracket.

/// `(3 − √5) / 2`: the golden-section fraction.
const GOLDEN: f64 = 0.381_966_011_250_105_1;

/// A minimum of `f` on `[lo, hi]` to within about `tol`, and `f` there;
/// at most `max_evals` evaluations. `f` should be unimodal on the interval;
/// otherwise a local minimum is found.
pub(super) fn brent(
    mut f: impl FnMut(f64) -> f64,
    lo: f64,
    hi: f64,
    tol: f64,
    max_evals: usize,
) -> (f64, f64) {
    let (mut a, mut b) = (lo.min(hi), lo.max(hi));
    let mut x = a + GOLDEN * (b - a);
    let (mut w, mut v) = (x, x);
    let mut fx = f(x);
    let (mut fw, mut fv) = (fx, fx);
    // The step before last (`e`) and the last (`d`).
    let (mut d, mut e) = (0.0f64, 0.0f64);
    for _ in 1..max_evals {
        let m = 0.5 * (a + b);
        let tol1 = tol * 0.5;
        let tol2 = tol;
        if (x - m).abs() <= tol2 - 0.5 * (b - a) {
            break;
        }
        let mut golden = true;
        if e.abs() > tol1 {
            // The parabola through x, w and v.
            let r = (x - w) * (fx - fv);
            let mut q = (x - v) * (fx - fw);
            let mut p = (x - v) * q - (x - w) * r;
            q = 2.0 * (q - r);
            if q > 0.0 {
                p = -p;
            } else {
                q = -q;
            }
            // Accepted when it falls inside the bracket and moves less than
            // half the step before last (else it may not converge).
            if p.abs() < (0.5 * q * e).abs() && p > q * (a - x) && p < q * (b - x) {
                e = d;
                d = p / q;
                let u = x + d;
                if u - a < tol2 || b - u < tol2 {
                    d = if x < m { tol1 } else { -tol1 };
                }
                golden = false;
            }
        }
        if golden {
            e = if x < m { b - x } else { a - x };
            d = GOLDEN * e;
        }
        let u = if d.abs() >= tol1 {
            x + d
        } else {
            x + tol1.copysign(d)
        };
        let fu = f(u);
        if fu <= fx {
            if u < x {
                b = x;
            } else {
                a = x;
            }
            (v, fv, w, fw, x, fx) = (w, fw, x, fx, u, fu);
        } else {
            if u < x {
                a = u;
            } else {
                b = u;
            }
            if fu <= fw || w == x {
                (v, fv, w, fw) = (w, fw, u, fu);
            } else if fu <= fv || v == x || v == w {
                (v, fv) = (u, fu);
            }
        }
    }
    (x, fx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_minimum_of_smooth_functions_in_few_evaluations() {
        for (centre, lo, hi) in [(0.3, -16.0, 2.0), (-9.7, -16.0, 2.0), (1.9, -16.0, 2.0)] {
            let mut evals = 0;
            let (x, fx) = brent(
                |x| {
                    evals += 1;
                    (x - centre) * (x - centre) + 0.1 * (x - centre).powi(4) + 5.0
                },
                lo,
                hi,
                0.01,
                50,
            );
            assert!((x - centre).abs() < 0.02, "{centre}: {x}");
            assert!((fx - 5.0).abs() < 1e-3, "{centre}: {fx}");
            // Golden section needs 17 to bring 18 down to 0.02.
            assert!(evals <= 14, "{centre}: {evals} evaluations");
        }
        // A minimum at an end of the interval: found there.
        let (x, _) = brent(|x| x, -16.0, 2.0, 0.01, 60);
        assert!(x < -15.9, "{x}");
    }
}
