//! Why a comparison could not decide: when a metric's runs spread far
//! beyond what its comparison can resolve, one line that says so with the
//! figures, what the hosts were doing meanwhile, and what would help.
//!
//! "runs vary ×9.65 (0.680–6.56 s) in the baseline, ×14.3 (0.930–13.3 s) in
//! the candidate: too much to resolve ±2% with 15 runs a side (about 10,163
//! would, beyond the 1,000 a cell may have); the host's load average was
//! 5.1–7.0 on 2 CPUs during the runs; the guest ran ×4.6–7.9 slower than
//! the host under tcg; might help: a guest with fewer vCPUs than the host's 2
//! CPUs (it had 2, under tcg), a quieter host" — where an
//! inconclusive verdict alone said nothing (issue 35: a 2-vCPU TCG guest on
//! a busy 2-core host; the coordinator's `undecided` test plays it).
//!
//! # The rule
//!
//! The comparison decides on the Moses interval of the shift (module
//! `compare`): `no_change` needs it inside [1 − m, 1 + m], a regression
//! needs it clear of that band. Its width, against the band's, is therefore
//! what the runs could resolve: an interval no wider than the band can fall
//! on one side of the band's edge or the other; a wider one cannot lie
//! within it at all, and straddles an edge unless the effect is far larger
//! than `m`. So the line is given when
//!
//! - the verdict is inconclusive (a decided comparison needs no why), and
//! - the interval is bounded (with too few runs to bound it, the number of
//!   runs, not their spread, is the reason), and
//! - it is more than [`WIDTH_FACTOR`] (2) times as wide as the band, on the
//!   log scale when its bounds are positive (a ratio's interval is
//!   symmetric there), else as relative changes.
//!
//! Why a factor of 2 rather than 1: an inconclusive verdict with an
//! interval about as wide as the band is what an effect close to `m`
//! gives, however tight the runs; twice the band is four times the runs
//! (below), which no effect near the edge explains. Tight runs (a few
//! percent) against a 2% band give intervals well under it.
//!
//! The runs that would resolve `m` at this spread come from the interval's
//! width shrinking as 1/√n (it scales with √(1/n_b + 1/n_c)): the runs a
//! side at which it would be as narrow as the band are n·k², with k the
//! width's ratio to the band and n the sides' harmonic mean count. A rough
//! figure (the interval is discrete, the spread itself estimated), good for
//! its order of magnitude: whether raising `max_runs` can help at all, given
//! the most runs a cell may have.
//!
//! Pure: plain numbers in, a line out; the coordinator gathers the figures.

#[cfg(test)]
mod tests;

use crate::compare::{Comparison, Verdict};
use crate::diagnosis::{amount, factor};

/// How many times wider than the band [1 − m, 1 + m] the interval must be
/// for the spread, rather than an effect close to `m`, to be the reason
/// (see the module's documentation).
pub const WIDTH_FACTOR: f64 = 2.0;

/// Steal below this share of a guest's time (percent) explains no spread.
const STEAL_WORTH_SAYING_PCT: f64 = 1.0;

/// A guest within this factor of its host's speed ran as a machine does
/// (KVM's is about 1); a slower one is emulated, or its vCPUs wait for the
/// host, in every figure it gives.
const SLOWDOWN_WORTH_SAYING: f64 = 2.0;

/// A guest's load on its host beyond its vCPUs (its I/O thread, the
/// emulator's helpers) is under one CPU's worth; more is someone else's.
const OTHERS_LOAD: f64 = 1.0;

/// The lowest and highest of a figure over the runs of both sides.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub low: f64,
    pub high: f64,
}

impl Range {
    /// The range of `values`; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Range> {
        values
            .into_iter()
            .filter(|v| v.is_finite())
            .fold(None, |r: Option<Range>, v| {
                Some(match r {
                    None => Range { low: v, high: v },
                    Some(r) => Range {
                        low: r.low.min(v),
                        high: r.high.max(v),
                    },
                })
            })
    }
}

