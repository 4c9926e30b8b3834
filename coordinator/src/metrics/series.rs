//! The results gauges as plain data: which series an ended matrix's cells
//! show, and which of them the gauges keep. Pure; the scheduler hands in the
//! summaries `results::summarise` made.

use std::collections::{BTreeSet, HashSet};

use farm_proto::{CellSummary, Verdict, param};

use crate::cell::Cell;

use farm_spec::metric::{self, is_primary};

/// What names a series: the labels every results gauge carries.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Series {
    pub workload: String,
    pub metric: String,
    pub kernel: String,
    pub state: String,
    pub host: String,
    /// The cell is a trigger's new kernel (`Cell.new_kernel`): its history
    /// is not the one of the file's fixed kernels. Not a label: the kernel
    /// label already tells them apart.
    pub new_kernel: bool,
    /// The kernel's history class (`farm_spec::Kernel::history_class`):
    /// an s390x guest's history never continues an x86_64 one. Not a label.
    pub history_class: &'static str,
}

/// Label names of [`Series::labels`], in that order.
pub const SERIES_LABELS: [&str; 5] = ["workload", "metric", "kernel", "state", "host"];

impl Series {
    pub fn labels(&self) -> Vec<String> {
        vec![
            self.workload.clone(),
            self.metric.clone(),
            self.kernel.clone(),
            self.state.clone(),
            self.host.clone(),
        ]
    }
}

/// One metric of one cell of an ended matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub series: Series,
    pub median: f64,
    pub baseline_median: Option<f64>,
    /// Candidate / baseline when the metric's verdict is a regression.
    pub regression_ratio: Option<f64>,
    /// Runs the cell and its baseline got beyond the matrix's repetitions
    /// because their comparison was inconclusive (adaptive reruns).
    pub extra_runs: u32,
    /// The metric's history (over matrices and kernels) as this matrix
    /// left it: every change point, and whether it ends in a worse regime.
    pub changes: Vec<Change>,
    pub change_regression: Option<Change>,
    /// The history's drift over its window (fitted level at its end over
    /// its start), when it drifts; and whether that is a regression.
    pub drift_ratio: Option<f64>,
    pub drift_regression: Option<Change>,
    /// Why, in scheduler terms: the cell's diagnosis (strongest first).
    pub diagnosis: Vec<String>,
}

/// The diagnosis label of a regression: its strongest few findings, or
/// what found it when there is no telemetry comparison.
fn diagnosis_label(lines: &[String]) -> String {
    /// Enough to name the cause; the report has the rest.
    const SHOWN: usize = 3;
    if lines.is_empty() {
        return "no scheduler telemetry moved with it".into();
    }
    lines
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ")
}

/// The `found_by` label of a regression: a verdict against the cell's
/// baseline in one matrix, or a series' history over matrices and kernels.
pub const FOUND_BY_BASELINE: &str = "baseline";
pub const FOUND_BY_HISTORY: &str = "history";
/// A series' history drifting the wrong way over its drift window.
pub const FOUND_BY_DRIFT: &str = "drift";

/// What names a history in the metrics: workload, metric, state, host,
/// guest arch class, and whether it is a trigger's trend of new kernels.
type HistoryKey<'a> = (&'a str, &'a str, &'a str, &'a str, &'a str, bool);

/// A change point of a series' history: the first point after it (its
/// kernel and matrix) and the ratio of the means after and before.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kernel: String,
    pub matrix_id: String,
    pub ratio: f64,
}

impl Sample {
    /// What names the history the sample's changes belong to: the series
    /// without its kernel (a history runs across kernels), with the guest
    /// arch class, since an s390x history never continues an x86_64 one.
    fn history_key(&self) -> HistoryKey<'_> {
        let s = &self.series;
        let arch = s.history_class;
        (
            &s.workload,
            &s.metric,
            &s.state,
            &s.host,
            arch,
            s.new_kernel,
        )
    }

    /// Labels of a change: the series', with the kernel and matrix where
    /// the change begins.
    fn change_labels(&self, c: &Change) -> Vec<String> {
        let mut l = self.series.labels();
        l[2] = c.kernel.clone();
        l.push(c.matrix_id.clone());
        l
    }
}

/// Threads per NUMA node of one cell's representative run.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSample {
    /// The cell's series; its `metric` is empty (placement is the cell's).
    pub series: Series,
    pub node: u32,
    /// Average threads, and runnable threads, the sweeps saw on the node.
    pub threads: f64,
    pub runnable: f64,
}

