//! Comparing a cell's runs with its baseline's: one verdict per metric.
//!
//! # What is computed
//!
//! - `ratio`: candidate median / baseline median, the figure people read, with
//!   a seeded bootstrap interval (`ci_low`, `ci_high`; module `bootstrap`).
//! - `p_value`: two-sided, of the test the verdict used: an adaptive rank
//!   test (module `adaptive`) that chooses, from the pooled values alone,
//!   between van der Waerden's normal scores (normal-looking noise, no ties,
//!   15 or more runs a side; Cornish-Fisher tail) and the Mann-Whitney U test
//!   (anything else; exact by counting for small samples, a normal
//!   approximation for large ones, module `mann_whitney`).
//! - `shift`, `shift_low`, `shift_high`: the Hodges-Lehmann estimate of the
//!   candidate/baseline ratio and its distribution-free (Moses) interval, the
//!   figures the verdict is decided on (module `shift`).
//! - `findings`: a change of spread (module `spread`) and two modes on either
//!   side (module `modes`), which a verdict on location alone would hide.
//!
//! # The verdict
//!
//! With `m` the minimum effect and "worse" meaning larger for
//! [`Direction::LowerIsBetter`] and smaller for [`Direction::HigherIsBetter`]:
//!
//! - `regression`: the one-sided adaptive rank test in the worse direction
//!   rejects at `alpha` (0.01) **and** the Hodges-Lehmann ratio is worse by at
//!   least `m`;
//! - `improvement`: the same in the better direction;
//! - `no_change`: the Moses interval at 1 − 2·`equivalence_alpha` (90%) lies
//!   within [1 − m, 1 + m]: two one-sided tests (TOST) say that any change is
//!   smaller than `m`;
//! - `inconclusive`: anything else, which is exactly what more runs can
//!   decide, since both intervals narrow as runs are added.
//!
//! Why these choices, against the alternatives:
//!
//! - The test is rank-based so that no noise shape (log-normal tails, a slow
//!   mode, one run in ten hit by a neighbour) can raise false alarms: under
//!   "no change", whatever the distribution, a regression is called with
//!   probability at most `alpha` (exact Mann-Whitney: at most its attained
//!   level, 0.93% at 10 runs a side; normal scores: `alpha` up to the
//!   Cornish-Fisher tail's error, ±0.03 points in permutation checks). The
//!   choice of scores is made on the pooled sample, which under "no change"
//!   says nothing about which side a value came from, so it keeps each
//!   test's level (Hogg's adaptive tests).
//! - It is adaptive because no one rank test does both jobs: Mann-Whitney's
//!   efficiency under normal noise is 95.5% of the t-test's (3/π), 89.6%
//!   against 91.1% for a 5% slowdown at 30 runs a side in
//!   `examples/power.rs`, short of the 90% target; normal scores are as
//!   efficient as the t-test there (90.6%) but lose 6-7 points to
//!   Mann-Whitney under outliers, where Mann-Whitney keeps 70% and the t-test
//!   falls to 4%. The selector (Hogg's tail weight and skewness of the pooled
//!   values) tells the two noises apart almost always.
//! - One-sided at 0.01 in each direction (two-sided 0.02) rather than 0.05:
//!   every metric of every cell is compared, so false alarms add up, and the
//!   targets ask for fewer than 1%.
//! - The effect gate uses the Hodges-Lehmann ratio rather than the ratio of
//!   medians: it is the estimate that goes with Mann-Whitney (that test
//!   rejects exactly when the Moses interval excludes 1; normal scores
//!   nearly so) and it is far less noisy
//!   (efficiency 0.95 against 0.64 for the median under normal noise), so the
//!   gate costs no power at all in the benchmark, where gating on the ratio
//!   of medians cost 0.4 points at 30 runs a side and a 5% slowdown.
//! - `no_change` is an equivalence decision, not "not significant": the
//!   coordinator stops adding runs on it, so it has to mean "any change is
//!   below `m`" with 95% confidence on each side. With 10 noisy runs it is
//!   rarely reached; that is the truth about 10 noisy runs.
//! - Scale: when every value on both sides is positive the analysis works on
//!   logarithms, so that a slowdown is a ratio and the spread is relative
//!   (seed 003's spread shows there at any location). Metrics with zeros or
//!   negative values are compared on their own scale, effects being taken
//!   relative to the absolute baseline median.

use rand::SeedableRng as _;
use rand::rngs::StdRng;

use crate::Direction;

pub use finding::Finding;
use scale::{Scale, median_sorted, sorted};

mod adaptive;
mod bootstrap;
mod finding;
mod mann_whitney;
mod modes;
mod scale;
mod shift;
mod spread;

#[cfg(test)]
mod tests;

/// What a comparison concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Regression,
    Improvement,
    NoChange,
    Inconclusive,
}

impl Verdict {
    /// The name the JSON interface and the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::Improvement => "improvement",
            Verdict::NoChange => "no_change",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// How to compare.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The smallest relative change called a regression or an improvement,
    /// as a fraction (0.02 is 2%); also the margin within which `no_change`
    /// is called. In [0, 1).
    pub min_effect: f64,
    /// Seed of the bootstrap, so that a comparison is reproducible.
    pub seed: u64,
    /// One-sided level of the verdict's rank test in each direction, and of
    /// the spread test: the largest rate of false regressions (and of false
    /// improvements) under no change. In (0, 0.5).
    pub alpha: f64,
    /// One-sided level of each of the two tests behind `no_change`: the
    /// largest rate at which a change of exactly `min_effect` is called
    /// `no_change`. In (0, 0.5).
    pub equivalence_alpha: f64,
    /// Bootstrap resamples behind `ci_low` and `ci_high`. They do not enter
    /// the verdict; 0 skips the bootstrap (the bounds are then NaN).
    pub resamples: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            min_effect: 0.02,
            seed: 0x5eed,
            alpha: 0.01,
            equivalence_alpha: 0.05,
            // The 2.5% and 97.5% percentiles of 2,000 resamples move by well
            // under a tenth of the interval's width from seed to seed.
            resamples: 2000,
        }
    }
}

