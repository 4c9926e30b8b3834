//! Change points in a series: E-divisive means, in the spirit of MongoDB's
//! signal-processing work (Daly et al., ICPE 2020) and Apache Otava.
//!
//! A series is one metric of one workload, state and host class, ordered by
//! kernel version or by time. In the farm it is a *history*: one primary
//! metric of one series (workload, state, host, guest arch) over matrices
//! and kernels, at most the coordinator's `results::HISTORY_POINTS`
//! medians. The coordinator runs [`detect`] and [`crate::drift`] on every
//! history a matrix's summary carries (`results::histories`);
//! `farmctl analyze changepoints` runs them on a file.
//!
//! [`detect`] finds where its level changes:
//!
//! 1. **Split** (binary segmentation): within a segment, rank the values and
//!    find the split maximising the E-divisive-means statistic (energy
//!    distance with α = 2, i.e. the weighted squared difference of the two
//!    sides' means) over the ranks, in O(m) with one prefix sum (`ranks`);
//!    keep it when a permutation test of that maximum says it is better than
//!    chance, p below [`Options::max_p_value`] (`significance`); recurse
//!    on both sides.
//! 2. **Rescue**: a segment whose best split is not significant may still
//!    hold changes that cancel out over its whole length (up, then down);
//!    the same statistic is tried over seeded sub-intervals and tested the
//!    same way (`multiscale`).
//! 3. **Prune**: every change point is moved to the best split of the
//!    stretch between its neighbours and must be a significant split of that
//!    stretch; the weakest that is not is dropped, one at a time.
//!
//! 4. **Trend** (`trend`): every run of two or more change points
//!    stepping the same way is a staircase a trend may explain; a
//!    penalised likelihood between the staircase and a line (plus the
//!    run's steps that still improve on the line) decides, and the steps
//!    the line does not need are dropped. A step on top of a trend stays.
//!    Sums of squares are over a noise variance from the differences of
//!    neighbouring points, their squares capped at 3 robust deviations.
//! 5. **Dependence** (`serial`): when the residuals around binary
//!    segmentation's segments are serially correlated (their lag-one
//!    autocorrelation is above chance), the noise is fitted as white plus
//!    AR(1) from its variogram within the segments (cut also at any step
//!    binary segmentation missed that stands far out), and every change
//!    point's step must reach a `z` under that noise's variance (Bonferroni
//!    over the positions of its stretch); the weakest that does not is
//!    dropped, the variogram fitted again, until all do; then step 4 again.
//!    AR(1) noise makes a permutation test far too confident.
//! 6. **Wander, persistence and swing** (`alternatives`): from 50 points on,
//!    the staircase left is compared, by a penalised likelihood over the
//!    whole series, with a local level (`level`: a level that moves a
//!    little at every point, `q` by maximum likelihood) and with AR(1)
//!    noise (`autoregressive`, `φ` by maximum likelihood) and, up to 500
//!    points, with a seasonal swing (`season`, a sinusoid of free
//!    period), each plus those of the steps that still pay for themselves
//!    under it; when the cheapest costs less than the best staircase
//!    through the steps, the steps it does not need are dropped. A random
//!    walk, a seasonal
//!    swing or the runs of persistent noise are cut into steps that leave
//!    white residuals, which stage 5 cannot always see; this stage sees
//!    the whole.
//!
//! A history that drifts rather than steps is [`crate::drift`]'s.
//!
//! The stages share their numerics through modules that import no stage:
//! `least_squares` (a stretch's design of constant, slope, steps and
//! bends, and its solution), `staircase` (segments, their means, the best
//! staircase's cost), `bonferroni` (a step's `z` over its stretch's
//! positions), `robust` (median, MAD) and `minimise` (Brent). Each stage
//! imports only those and the stages below it (`alternatives` the models
//! it weighs), so that a stage can be read, and changed, without the
//! others.
//!
//! Why not Otava's way: Otava slides 50-point windows over the series, runs
//! E-divisive in each with a t-test at ten times the requested p-value, then
//! merges the union back with t-tests. On a long series that is hundreds of
//! tests, each at a level meant for one, on splits chosen to look
//! significant, with a test that assumes normal noise: on 10,000 points with
//! a single step it reports a dozen or more change points, all but one
//! false. Here a segment gets one test (two if it needs the rescue), exact
//! under any noise, whose statistic already accounts for the choice of the
//! split, so a series without change yields a false change point with
//! probability about `max_p_value` per test; and the whole segment's
//! evidence goes into its split, not 50 points of it, which is what finds
//! small steps in long series.
//!
//! Cost: ranking is O(m log m) per segment and the statistic O(m); splits
//! so strong that no permutation could match them skip the permutations
//! (Serfling's bound), the others stop as soon as the outcome is settled
//! (sequential Monte Carlo), and a segment without change stops after a few
//! permutations. 10,000 points take about 3 ms, 100 points about 0.2 ms;
//! steps 4 to 6 add 3–51% on series without change and up to 87% on
//! series with steps (docs/BENCHMARKS.md).
//!
//! Measured (docs/BENCHMARKS.md, "Change points"): the step families keep
//! their F1, and steps on a trend gain; from 1,000 points on every family
//! without change (trends, random walks, seasonal swings, AR(1) noise) is
//! at or below one false change point per 1,000 points. At 100 points
//! trends are too and AR(1) noise about at it, but random walks (5) and
//! seasonal swings (6) are not, though below Otava's, binary
//! segmentation's and PELT's. There a walk of steps of 0.3 under noise of
//! 3 cannot be told from steps: in 81 of the 94 walks where steps were
//! found, they beat the *known* walk by Schwarz's criterion; and a
//! stricter test (a permutation level of 0.0001) brings walks and swings
//! only to 2 and 3.6 while every step family falls below Otava's F1. At
//! 100 points the bound is a choice between those two targets, not a
//! missing stage.