/// Label names of the placement families: the series' without `metric`,
/// then the node.
pub const NODE_LABELS: [&str; 5] = ["workload", "kernel", "state", "host", "node"];

impl NodeSample {
    fn labels(&self) -> Vec<String> {
        let s = &self.series;
        vec![
            s.workload.clone(),
            s.kernel.clone(),
            s.state.clone(),
            s.host.clone(),
            self.node.to_string(),
        ]
    }
}

/// The samples of one ended matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// Submission order: the newest matrix is the latest point of a series.
    pub seq: u64,
    pub matrix_id: String,
    pub samples: Vec<Sample>,
    pub placement: Vec<NodeSample>,
}

/// `lu(size=24,threads=2)`: the workload with all its parameters (defaults
/// filled in, sorted by name), so a series is the same whichever parameters
/// a file spelled out; competing loads follow (`+ cpu-hog(...)`), because
/// a figure measured beside them is another series.
pub fn workload_label(cell: &Cell) -> String {
    let one = |w: &farm_proto::Workload| {
        let params: Vec<String> = w
            .params
            .iter()
            .map(|p| {
                let v = match &p.value {
                    Some(param::Value::Int(i)) => i.to_string(),
                    Some(param::Value::Float(f)) => f.to_string(),
                    Some(param::Value::Text(t)) => t.clone(),
                    Some(param::Value::Flag(b)) => b.to_string(),
                    None => String::new(),
                };
                format!("{}={v}", p.name)
            })
            .collect();
        format!("{}({})", w.name, params.join(","))
    };
    let mut label = cell.workload.as_ref().map(one).unwrap_or_default();
    for load in &cell.loads {
        label.push_str(" + ");
        label.push_str(&one(load));
    }
    label
}

/// The series of `cell`'s `metric`.
pub fn series(cell: &Cell, metric: &str) -> Series {
    let state = cell.state.as_ref().map(|s| s.name.as_str()).unwrap_or("");
    let host = cell.host.as_ref().map(|h| h.name.as_str()).unwrap_or("");
    Series {
        workload: workload_label(cell),
        metric: metric.to_owned(),
        kernel: cell.kernel.to_string(),
        state: state.to_owned(),
        host: host.to_owned(),
        new_kernel: cell.new_kernel,
        history_class: cell.kernel.history_class(),
    }
}

/// Primary and telemetry metrics (balancing counters: a few levels × seven
/// counters); not per-instance figures, whose number grows with a
/// workload's instances and would make cardinality unbounded.
fn shown(metric: &str) -> bool {
    is_primary(metric)
        || metric::telemetry(metric).is_some()
        || metric::balancing::parse(metric).is_some()
}

/// The samples of a matrix's cell summaries (as `results::summarise` makes
/// them), cell by cell. A regression ratio only for primary metrics: they
/// make a cell's verdict; telemetry explains one and is not alerted on.
pub fn samples(cells: &[Cell], summaries: &[CellSummary]) -> Vec<Sample> {
    let mut out = Vec::new();
    for s in summaries {
        let Some(cell) = cells.get(s.cell_index as usize) else {
            continue;
        };
        // Once per cell, not per metric: each walks the cell's histories.
        let change_points = crate::results::change_points(s);
        let change_regressions = crate::results::change_regressions(cell, s);
        let drift_regressions = crate::results::drift_regressions(cell, s);
        for m in &s.metrics {
            if !shown(&m.name) || !m.median.is_finite() {
                continue;
            }
            let regression = m.verdict == Verdict::Regression as i32 && is_primary(&m.name);
            let changes = change_points
                .iter()
                .filter(|(metric, _, _)| *metric == m.name)
                .map(|&(_, ratio, p)| Change {
                    kernel: p.kernel.clone(),
                    matrix_id: p.matrix_id.clone(),
                    ratio,
                })
                .collect();
            // This metric's regression among a cell's (history or drift).
            let of_metric = |found: &[crate::results::ChangeRegression]| {
                found.iter().find(|c| c.metric == m.name).map(|c| Change {
                    kernel: c.kernel.clone(),
                    matrix_id: c.matrix_id.clone(),
                    ratio: c.ratio,
                })
            };
            let change_regression = of_metric(&change_regressions);
            let drift_ratio = s
                .history
                .iter()
                .find(|h| h.metric == m.name)
                .and_then(|h| h.drift.as_ref())
                .map(|d| d.level_end / d.level_start)
                .filter(|r| r.is_finite());
            let drift_regression = of_metric(&drift_regressions);
            out.push(Sample {
                series: series(cell, &m.name),
                median: m.median,
                baseline_median: m.baseline_median.filter(|v| v.is_finite()),
                regression_ratio: m.ratio.filter(|r| regression && r.is_finite()),
                extra_runs: s.extra_runs,
                changes,
                change_regression,
                drift_ratio,
                drift_regression,
                diagnosis: s.diagnosis.clone(),
            });
        }
    }
    out
}

