//! Bisection: which kernel of an ordered list is the first bad one.
//!
//! The list runs from a good kernel (index 0) to a bad one (the last), in
//! the order the regression could have entered (a git range's first-parent
//! commits, or releases). Each step measures one kernel beside both ends
//! and judges it *same as good*, *same as bad* or *unknown* (module
//! [`judge`](mod@judge)). Unknown gets more runs, up to the policy's cap; a kernel that
//! stays unknown is set aside, as `git bisect skip` does, and the next step
//! measures the kernel nearest the middle that is still untried. The search
//! ends with two neighbours, the last good and the first bad kernel, which a
//! last step measures afresh beside each other: the culprit is *confirmed*
//! only when that comparison, on runs no earlier decision used, calls the
//! regression. When every kernel between the last known good and the first
//! known bad one stayed unknown, the outcome says the culprit is in that
//! range, and never which (the range confirmed the same way).
//!
//! [`Bisector`] is plain data (so the coordinator can store it and a
//! restart resumes it) driven by two calls: [`Bisector::plan`] says what to
//! measure next, [`Bisector::observe`] takes what was measured.

use crate::Direction;
use crate::compare::{self, Options, Verdict};

pub mod judge;
pub mod simulation;

#[cfg(test)]
mod tests;

pub use judge::{Call, Judgement, Unknown, judge};

/// The most kernels one bisection may range over: 17 steps at most, and a
/// list the coordinator keeps in one record (first-parent commits between
/// two releases are about a thousand).
pub const MAX_KERNELS: usize = 100_000;

/// The most runs of one kernel in one step.
pub const MAX_STEP_RUNS: u32 = 100;

/// The most decided steps before the search gives up and confirms what it
/// has: 17 halvings cover `MAX_KERNELS`, so the rest are kernels set aside.
/// It bounds the record the coordinator keeps (a step and up to
/// `MAX_STEP_RUNS` values of each end per step).
pub const MAX_STEPS: usize = 64;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("a bisection needs between 2 and {MAX_KERNELS} kernels; this one has {0}")]
    Kernels(usize),
    #[error(
        "runs per step must be between 2 and the cap, and the cap at most {MAX_STEP_RUNS}; \
         got {runs} and {max_runs}"
    )]
    Runs { runs: u32, max_runs: u32 },
    #[error("measured {got} kernels; the plan asked for {want}")]
    Shape { got: usize, want: usize },
    #[error("the bisection has ended")]
    Ended,
    #[error(transparent)]
    Compare(#[from] compare::Error),
}

/// How many runs a step takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Runs of each kernel in a step's first round, and added by each
    /// further round while the step is unknown.
    pub runs: u32,
    /// The most runs of each kernel in one step.
    pub max_runs: u32,
}

/// What a bisection does next.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Run each of `kernels` `runs` more times, side by side, and pass the
    /// values to [`Bisector::observe`] in this order.
    Measure {
        kernels: Vec<usize>,
        runs: u32,
    },
    Done(Outcome),
}

/// How a bisection ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `first_bad` is the first bad kernel and `last_good` the one before.
    Culprit {
        last_good: usize,
        first_bad: usize,
        confirmation: Confirmation,
    },
    /// The culprit is one of `last_good + 1 ..= first_bad`: every kernel
    /// between stayed unknown.
    Unresolved {
        last_good: usize,
        first_bad: usize,
        confirmation: Confirmation,
    },
    /// Bad was not worse than good on all their runs, with a step at its cap.
    EndsDoNotDiffer { ratio: f64, p_value: f64 },
    /// The runs of a kernel the outcome rests on (an end, or one of the
    /// confirmation's neighbours) failed.
    Failed { kernel: usize },
}

impl Outcome {
    /// Whether the outcome was confirmed on fresh runs.
    pub fn confirmed(&self) -> bool {
        match self {
            Outcome::Culprit { confirmation, .. } | Outcome::Unresolved { confirmation, .. } => {
                confirmation.confirmed
            }
            _ => false,
        }
    }
}

/// The last step: the two bounds measured afresh beside both ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Confirmation {
    /// The first bad kernel is a regression of the last good one, and
    /// neither differs from its own end.
    pub confirmed: bool,
    /// Hodges-Lehmann ratio and p-value of first bad against last good.
    pub ratio: f64,
    pub p_value: f64,
    /// p-values of last good against good and first bad against bad (NaN
    /// for a bound that is an end itself).
    pub neighbours: (f64, f64),
}

/// One decided step, as reports show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub kernel: usize,
    pub call: Call,
    /// Runs of each kernel the call was made on.
    pub runs: u32,
    /// The kernel's Hodges-Lehmann ratio and p-value against good and bad;
    /// NaN when not compared.
    pub vs_good: (f64, f64),
    pub vs_bad: (f64, f64),
}