/// The result of comparing a candidate with its baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub verdict: Verdict,
    /// Candidate median / baseline median. Not finite when the baseline
    /// median is 0.
    pub ratio: f64,
    /// Bootstrap confidence interval of `ratio`: 95%, percentile method.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Two-sided p-value (twice the smaller one-sided one) of the rank test
    /// the verdict used: van der Waerden's normal scores when the pooled
    /// values look normal-tailed and symmetric, have no ties and each side
    /// has 15 or more; the Mann-Whitney U test (exact for small samples)
    /// otherwise.
    pub p_value: f64,
    pub n_baseline: usize,
    pub n_candidate: usize,
    pub findings: Vec<Finding>,
    /// The Hodges-Lehmann estimate of candidate / baseline: the median over
    /// all pairs of candidate / baseline (of the differences, relative to the
    /// baseline median, when some value is not positive). The verdict's
    /// effect size.
    pub shift: f64,
    /// The Moses interval of `shift` at 1 − 2·`equivalence_alpha` (90% by
    /// default): `no_change` is called when it lies within ±`min_effect`.
    /// Unbounded (0 or −∞ to +∞) when the samples are too small to bound it.
    pub shift_low: f64,
    pub shift_high: f64,
}

/// Why two samples cannot be compared.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("the {side} has {n} values; a comparison needs at least 2 on each side")]
    TooFew { side: &'static str, n: usize },
    #[error("the {side} has a value that is not a finite number at position {index}")]
    NotFinite { side: &'static str, index: usize },
    #[error("option {name} is {value}; it must be {expected}")]
    BadOption {
        name: &'static str,
        value: f64,
        expected: &'static str,
    },
}

/// Compares `candidate` with `baseline` for a metric in `direction`.
///
/// Deterministic: the same samples and options give the same result (the
/// only randomness, the bootstrap, is seeded by `options.seed`).
pub fn compare(
    baseline: &[f64],
    candidate: &[f64],
    direction: Direction,
    options: &Options,
) -> Result<Comparison, Error> {
    check_options(options)?;
    check_side("baseline", baseline)?;
    check_side("candidate", candidate)?;

    let scale = Scale::of(baseline, candidate);
    let x = scale.sorted(baseline);
    let y = scale.sorted(candidate);

    let test = adaptive::test(&x, &y);
    let shift = shift::estimate(&x, &y, options.equivalence_alpha);
    let baseline_median = median_sorted(&sorted(baseline));
    let relative = |d: f64| scale.relative(d, baseline_median);
    let (effect, low, high) = (
        relative(shift.estimate),
        relative(shift.low),
        relative(shift.high),
    );

    // Worse and better as signed relative changes: positive is worse.
    let (p_worse, p_better, worse_effect) = match direction {
        Direction::LowerIsBetter => (test.p_greater, test.p_less, effect),
        Direction::HigherIsBetter => (test.p_less, test.p_greater, -effect),
    };
    let m = options.min_effect;
    let verdict = if p_worse < options.alpha && worse_effect >= m {
        Verdict::Regression
    } else if p_better < options.alpha && -worse_effect >= m {
        Verdict::Improvement
    } else if low >= -m && high <= m {
        Verdict::NoChange
    } else {
        Verdict::Inconclusive
    };

    let candidate_median = median_sorted(&sorted(candidate));
    let (ci_low, ci_high) = if options.resamples == 0 {
        (f64::NAN, f64::NAN)
    } else {
        let mut rng = StdRng::seed_from_u64(options.seed);
        bootstrap::median_ratio_interval(baseline, candidate, options.resamples, 0.95, &mut rng)
    };

    let mut findings = Vec::new();
    findings.extend(spread::find(&x, &y, options.alpha));
    for (is_candidate, values) in [(false, baseline), (true, candidate)] {
        findings.extend(modes::find(&sorted(values), scale, is_candidate));
    }

    Ok(Comparison {
        verdict,
        ratio: candidate_median / baseline_median,
        ci_low,
        ci_high,
        p_value: test.p_two_sided(),
        n_baseline: baseline.len(),
        n_candidate: candidate.len(),
        findings,
        shift: 1.0 + effect,
        shift_low: 1.0 + low,
        shift_high: 1.0 + high,
    })
}

fn check_options(options: &Options) -> Result<(), Error> {
    let bad = |name, value, expected| {
        Err(Error::BadOption {
            name,
            value,
            expected,
        })
    };
    // Written so that NaN fails every check.
    if !(options.min_effect >= 0.0 && options.min_effect < 1.0) {
        return bad("min_effect", options.min_effect, "in [0, 1)");
    }
    if !(options.alpha > 0.0 && options.alpha < 0.5) {
        return bad("alpha", options.alpha, "in (0, 0.5)");
    }
    if !(options.equivalence_alpha > 0.0 && options.equivalence_alpha < 0.5) {
        return bad(
            "equivalence_alpha",
            options.equivalence_alpha,
            "in (0, 0.5)",
        );
    }
    Ok(())
}

fn check_side(side: &'static str, values: &[f64]) -> Result<(), Error> {
    if values.len() < 2 {
        return Err(Error::TooFew {
            side,
            n: values.len(),
        });
    }
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(Error::NotFinite { side, index }),
        None => Ok(()),
    }
}
