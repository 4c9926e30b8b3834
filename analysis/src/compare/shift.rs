//! The Hodges-Lehmann shift and its Moses interval.
//!
//! On the analysis scale (logarithms, usually) the shift between the sides is
//! estimated by the median of all m·n pairwise differences `y_j − x_i`, and
//! bounded by two of their order statistics whose ranks come from the null
//! distribution of U. The interval is exact and distribution-free under a
//! shift model, and it is the test's own: the one-sided test rejects "no
//! shift" at `alpha` exactly when the interval at 1 − 2·`alpha` excludes 0.
//!
//! The differences are never stored: the k-th smallest is found by bisection
//! on the floating-point numbers themselves (at most 64 steps), counting the
//! pairs at or below a threshold in O(m + n) over the sorted samples. That is
//! exact, since a computed difference is monotone in each operand, and costs
//! nothing even at thousands of runs a side.

use super::mann_whitney;

/// The estimate and interval of the shift, on the analysis scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shift {
    pub estimate: f64,
    /// −∞ and +∞ when the samples are too small to bound the shift.
    pub low: f64,
    pub high: f64,
}

/// The shift of sorted `y` against sorted `x` with its interval at
/// confidence 1 − 2·`alpha`.
pub(crate) fn estimate(x: &[f64], y: &[f64], alpha: f64) -> Shift {
    let pairs = (x.len() as u64) * (y.len() as u64);
    let estimate = if pairs % 2 == 1 {
        kth_difference(x, y, pairs.div_ceil(2))
    } else {
        let below = kth_difference(x, y, pairs / 2);
        let above = kth_difference(x, y, pairs / 2 + 1);
        below + (above - below) / 2.0
    };
    let (low, high) = match mann_whitney::lower_critical(x.len(), y.len(), alpha) {
        Some(c) => (kth_difference(x, y, c + 1), kth_difference(x, y, pairs - c)),
        None => (f64::NEG_INFINITY, f64::INFINITY),
    };
    Shift {
        estimate,
        low,
        high,
    }
}

/// The k-th smallest (1-based) of the differences `y[j] − x[i]`, `x` and `y`
/// sorted and non-empty, 1 ≤ k ≤ |x|·|y|.
pub(crate) fn kth_difference(x: &[f64], y: &[f64], k: u64) -> f64 {
    let (first, last) = (x.len() - 1, y.len() - 1);
    let smallest = y[0] - x[first];
    if count_at_most(x, y, smallest) >= k {
        return smallest;
    }
    // Invariant: fewer than k differences ≤ from_key(lo), at least k ≤ from_key(hi).
    let mut lo = key(smallest);
    let mut hi = key(y[last] - x[0]);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if count_at_most(x, y, from_key(mid)) >= k {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    from_key(hi)
}

/// How many differences `y[j] − x[i]` are at most `t`.
fn count_at_most(x: &[f64], y: &[f64], t: f64) -> u64 {
    // For each j the qualifying i form a suffix of x, starting at `from`,
    // and `from` only moves right as y[j] grows.
    let mut from = 0;
    let mut count = 0u64;
    for &yj in y {
        while from < x.len() && yj - x[from] > t {
            from += 1;
        }
        count += (x.len() - from) as u64;
    }
    count
}

/// A map of the non-NaN doubles onto integers that keeps their order.
fn key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn from_key(k: u64) -> f64 {
    f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k })
}
