//! Per-cell summaries of finished runs: each metric's median, its ratio to
//! the baseline cell's, and the verdict of comparing their runs
//! (`farm_analysis::compare`); the cell's verdict, what its telemetry says
//! about why (`farm_analysis::diagnosis`), why an inconclusive one could not
//! decide (`farm_analysis::resolution`, against the hosts' figures that
//! `conditions` gathers), and its history over past matrices with change
//! points (`farm_analysis::changepoint`).
//!
//! *Primary* metrics are the workload's own figures (its time, throughput,
//! `wall_s`): they make the cell's verdict. The others are telemetry every
//! run reports (`farm_spec::metric::TELEMETRY`): they explain a verdict, they
//! do not make one. Which is which is `farm_spec::metric::is_primary`, the
//! list farmctl's reports read too.

use std::collections::{BTreeMap, HashMap};

use farm_analysis::compare::{self, Comparison, Verdict};
use farm_analysis::{Direction, changepoint, diagnosis};
use farm_proto::{
    CellSummary, ChangePoint, Direction as WireDirection, Drift, History, MetricSummary,
    SeriesPoint, Telemetry, Verdict as WireVerdict, VerdictPolicy,
};
use farm_spec::Executor;
use farm_spec::metric::{self, is_primary};

use crate::cell::Cell;
use crate::store::{RunRecord, RunState};

mod conditions;
mod values;

pub(crate) use values::{Values, values};

/// Each metric's values by name, for lookups in a loop over another cell's.
fn by_name(values: &[Values]) -> HashMap<&str, &Values> {
    values.iter().map(|v| (v.name.as_str(), v)).collect()
}

/// The wire's direction of a metric (unset reads as lower is better).
pub(crate) fn direction(wire: i32) -> Direction {
    if wire == WireDirection::HigherIsBetter as i32 {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    }
}

fn wire_verdict(v: Verdict) -> WireVerdict {
    match v {
        Verdict::Regression => WireVerdict::Regression,
        Verdict::Improvement => WireVerdict::Improvement,
        Verdict::NoChange => WireVerdict::NoChange,
        Verdict::Inconclusive => WireVerdict::Inconclusive,
    }
}

/// How bad a verdict is, for the worst of a cell's metrics.
fn severity(v: Verdict) -> u8 {
    match v {
        Verdict::NoChange => 0,
        Verdict::Improvement => 1,
        Verdict::Inconclusive => 2,
        Verdict::Regression => 3,
    }
}

/// Why the finished runs of two sides are not compared: a cell's note.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotComparable {
    /// The arches of each side's runs, `+`-joined.
    #[error(
        "not compared: {candidate} runs against {baseline} runs (another arch is another machine)"
    )]
    Arches { candidate: String, baseline: String },
    #[error(
        "not compared: emulated (tcg) runs on one side, kvm or bare-metal runs on the \
         other ([verdict] mix_executors = true compares them anyway)"
    )]
    Executors,
}

/// Whether the finished runs of both sides may be compared: runs of
/// different arches never are (an s390x and an x86_64 figure measure two
/// machines, not two kernels); TCG emulation changes timing far more than a
/// kernel does, so its runs are compared only with TCG runs unless the
/// matrix says otherwise. `Err` says why not.
pub fn comparable(
    policy: &VerdictPolicy,
    candidate: &[&RunRecord],
    baseline: &[&RunRecord],
) -> Result<(), NotComparable> {
    let arches = |runs: &[&RunRecord]| -> std::collections::BTreeSet<String> {
        runs.iter()
            .filter(|r| r.state == RunState::Finished)
            .filter_map(|r| r.result.as_ref().map(|x| x.arch.clone()))
            .filter(|a| !a.is_empty())
            .collect()
    };
    let (ca, ba) = (arches(candidate), arches(baseline));
    if !ca.is_empty() && !ba.is_empty() && ca != ba {
        let list = |s: &std::collections::BTreeSet<String>| {
            s.iter().cloned().collect::<Vec<_>>().join("+")
        };
        return Err(NotComparable::Arches {
            candidate: list(&ca),
            baseline: list(&ba),
        });
    }
    if policy.mix_executors {
        return Ok(());
    }
    // (some run emulated, some run not)
    let emulated = |runs: &[&RunRecord]| -> (bool, bool) {
        let mut seen = (false, false);
        for r in runs.iter().filter(|r| r.state == RunState::Finished) {
            match r.result.as_ref().map(|x| x.executor.parse::<Executor>()) {
                Some(Ok(Executor::Tcg)) => seen.0 = true,
                _ => seen.1 = true,
            }
        }
        seen
    };
    let (c, b) = (emulated(candidate), emulated(baseline));
    if (c.0 && b.1) || (c.1 && b.0) {
        return Err(NotComparable::Executors);
    }
    Ok(())
}