/// The values measured so far of the kernels `plan` asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    pub kernels: Vec<usize>,
    pub values: Vec<Vec<f64>>,
}

/// A bisection in progress: plain data, see the module's documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Bisector {
    pub kernels: usize,
    pub policy: Policy,
    pub direction: Direction,
    /// The comparison's options; `min_effect` is the policy's.
    pub options: Options,
    pub steps: Vec<Step>,
    /// Every value of the good and the bad end, over all measurements.
    pub ends: [Vec<f64>; 2],
    pub pending: Option<Pending>,
    pub outcome: Option<Outcome>,
}

impl Bisector {
    pub fn new(
        kernels: usize,
        policy: Policy,
        direction: Direction,
        options: Options,
    ) -> Result<Bisector, Error> {
        if !(2..=MAX_KERNELS).contains(&kernels) {
            return Err(Error::Kernels(kernels));
        }
        if policy.runs < 2 || policy.max_runs < policy.runs || policy.max_runs > MAX_STEP_RUNS {
            return Err(Error::Runs {
                runs: policy.runs,
                max_runs: policy.max_runs,
            });
        }
        Ok(Bisector {
            kernels,
            policy,
            direction,
            options,
            steps: Vec::new(),
            ends: [Vec::new(), Vec::new()],
            pending: None,
            outcome: None,
        })
    }

    /// The last kernel known good and the first known bad, from the steps.
    pub fn bounds(&self) -> (usize, usize) {
        let mut lo = 0;
        let mut hi = self.kernels - 1;
        for s in &self.steps {
            match s.call {
                Call::SameAsGood => lo = lo.max(s.kernel),
                Call::SameAsBad => hi = hi.min(s.kernel),
                Call::Unknown(_) => {}
            }
        }
        (lo, hi)
    }

    /// What to measure next, or how it ended.
    pub fn plan(&self) -> Action {
        if let Some(o) = &self.outcome {
            return Action::Done(o.clone());
        }
        let kernels = self.kernels_of(self.target());
        let have = self
            .pending
            .as_ref()
            .filter(|p| p.kernels == kernels)
            .map_or(0, |p| {
                p.values.iter().map(Vec::len).min().unwrap_or(0) as u32
            });
        let runs = if have < self.policy.runs {
            self.policy.runs - have
        } else {
            self.policy
                .runs
                .min(self.policy.max_runs.saturating_sub(have))
                .max(1)
        };
        Action::Measure { kernels, runs }
    }

    /// The comparison the next measurement is about, as positions in its
    /// kernels (baseline, candidate): a step's kernel against good, the
    /// confirmation's first bad against last good. Reports show it with
    /// the farm's diagnosis.
    pub fn focus(&self) -> Option<(usize, usize)> {
        if self.outcome.is_some() {
            return None;
        }
        let t = self.target();
        let kernels = self.kernels_of(t);
        let at = |k: usize| kernels.iter().position(|&x| x == k);
        match t {
            Target::Step(mid) => Some((0, at(mid)?)),
            Target::Confirm(lo, hi) => Some((at(lo)?, at(hi)?)),
        }
    }

    /// The next measurement: a step (good, mid, bad) or, once no kernel
    /// between the bounds is left to try (they are neighbours, or every
    /// kernel between was set aside), the confirmation of the bounds beside
    /// both ends.
    fn target(&self) -> Target {
        let (lo, hi) = self.bounds();
        if self.steps.len() >= MAX_STEPS {
            return Target::Confirm(lo, hi);
        }
        let aside = |k: usize| self.steps.iter().any(|s| s.kernel == k);
        let middle = lo + (hi - lo) / 2;
        // Nearest the middle, the lower on a tie.
        match (lo + 1..hi)
            .filter(|&k| !aside(k))
            .min_by_key(|&k| (k.abs_diff(middle), k))
        {
            Some(mid) => Target::Step(mid),
            None => Target::Confirm(lo, hi),
        }
    }

    fn kernels_of(&self, t: Target) -> Vec<usize> {
        let last = self.kernels - 1;
        match t {
            Target::Step(mid) => vec![0, mid, last],
            Target::Confirm(lo, hi) => {
                let mut k = vec![0, lo, hi, last];
                k.dedup();
                k
            }
        }
    }