mod alternatives;
mod autoregressive;
mod bonferroni;
mod least_squares;
mod level;
mod minimise;
mod multiscale;
mod ranks;
mod robust;
mod season;
mod serial;
mod significance;
mod staircase;
#[cfg(test)]
mod tests;
mod trend;

use std::collections::HashMap;

use significance::{Scratch, Test};
use staircase::{bounds, segment_means};

/// One change in a series.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    /// The first index after the change.
    pub index: usize,
    /// Means of the segments before and after it (up to the neighbouring change points).
    pub mean_before: f64,
    pub mean_after: f64,
    /// The p-value of this change as a split of the stretch between its
    /// neighbours: the Monte Carlo permutation p-value `(1 + x) / (1 + b)`
    /// (`x` of `b` permutations as extreme), or, for a split too strong for
    /// any permutation to match, an upper bound on the exact one.
    pub p_value: f64,
}

/// How to detect.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// A change is kept when its p-value is below this.
    pub max_p_value: f64,
    /// Seed of the permutations, so that a detection is reproducible.
    pub seed: u64,
    /// Fewest points on either side of a change, within the segment being
    /// split. Five: fewer cannot tell a step from a couple of outliers, even
    /// on ranks, and a shorter run is not a regression one would act on.
    pub min_segment_len: usize,
    /// Monte Carlo permutations per test, at most. 999 lets a p-value be
    /// estimated to within a few thousandths around the default level of
    /// 0.01, so that a real change with an exact p-value of, say, 0.004 is
    /// kept nearly always (with 199, a single unlucky permutation would
    /// reject it, about half the time); the sequential stopping keeps the
    /// average far below it. Raised automatically to `1 / max_p_value` when
    /// that is more, since fewer could never show a p-value below the level.
    pub permutations: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_p_value: 0.01,
            seed: 0x5eed,
            min_segment_len: 5,
            permutations: 999,
        }
    }
}

/// Why a series or options cannot be analysed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    #[error("value {value} at index {index} is not finite")]
    NotFinite { index: usize, value: f64 },
    #[error("max_p_value must be in (0, 1], got {0}")]
    MaxPValue(f64),
    #[error("min_segment_len must be at least 1")]
    MinSegmentLen,
    #[error("a series of {0} values is longer than the {max} supported", max = MAX_LEN)]
    TooLong(usize),
}

/// Longest series accepted: positions are drawn and kept as `u32`, which
/// halves the memory the permutations walk through.
pub const MAX_LEN: usize = u32::MAX as usize;

/// The change points of `series`, by index. Values must be finite.
///
/// # Panics
///
/// When a value is not finite or the options are invalid; [`try_detect`]
/// returns those as errors instead.
pub fn detect(series: &[f64], options: &Options) -> Vec<ChangePoint> {
    try_detect(series, options).unwrap_or_else(|e| panic!("changepoint::detect: {e}"))
}

/// [`detect`], with invalid input as an error rather than a panic.
pub fn try_detect(series: &[f64], options: &Options) -> Result<Vec<ChangePoint>, Error> {
    if let Some((index, &value)) = series.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(Error::NotFinite { index, value });
    }
    if !(options.max_p_value > 0.0 && options.max_p_value <= 1.0) {
        return Err(Error::MaxPValue(options.max_p_value));
    }
    if options.min_segment_len == 0 {
        return Err(Error::MinSegmentLen);
    }
    if series.len() > MAX_LEN {
        return Err(Error::TooLong(series.len()));
    }
    let splits = segment(series, options);
    Ok(with_means(series, &confirm(series, splits, options)))
}