/// Threads per node of each cell's representative run (the run whose
/// figures are the cell's medians), from its telemetry; `runs` are the
/// matrix's runs.
pub fn placement(
    cells: &[Cell],
    summaries: &[CellSummary],
    runs: &[&crate::store::RunRecord],
) -> Vec<NodeSample> {
    let mut out = Vec::new();
    // By id: a scan of the matrix's runs per cell was cells × runs.
    let by_id: std::collections::HashMap<String, &crate::store::RunRecord> =
        runs.iter().map(|r| (r.run_id.to_string(), *r)).collect();
    for s in summaries {
        let Some(cell) = cells.get(s.cell_index as usize) else {
            continue;
        };
        let Some(telemetry) = by_id
            .get(&s.representative_run)
            .and_then(|r| r.result.as_ref())
            .and_then(|r| r.telemetry.as_ref())
        else {
            continue;
        };
        for n in &telemetry.nodes {
            if n.avg_threads.is_finite() && n.avg_runnable.is_finite() {
                out.push(NodeSample {
                    series: series(cell, ""),
                    node: n.node,
                    threads: n.avg_threads,
                    runnable: n.avg_runnable,
                });
            }
        }
    }
    out
}

/// Label values and value of one gauge sample.
pub type Point = (Vec<String>, f64);

/// What the results gauges show.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Selection {
    pub median: Vec<Point>,
    pub baseline_median: Vec<Point>,
    /// Labels: the series', the matrix id, `found_by`.
    pub regression_ratio: Vec<Point>,
    /// The extra runs behind each regression of `regression_ratio` (same
    /// labels, same cap).
    pub regression_extra_runs: Vec<Point>,
    /// Each regression's diagnosis: its labels and `diagnosis`, value 1.
    pub regression_diagnosis: Vec<Point>,
    /// Every change point of each history's newest matrix; labels as
    /// `regression_ratio`, the kernel and matrix where the change begins.
    pub change_ratio: Vec<Point>,
    /// Each drifting history's drift ratio, as its newest matrix left it;
    /// labels: the series' (that matrix's kernel).
    pub drift_ratio: Vec<Point>,
    /// Labels: [`NODE_LABELS`].
    pub threads_per_node: Vec<Point>,
    pub runnable_per_node: Vec<Point>,
    /// Series left out by the cap: median, baseline median, regression
    /// ratio, threads per node (runnable ones go with them), change ratio,
    /// drift ratio.
    pub dropped: [usize; 6],
    /// The matrices something above comes from; the others need not be kept.
    pub shown: BTreeSet<u64>,
}

