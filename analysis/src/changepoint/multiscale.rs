//! The same statistic over seeded sub-intervals of a segment, for changes
//! that mask each other.
//!
//! Binary segmentation splits a segment where its two sides differ most
//! overall. When a segment holds several changes that cancel out — up, down,
//! up again — no single split of the whole segment separates much, and the
//! segment's test fails even though each change is plain within a shorter
//! stretch. Otava's 50-point windows and Matteson and James's search over
//! the segment's end find those; Wild and Seeded Binary Segmentation
//! (Fryzlewicz 2014; Kovács et al. 2023) are the standard cure. We follow
//! Seeded Binary Segmentation: a deterministic family of intervals, lengths
//! halving from half the segment down (see [`intervals`]), each length
//! tiled with half-overlapping intervals, so every change lies well inside
//! an interval about as long as its distance to its neighbours, and the
//! family's total length is only about twice the segment's per length.
//!
//! Within an interval of length `L` the split at `k` scores
//! `Z² = C² L² / (k (L − k) V)`, where `C` is the interval's own centred
//! prefix sum of the segment's ranks and `V` their sum of squared deviations
//! within the interval: standardising by the interval's own spread, rather
//! than the segment's, keeps a quiet stretch between changes from being
//! judged against the spread that the changes themselves add to the segment.
//! The maximum over the family is tested by permuting the segment's ranks
//! and taking the same maximum, so the test is exact whatever the family.

/// Shortest interval of the family, as a fraction of the segment: see
/// [`intervals`].
const SHORTEST_FRACTION: usize = 32;

/// The seeded intervals of a segment of length `m`, as `(start, end)`:
/// lengths `m/2`, `m/4`, … down to `max(2 · min_len, m / 32)`, each tiled by
/// `2 ⌈m / len⌉ − 1` evenly spaced, half-overlapping intervals.
///
/// The whole segment is left out: its split has just been tested and found
/// wanting. The floor at a 32nd of the segment bounds the cost of a
/// permutation to about ten passes over the segment, and gives up little:
/// binary segmentation has already split the segment's ends at the strongest
/// changes, so changes still masked inside it lie far apart compared with
/// its length, while every extra level of tiny intervals would raise the
/// maximum that chance alone reaches, and so the bar for every real change.
pub(super) fn intervals(m: usize, min_len: usize) -> Vec<(usize, usize)> {
    let shortest = (2 * min_len.max(1)).max(m / SHORTEST_FRACTION);
    let mut out = Vec::new();
    let mut len = m / 2;
    while len >= shortest {
        let count = 2 * m.div_ceil(len) - 1;
        let room = m - len;
        for i in 0..count {
            out.push((room * i / (count - 1), room * i / (count - 1) + len));
        }
        if len == shortest {
            break;
        }
        len = (len / 2).max(shortest);
    }
    out
}

/// The best split over the family: its position in the segment and `Z²`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LocalSplit {
    pub tau: usize,
    pub stat: f64,
}

/// Prefix sums of `c` and of its squares, all that the scans read.
pub(super) fn prefix_sums(c: &[f64], sums: &mut Vec<f64>, squares: &mut Vec<f64>) {
    sums.clear();
    squares.clear();
    let (mut s, mut q) = (0.0, 0.0);
    sums.push(0.0);
    squares.push(0.0);
    for &v in c {
        s += v;
        q += v * v;
        sums.push(s);
        squares.push(q);
    }
}

/// One interval's total, mean and sum of squared deviations, or `None` when
/// its ranks are all tied (nothing to split).
fn moments(sums: &[f64], squares: &[f64], a: usize, b: usize) -> Option<(f64, f64)> {
    let len = (b - a) as f64;
    let total = sums[b] - sums[a];
    let spread = (squares[b] - squares[a]) - total * total / len;
    (spread > 1e-9 * len).then_some((total / len, spread))
}

/// The split with the largest `Z²` over `family`, or `None` when every
/// interval is tied.
pub(super) fn best(
    sums: &[f64],
    squares: &[f64],
    family: &[(usize, usize)],
    min_len: usize,
) -> Option<LocalSplit> {
    let mut best: Option<LocalSplit> = None;
    for &(a, b) in family {
        let Some((mean, spread)) = moments(sums, squares, a, b) else {
            continue;
        };
        let len = (b - a) as f64;
        let base = sums[a];
        for k in min_len..=(b - a - min_len) {
            let kf = k as f64;
            let cusum = (sums[a + k] - base) - kf * mean;
            let stat = cusum * cusum * len * len / (kf * (len - kf) * spread);
            if best.is_none_or(|s| stat > s.stat) {
                best = Some(LocalSplit { tau: a + k, stat });
            }
        }
    }
    best.filter(|s| s.stat > 0.0)
}

/// Whether some split over `family` has `Z² ≥ threshold`; stops at the first.
/// Compares `C² L² ≥ threshold · k (L − k) V`, without dividing.
pub(super) fn reaches(
    sums: &[f64],
    squares: &[f64],
    family: &[(usize, usize)],
    min_len: usize,
    threshold: f64,
) -> bool {
    for &(a, b) in family {
        let Some((mean, spread)) = moments(sums, squares, a, b) else {
            continue;
        };
        let len = (b - a) as f64;
        let base = sums[a];
        let bar = threshold * spread / (len * len);
        for k in min_len..=(b - a - min_len) {
            let kf = k as f64;
            let cusum = (sums[a + k] - base) - kf * mean;
            if cusum * cusum >= bar * kf * (len - kf) {
                return true;
            }
        }
    }
    false
}