/// The change points binary segmentation found (`splits`) that remain
/// steps once trends and serially dependent noise are allowed for
/// ([`trend`], [`serial`]). Dependence is judged around the segments
/// binary segmentation found, before trends merge any: a trend's staircase
/// leaves residuals that look white, a trend's line does not. Trends are
/// resolved first, so that a staircase is judged whole, not what the
/// dependence test leaves of it, and again after it; what is left is then
/// judged against a wandering level and persistent noise
/// ([`alternatives`]).
fn confirm(series: &[f64], splits: Vec<(usize, f64)>, options: &Options) -> Vec<(usize, f64)> {
    let bounds = bounds(series.len(), splits.iter().map(|&(at, _)| at));
    let dependent = serial::dependent(series, &bounds);
    let noise = serial::noise(series, &bounds);
    let resolve = |splits: Vec<(usize, f64)>| -> Vec<(usize, f64)> {
        let kept = trend::resolve(
            series,
            splits.iter().map(|&(at, _)| at).collect(),
            noise,
            options.max_p_value,
        );
        splits
            .into_iter()
            .filter(|(at, _)| kept.contains(at))
            .collect()
    };
    let splits = resolve(splits);
    let splits = if dependent {
        resolve(serial::confirm(series, splits, options.max_p_value))
    } else {
        splits
    };
    let kept = alternatives::resolve(series, splits.iter().map(|&(at, _)| at).collect());
    splits
        .into_iter()
        .filter(|(at, _)| kept.contains(at))
        .collect()
}

/// Binary segmentation, then pruning: the significant splits, as
/// `(index, p_value)` in increasing index order.
fn segment(series: &[f64], options: &Options) -> Vec<(usize, f64)> {
    let test = Test {
        alpha: options.max_p_value,
        permutations: options
            .permutations
            .max((1.0 / options.max_p_value).floor().min(1e7) as usize),
        min_len: options.min_segment_len,
    };
    let mut d = Detector {
        series,
        test,
        seed: options.seed,
        tested: HashMap::new(),
        order: Vec::new(),
        centred: Vec::new(),
        sums: Vec::new(),
        squares: Vec::new(),
        scratch: Scratch::default(),
    };
    let mut found = Vec::new();
    let mut pending = vec![(0, series.len())];
    while let Some((start, end)) = pending.pop() {
        if let Some(at) = d.split(start, end) {
            found.push(at);
            pending.push((start, at));
            pending.push((at, end));
        }
    }
    found.sort_unstable();
    d.prune(found)
}

/// The outcome of testing the whole-segment split of `lo..hi`.
#[derive(Debug, Clone, Copy)]
struct Tested {
    /// Where the best split falls, as an index into the series.
    at: usize,
    /// Its standardised strength, comparable across segments.
    z2: f64,
    /// Its p-value, when below the level.
    p: Option<f64>,
}

/// The series, what has been tested of it, and the buffers reused from
/// segment to segment.
struct Detector<'a> {
    series: &'a [f64],
    test: Test,
    seed: u64,
    /// Whole-segment tests by `(lo, hi)`. A test's permutations are seeded
    /// by its bounds, so repeating it would give the same answer: pruning
    /// re-tests many of the segments binary segmentation already did.
    tested: HashMap<(usize, usize), Option<Tested>>,
    order: Vec<(f64, u32)>,
    centred: Vec<f64>,
    sums: Vec<f64>,
    squares: Vec<f64>,
    scratch: Scratch,
}