/// What the hosts (and guests) were like over both sides' runs, as their
/// telemetry recorded it; every field is unknown for runs that did not
/// record it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conditions {
    /// The host's 1-minute load average at each run's end.
    pub load: Option<Range>,
    /// The host's online CPUs.
    pub host_cpus: Option<Range>,
    /// A guest's online vCPUs during the workload, the most of any run
    /// (`None`: the runs ran on the host itself).
    pub guest_cpus: Option<u32>,
    /// The executor when every run had the same one (`tcg`, `kvm`, `host`).
    pub executor: Option<String>,
    /// The share of a guest's CPU time the hypervisor stole, in percent.
    pub steal_pct: Option<Range>,
    /// How many times slower a guest ran a fixed loop than its host runs
    /// it natively (`guest_slowdown`): TCG's figure, where steal reads 0.
    pub slowdown: Option<Range>,
}

/// One metric's comparison and what it was made of.
#[derive(Debug, Clone, PartialEq)]
pub struct Question<'a> {
    pub comparison: &'a Comparison,
    pub baseline: &'a [f64],
    pub candidate: &'a [f64],
    /// The metric's unit (`s`), empty for none.
    pub unit: &'a str,
    /// The minimum effect the comparison resolves, a fraction (0.02).
    pub min_effect: f64,
    /// The runs a cell may reach by the runs verdicts add (`max_runs`).
    pub max_runs: u32,
    /// The most runs any cell may have (`max_runs`' own limit).
    pub runs_limit: u32,
}

/// How far beyond the comparison's resolution its runs spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Beyond {
    /// The interval's width over the band's.
    pub width_ratio: f64,
    /// The runs a side at which the interval would be as narrow as the band.
    pub runs_to_resolve: u64,
}

/// Whether `q`'s runs spread beyond what its comparison could resolve (the
/// rule of this module's documentation), and how far.
pub fn beyond(q: &Question<'_>) -> Option<Beyond> {
    let c = q.comparison;
    let m = q.min_effect;
    if c.verdict != Verdict::Inconclusive || !(m > 0.0 && m < 1.0) {
        return None;
    }
    let (low, high) = (c.shift_low, c.shift_high);
    if !(low.is_finite() && high.is_finite()) || c.n_baseline == 0 || c.n_candidate == 0 {
        return None;
    }
    let (width, band) = if low > 0.0 {
        ((high / low).ln(), ((1.0 + m) / (1.0 - m)).ln())
    } else {
        (high - low, 2.0 * m)
    };
    let k = width / band;
    if k.is_nan() || k <= WIDTH_FACTOR {
        return None;
    }
    let n = 2.0 / (1.0 / c.n_baseline as f64 + 1.0 / c.n_candidate as f64);
    Some(Beyond {
        width_ratio: k,
        runs_to_resolve: (n * k * k).ceil() as u64,
    })
}

