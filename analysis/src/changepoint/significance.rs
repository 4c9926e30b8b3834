//! Whether the best split of a segment is better than chance.
//!
//! The null hypothesis is that the segment's values are exchangeable (no
//! change), so every ordering of its ranks is equally likely and the p-value
//! of the observed maximum is the share of orderings whose own maximum, over
//! the same range of splits, reaches it. That is exact whatever the noise —
//! normal, heavy-tailed or bimodal — unlike Otava's Student t-test, which
//! assumes normal segments and is re-applied to windows it has itself
//! selected. Two shortcuts keep it cheap:
//!
//! - an overwhelming split needs no permutation at all: Serfling's bound for
//!   sums sampled without replacement, with a union over the splits, gives an
//!   upper bound on the exact permutation p-value in O(m) (see
//!   [`serfling_bound`]);
//! - the Monte Carlo test is sequential (Besag and Clifford 1991; Gandy
//!   2009): it stops as soon as its outcome is settled — when so many
//!   permutations have reached the observed value that a p-value below the
//!   level has become implausible, or so few that one above it has. "Settled"
//!   means that a p-value on the other side of the level would have produced
//!   counts that extreme with probability below [`REJECT_RISK`] or
//!   [`ACCEPT_RISK`]. A segment without change then stops after a handful of
//!   permutations, and a clear change after a few hundred rather than the full
//!   [`super::Options::permutations`]. Within one permutation, the scan stops
//!   at the first split that reaches the observed value.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{Rng, SeedableRng};

use super::multiscale;
use super::ranks::Split;

/// Largest chance of stopping with "not significant" although the exact
/// permutation p-value is below the level: a loss of power only, never a
/// false change point, so it can be generous to save time on the many
/// segments without change.
pub(super) const REJECT_RISK: f64 = 1e-3;

/// Largest chance of stopping with "significant" although the exact p-value
/// is at the level. It only matters for exact p-values just above the level
/// (at 0.015 it is already below 0.01), so its cost in false change points
/// is small: computed exactly for the defaults (level 0.01, 999
/// permutations), a segment without change is declared significant with
/// probability 0.0089 with it, against 0.00875 for the full Monte Carlo test
/// — still below the level — while a clear change stops after 299
/// permutations instead of 999.
pub(super) const ACCEPT_RISK: f64 = 0.05;

/// Scratch buffers reused from segment to segment.
#[derive(Debug, Default)]
pub(super) struct Scratch {
    permuted: Vec<f64>,
    threshold: Vec<f64>,
    sums: Vec<f64>,
    squares: Vec<f64>,
}

/// How a segment's split is tested.
#[derive(Debug, Clone, Copy)]
pub(super) struct Test {
    /// A split is kept when its p-value is below this.
    pub alpha: f64,
    /// Monte Carlo permutations at most.
    pub permutations: usize,
    /// Smallest part on either side of a split.
    pub min_len: usize,
}

/// The p-value of `split` of the segment whose centred ranks are `c`, or
/// `None` when it is not below `test.alpha`. `seed` seeds the permutations.
pub(super) fn p_value(
    c: &[f64],
    split: Split,
    test: Test,
    seed: u64,
    scratch: &mut Scratch,
) -> Option<f64> {
    let bound = serfling_bound(c, split.stat, test.min_len);
    if bound < test.alpha {
        return Some(bound);
    }
    let m = c.len();
    let min_len = test.min_len;
    let last = m - min_len;
    // A permutation reaches the observed maximum when some split has
    // C(τ)² ≥ stat · τ (m − τ).
    let relaxed = relax(split.stat);
    scratch.threshold.clear();
    scratch
        .threshold
        .extend((0..=last).map(|tau| relaxed * tau as f64 * (m - tau) as f64));
    scratch.permuted.clear();
    scratch.permuted.extend_from_slice(c);
    let Scratch {
        permuted,
        threshold,
        ..
    } = scratch;
    monte_carlo(test, seed, |rng| {
        permutation_reaches(permuted, threshold, min_len, rng)
    })
}