impl Detector<'_> {
    /// Where to split `lo..hi`, if anywhere: at its best whole-segment split
    /// if that is significant, else at the best split over seeded
    /// sub-intervals if that is ([`multiscale`]).
    fn split(&mut self, lo: usize, hi: usize) -> Option<usize> {
        let tested = self.whole(lo, hi)?;
        if tested.p.is_some() {
            return Some(tested.at);
        }
        let min_len = self.test.min_len;
        ranks::centred_ranks(&self.series[lo..hi], &mut self.order, &mut self.centred);
        let family = multiscale::intervals(hi - lo, min_len);
        multiscale::prefix_sums(&self.centred, &mut self.sums, &mut self.squares);
        let local = multiscale::best(&self.sums, &self.squares, &family, min_len)?;
        // Fewer permutations here: see `RESCUE_PERMUTATIONS`.
        let test = Test {
            permutations: self.test.permutations.min(RESCUE_PERMUTATIONS),
            ..self.test
        };
        let seed = segment_seed(self.seed ^ RESCUE_SEED, lo, hi);
        significance::local_p_value(
            &self.centred,
            local.stat,
            &family,
            test,
            seed,
            &mut self.scratch,
        )?;
        Some(lo + local.tau)
    }

    /// The test of the best whole-segment split of `lo..hi`, or `None` when
    /// the segment is too short or constant.
    fn whole(&mut self, lo: usize, hi: usize) -> Option<Tested> {
        let min_len = self.test.min_len;
        if hi - lo < 2 * min_len {
            return None;
        }
        if let Some(&known) = self.tested.get(&(lo, hi)) {
            return known;
        }
        ranks::centred_ranks(&self.series[lo..hi], &mut self.order, &mut self.centred);
        let result = ranks::best_split(&self.centred, min_len).map(|split| {
            let m = (hi - lo) as f64;
            let sum_sq: f64 = self.centred.iter().map(|&c| c * c).sum();
            let seed = segment_seed(self.seed, lo, hi);
            Tested {
                at: lo + split.tau,
                z2: split.stat * m * m / sum_sq,
                p: significance::p_value(&self.centred, split, self.test, seed, &mut self.scratch),
            }
        });
        self.tested.insert((lo, hi), result);
        result
    }

    /// Makes every change point a significant split of the stretch between
    /// its neighbours, as Otava's merge step does but with the same exact
    /// test as the split: moves each to the best split of that stretch
    /// (binary segmentation placed it using a longer one, which may hold
    /// other changes that pull it aside), then drops, one at a time and
    /// weakest first, those whose stretch is not significantly split, and
    /// repeats, since dropping one widens its neighbours' stretches.
    ///
    /// A change point a few points off leaves those points in the next
    /// segment, where they can make a spurious split of their own; once the
    /// first is moved back, the second's stretch has nothing left to split.
    fn prune(&mut self, mut at: Vec<usize>) -> Vec<(usize, f64)> {
        let n = self.series.len();
        let bounds = |at: &[usize], i: usize| {
            let lo = if i == 0 { 0 } else { at[i - 1] };
            (lo, at.get(i + 1).copied().unwrap_or(n))
        };
        loop {
            // Moving one shifts its neighbours' stretches; a few rounds
            // settle it (binary segmentation leaves them close).
            for _ in 0..RELOCATION_ROUNDS {
                let mut moved = false;
                for i in 0..at.len() {
                    let (lo, hi) = bounds(&at, i);
                    if let Some(best) = self.best_split_at(lo, hi) {
                        moved |= best != at[i];
                        at[i] = best;
                    }
                }
                if !moved {
                    break;
                }
            }
            let mut weakest: Option<(usize, f64)> = None;
            for i in 0..at.len() {
                let (lo, hi) = bounds(&at, i);
                let z2 = match self.whole(lo, hi) {
                    Some(t) if t.p.is_some() => continue,
                    Some(t) => t.z2,
                    None => 0.0,
                };
                if weakest.is_none_or(|(_, w)| z2 < w) {
                    weakest = Some((i, z2));
                }
            }
            match weakest {
                Some((i, _)) => {
                    at.remove(i);
                }
                None => break,
            }
        }
        (0..at.len())
            .map(|i| {
                let (lo, hi) = bounds(&at, i);
                let p = self.whole(lo, hi).and_then(|t| t.p);
                (at[i], p.expect("every change point left is significant"))
            })
            .collect()
    }

    /// The best whole-segment split of `lo..hi`, untested.
    fn best_split_at(&mut self, lo: usize, hi: usize) -> Option<usize> {
        if let Some(Some(known)) = self.tested.get(&(lo, hi)) {
            return Some(known.at);
        }
        if hi - lo < 2 * self.test.min_len {
            return None;
        }
        ranks::centred_ranks(&self.series[lo..hi], &mut self.order, &mut self.centred);
        ranks::best_split(&self.centred, self.test.min_len).map(|s| lo + s.tau)
    }
}

/// Rounds of moving change points between pruning steps.
const RELOCATION_ROUNDS: usize = 8;

/// Permutations at most for the seeded-interval test. Each of its
/// permutations scans about ten times the segment, and it mostly runs on
/// segments without change, where it stops early anyway; a change it would
/// only find with more permutations is a borderline one.
const RESCUE_PERMUTATIONS: usize = 199;

/// Mixed into the seed of the seeded-interval test, so that its
/// permutations differ from the whole-segment test's on the same segment.
const RESCUE_SEED: u64 = 0x6d75_6c74_6973_6361;

/// A seed for the segment `start..end`: SplitMix64's finaliser over the
/// user's seed and the bounds, so that segments draw independent streams.
fn segment_seed(seed: u64, start: usize, end: usize) -> u64 {
    let mut z = seed
        ^ (start as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (end as u64).wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The change points at `splits`, with the means of the raw values between
/// neighbouring change points.
fn with_means(series: &[f64], splits: &[(usize, f64)]) -> Vec<ChangePoint> {
    let means = segment_means(
        series,
        &bounds(series.len(), splits.iter().map(|&(at, _)| at)),
    );
    splits
        .iter()
        .enumerate()
        .map(|(i, &(index, p_value))| ChangePoint {
            index,
            mean_before: means[i],
            mean_after: means[i + 1],
            p_value,
        })
        .collect()
}