/// Compares one metric's runs; `None` when a side has fewer than 2 values.
/// Without `interval` the bootstrap interval is skipped (its bounds are
/// NaN): it does not enter the verdict, and it is most of the cost.
fn compare_metric(
    policy: &VerdictPolicy,
    name: &str,
    wire_direction: i32,
    baseline: &[f64],
    candidate: &[f64],
    interval: bool,
) -> Option<Comparison> {
    let defaults = compare::Options::default();
    let options = compare::Options {
        min_effect: crate::policy::min_effect(policy, name),
        resamples: if interval { defaults.resamples } else { 0 },
        ..defaults
    };
    compare::compare(baseline, candidate, direction(wire_direction), &options).ok()
}

/// The verdict of a cell against its baseline: the worst of its primary
/// metrics' (regression, then inconclusive, then improvement, then no
/// change); `None` while a side has too few finished runs to compare.
/// Only what the verdict needs is computed (no interval, no telemetry, no
/// history): adaptive reruns ask this on the scheduler thread.
pub fn pair_verdict(
    cell: &Cell,
    candidate: &[&RunRecord],
    baseline: &[&RunRecord],
) -> Option<Verdict> {
    let policy = crate::policy::of(cell);
    comparable(&policy, candidate, baseline).ok()?;
    let base = values(baseline);
    let base = by_name(&base);
    values(candidate)
        .iter()
        .filter(|v| is_primary(&v.name))
        .filter_map(|v| {
            let b = base.get(v.name.as_str())?;
            compare_metric(&policy, &v.name, v.direction, &b.values, &v.values, false)
        })
        .map(|c| c.verdict)
        .max_by_key(|v| severity(*v))
}

/// A series whose latest regime, after its last change point, is worse
/// than the one before by at least the cell's minimum effect.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangeRegression {
    pub metric: String,
    /// Mean after / mean before the change.
    pub ratio: f64,
    /// The first point after the change: its kernel and matrix.
    pub kernel: String,
    pub matrix_id: String,
    pub t_ms: u64,
}

/// Every change point of a cell's histories (as `summarise` gives them),
/// with the first point after it: (metric, ratio of means, that point).
pub fn change_points(summary: &CellSummary) -> Vec<(&str, f64, &SeriesPoint)> {
    let mut out = Vec::new();
    for h in &summary.history {
        for cp in &h.change_points {
            let Some(p) = h.points.get(cp.index as usize) else {
                continue;
            };
            let ratio = cp.mean_after / cp.mean_before;
            if ratio.is_finite() {
                out.push((h.metric.as_str(), ratio, p));
            }
        }
    }
    out
}

/// The cell's primary metrics whose history ends in a worse regime: the
/// last change point goes the wrong way for the metric's direction, by at
/// least the cell's minimum effect for it. What continuous matrices alert
/// on: no baseline cell is needed, the series' own past is the baseline.
pub fn change_regressions(cell: &Cell, summary: &CellSummary) -> Vec<ChangeRegression> {
    let policy = crate::policy::of(cell);
    let mut out = Vec::new();
    for h in &summary.history {
        let (Some(cp), Some(m)) = (
            h.change_points.last(),
            summary.metrics.iter().find(|m| m.name == h.metric),
        ) else {
            continue;
        };
        let Some(p) = h.points.get(cp.index as usize) else {
            continue;
        };
        out.extend(worse(&policy, m, cp.mean_after / cp.mean_before, p));
    }
    out
}

/// The regression of metric `m` that moved by `ratio` from the point `p`
/// on, when that is the wrong way for its direction by at least the
/// policy's minimum effect for it.
fn worse(
    policy: &VerdictPolicy,
    m: &MetricSummary,
    ratio: f64,
    p: &SeriesPoint,
) -> Option<ChangeRegression> {
    let min_effect = crate::policy::min_effect(policy, &m.name);
    let worse = match direction(m.direction) {
        Direction::LowerIsBetter => ratio >= 1.0 + min_effect,
        Direction::HigherIsBetter => ratio <= 1.0 - min_effect,
    };
    (ratio.is_finite() && worse).then(|| ChangeRegression {
        metric: m.name.clone(),
        ratio,
        kernel: p.kernel.clone(),
        matrix_id: p.matrix_id.clone(),
        t_ms: p.t_ms,
    })
}

