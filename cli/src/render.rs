//! How results look: a table for people, JSON for programs. Pure functions.

use farm_proto::{Direction, GetResultsResponse, MatrixStatus, RunCounts, Verdict};
use serde_json::{Value, json};

mod activity;
mod names;
mod schedules;
pub use activity::{agents_table, build_seconds_left, duration};
pub use schedules::{schedules_json, schedules_table, utc};

use names::{direction_name, state_name};

/// A verdict's name, as `farmctl analyze compare --json` prints it; null
/// where there was nothing to compare.
fn verdict_name(v: i32) -> Option<&'static str> {
    match Verdict::try_from(v) {
        Ok(Verdict::Regression) => Some("regression"),
        Ok(Verdict::Improvement) => Some("improvement"),
        Ok(Verdict::NoChange) => Some("no_change"),
        Ok(Verdict::Inconclusive) => Some("inconclusive"),
        _ => None,
    }
}

fn counts_json(c: &RunCounts) -> Value {
    json!({
        "total": c.total, "queued": c.queued, "running": c.running,
        "finished": c.finished, "failed": c.failed, "cancelled": c.cancelled,
    })
}

/// One line: `12/12 done · 0 running · 0 queued · 0 failed`, and the
/// builds under way: `· building git:linux@v6.1 (compile, 3m12s of ~7m
/// cold)`.
pub fn progress_line(s: &MatrixStatus) -> String {
    let c = s.counts.unwrap_or_default();
    format!(
        "{}/{} done · {} running · {} queued · {} failed{}{}",
        c.finished,
        c.total,
        c.running,
        c.queued,
        c.failed,
        if c.cancelled > 0 {
            format!(" · {} cancelled", c.cancelled)
        } else {
            String::new()
        },
        activity::builds_part(s)
    )
}

/// Distinct reasons why queued cells wait, with the cells they hold up.
pub fn waiting(s: &MatrixStatus) -> Vec<String> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for c in &s.cells {
        if c.waiting_reason.is_empty() {
            continue;
        }
        let name = c.cell.as_ref().map(|c| c.name.clone()).unwrap_or_default();
        match out.iter_mut().find(|(r, _)| *r == c.waiting_reason) {
            Some((_, cells)) => cells.push(name),
            None => out.push((c.waiting_reason.clone(), vec![name])),
        }
    }
    out.into_iter()
        .map(|(reason, cells)| {
            let shown: Vec<&str> = cells.iter().take(3).map(String::as_str).collect();
            let more = if cells.len() > 3 {
                format!(" and {} more", cells.len() - 3)
            } else {
                String::new()
            };
            format!(
                "waiting: {reason} ({} cell{}: {}{more})",
                cells.len(),
                if cells.len() == 1 { "" } else { "s" },
                shown.join("; ")
            )
        })
        .collect()
}