/// The line saying why `q`'s comparison could not decide, when its runs
/// spread beyond what it could resolve; `None` otherwise.
pub fn why_undecided(q: &Question<'_>, conditions: &Conditions) -> Option<String> {
    let b = beyond(q)?;
    let c = q.comparison;
    let unit = if q.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", q.unit)
    };
    // A side without finite values has no spread to tell: no line then.
    let spread = |values: &[f64]| -> Option<String> {
        let r = Range::of(values.iter().copied())?;
        Some(if r.low > 0.0 {
            format!(
                "{} ({}–{}{unit})",
                factor(r.high / r.low),
                amount(r.low),
                amount(r.high)
            )
        } else {
            format!("from {} to {}{unit}", amount(r.low), amount(r.high))
        })
    };
    let runs = if c.n_baseline == c.n_candidate {
        format!("{} runs a side", c.n_baseline)
    } else {
        format!(
            "{} baseline and {} candidate runs",
            c.n_baseline, c.n_candidate
        )
    };
    let beyond_limit = if b.runs_to_resolve > u64::from(q.runs_limit) {
        format!(
            ", beyond the {} a cell may have",
            amount(f64::from(q.runs_limit))
        )
    } else {
        String::new()
    };
    let mut line = format!(
        "runs vary {} in the baseline, {} in the candidate: too much to resolve ±{} with {runs} \
         (about {} would{beyond_limit})",
        spread(q.baseline)?,
        spread(q.candidate)?,
        percent(q.min_effect * 100.0),
        amount(b.runs_to_resolve as f64),
    );
    if let Some(load) = conditions.load {
        let on = conditions
            .host_cpus
            .map(|cpus| format!(" on {} CPUs", span(cpus, 0)))
            .unwrap_or_default();
        line += &format!(
            "; the host's load average was {}{on} during the runs",
            span(load, 1)
        );
    }
    if let Some(steal) = conditions.steal_pct
        && steal.high >= STEAL_WORTH_SAYING_PCT
    {
        line += &format!(
            "; the guest lost {}% of its CPU time to steal",
            span(steal, 1)
        );
    }
    if let Some(slowdown) = conditions.slowdown
        && slowdown.high >= SLOWDOWN_WORTH_SAYING
    {
        let under = conditions
            .executor
            .as_deref()
            .map(|e| format!(" under {e}"))
            .unwrap_or_default();
        // Whole times from ×10 (a rough figure: the host's preemption is in
        // it), tenths below.
        let decimals = if slowdown.low >= 10.0 { 0 } else { 1 };
        line += &format!(
            "; the guest ran ×{} slower than the host{under}",
            span(slowdown, decimals)
        );
    }
    let help = suggestions(q, conditions, &b);
    if !help.is_empty() {
        line += &format!("; might help: {}", help.join(", "));
    }
    Some(line)
}

/// What would help, where the figures say so.
fn suggestions(q: &Question<'_>, k: &Conditions, b: &Beyond) -> Vec<String> {
    let mut out = Vec::new();
    // A guest whose vCPUs need every CPU of its host competes with the
    // emulator's own threads and with everything else there: each vCPU
    // then waits for a host CPU at random moments, which the guest sees as
    // its own time (under TCG, with no steal accounting at all).
    let host = k.host_cpus.map(|r| r.low);
    if let (Some(guest), Some(host)) = (k.guest_cpus, host)
        && f64::from(guest) >= host
    {
        let under = k
            .executor
            .as_deref()
            .map(|e| format!(", under {e}"))
            .unwrap_or_default();
        out.push(format!(
            "a guest with fewer vCPUs than the host's {} CPUs (it had {guest}{under})",
            amount(host)
        ));
    }
    // The load average counts the guest's vCPU threads: only a load beyond
    // them is the rest of the host. On the host itself the workload's own
    // threads are the load (hackbench's hundreds), so nothing is said.
    if let (Some(guest), Some(load)) = (k.guest_cpus, k.load)
        && load.high - f64::from(guest) >= OTHERS_LOAD
    {
        out.push("a quieter host".to_owned());
    }
    if b.runs_to_resolve <= u64::from(q.runs_limit) {
        out.push(format!(
            "more runs (max_runs in [verdict]{})",
            if q.max_runs > 0 {
                format!(", now {}", q.max_runs)
            } else {
                String::new()
            }
        ));
    }
    out
}

/// `5.1–7.0`, or `5.1` when both ends read the same, to `decimals`.
fn span(r: Range, decimals: usize) -> String {
    let (low, high) = (
        format!("{:.decimals$}", r.low),
        format!("{:.decimals$}", r.high),
    );
    if low == high {
        low
    } else {
        format!("{low}–{high}")
    }
}

/// `2%`, `2.5%`.
fn percent(p: f64) -> String {
    let s = format!("{p:.1}");
    format!("{}%", s.strip_suffix(".0").unwrap_or(&s))
}
