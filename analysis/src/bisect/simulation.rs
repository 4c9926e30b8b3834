//! A bisection over kernels whose truth is known: the tests' and the
//! benchmark's model of a farm, with the real [`Bisector`] and statistics.
//!
//! Kernel `k` runs in `base(k) · exp(σ z)` seconds with `σ` from the noise's
//! coefficient of variation (log-normal noise, as run times are), and
//! `base` a step function: 100 before each culprit, times (1 + its effect)
//! from it on. A kernel can be made to fail, as one that does not build.

use rand::SeedableRng as _;
use rand::rngs::StdRng;

use super::{Action, Bisector, Error, Outcome, Policy};
use crate::Direction;
use crate::compare::Options;
use crate::normal::draw as gauss;

/// The farm being simulated.
#[derive(Debug, Clone, PartialEq)]
pub struct Truth {
    pub kernels: usize,
    /// (first bad kernel, relative slowdown it adds), in order.
    pub culprits: Vec<(usize, f64)>,
    /// Coefficient of variation of every run.
    pub noise: f64,
    /// Kernels whose runs all fail.
    pub failing: Vec<usize>,
}

impl Truth {
    fn base(&self, k: usize) -> f64 {
        self.culprits
            .iter()
            .filter(|&&(c, _)| k >= c)
            .fold(100.0, |t, &(_, e)| t * (1.0 + e))
    }
}

/// What a simulated bisection did.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub outcome: Outcome,
    /// Measurements (rounds of one matrix each) until the outcome.
    pub rounds: u32,
    /// Decided steps, the confirmation not included.
    pub steps: usize,
    /// Runs of all kernels.
    pub runs: u64,
}

/// Bisects `truth` with `policy` and the farm's default comparison at
/// `min_effect`; `seed` makes the noise.
pub fn bisect(truth: &Truth, policy: Policy, min_effect: f64, seed: u64) -> Result<Run, Error> {
    let options = Options {
        min_effect,
        resamples: 0,
        ..Options::default()
    };
    let mut b = Bisector::new(truth.kernels, policy, Direction::LowerIsBetter, options)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let sigma = (1.0 + truth.noise * truth.noise).ln().sqrt();
    let (mut rounds, mut runs) = (0u32, 0u64);
    loop {
        match b.plan() {
            Action::Done(outcome) => {
                return Ok(Run {
                    outcome,
                    rounds,
                    steps: b.steps.len(),
                    runs,
                });
            }
            Action::Measure { kernels, runs: n } => {
                rounds += 1;
                let values = kernels
                    .iter()
                    .map(|&k| {
                        if truth.failing.contains(&k) {
                            return Vec::new();
                        }
                        runs += u64::from(n);
                        (0..n)
                            .map(|_| truth.base(k) * (sigma * gauss(&mut rng)).exp())
                            .collect()
                    })
                    .collect();
                b.observe(values)?;
            }
        }
    }
}
