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
            CellSummary {
                cell_index: cell.index,
                cell_name: cell.name.clone(),
                baseline: cell.baseline,
                metrics,
            }
        })
        .collect()
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