    /// Takes the values of the kernels the last [`Action::Measure`] named,
    /// in its order (failed runs give no value), and decides what it can.
    pub fn observe(&mut self, values: Vec<Vec<f64>>) -> Result<(), Error> {
        if self.outcome.is_some() {
            return Err(Error::Ended);
        }
        let target = self.target();
        let kernels = self.kernels_of(target);
        if values.len() != kernels.len() {
            return Err(Error::Shape {
                got: values.len(),
                want: kernels.len(),
            });
        }
        let mut pending = match self.pending.take() {
            Some(p) if p.kernels == kernels => p,
            _ => Pending {
                kernels: kernels.clone(),
                values: vec![Vec::new(); kernels.len()],
            },
        };
        let grew: Vec<bool> = values.iter().map(|v| !v.is_empty()).collect();
        for (&k, v) in kernels.iter().zip(&values) {
            if k == 0 {
                self.ends[0].extend(v);
            } else if k == self.kernels - 1 {
                self.ends[1].extend(v);
            }
        }
        for (have, new) in pending.values.iter_mut().zip(values) {
            have.extend(new);
        }
        let runs = pending.values.iter().map(Vec::len).min().unwrap_or(0) as u32;
        let capped = runs >= self.policy.max_runs;
        // A kernel whose round gave nothing failed: a middle kernel is set
        // aside, any other ends the bisection (it does not build or
        // boot, and more runs would fail the same way).
        if let Some(i) = grew.iter().position(|g| !g) {
            let kernel = kernels[i];
            if matches!(target, Target::Step(_)) && i == 1 {
                self.steps
                    .push(unplaced(kernel, Call::Unknown(Unknown::Failed), runs));
            } else {
                self.outcome = Some(Outcome::Failed { kernel });
            }
            return Ok(());
        }
        if runs < self.policy.runs.min(self.policy.max_runs) {
            self.pending = Some(pending);
            return Ok(());
        }
        if let (Target::Step(_), [good, mid, bad]) = (target, &pending.values[..]) {
            let ends = (&self.ends[0][..], &self.ends[1][..]);
            let j = judge(ends, good, mid, bad, self.direction, &self.options())?;
            if matches!(j.call, Call::Unknown(_)) && !capped {
                self.pending = Some(pending);
                return Ok(());
            }
            if j.call == Call::Unknown(Unknown::EndsDoNotDiffer) {
                self.outcome = Some(Outcome::EndsDoNotDiffer {
                    ratio: j.ends.shift,
                    p_value: j.ends.p_value,
                });
                return Ok(());
            }
            let pair = |c: &Option<compare::Comparison>| {
                c.as_ref()
                    .map_or((f64::NAN, f64::NAN), |c| (c.shift, c.p_value))
            };
            self.steps.push(Step {
                kernel: kernels[1],
                call: j.call,
                runs,
                vs_good: pair(&j.vs_good),
                vs_bad: pair(&j.vs_bad),
            });
            return Ok(());
        }
        let Target::Confirm(last_good, first_bad) = target else {
            unreachable!("a step measures three kernels");
        };
        let options = self.options();
        let of = |k: usize| &pending.values[kernels.iter().position(|&x| x == k).unwrap_or(0)][..];
        let c = compare::compare(of(last_good), of(first_bad), self.direction, &options)?;
        // Each neighbour must not differ from its own end (the rank test
        // alone, p-value reported): a false regression between two kernels
        // of one side would have to hide from that side's end too.
        let last = self.kernels - 1;
        let same = |end: usize, k: usize| -> Result<(bool, f64), Error> {
            if end == k {
                return Ok((true, f64::NAN));
            }
            let zero = Options {
                min_effect: 0.0,
                ..options.clone()
            };
            let d = compare::compare(of(end), of(k), self.direction, &zero)?;
            let differs = matches!(d.verdict, Verdict::Regression | Verdict::Improvement);
            Ok((!differs, d.p_value))
        };
        let (good_same, good_p) = same(0, last_good)?;
        let (bad_same, bad_p) = same(last, first_bad)?;
        let confirmed = c.verdict == Verdict::Regression && good_same && bad_same;
        if !confirmed && !capped {
            self.pending = Some(pending);
            return Ok(());
        }
        let confirmation = Confirmation {
            confirmed,
            ratio: c.shift,
            p_value: c.p_value,
            neighbours: (good_p, bad_p),
        };
        self.outcome = Some(if first_bad - last_good == 1 {
            Outcome::Culprit {
                last_good,
                first_bad,
                confirmation,
            }
        } else {
            Outcome::Unresolved {
                last_good,
                first_bad,
                confirmation,
            }
        });
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Step(usize),
    Confirm(usize, usize),
}

impl Bisector {
    /// The comparison's options for one look at a step's runs: a step is
    /// judged after each round, up to `looks` times, so each look tests at
    /// `alpha / looks` (Bonferroni), and a step's chance of a false call
    /// stays at most `alpha` however many rounds it takes.
    fn options(&self) -> Options {
        let p = self.policy;
        let looks = 1 + (p.max_runs - p.runs).div_ceil(p.runs);
        Options {
            alpha: self.options.alpha / f64::from(looks),
            resamples: 0,
            ..self.options.clone()
        }
    }
}

fn unplaced(kernel: usize, call: Call, runs: u32) -> Step {
    Step {
        kernel,
        call,
        runs,
        vs_good: (f64::NAN, f64::NAN),
        vs_bad: (f64::NAN, f64::NAN),
    }
}
