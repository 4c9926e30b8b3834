//! A cell's metrics as the verdicts read them: each metric's values over
//! its finished runs.

use std::collections::HashMap;

use crate::store::{RunRecord, RunState};

/// One metric's values over a cell's finished runs, in run order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Values {
    pub name: String,
    pub unit: String,
    /// The wire's `Direction` (read it with `results::direction`).
    pub direction: i32,
    pub values: Vec<f64>,
}

/// The metrics of `runs` in the order they first appear; finished runs only,
/// by repetition.
pub(crate) fn values(runs: &[&RunRecord]) -> Vec<Values> {
    let mut finished: Vec<&&RunRecord> = runs
        .iter()
        .filter(|r| r.state == RunState::Finished)
        .collect();
    finished.sort_by_key(|r| r.repetition);
    let mut out: Vec<Values> = Vec::new();
    // By name: a result may carry thousands of metrics (a workload's per
    // instance figures), and a scan of `out` per metric was quadratic.
    let mut index: HashMap<&str, usize> = HashMap::new();
    for r in finished {
        let Some(res) = &r.result else { continue };
        for m in &res.metrics {
            let i = *index.entry(m.name.as_str()).or_insert_with(|| {
                out.push(Values {
                    name: m.name.clone(),
                    unit: m.unit.clone(),
                    direction: m.direction,
                    values: Vec::new(),
                });
                out.len() - 1
            });
            out[i].values.push(m.value);
        }
    }
    out
}