/// An upper bound on the exact permutation p-value of the maximum `stat`.
///
/// For a split at `τ`, the statistic reaches `stat` exactly when
/// `|C(τ)| ≥ sqrt(stat · τ (m − τ))`, and `C(τ)` is the sum of `τ` centred
/// ranks drawn without replacement from the segment's. Serfling (1974) bounds
/// that for a sample of `n` from `N` values spread over a range `R`:
/// `P(sum/n − mean ≥ ε) ≤ exp(−2 n ε² / ((1 − (n − 1)/N) R²))`. Applied to
/// the left part (`n = τ`) and, since its sum is `−C(τ)`, to the right part
/// (`n = m − τ`), keeping the better of the two, the exponent is at least
/// `2 · stat · m · h / R²` with `h = (m/2) / (m/2 + 1)`, for every `τ`. Two
/// tails, and a union over the `T` admissible splits, give
/// `p ≤ 2 T exp(−2 · stat · m · h / R²)`.
///
/// The bound is loose (about `exp(−z²/6)` for a standardised `z`, against
/// `exp(−z²/2)` for a normal tail) but costs nothing, and it is only used to
/// accept splits so strong that no permutation could reach them: a 10% step
/// over thousands of points, which would otherwise take the Monte Carlo run
/// on the longest segment. It is also the p-value we report for those, so a
/// reported p-value never understates the evidence's uncertainty.
pub(super) fn serfling_bound(c: &[f64], stat: f64, min_len: usize) -> f64 {
    let m = c.len();
    let (lo, hi) = c
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        });
    if m < 2 * min_len || hi <= lo {
        return 1.0;
    }
    let range = hi - lo;
    let splits = (m - 2 * min_len + 1) as f64;
    let half = m as f64 / 2.0;
    let h = half / (half + 1.0);
    let log_p = (2.0 * splits).ln() - 2.0 * stat * m as f64 * h / (range * range);
    // A p-value of exactly zero would claim a certainty that a bound does not
    // give; the smallest positive float says "overwhelming" without lying.
    log_p.exp().clamp(f64::MIN_POSITIVE, 1.0)
}

/// The p-value of the best split over the seeded intervals `family` of the
/// segment whose centred ranks are `c` (see [`multiscale`]), or `None` when
/// it is not below `test.alpha`. Each permutation reorders the whole segment
/// and takes the maximum over the same family.
pub(super) fn local_p_value(
    c: &[f64],
    stat: f64,
    family: &[(usize, usize)],
    test: Test,
    seed: u64,
    scratch: &mut Scratch,
) -> Option<f64> {
    let threshold = relax(stat);
    scratch.permuted.clear();
    scratch.permuted.extend_from_slice(c);
    let Scratch {
        permuted,
        sums,
        squares,
        ..
    } = scratch;
    monte_carlo(test, seed, |rng| {
        let m = permuted.len();
        for t in 0..m.saturating_sub(1) {
            let j = t + rng.below((m - t) as u32) as usize;
            permuted.swap(t, j);
        }
        multiscale::prefix_sums(permuted, sums, squares);
        multiscale::reaches(sums, squares, family, test.min_len, threshold)
    })
}

/// The observed value, lowered by a hair so that a permutation tying it
/// exactly (the same integer sums, rounded differently) counts as reaching
/// it, as it must.
fn relax(stat: f64) -> f64 {
    stat * (1.0 - 1e-9)
}

/// The sequential Monte Carlo p-value: `(1 + x) / (1 + b)` where `x` of the
/// `b` permutations drawn reach the observed value, or `None` when it is not
/// below `test.alpha`. Draws up to `test.permutations`, stopping early as
/// described in the module's documentation.
fn monte_carlo(
    test: Test,
    seed: u64,
    mut reaches: impl FnMut(&mut Indices) -> bool,
) -> Option<f64> {
    let total = test.permutations;
    let alpha = test.alpha;
    let mut rng = Indices::new(seed);
    let mut reached = 0usize;
    // The fewest permutations after which `reached` exceedances settle
    // "significant": the smallest b with P(Bin(b, α) ≤ reached) below
    // ACCEPT_RISK. Recomputed only when `reached` grows.
    let mut settle_at = settles_below(alpha, 0, total);
    let mut drawn = 0;
    while drawn < total {
        drawn += 1;
        if reaches(&mut rng) {
            reached += 1;
            // Certain: even no further exceedance leaves p at or above α.
            if (reached + 1) as f64 / (total + 1) as f64 >= alpha {
                return None;
            }
            // Settled: this many, this early, is implausible below α.
            if 1.0 - binomial_lower_tail(drawn, alpha, reached - 1) < REJECT_RISK {
                return None;
            }
            settle_at = settles_below(alpha, reached, total);
        }
        if drawn >= settle_at {
            break;
        }
    }
    Some((reached + 1) as f64 / (drawn + 1) as f64)
}