/// A primary metric's median over a cell's finished runs: all a history
/// keeps of a cell, live or archived.
#[derive(Debug, Clone, PartialEq)]
pub struct Median {
    pub name: String,
    pub unit: String,
    pub value: f64,
}

/// One matrix's cell on a series: a point of its cells' histories.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub matrix_id: crate::ids::MatrixId,
    /// The matrix's submission order: points are ordered by (seq, cell).
    pub matrix_seq: u64,
    pub cell: crate::ids::CellIndex,
    pub submitted_ms: u64,
    pub kernel: String,
    /// Empty when the cell has no finished run: not a point then.
    pub medians: Vec<Median>,
}

/// The median of each primary metric over `runs`' finished ones.
pub fn medians(runs: &[&RunRecord]) -> Vec<Median> {
    values(runs)
        .into_iter()
        .filter(|v| is_primary(&v.name))
        .filter_map(|v| {
            Some(Median {
                value: farm_analysis::median(&v.values)?,
                name: v.name,
                unit: v.unit,
            })
        })
        .collect()
}

/// A series from its archived and its live points (either may hold a point
/// the other has: a matrix archived while its point was copied), in order,
/// once each, the latest [`crate::policy::HISTORY_POINTS`].
pub fn merge(archived: Vec<Point>, live: Vec<Point>) -> Vec<Point> {
    let mut all: BTreeMap<(u64, crate::ids::CellIndex), Point> = BTreeMap::new();
    for p in archived.into_iter().chain(live) {
        all.insert((p.matrix_seq, p.cell), p);
    }
    let skip = all.len().saturating_sub(crate::policy::HISTORY_POINTS);
    all.into_values().skip(skip).collect()
}

/// The series of each primary metric over `points` (in order), with its
/// change points and, when its last `drift_window` points since the last
/// change point move steadily, its drift.
pub fn histories(points: &[Point], drift_window: usize) -> Vec<History> {
    let mut out: Vec<History> = Vec::new();
    for point in points {
        for v in &point.medians {
            let i = match out.iter().position(|h| h.metric == v.name) {
                Some(i) => i,
                None => {
                    out.push(History {
                        metric: v.name.clone(),
                        unit: v.unit.clone(),
                        ..Default::default()
                    });
                    out.len() - 1
                }
            };
            out[i].points.push(SeriesPoint {
                matrix_id: point.matrix_id.to_string(),
                t_ms: point.submitted_ms,
                kernel: point.kernel.clone(),
                value: v.value,
            });
        }
    }
    for h in &mut out {
        let ys: Vec<f64> = h.points.iter().map(|p| p.value).collect();
        // Medians are finite and the options the defaults: nothing to refuse.
        h.change_points = changepoint::try_detect(&ys, &changepoint::Options::default())
            .unwrap_or_default()
            .into_iter()
            .map(|c| ChangePoint {
                index: c.index as u32,
                mean_before: c.mean_before,
                mean_after: c.mean_after,
                p_value: c.p_value,
            })
            .collect();
        let since = h.change_points.last().map_or(0, |c| c.index as usize);
        h.drift = farm_analysis::drift::drift(&ys, since, drift_window).map(|d| wire_drift(&d));
    }
    out
}

/// A drift as the wire carries it.
pub fn wire_drift(d: &farm_analysis::drift::Drift) -> Drift {
    Drift {
        start_index: d.start as u32,
        points: d.points as u32,
        slope: d.slope,
        slope_low: d.slope_low,
        slope_high: d.slope_high,
        level_start: d.level_start,
        level_end: d.level_end,
    }
}

/// The cell's primary metrics whose history drifts the wrong way over its
/// drift window by at least the cell's minimum effect for it (the fitted
/// level at the window's end over its start). Labelled with the first
/// point of the regime the drift is in (after the last change point, or
/// the history's first): that point does not move as matrices come, so one
/// drift is one alert.
pub fn drift_regressions(cell: &Cell, summary: &CellSummary) -> Vec<ChangeRegression> {
    let policy = crate::policy::of(cell);
    let mut out = Vec::new();
    for h in &summary.history {
        let (Some(d), Some(m)) = (
            &h.drift,
            summary.metrics.iter().find(|m| m.name == h.metric),
        ) else {
            continue;
        };
        let since = h.change_points.last().map_or(0, |c| c.index as usize);
        let Some(p) = h.points.get(since) else {
            continue;
        };
        out.extend(worse(&policy, m, d.level_end / d.level_start, p));
    }
    out
}

