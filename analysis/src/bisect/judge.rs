//! One step of a bisection: a kernel measured beside both ends, judged
//! *same as good*, *same as bad*, or *unknown* by the farm's comparison.
//!
//! The rule, with "worse" in the metric's direction:
//!
//! 1. The ends are compared first, on every run of them the bisection has
//!    (each step measures them again, so the evidence grows): unless the
//!    rank test says bad is worse than good, nothing measured here can place
//!    the kernel (`Unknown::EndsDoNotDiffer`). The test alone decides: the
//!    bisection was started on a regression, and a minimum effect near the
//!    true one would make this a coin toss at every step.
//! 2. The kernel is compared with each end at a gate of half the ends' gap
//!    (the Hodges-Lehmann ratio of bad to good, halved on the log scale):
//!    the question is which half of the gap it is in, not whether it moved
//!    by the policy's minimum.
//! 3. *Same as bad*: a regression against good, and no significant
//!    difference from bad in either direction, however small (the rank test
//!    alone). *Same as good*: the mirror image. A kernel that differs from
//!    both ends is *between* them (part of the regression, or a second one),
//!    and one that cannot be told from either is *inconclusive*: both are
//!    unknown.
//!
//! A wrong call needs a false verdict of the rank test, at most `alpha` per
//! step under no change; the bisection's last step checks the neighbours it
//! ends with on fresh runs, so a wrong culprit needs two.

use crate::Direction;
use crate::compare::{self, Comparison, Options, Verdict};

/// Where a step put its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    SameAsGood,
    SameAsBad,
    Unknown(Unknown),
}

/// Why a step could not place its kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unknown {
    /// Bad was not worse than good, on all their runs so far.
    EndsDoNotDiffer,
    /// It differs from both ends: part of the regression, or a second one.
    Between,
    /// Neither comparison was decided: more runs may tell.
    Inconclusive,
    /// Its runs failed (a kernel that does not build or boot).
    Failed,
}

impl Call {
    /// The name reports and the wire use.
    pub fn as_str(self) -> &'static str {
        match self {
            Call::SameAsGood => "same_as_good",
            Call::SameAsBad => "same_as_bad",
            Call::Unknown(Unknown::EndsDoNotDiffer) => "unknown_ends_do_not_differ",
            Call::Unknown(Unknown::Between) => "unknown_between",
            Call::Unknown(Unknown::Inconclusive) => "unknown_inconclusive",
            Call::Unknown(Unknown::Failed) => "unknown_failed",
        }
    }

    /// The inverse of [`Call::as_str`].
    pub fn from_name(name: &str) -> Option<Call> {
        [
            Call::SameAsGood,
            Call::SameAsBad,
            Call::Unknown(Unknown::EndsDoNotDiffer),
            Call::Unknown(Unknown::Between),
            Call::Unknown(Unknown::Inconclusive),
            Call::Unknown(Unknown::Failed),
        ]
        .into_iter()
        .find(|c| c.as_str() == name)
    }
}

/// A step's call with the comparisons behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub call: Call,
    /// Bad against good, on all their runs, by the rank test alone.
    pub ends: Comparison,
    /// The kernel against good and against bad, at `gate`; absent when the
    /// ends did not differ.
    pub vs_good: Option<Comparison>,
    pub vs_bad: Option<Comparison>,
    /// The minimum effects of `vs_good` and `vs_bad`: half the ends' gap
    /// each, on the ratio scale.
    pub gate: (f64, f64),
}

/// Judges `mid` beside `good` and `bad`, measured with it (at least 2
/// values each); `ends` are all the values of good and bad the bisection
/// has, these included.
pub fn judge(
    ends: (&[f64], &[f64]),
    good: &[f64],
    mid: &[f64],
    bad: &[f64],
    direction: Direction,
    options: &Options,
) -> Result<Judgement, compare::Error> {
    let options = Options {
        resamples: 0,
        ..options.clone()
    };
    let at = |min_effect| Options {
        min_effect,
        ..options.clone()
    };
    let ends = compare::compare(ends.0, ends.1, direction, &at(0.0))?;
    if ends.verdict != Verdict::Regression {
        return Ok(Judgement {
            call: Call::Unknown(Unknown::EndsDoNotDiffer),
            ends,
            vs_good: None,
            vs_bad: None,
            gate: (f64::NAN, f64::NAN),
        });
    }
    // Half the ends' gap on the ratio scale: `g` is the square root of the
    // ends' ratio made at least 1, so "worse than good by g" and "better
    // than bad by g" meet at the geometric middle. A regression's ratio is at
    // least the minimum effect away from 1, so both gates are positive;
    // they stay below 1 (an option's limit) short of a 4x slowdown.
    let g = ends.shift.max(1.0 / ends.shift).sqrt();
    let (up, down) = ((g - 1.0).min(0.99), 1.0 - 1.0 / g);
    let (to_good, to_bad) = match direction {
        Direction::LowerIsBetter => (up, down),
        Direction::HigherIsBetter => (down, up),
    };
    let vs_good = compare::compare(good, mid, direction, &at(to_good))?;
    let vs_bad = compare::compare(bad, mid, direction, &at(to_bad))?;
    // Whether the kernel differs from an end at all, in either direction:
    // the rank test alone (a minimum effect of 0). A kernel on one side must
    // not differ from that side's end, however little.
    let differs = |end: &[f64]| -> Result<bool, compare::Error> {
        let v = compare::compare(end, mid, direction, &at(0.0))?.verdict;
        Ok(matches!(v, Verdict::Regression | Verdict::Improvement))
    };
    let call = match (vs_good.verdict, vs_bad.verdict) {
        (Verdict::Regression, _) if !differs(bad)? => Call::SameAsBad,
        (_, Verdict::Improvement) if !differs(good)? => Call::SameAsGood,
        _ if differs(good)? && differs(bad)? => Call::Unknown(Unknown::Between),
        _ => Call::Unknown(Unknown::Inconclusive),
    };
    Ok(Judgement {
        call,
        ends,
        vs_good: Some(vs_good),
        vs_bad: Some(vs_bad),
        gate: (to_good, to_bad),
    })
}
