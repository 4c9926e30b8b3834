//! Bisections as the coordinator keeps them: a `farm_proto::Bisection`
//! record (stored, shown) around `farm_analysis::bisect::Bisector`, and the
//! step matrices it asks for. Pure: the scheduler submits the matrices and
//! feeds their values back (`scheduler/bisection.rs`).

use farm_analysis::Direction;
use farm_analysis::bisect::{self, Action, Bisector, Call, Outcome, Pending, Policy, Step};
use farm_analysis::compare::{Options, Verdict};
use farm_proto::{
    Bisection, BisectionOutcome, BisectionStep, Direction as WireDirection, Samples, VerdictPolicy,
};
use farm_spec::metric::is_primary;

use crate::matrix::{MAX_NAME_BYTES, Matrix};
use crate::results::{direction, values};
use crate::store::{RunRecord, RunState};

/// Runs of each kernel per round, and the most per step, when the request
/// leaves them out.
pub const DEFAULT_RUNS: u32 = 10;
pub const DEFAULT_MAX_RUNS: u32 = 30;

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    #[error("kernel {index} of the bisection ({prefix:?}): {reason}")]
    Kernel {
        index: usize,
        prefix: String,
        reason: String,
    },
    #[error("the good and the bad kernel are the same ({0:?}): nothing to bisect")]
    SameEnds(String),
    #[error("kernel {0:?} is in the bisection twice")]
    Repeated(String),
    #[error("cell {cell} has no baseline, so no good kernel: bisect a cell that is compared")]
    NoBaseline { cell: u32 },
    #[error("cell {cell}'s finished runs have no metric {metric:?}")]
    NoMetric { cell: u32, metric: String },
    #[error(
        "cell {cell} did not regress on a primary metric against its baseline; \
         name the metric to bisect (--metric)"
    )]
    NotRegressed { cell: u32 },
    #[error("{0}")]
    Bisect(#[from] bisect::Error),
    #[error("stored bisection {id}: {what}")]
    Corrupt { id: String, what: String },
}

/// A request's kernels between good and bad, parsed where the request
/// enters (`service`); a bad one is named by its place in the bisection
/// (good is 0).
pub fn between(kernels: &[String]) -> Result<Vec<farm_spec::Kernel>, Error> {
    kernels
        .iter()
        .enumerate()
        .map(|(i, k)| {
            k.parse::<farm_spec::Kernel>().map_err(|e| Error::Kernel {
                index: i + 1,
                prefix: k.chars().take(40).collect(),
                reason: e.to_string(),
            })
        })
        .collect()
}

/// A new bisection's record: `good` and `bad` are the baseline's and the
/// cell's kernels, `between` the kernels between them in order.
pub struct New<'a> {
    pub id: crate::ids::BisectionId,
    pub matrix_id: crate::ids::MatrixId,
    pub matrix_name: String,
    pub timeout_s: u32,
    pub cell: &'a crate::cell::Cell,
    pub good: &'a farm_spec::Kernel,
    pub between: &'a [farm_spec::Kernel],
    pub metric: String,
    pub direction: Direction,
    pub runs: u32,
    pub max_runs: u32,
    pub created_ms: u64,
}

