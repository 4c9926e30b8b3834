//! Per-cell summaries of finished runs: each metric's median and its ratio
//! to the same metric's median in the cell's baseline.

use farm_proto::{Cell, CellSummary, MetricSummary};

use crate::store::{RunRecord, RunState};

/// Summarises `runs` (any order, any cells) per cell of `cells`.
pub fn summarise(cells: &[Cell], runs: &[&RunRecord]) -> Vec<CellSummary> {
    let mut per_cell: Vec<Vec<MetricSummary>> = cells.iter().map(|_| Vec::new()).collect();
    let mut values: Vec<Vec<Vec<f64>>> = cells.iter().map(|_| Vec::new()).collect();
    for r in runs.iter().filter(|r| r.state == RunState::Finished) {
        let (Some(res), Some(metrics), Some(vals)) = (
            &r.result,
            per_cell.get_mut(r.cell as usize),
            values.get_mut(r.cell as usize),
        ) else {
            continue;
        };
        for m in &res.metrics {
            // Metrics keep the order in which they first appear.
            let i = match metrics.iter().position(|s| s.name == m.name) {
                Some(i) => i,
                None => {
                    metrics.push(MetricSummary {
                        name: m.name.clone(),
                        unit: m.unit.clone(),
                        direction: m.direction,
                        ..Default::default()
                    });
                    vals.push(Vec::new());
                    metrics.len() - 1
                }
            };
            vals[i].push(m.value);
        }
    }
    for (metrics, vals) in per_cell.iter_mut().zip(&values) {
        for (s, v) in metrics.iter_mut().zip(vals) {
            s.n = v.len() as u32;
            s.median = farm_analysis::median(v).unwrap_or(f64::NAN);
        }
    }
    let medians: Vec<Vec<(String, f64)>> = per_cell
        .iter()
        .map(|ms| ms.iter().map(|m| (m.name.clone(), m.median)).collect())
        .collect();
    cells
        .iter()
        .zip(per_cell)
        .map(|(cell, mut metrics)| {
            if let Some(base) = cell.baseline.and_then(|b| medians.get(b as usize)) {
                for m in &mut metrics {
                    if let Some((_, bm)) = base.iter().find(|(n, _)| *n == m.name) {
                        m.baseline_median = Some(*bm);
                        m.ratio = farm_analysis::ratio(m.median, *bm);
                    }
                }
            }
            let (representative_run, notes) = representative(cell.index, runs);
            CellSummary {
                cell_index: cell.index,
                cell_name: cell.name.clone(),
                baseline: cell.baseline,
                metrics,
                representative_run,
                notes,
            }
        })
        .collect()
}

/// Most instances and topology changes a cell's notes list.
const MAX_NOTES_EACH: usize = 8;

fn wall(r: &RunRecord) -> Option<f64> {
    r.result
        .as_ref()?
        .metrics
        .iter()
        .find(|m| m.name == "wall_s")
        .map(|m| m.value)
}

/// The finished run of `cell` whose wall time is nearest the median, and
/// its telemetry in the words the seeds' authors used.
fn representative(cell: u32, runs: &[&RunRecord]) -> (String, Vec<String>) {
    let mut finished: Vec<(&RunRecord, f64)> = runs
        .iter()
        .filter(|r| r.cell == cell && r.state == RunState::Finished)
        .filter_map(|r| Some((*r, wall(r)?)))
        .collect();
    if finished.is_empty() {
        return (String::new(), Vec::new());
    }
    finished.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (run, _) = finished[(finished.len() - 1) / 2];
    let Some(t) = run.result.as_ref().and_then(|r| r.telemetry.as_ref()) else {
        return (run.run_id.clone(), Vec::new());
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
    (run.run_id.clone(), notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_proto::{Metric, RunResult};

    fn run(cell: u32, state: RunState, wall: f64) -> RunRecord {
        RunRecord {
            run_id: format!("r{cell}-{wall}"),
            matrix_id: "m".into(),
            cell,
            repetition: 0,
            seq: 0,
            state,
            attempt: 1,
            agent_id: "a".into(),
            result: Some(RunResult {
                ok: state == RunState::Finished,
                metrics: vec![Metric {
                    name: "wall_s".into(),
                    value: wall,
                    unit: "s".into(),
                    direction: 1,
                }],
                ..Default::default()
            }),
        }
    }

    #[test]
    fn medians_and_ratios_to_baseline() {
        let cells = vec![
            Cell {
                index: 0,
                name: "base".into(),
                ..Default::default()
            },
            Cell {
                index: 1,
                name: "cand".into(),
                baseline: Some(0),
                ..Default::default()
            },
        ];
        let runs = [
            run(0, RunState::Finished, 1.0),
            run(0, RunState::Finished, 3.0),
            run(0, RunState::Finished, 2.0),
            run(1, RunState::Finished, 4.0),
            run(1, RunState::Finished, 5.0),
            // A failed run's figures must not count.
            run(1, RunState::Failed, 100.0),
        ];
        let refs: Vec<&RunRecord> = runs.iter().collect();
        let s = summarise(&cells, &refs);
        assert_eq!(s[0].metrics[0].median, 2.0);
        assert_eq!(s[0].metrics[0].ratio, None);
        assert_eq!(s[1].metrics[0].n, 2);
        assert_eq!(s[1].metrics[0].median, 4.5);
        assert_eq!(s[1].metrics[0].baseline_median, Some(2.0));
        assert_eq!(s[1].metrics[0].ratio, Some(2.25));
    }
}