/// Summarises `runs` (any order, any cells) per cell of `cells`;
/// `histories[i]` is cell i's history (empty when unknown).
pub fn summarise(
    cells: &[Cell],
    runs: &[&RunRecord],
    histories: Vec<Vec<History>>,
) -> Vec<CellSummary> {
    let mut by_cell: Vec<Vec<&RunRecord>> = cells.iter().map(|_| Vec::new()).collect();
    for r in runs {
        if let Some(v) = by_cell.get_mut(r.cell.at()) {
            v.push(r);
        }
    }
    let vals: Vec<Vec<Values>> = by_cell.iter().map(|r| values(r)).collect();
    let reps: Vec<(String, Vec<String>, Option<&Telemetry>)> = cells
        .iter()
        .zip(&by_cell)
        .map(|(cell, runs)| representative(cell.index, runs))
        .collect();
    let mut histories = histories.into_iter();
    cells
        .iter()
        .map(|cell| {
            let i = cell.index.at();
            let policy = crate::policy::of(cell);
            let base_i = cell
                .baseline
                .map(crate::ids::CellIndex::at)
                .filter(|&b| b < cells.len());
            let mut summary = CellSummary {
                cell_index: cell.index.get(),
                cell_name: cell.name.clone(),
                baseline: cell.baseline.map(crate::ids::CellIndex::get),
                representative_run: reps[i].0.clone(),
                notes: reps[i].1.clone(),
                history: histories.next().unwrap_or_default(),
                ..Default::default()
            };
            if policy.repetitions > 0 {
                summary.extra_runs = by_cell[i]
                    .iter()
                    .filter(|r| r.repetition >= policy.repetitions)
                    .count() as u32;
            }
            let mixed = base_i.and_then(|b| comparable(&policy, &by_cell[i], &by_cell[b]).err());
            if let Some(why) = &mixed {
                summary.notes.insert(0, why.to_string());
            }
            let base = base_i.map(|b| by_name(&vals[b])).unwrap_or_default();
            let hosts =
                base_i.map(|b| conditions::of([&by_cell[b], &by_cell[i]], [&vals[b], &vals[i]]));
            let mut worst: Option<Verdict> = None;
            let mut moved: Vec<(String, f64, f64, Verdict)> = Vec::new();
            for v in &vals[i] {
                let mut m = MetricSummary {
                    name: v.name.clone(),
                    unit: v.unit.clone(),
                    direction: v.direction,
                    n: v.values.len() as u32,
                    median: farm_analysis::median(&v.values).unwrap_or(f64::NAN),
                    values: v.values.clone(),
                    primary: is_primary(&v.name),
                    ..Default::default()
                };
                if let Some(b) = base.get(v.name.as_str()) {
                    let bm = farm_analysis::median(&b.values).unwrap_or(f64::NAN);
                    m.baseline_median = Some(bm);
                    m.ratio = farm_analysis::ratio(m.median, bm);
                    m.baseline_n = b.values.len() as u32;
                    m.baseline_values = b.values.clone();
                    if let Some(c) =
                        compare_metric(&policy, &v.name, v.direction, &b.values, &v.values, true)
                            .filter(|_| mixed.is_none())
                    {
                        m.verdict = wire_verdict(c.verdict) as i32;
                        m.ci_low = c.ci_low;
                        m.ci_high = c.ci_high;
                        m.p_value = c.p_value;
                        m.findings = c
                            .findings
                            .iter()
                            .map(|f| diagnosis::finding_text(f, &v.unit))
                            .collect();
                        if is_primary(&v.name) {
                            // Why an inconclusive verdict could not decide.
                            m.findings.extend(
                                hosts.as_ref().and_then(|k| {
                                    conditions::why_undecided(&policy, &c, [*b, v], k)
                                }),
                            );
                            if worst.is_none_or(|w| severity(c.verdict) > severity(w)) {
                                worst = Some(c.verdict);
                            }
                        } else if v.name != metric::TELEMETRY_OVERHEAD_PCT.name
                            && !metric::CONDITIONS.iter().any(|k| k.name == v.name)
                        {
                            // The farm's own cost and the host's conditions
                            // explain nothing about the kernel.
                            moved.push((v.name.clone(), bm, m.median, c.verdict));
                        }
                    }
                }
                summary.metrics.push(m);
            }
            if let Some(w) = worst {
                summary.verdict = wire_verdict(w) as i32;
                let evidence = diagnosis::Evidence {
                    metrics: moved
                        .iter()
                        .map(|(name, b, c, v)| diagnosis::Moved {
                            metric: name,
                            baseline_median: *b,
                            candidate_median: *c,
                            verdict: *v,
                        })
                        .collect(),
                    baseline: base_i.and_then(|b| reps[b].2).map(placement_of),
                    candidate: reps[i].2.map(placement_of),
                    baseline_topology: base_i
                        .and_then(|b| reps[b].2)
                        .map(|t| t.topology_changes.clone())
                        .unwrap_or_default(),
                    candidate_topology: reps[i]
                        .2
                        .map(|t| t.topology_changes.clone())
                        .unwrap_or_default(),
                };
                summary.diagnosis = diagnosis::diagnose(&evidence)
                    .into_iter()
                    .map(|l| l.text)
                    .collect();
            }
            summary
        })
        .collect()
}