pub fn results_json(r: &GetResultsResponse) -> Value {
    let status = r.status.clone().unwrap_or_default();
    json!({
        "matrix_id": status.matrix_id,
        "name": status.name,
        "state": state_name(status.state),
        "counts": counts_json(&status.counts.unwrap_or_default()),
        "waiting": waiting(&status),
        "cells": r.cells.iter().map(|c| json!({
            "index": c.cell_index,
            "name": c.cell_name,
            "baseline": c.baseline,
            "representative_run": c.representative_run,
            "notes": c.notes,
            "verdict": verdict_name(c.verdict),
            "diagnosis": c.diagnosis,
            "extra_runs": c.extra_runs,
            "metrics": c.metrics.iter().map(|m| json!({
                "name": m.name,
                "unit": m.unit,
                "direction": direction_name(m.direction),
                "n": m.n,
                "median": m.median,
                "baseline_median": m.baseline_median,
                "ratio": m.ratio,
                "verdict": verdict_name(m.verdict),
                "ci_low": m.baseline_median.map(|_| m.ci_low),
                "ci_high": m.baseline_median.map(|_| m.ci_high),
                "p_value": m.baseline_median.map(|_| m.p_value),
                "baseline_n": m.baseline_median.map(|_| m.baseline_n),
                "findings": m.findings,
            })).collect::<Vec<_>>(),
            "history": c.history.iter().map(history_json).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "results": r.runs.iter().map(|run| {
            let res = run.result.clone().unwrap_or_default();
            json!({
                "run_id": run.run_id,
                "cell": run.cell_index,
                "repetition": run.repetition,
                "attempt": res.run.as_ref().map(|r| r.attempt),
                "agent_id": run.agent_id,
                "ok": res.ok,
                "error": res.error,
                // What the workload (or the guest's console) last said: the
                // why of a failed run; bounded by the agent.
                "log_tail": (!res.ok && !res.log_tail.is_empty()).then_some(&res.log_tail),
                "executor": res.executor,
                "arch": res.arch,
                "kernel_release": res.kernel_release,
                "kernel_commit": (!res.kernel_commit.is_empty()).then_some(&res.kernel_commit),
                "kernel_config_sha256": (!res.kernel_config_sha256.is_empty()).then_some(&res.kernel_config_sha256),
                // For a `git:` kernel: the time spent getting it, and whether
                // this run built it (not found kept).
                "kernel_build_ms": (!res.kernel_commit.is_empty()).then_some(res.kernel_build_ms),
                "kernel_built": (!res.kernel_commit.is_empty()).then_some(res.kernel_built),
                "started_unix_ms": res.started_unix_ms,
                "finished_unix_ms": res.finished_unix_ms,
                "metrics": res.metrics.iter().map(|m| (m.name.clone(), json!(m.value))).collect::<serde_json::Map<_, _>>(),
                "telemetry": res.telemetry.as_ref().map(telemetry_json),
            })
        }).collect::<Vec<_>>(),
    })
}

/// A history: its points, change points and, when it drifts, its drift.
fn history_json(h: &farm_proto::History) -> Value {
    let mut v = json!({
        "metric": h.metric,
        "unit": h.unit,
        "points": h.points.iter().map(|p| json!({
            "matrix_id": p.matrix_id, "t_ms": p.t_ms, "kernel": p.kernel, "value": p.value,
        })).collect::<Vec<_>>(),
        "change_points": h.change_points.iter().map(|c| json!({
            "index": c.index, "mean_before": c.mean_before,
            "mean_after": c.mean_after, "p_value": c.p_value,
        })).collect::<Vec<_>>(),
    });
    if let Some(d) = &h.drift {
        v["drift"] = drift_json(d);
    }
    v
}

/// A history's drift: its window, slope and interval (in the metric's unit
/// per point), fitted levels, their ratio, and the slope as a percentage of
/// the window's starting level per point.
pub fn drift_json(d: &farm_proto::Drift) -> Value {
    let (pct, low, high) = per_point_pct(d);
    json!({
        "start_index": d.start_index,
        "points": d.points,
        "slope": d.slope,
        "slope_low": d.slope_low,
        "slope_high": d.slope_high,
        "level_start": d.level_start,
        "level_end": d.level_end,
        "ratio": d.level_end / d.level_start,
        "per_point_pct": pct,
        "per_point_pct_low": low,
        "per_point_pct_high": high,
    })
}

/// The slope and its interval as percentages of the starting level.
fn per_point_pct(d: &farm_proto::Drift) -> (f64, f64, f64) {
    let l = d.level_start / 100.0;
    (d.slope / l, d.slope_low / l, d.slope_high / l)
}

/// "wall_s drifts +0.40% per matrix over the last 30 (95%: +0.21% to
/// +0.59%), ×1.123 over them"; `per` names a point.
pub fn drift_text(metric: &str, d: &farm_proto::Drift, per: &str) -> String {
    let (pct, low, high) = per_point_pct(d);
    format!(
        "{metric} drifts {pct:+.2}% per {per} over the last {} (95%: {low:+.2}% to {high:+.2}%), ×{:.3} over them",
        d.points,
        d.level_end / d.level_start
    )
}

/// A proto map as a JSON object with keys in order.
fn sorted_map<V: Copy + Into<Value>>(m: &std::collections::HashMap<u32, V>) -> Value {
    let mut keys: Vec<&u32> = m.keys().collect();
    keys.sort();
    Value::Object(
        keys.into_iter()
            .map(|k| (k.to_string(), m[k].into()))
            .collect(),
    )
}

/// A run's scheduler telemetry: placement, IPIs per CPU, wasted cores, topology.
fn telemetry_json(t: &farm_proto::Telemetry) -> Value {
    json!({
        "sample_interval_ms": t.sample_interval_ms,
        "threads_read_fraction": t.threads_read_fraction,
        // Samples the run took when the series were thinned to fit; 0 when
        // they are whole.
        "downsampled_from": t.downsampled_from,
        "nodes": t.nodes.iter().map(|n| json!({
            "node": n.node, "cpus": n.cpus, "avg_threads": n.avg_threads,
            "avg_runnable": n.avg_runnable, "peak_threads": n.peak_threads,
        })).collect::<Vec<_>>(),
        "instances": t.instances.iter().map(|i| json!({
            "instance": i.instance,
            "numa_nodes": i.numa_nodes,
            "avg_threads": sorted_map(&i.avg_threads),
            "avg_runnable": sorted_map(&i.avg_runnable),
        })).collect::<Vec<_>>(),
        "series": t.series.iter().map(|s| json!({"t_ms": s.t_ms, "threads": s.threads, "runnable": s.runnable})).collect::<Vec<_>>(),
        "irqs": t.irqs.iter().map(|d| json!({
            "name": d.name, "description": d.description, "ipi": d.ipi,
            "total": d.total, "per_cpu": sorted_map(&d.per_cpu),
        })).collect::<Vec<_>>(),
        "wasted_cpu_s_per_node": sorted_map(&t.wasted_cpu_s_per_node),
        "topology": {
            "source": t.topology_source,
            "before": t.topology_before,
            "after": t.topology_after,
            "changes": t.topology_changes,
        },
    })
}

fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1e6 {
        format!("{v:.3e}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The results table: one block per cell, one row per metric.
/// A line of the results table: a row of columns, or a note under a cell.
enum Line {
    Row([String; 7]),
    Note(String),
}

/// A metric worth a row: zero on both sides says nothing (no TLB shootdowns).
fn shown(m: &farm_proto::MetricSummary) -> bool {
    m.median != 0.0 || m.baseline_median.is_some_and(|b| b != 0.0)
}

/// The results table: one block per cell, one row per metric, then what the
/// cell's representative run's telemetry says.
pub fn results_table(r: &GetResultsResponse) -> String {
    let status = r.status.clone().unwrap_or_default();
    let header = [
        "CELL", "RUNS", "METRIC", "MEDIAN", "BASELINE", "RATIO", "VERDICT",
    ]
    .map(String::from);
    let mut lines: Vec<Line> = vec![Line::Row(header)];
    for c in &r.cells {
        let counts = status
            .cells
            .get(c.cell_index as usize)
            .and_then(|s| s.counts)
            .unwrap_or_default();
        let runs = if counts.failed > 0 {
            format!(
                "{}/{} ({} failed)",
                counts.finished, counts.total, counts.failed
            )
        } else {
            format!("{}/{}", counts.finished, counts.total)
        };
        let metrics: Vec<&farm_proto::MetricSummary> =
            c.metrics.iter().filter(|m| shown(m)).collect();
        if metrics.is_empty() {
            lines.push(Line::Row([
                c.cell_name.clone(),
                runs,
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]));
            continue;
        }
        for (i, m) in metrics.iter().enumerate() {
            let arrow = match Direction::try_from(m.direction) {
                Ok(Direction::LowerIsBetter) => "↓",
                Ok(Direction::HigherIsBetter) => "↑",
                _ => "",
            };
            lines.push(Line::Row([
                if i == 0 {
                    c.cell_name.clone()
                } else {
                    String::new()
                },
                if i == 0 { runs.clone() } else { String::new() },
                format!("{} [{}]{arrow}", m.name, m.unit),
                fmt_value(m.median),
                m.baseline_median
                    .map(fmt_value)
                    .unwrap_or_else(|| "-".into()),
                m.ratio
                    .map(|x| format!("×{x:.3}"))
                    .unwrap_or_else(|| "-".into()),
                match verdict_name(m.verdict) {
                    Some(v) => format!("{v} [{:.3}, {:.3}]", m.ci_low, m.ci_high),
                    None => "-".into(),
                },
            ]));
        }
        if let Some(v) = verdict_name(c.verdict) {
            let added = if c.extra_runs > 0 {
                format!(" ({} runs added to decide)", c.extra_runs)
            } else {
                String::new()
            };
            lines.push(Line::Note(format!("    = {v}{added}")));
        }
        for d in &c.diagnosis {
            lines.push(Line::Note(format!("    ! {d}")));
        }
        for m in &c.metrics {
            for f in &m.findings {
                lines.push(Line::Note(format!("    ~ {}: {f}", m.name)));
            }
        }
        for n in &c.notes {
            lines.push(Line::Note(format!("    · {n}")));
        }
        for h in &c.history {
            if let Some(cp) = h.change_points.last()
                && let Some(p) = h.points.get(cp.index as usize)
            {
                lines.push(Line::Note(format!(
                    "    ^ {} changed ×{:.3} at matrix {} (kernel {}), point {} of its history's {}",
                    h.metric,
                    cp.mean_after / cp.mean_before,
                    p.matrix_id,
                    p.kernel,
                    cp.index + 1,
                    h.points.len()
                )));
            }
            if let Some(d) = &h.drift {
                lines.push(Line::Note(format!(
                    "    ^ {}",
                    drift_text(&h.metric, d, "matrix")
                )));
            }
        }
    }
    let mut widths = [0usize; 7];
    for line in &lines {
        if let Line::Row(row) = line {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = format!(
        "matrix {} ({}): {}\n",
        status.matrix_id,
        status.name,
        progress_line(&status)
    );
    for line in lines {
        let row = match line {
            Line::Note(n) => {
                out.push_str(&n);
                out.push('\n');
                continue;
            }
            Line::Row(row) => row,
        };
        let mut text = String::new();
        for (i, (w, cell)) in widths.iter().zip(&row).enumerate() {
            let pad = w - cell.chars().count();
            // Numbers align right, words left.
            if (3..6).contains(&i) {
                text.push_str(&" ".repeat(pad));
                text.push_str(cell);
            } else {
                text.push_str(cell);
                text.push_str(&" ".repeat(pad));
            }
            text.push_str("  ");
        }
        out.push_str(text.trim_end());
        out.push('\n');
    }
    let failed: Vec<String> = r
        .runs
        .iter()
        .filter_map(|run| {
            run.result
                .as_ref()
                .filter(|x| !x.ok)
                .map(|x| format!("  {}: {}", run.run_id, x.error))
        })
        .collect();
    if !failed.is_empty() {
        out.push_str("failed runs:\n");
        out.push_str(&failed.join("\n"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_proto::MatrixState;
    use farm_proto::{CellStatus, CellSummary, MetricSummary};

    fn response() -> GetResultsResponse {
        GetResultsResponse {
            status: Some(MatrixStatus {
                matrix_id: "m-1".into(),
                name: "demo".into(),
                state: MatrixState::Done as i32,
                counts: Some(RunCounts {
                    total: 2,
                    finished: 2,
                    ..Default::default()
                }),
                cells: vec![
                    CellStatus {
                        counts: Some(RunCounts {
                            total: 1,
                            finished: 1,
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    CellStatus {
                        counts: Some(RunCounts {
                            total: 1,
                            finished: 1,
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
            runs: vec![],
            cells: vec![
                CellSummary {
                    cell_index: 0,
                    cell_name: "lu threads=1".into(),
                    baseline: None,
                    metrics: vec![MetricSummary {
                        name: "wall_s".into(),
                        unit: "s".into(),
                        direction: 1,
                        n: 1,
                        median: 2.0,
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                CellSummary {
                    cell_index: 1,
                    cell_name: "lu threads=2".into(),
                    baseline: Some(0),
                    metrics: vec![MetricSummary {
                        name: "wall_s".into(),
                        unit: "s".into(),
                        direction: 1,
                        n: 1,
                        median: 1.0,
                        baseline_median: Some(2.0),
                        ratio: Some(0.5),
                        ..Default::default()
                    }],
                    representative_run: "m-1.c1.r0".into(),
                    notes: vec!["node 0 holds 2.0 threads (2.0 runnable) on 2 CPUs".into()],
                    ..Default::default()
                },
            ],
        }
    }

    #[test]
    fn table_shows_medians_and_ratios() {
        let t = results_table(&response());
        assert!(t.starts_with("matrix m-1 (demo): 2/2 done"), "{t}");
        // Notes follow their cell, outside the columns.
        let last = t.lines().last().unwrap();
        assert_eq!(
            last, "    · node 0 holds 2.0 threads (2.0 runnable) on 2 CPUs",
            "{t}"
        );
        let line = t.lines().find(|l| l.starts_with("lu threads=2")).unwrap();
        assert!(
            line.contains("1/1")
                && line.contains("wall_s [s]↓")
                && line.contains("2.00")
                && line.contains("×0.500"),
            "{line}"
        );
    }

    #[test]
    fn json_has_cells_and_results() {
        let v = results_json(&response());
        assert_eq!(v["state"], "done");
        assert_eq!(v["cells"][1]["metrics"][0]["ratio"], 0.5);
        assert_eq!(v["cells"][1]["baseline"], 0);
        assert!(v["results"].as_array().unwrap().is_empty());
    }
}