/// For every series, its sample in the newest matrix that has it; per
/// family at most `limit` series, those of the newest matrices first (ties
/// in cell order). `ended` may be in any order.
pub fn select<'a>(ended: impl IntoIterator<Item = &'a Ended>, limit: usize) -> Selection {
    let mut matrices: Vec<&Ended> = ended.into_iter().collect();
    matrices.sort_by_key(|e| std::cmp::Reverse(e.seq));
    let mut seen: HashSet<&Series> = HashSet::new();
    // Newest first, so a series is seen first in its latest matrix.
    let latest: Vec<(&Ended, &Sample)> = matrices
        .iter()
        .flat_map(|e| e.samples.iter().map(move |s| (*e, s)))
        .filter(|(_, s)| seen.insert(&s.series))
        .collect();
    let mut sel = Selection::default();
    // Placement likewise: each cell's nodes from its newest matrix.
    let mut seen_cells: HashSet<&Series> = HashSet::new();
    for e in &matrices {
        let fresh: HashSet<&Series> = e
            .placement
            .iter()
            .map(|p| &p.series)
            .filter(|s| !seen_cells.contains(s))
            .collect();
        for p in e.placement.iter().filter(|p| fresh.contains(&p.series)) {
            let kept = sel.threads_per_node.len();
            push_capped(
                &mut sel.threads_per_node,
                &mut sel.dropped[3],
                &mut sel.shown,
                limit,
                (p.labels(), p.threads),
                e.seq,
            );
            if sel.threads_per_node.len() > kept {
                sel.runnable_per_node.push((p.labels(), p.runnable));
            }
        }
        seen_cells.extend(fresh);
    }
    // Histories run across kernels: their changes come from the newest
    // matrix that has the history, whatever its kernel. A regression a
    // history's newest point no longer ends in is gone, even if an older
    // kernel's series still shows the sample that found it.
    let mut histories: HashSet<HistoryKey<'_>> = HashSet::new();
    let mut regressions: HashSet<Vec<String>> = HashSet::new();
    for (e, s) in &latest {
        if !histories.insert(s.history_key()) {
            continue;
        }
        let mut seen_changes: HashSet<Vec<String>> = HashSet::new();
        for c in &s.changes {
            let labels = s.change_labels(c);
            if seen_changes.insert(labels.clone()) {
                push_capped(
                    &mut sel.change_ratio,
                    &mut sel.dropped[4],
                    &mut sel.shown,
                    limit,
                    (labels, c.ratio),
                    e.seq,
                );
            }
        }
        if let Some(c) = &s.change_regression {
            let labels = s.change_labels(c);
            let why = format!("the series' history: a worse regime since {}", c.kernel);
            let mut found = labels.clone();
            found.push(FOUND_BY_HISTORY.into());
            // Found by the history, not by adaptive reruns. No figure in
            // the diagnosis: it would change with every new point, and each
            // change would be a new alert.
            if push_regression(&mut sel, (limit, e.seq), found, (c.ratio, why), 0) {
                regressions.insert(labels);
            }
        }
        if let Some(r) = s.drift_ratio {
            push_capped(
                &mut sel.drift_ratio,
                &mut sel.dropped[5],
                &mut sel.shown,
                limit,
                (s.series.labels(), r),
                e.seq,
            );
        }
        if let Some(c) = &s.drift_regression {
            let mut found = s.change_labels(c);
            found.push(FOUND_BY_DRIFT.into());
            let why = format!(
                "the series' history drifts the wrong way since {}",
                c.kernel
            );
            push_regression(&mut sel, (limit, e.seq), found, (c.ratio, why), 0);
        }
    }
    for (e, s) in &latest {
        let labels = s.series.labels();
        push_capped(
            &mut sel.median,
            &mut sel.dropped[0],
            &mut sel.shown,
            limit,
            (labels.clone(), s.median),
            e.seq,
        );
        if let Some(b) = s.baseline_median {
            push_capped(
                &mut sel.baseline_median,
                &mut sel.dropped[1],
                &mut sel.shown,
                limit,
                (labels.clone(), b),
                e.seq,
            );
        }
        if let Some(r) = s.regression_ratio {
            let mut labels = labels;
            labels.push(e.matrix_id.clone());
            if regressions.contains(&labels) {
                // The history found it beginning right here too: one series.
                continue;
            }
            labels.push(FOUND_BY_BASELINE.into());
            let why = diagnosis_label(&s.diagnosis);
            push_regression(&mut sel, (limit, e.seq), labels, (r, why), s.extra_runs);
        }
    }
    sel
}

/// A regression at `found` (the series' labels, the matrix, `found_by`),
/// its ratio and diagnosis `why`, and the runs adaptive reruns added:
/// whether the cap (the `limit`, for matrix `seq`) let it in.
fn push_regression(
    sel: &mut Selection,
    (limit, seq): (usize, u64),
    mut found: Vec<String>,
    (ratio, why): (f64, String),
    extra_runs: u32,
) -> bool {
    let kept = sel.regression_ratio.len();
    push_capped(
        &mut sel.regression_ratio,
        &mut sel.dropped[2],
        &mut sel.shown,
        limit,
        (found.clone(), ratio),
        seq,
    );
    if sel.regression_ratio.len() == kept {
        return false;
    }
    sel.regression_extra_runs
        .push((found.clone(), f64::from(extra_runs)));
    found.push(why);
    sel.regression_diagnosis.push((found, 1.0));
    true
}

fn push_capped(
    out: &mut Vec<Point>,
    dropped: &mut usize,
    shown: &mut BTreeSet<u64>,
    limit: usize,
    point: Point,
    seq: u64,
) {
    if out.len() < limit {
        out.push(point);
        shown.insert(seq);
    } else {
        *dropped += 1;
    }
}

#[cfg(test)]
mod tests;