/// A run's placement, as the diagnosis reads it.
fn placement_of(t: &Telemetry) -> diagnosis::Placement {
    diagnosis::Placement {
        nodes: t
            .nodes
            .iter()
            .map(|n| diagnosis::NodeLoad {
                node: n.node,
                cpus: n.cpus,
                avg_threads: n.avg_threads,
                avg_runnable: n.avg_runnable,
            })
            .collect(),
        instances: t
            .instances
            .iter()
            .map(|i| {
                (
                    i.instance,
                    i.avg_threads
                        .iter()
                        .map(|(k, v)| (*k, *v))
                        .collect::<BTreeMap<u32, f64>>(),
                )
            })
            .collect(),
    }
}

/// Most instances and topology changes a cell's notes list.
const MAX_NOTES_EACH: usize = 8;

fn wall(r: &RunRecord) -> Option<f64> {
    r.result
        .as_ref()?
        .metrics
        .iter()
        .find(|m| m.name == metric::WALL_S.name)
        .map(|m| m.value)
}

/// The finished run of `cell` whose wall time is nearest the median, its
/// telemetry in the words the seeds' authors used, and the telemetry itself.
fn representative<'a>(
    cell: crate::ids::CellIndex,
    runs: &[&'a RunRecord],
) -> (String, Vec<String>, Option<&'a Telemetry>) {
    let mut finished: Vec<(&'a RunRecord, f64)> = runs
        .iter()
        .filter(|r| r.cell == cell && r.state == RunState::Finished)
        .filter_map(|r| Some((*r, wall(r)?)))
        .collect();
    if finished.is_empty() {
        return (String::new(), Vec::new(), None);
    }
    finished.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (run, _) = finished[(finished.len() - 1) / 2];
    let Some(t) = run.result.as_ref().and_then(|r| r.telemetry.as_ref()) else {
        return (run.run_id.to_string(), Vec::new(), None);
    };
    let mut notes = Vec::new();
    for n in &t.nodes {
        let over = if n.avg_runnable > f64::from(n.cpus) {
            " — overcommitted"
        } else {
            ""
        };
        notes.push(format!(
            "node {} holds {:.1} threads ({:.1} runnable) on {} CPUs{over}",
            n.node, n.avg_threads, n.avg_runnable, n.cpus
        ));
    }
    if t.threads_read_fraction > 0.0 && t.threads_read_fraction < 0.995 {
        // Say so when the counts above are estimates (the sampler's budget).
        notes.push(format!(
            "placement estimated: each {} ms sweep read {:.0}% of the threads, in turn",
            t.sample_interval_ms,
            t.threads_read_fraction * 100.0
        ));
    }
    if t.instances.len() > 1 || t.nodes.len() > 1 {
        for i in t.instances.iter().take(MAX_NOTES_EACH) {
            let mut per_node: Vec<(&u32, &f64)> = i.avg_threads.iter().collect();
            per_node.sort_by_key(|(n, _)| **n);
            let avg: Vec<String> = per_node
                .iter()
                .map(|(n, v)| format!("{n}: {v:.2}"))
                .collect();
            let mut nodes = i.numa_nodes.clone();
            if nodes.len() > 60 {
                nodes.truncate(nodes.char_indices().nth(57).map_or(nodes.len(), |(b, _)| b));
                nodes.push_str("...");
            }
            notes.push(format!(
                "instance {}: average threads per node {}; NUMA nodes: {nodes}",
                i.instance,
                avg.join(", ")
            ));
        }
    }
    for c in t.topology_changes.iter().take(MAX_NOTES_EACH) {
        notes.push(format!("topology: {c}"));
    }
    (run.run_id.to_string(), notes, Some(t))
}

#[cfg(test)]
mod tests;
