//! Ranks of a segment and the E-divisive-means statistic over them.
//!
//! With exponent α = 2 the energy distance between two samples collapses to
//! twice the squared difference of their means, so Matteson and James's
//! scaled statistic for splitting a segment of length `m` at `τ` is
//!
//! ```text
//! q(τ) = τ (m − τ) / m · 2 (mean[..τ] − mean[τ..])²
//!      = 2 m · C(τ)² / (τ (m − τ)),      C(τ) = Σ_{i<τ} (x_i − mean)
//! ```
//!
//! which one prefix sum gives for every `τ` in O(m). We evaluate it on the
//! ranks of the values within the segment instead of on the values: a
//! single outlier of a heavy-tailed noise then moves the statistic by at most
//! one rank, and the two modes of a bimodal noise stop dominating the
//! variance, while a step in level still moves every later rank the same
//! way. On ranks the statistic is the squared, standardised Mann–Whitney
//! statistic of the split, and its distribution when nothing changes no longer
//! depends on the noise at all, which is what lets [`super::significance`]
//! bound it without knowing the noise.

/// Centred ranks of `values`, doubled so that mid-ranks of ties stay
/// integers: element `i` gets `2 · rank_i − (m + 1)` where `rank_i` is its
/// 1-based mid-rank. They sum to zero, so their prefix sums are the `C(τ)`
/// above. They are kept as `f64`, in which these integers and their sums are
/// exact for any series shorter than 2²⁶ points (sums stay below 2⁵³), and
/// which is what the multiscale statistic divides anyway.
///
/// `order` is scratch space kept by the caller so that the recursion does not
/// allocate per segment.
pub(super) fn centred_ranks(values: &[f64], order: &mut Vec<(f64, u32)>, out: &mut Vec<f64>) {
    let m = values.len();
    order.clear();
    // Indices fit u32: `try_detect` refuses longer series.
    order.extend(values.iter().enumerate().map(|(i, &v)| (v, i as u32)));
    order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
    out.clear();
    out.resize(m, 0.0);
    let mut a = 0;
    while a < order.len() {
        // The tie group occupies sorted positions a..b (0-based); its
        // 1-based mid-rank is (a + 1 + b) / 2, doubled: a + 1 + b.
        let mut b = a + 1;
        while b < order.len() && order[b].0 == order[a].0 {
            b += 1;
        }
        let centred = (a + b) as f64 - m as f64;
        for &(_, i) in &order[a..b] {
            out[i as usize] = centred;
        }
        a = b;
    }
}

/// The best split of a segment whose centred ranks are `c`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Split {
    /// Length of the left part: the split is `c[..tau]`, `c[tau..]`.
    pub tau: usize,
    /// `C(τ)² / (τ (m − τ))`, the statistic without its constant factor
    /// `2m`, which changes neither the argmax nor any comparison with
    /// permutations of the same segment.
    pub stat: f64,
}

/// The split maximising the statistic over `min_len ≤ τ ≤ m − min_len`, or
/// `None` when there is no such `τ` or the statistic is zero everywhere (a
/// constant segment, whose ranks are all tied, can not be split).
pub(super) fn best_split(c: &[f64], min_len: usize) -> Option<Split> {
    let m = c.len();
    if min_len == 0 || m < 2 * min_len {
        return None;
    }
    let mut best = Split { tau: 0, stat: 0.0 };
    let mut cum: f64 = c[..min_len - 1].iter().sum();
    for tau in min_len..=m - min_len {
        cum += c[tau - 1];
        let stat = cum * cum / (tau as f64 * (m - tau) as f64);
        if stat > best.stat {
            best = Split { tau, stat };
        }
    }
    (best.stat > 0.0).then_some(best)
}