/// Checks a request and makes its record; the bisector it holds is valid.
pub fn create(n: New<'_>) -> Result<Bisection, Error> {
    let mut kernels: Vec<String> = Vec::with_capacity(n.between.len() + 2);
    kernels.push(n.good.to_string());
    kernels.extend(n.between.iter().map(farm_spec::Kernel::to_string));
    kernels.push(n.cell.kernel.to_string());
    if kernels[0] == kernels[kernels.len() - 1] {
        return Err(Error::SameEnds(kernels[0].clone()));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(k) = kernels.iter().find(|k| !seen.insert(k.as_str())) {
        return Err(Error::Repeated(k.chars().take(40).collect()));
    }
    let runs = if n.runs == 0 { DEFAULT_RUNS } else { n.runs };
    let max_runs = if n.max_runs == 0 {
        DEFAULT_MAX_RUNS.max(runs)
    } else {
        n.max_runs
    };
    let mut template = farm_proto::Cell::from(n.cell);
    template.baseline = None;
    template.new_kernel = false;
    let wire_direction = match n.direction {
        Direction::LowerIsBetter => WireDirection::LowerIsBetter,
        Direction::HigherIsBetter => WireDirection::HigherIsBetter,
    };
    let b = Bisection {
        bisection_id: n.id.to_string(),
        matrix_id: n.matrix_id.to_string(),
        cell: n.cell.index.get(),
        kernels,
        metric: n.metric,
        direction: wire_direction as i32,
        runs,
        max_runs,
        template: Some(template),
        created_ms: n.created_ms,
        matrix_name: n.matrix_name,
        timeout_s: n.timeout_s,
        ..Bisection::default()
    };
    bisector(&b)?;
    Ok(b)
}

fn policy_of(b: &Bisection) -> VerdictPolicy {
    b.template
        .as_ref()
        .and_then(|c| c.verdict.clone())
        .unwrap_or_default()
}

/// The bisector a record holds.
pub fn bisector(b: &Bisection) -> Result<Bisector, Error> {
    let direction = crate::results::direction(b.direction);
    let min_effect = policy_of(b).min_effect;
    let options = Options {
        min_effect: if min_effect > 0.0 { min_effect } else { 0.02 },
        resamples: 0,
        ..Options::default()
    };
    let policy = Policy {
        runs: b.runs,
        max_runs: b.max_runs,
    };
    let mut x = Bisector::new(b.kernels.len(), policy, direction, options)?;
    let corrupt = |what: &str| Error::Corrupt {
        id: b.bisection_id.clone(),
        what: what.to_owned(),
    };
    for s in &b.steps {
        let call = Call::from_name(&s.call).ok_or_else(|| corrupt("a step's call"))?;
        if s.kernel as usize >= b.kernels.len() {
            return Err(corrupt("a step's kernel"));
        }
        x.steps.push(Step {
            kernel: s.kernel as usize,
            call,
            runs: s.runs,
            vs_good: (s.ratio_vs_good, s.p_vs_good),
            vs_bad: (s.ratio_vs_bad, s.p_vs_bad),
        });
    }
    x.ends = [
        b.good.as_ref().map_or_else(Vec::new, |s| s.values.clone()),
        b.bad.as_ref().map_or_else(Vec::new, |s| s.values.clone()),
    ];
    if !b.pending_kernels.is_empty() {
        x.pending = Some(Pending {
            kernels: b.pending_kernels.iter().map(|&k| k as usize).collect(),
            values: b.pending_values.iter().map(|s| s.values.clone()).collect(),
        });
    }
    Ok(x)
}

/// Writes the bisector's state back into the record; `matrices` are the
/// rounds' matrices of the measurement just observed.
pub fn record(b: &mut Bisection, x: &Bisector) {
    let old = b.steps.len();
    b.steps.truncate(x.steps.len());
    for s in &x.steps[old.min(x.steps.len())..] {
        b.steps.push(BisectionStep {
            kernel: s.kernel as u32,
            call: s.call.as_str().to_owned(),
            runs: s.runs,
            ratio_vs_good: s.vs_good.0,
            p_vs_good: s.vs_good.1,
            ratio_vs_bad: s.vs_bad.0,
            p_vs_bad: s.vs_bad.1,
            // The rounds that made this step.
            matrix_ids: std::mem::take(&mut b.pending_matrices),
        });
    }
    b.good = Some(Samples {
        values: x.ends[0].clone(),
    });
    b.bad = Some(Samples {
        values: x.ends[1].clone(),
    });
    match &x.pending {
        Some(p) => {
            b.pending_kernels = p.kernels.iter().map(|&k| k as u32).collect();
            b.pending_values = p
                .values
                .iter()
                .map(|v| Samples { values: v.clone() })
                .collect();
        }
        None => {
            b.pending_kernels.clear();
            b.pending_values.clear();
        }
    }
    b.outcome = x.outcome.as_ref().map(outcome);
    if let Some(o) = &mut b.outcome {
        // The confirmation's rounds (none when an end failed in a step).
        o.matrix_ids = std::mem::take(&mut b.pending_matrices);
    }
}

/// The outcome's kind that names a first bad kernel.
pub const CULPRIT: &str = "culprit";

/// The outcome of a bisection whose round matrix `matrix_id` was
/// cancelled: it ends so, rather than wait for a round never done.
pub fn cancelled(b: &mut Bisection, matrix_id: &crate::ids::MatrixId) {
    b.outcome = Some(BisectionOutcome {
        kind: CANCELLED.to_owned(),
        matrix_ids: vec![matrix_id.to_string()],
        ..BisectionOutcome::default()
    });
}

/// The outcome's kind of a bisection whose round was cancelled.
pub const CANCELLED: &str = "cancelled";

fn outcome(o: &Outcome) -> BisectionOutcome {
    match *o {
        Outcome::Culprit {
            last_good,
            first_bad,
            confirmation: c,
        }
        | Outcome::Unresolved {
            last_good,
            first_bad,
            confirmation: c,
        } => BisectionOutcome {
            kind: if matches!(o, Outcome::Culprit { .. }) {
                CULPRIT
            } else {
                "unresolved"
            }
            .to_owned(),
            last_good: last_good as u32,
            first_bad: first_bad as u32,
            confirmed: c.confirmed,
            ratio: c.ratio,
            p_value: c.p_value,
            p_last_good_vs_good: c.neighbours.0,
            p_first_bad_vs_bad: c.neighbours.1,
            ..BisectionOutcome::default()
        },
        Outcome::EndsDoNotDiffer { ratio, p_value } => BisectionOutcome {
            kind: "ends_do_not_differ".to_owned(),
            ratio,
            p_value,
            ..BisectionOutcome::default()
        },
        Outcome::Failed { kernel } => BisectionOutcome {
            kind: "failed".to_owned(),
            failed_kernel: kernel as u32,
            ..BisectionOutcome::default()
        },
    }
}

/// The matrix of one round: each of `kernels` (indices into the record's)
/// `runs` times, as the template cell; none is a baseline, and no cell
/// takes runs of its own (the bisector decides how many).
///
/// `focus` (positions in `kernels`: baseline, candidate) is the comparison
/// the round is about: that cell is compared with its baseline like any
/// matrix's, so its results carry the farm's verdict and diagnosis.
pub fn round_matrix(
    b: &Bisection,
    kernels: &[usize],
    runs: u32,
    round: usize,
    focus: Option<(usize, usize)>,
) -> Result<Matrix, crate::cell::Error> {
    let template = b.template.clone().unwrap_or_default();
    let cells = kernels
        .iter()
        .enumerate()
        .map(|(i, &k)| {
            let kernel = b.kernels[k].clone();
            let mut c = template.clone();
            c.index = i as u32;
            c.name = cell_name(&template.name, &kernel);
            c.kernel = kernel;
            c.baseline = focus
                .filter(|&(_, candidate)| candidate == i)
                .map(|(baseline, _)| baseline as u32);
            c.verdict = Some(VerdictPolicy {
                max_runs: runs,
                repetitions: runs,
                ..policy_of(b)
            });
            // The record keeps the wire's cell and kernels (checked when
            // the bisection was made); the round's matrix is typed.
            crate::cell::Cell::try_from(&c)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut name = format!("{} bisect {} round {round}", b.matrix_name, b.bisection_id);
    if name.len() > MAX_NAME_BYTES {
        let mut end = MAX_NAME_BYTES;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        name.truncate(end);
    }
    Ok(Matrix {
        name,
        repetitions: runs,
        timeout_s: b.timeout_s.max(1),
        cells,
        schedule: None,
    })
}

/// What `farmctl schedules` says of a bisection: `running`, the confirmed
/// culprit (`culprit 85068c1ab3f2 sched/core: …`), or how it ended.
pub fn brief(b: &Bisection) -> String {
    match &b.outcome {
        None => "running".into(),
        Some(o) => match culprit_labels(b) {
            Some(l) => format!("culprit {}", l[6]),
            None if o.kind == CULPRIT => "culprit (unconfirmed)".into(),
            None => o.kind.clone(),
        },
    }
}

/// The labels of `b`'s culprit in `farm_regression_culprit`
/// (`metrics::CULPRIT_LABELS`), once it is confirmed: the regressed cell's
/// series (the template is that cell), its matrix, the bisection, and the
/// first bad commit's 12 digits and subject (the kernel's name where no
/// git range gave subjects).
pub fn culprit_labels(b: &Bisection) -> Option<Vec<String>> {
    let o = b.outcome.as_ref()?;
    if o.kind != CULPRIT || !o.confirmed {
        return None;
    }
    let i = o.first_bad as usize;
    let kernel = b.kernels.get(i)?;
    let subject = b.subjects.get(i).filter(|s| !s.is_empty());
    let culprit = match (kernel.rsplit_once('@'), subject) {
        (Some((_, commit)), Some(subject)) if commit.len() == 40 => {
            format!("{} {subject}", &commit[..12])
        }
        _ => kernel.clone(),
    };
    // The template as the store keeps it; it converted when the
    // bisection was made from the cell.
    let cell = crate::cell::Cell::try_from(b.template.as_ref()?).ok()?;
    let s = crate::metrics::series::series(&cell, "");
    Some(vec![
        s.workload,
        s.kernel,
        s.state,
        s.host,
        b.matrix_id.clone(),
        b.bisection_id.clone(),
        culprit,
    ])
}

/// The template's name with `kernel=` set: the axes' words after the
/// workload's label, as the matrix names cells.
fn cell_name(template: &str, kernel: &str) -> String {
    let mut parts: Vec<String> = template
        .split(" | ")
        .filter(|p| !p.starts_with("kernel="))
        .map(str::to_owned)
        .collect();
    parts.insert(1.min(parts.len()), format!("kernel={kernel}"));
    parts.join(" | ")
}

/// A round's values of `metric`, per cell, from its finished runs by
/// repetition (failed runs give none).
pub fn round_values(runs: &[&RunRecord], cells: usize, metric: &str) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::new(); cells];
    let mut finished: Vec<&&RunRecord> = runs
        .iter()
        .filter(|r| r.state == RunState::Finished)
        .collect();
    finished.sort_by_key(|r| (r.cell, r.repetition));
    for r in finished {
        let Some(v) = r
            .result
            .as_ref()
            .and_then(|res| res.metrics.iter().find(|m| m.name == metric))
        else {
            continue;
        };
        if let Some(cell) = out.get_mut(r.cell.at()) {
            cell.push(v.value);
        }
    }
    out
}

/// The metric a bisection of `cell` follows, and its direction: `asked`
/// if given (it must be in the cell's runs), else the primary metric on
/// which the cell regressed most against its baseline, by the farm's
/// comparison at the cell's minimum effect (largest |log ratio| first).
pub fn choose_metric(
    cell: u32,
    runs: &[&RunRecord],
    baseline: &[&RunRecord],
    asked: &str,
    min_effect: f64,
) -> Result<(String, Direction), Error> {
    let (ours, theirs) = (values(runs), values(baseline));
    if !asked.is_empty() {
        return ours
            .iter()
            .find(|v| v.name == asked)
            .map(|v| (v.name.clone(), direction(v.direction)))
            .ok_or_else(|| Error::NoMetric {
                cell,
                metric: asked.chars().take(40).collect(),
            });
    }
    let options = Options {
        min_effect,
        resamples: 0,
        ..Options::default()
    };
    let mut best: Option<(f64, String, Direction)> = None;
    for v in ours.iter().filter(|v| is_primary(&v.name)) {
        let Some(base) = theirs.iter().find(|b| b.name == v.name) else {
            continue;
        };
        let d = direction(v.direction);
        let Ok(c) = farm_analysis::compare::compare(&base.values, &v.values, d, &options) else {
            continue;
        };
        let size = c.shift.ln().abs();
        if c.verdict == Verdict::Regression && best.as_ref().is_none_or(|(b, _, _)| size > *b) {
            best = Some((size, v.name.clone(), d));
        }
    }
    best.map(|(_, n, d)| (n, d))
        .ok_or(Error::NotRegressed { cell })
}

/// A round the bisector asks for: each of `kernels` `runs` times, the
/// cells at `focus` (positions in `kernels`: baseline, candidate) compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Round {
    pub kernels: Vec<usize>,
    pub runs: u32,
    pub focus: Option<(usize, usize)>,
}

/// What to measure next, or `None` once it has ended.
pub fn next(x: &Bisector) -> Option<Round> {
    match x.plan() {
        Action::Measure { kernels, runs } => Some(Round {
            kernels,
            runs,
            focus: x.focus(),
        }),
        Action::Done(_) => None,
    }
}

/// The rounds a bisection has submitted: its steps' and the one under way.
pub fn rounds(b: &Bisection) -> usize {
    b.steps.iter().map(|s| s.matrix_ids.len()).sum::<usize>() + b.pending_matrices.len()
}

#[cfg(test)]
mod tests;