/// The smallest `b ≤ total` with `P(Bin(b, α) ≤ k) < ACCEPT_RISK`, or
/// `total` when there is none: `k` exceedances in `b` draws would then be
/// implausible for a p-value at or above `α`.
fn settles_below(alpha: f64, k: usize, total: usize) -> usize {
    // The lower tail falls as b grows: bisection.
    let below = |b: usize| binomial_lower_tail(b, alpha, k) < ACCEPT_RISK;
    if !below(total) {
        return total;
    }
    let (mut lo, mut hi) = (k, total);
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// `P(Bin(n, p) ≤ k)`, summed term by term (`k` is small here: at most
/// the number of exceedances that still allows significance).
fn binomial_lower_tail(n: usize, p: f64, k: usize) -> f64 {
    if k >= n {
        return 1.0;
    }
    let q = 1.0 - p;
    if q <= 0.0 {
        // Every draw succeeds: at most k < n successes is impossible.
        return 0.0;
    }
    let mut term = q.powf(n as f64);
    let mut total = term;
    for i in 1..=k {
        term *= (n - i + 1) as f64 / i as f64 * p / q;
        total += term;
    }
    total.min(1.0)
}

/// Uniform indices for Fisher–Yates, two per 64-bit draw.
///
/// Drawing the index is most of a permutation's cost, so each 64-bit output
/// of the generator serves two indices, one per 32-bit half, each mapped
/// onto its range by Lemire's multiply-and-reject method (exactly uniform;
/// the rejection branch is taken with probability below `range / 2³²`).
struct Indices {
    rng: Xoshiro256PlusPlus,
    spare: u32,
    has_spare: bool,
}

impl Indices {
    fn new(seed: u64) -> Self {
        Indices {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            spare: 0,
            has_spare: false,
        }
    }

    #[inline]
    fn next32(&mut self) -> u32 {
        if self.has_spare {
            self.has_spare = false;
            self.spare
        } else {
            let r = self.rng.next_u64();
            self.spare = (r >> 32) as u32;
            self.has_spare = true;
            r as u32
        }
    }

    /// Uniform in `0..range`; `range ≥ 1`.
    #[inline]
    fn below(&mut self, range: u32) -> u32 {
        let mut x = u64::from(self.next32()) * u64::from(range);
        if (x as u32) < range {
            let floor = range.wrapping_neg() % range;
            while (x as u32) < floor {
                x = u64::from(self.next32()) * u64::from(range);
            }
        }
        (x >> 32) as u32
    }
}

/// Draws one random ordering of `a` and says whether its maximum statistic
/// over `min_len ≤ τ ≤ m − min_len` reaches the observed one.
///
/// The ordering is drawn by a Fisher–Yates pass fused with the prefix sum,
/// and the pass stops at the first split that reaches the threshold: it
/// stays a uniform draw, because Fisher–Yates picks each next element
/// uniformly among those not yet placed whatever order `a` was left in by the
/// previous (possibly interrupted) pass, so `a` is never reset.
fn permutation_reaches(
    a: &mut [f64],
    threshold: &[f64],
    min_len: usize,
    rng: &mut Indices,
) -> bool {
    let m = a.len();
    let last = threshold.len() - 1;
    let mut cum = 0.0;
    for t in 0..last {
        // `m − t ≤ m`, which fits u32 since `detect` refuses longer series.
        let j = t + rng.below((m - t) as u32) as usize;
        a.swap(t, j);
        cum += a[t];
        let tau = t + 1;
        if tau >= min_len && cum * cum >= threshold[tau] {
            return true;
        }
    }
    false
}
