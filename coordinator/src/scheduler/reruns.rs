//! Adaptive reruns: once a cell and its baseline have no run left to wait
//! for, an inconclusive comparison of their primary metrics queues more
//! runs of both, alternating, up to the cell's `max_runs`.
//!
//! Invariant: the decision reads only the two cells' ended runs and their
//! primary metrics (never histories or diagnoses), and no cell ever holds
//! more runs than its policy's `max_runs`.

use std::time::Instant;

use tracing::{Span, info};

use super::{RunMem, Scheduler};
use crate::ids::{CellIndex, MatrixId, RunId};
use crate::results;
use crate::store::{Op, RunRecord, RunState};

impl Scheduler {
    /// Once a cell and its baseline have no run left to wait for, compares
    /// them; when the comparison is inconclusive and the matrix allows more
    /// runs, queues more of both, alternating, the way Chromium's Pinpoint
    /// retries. Checks the cell as a candidate and as a baseline.
    pub(super) fn rerun_if_inconclusive(&mut self, matrix_id: &MatrixId, cell: CellIndex) {
        let Some(m) = self.matrices.get(matrix_id) else {
            return;
        };
        if m.rec.cancelled {
            return;
        }
        let mut pairs: Vec<(CellIndex, CellIndex)> = Vec::new();
        if let Some(b) = m.rec.cells.get(cell.at()).and_then(|c| c.baseline) {
            pairs.push((cell, b));
        }
        if let Some(candidates) = m.candidates.get(cell.at()) {
            pairs.extend(candidates.iter().map(|&c| (c, cell)));
        }
        let mut add: Vec<CellIndex> = Vec::new();
        for (candidate, baseline) in pairs {
            let (Some(cand_ids), Some(base_ids)) =
                (m.by_cell.get(candidate.at()), m.by_cell.get(baseline.at()))
            else {
                continue;
            };
            let recs = |ids: &[RunId]| -> Vec<&RunRecord> {
                ids.iter()
                    .filter_map(|id| self.runs.get(id))
                    .map(|r| &r.rec)
                    .collect()
            };
            let (cand, base) = (recs(cand_ids), recs(base_ids));
            if cand.iter().chain(&base).any(|r| !r.state.is_terminal()) {
                continue;
            }
            let policy = crate::policy::of(&m.rec.cells[candidate.at()]);
            // Room under the cap, counting runs this call already plans: a
            // baseline shared by several inconclusive candidates grows once.
            let planned = |c: CellIndex| add.iter().filter(|&&a| a == c).count();
            let room =
                |n: usize, c: CellIndex| (policy.max_runs as usize).saturating_sub(n + planned(c));
            if room(cand.len(), candidate) == 0 {
                continue;
            }
            let verdict = results::pair_verdict(&m.rec.cells[candidate.at()], &cand, &base);
            if verdict != Some(farm_analysis::compare::Verdict::Inconclusive) {
                continue;
            }
            // A round as large as the matrix's repetitions, within the cap,
            // on both sides, alternating.
            let round = (policy.repetitions.max(1) as usize).min(room(cand.len(), candidate));
            let base_round = round.min(room(base.len(), baseline));
            for k in 0..round {
                add.push(candidate);
                if k < base_round {
                    add.push(baseline);
                }
            }
            info!(matrix = %matrix_id, %candidate, %baseline, round, "inconclusive: adding runs");
        }
        for cell in add {
            self.add_run(matrix_id, cell);
        }
    }

    /// Queues one more run of `cell`, after every run the matrix has.
    pub(super) fn add_run(&mut self, matrix_id: &MatrixId, cell: CellIndex) {
        let Some(m) = self.matrices.get_mut(matrix_id) else {
            return;
        };
        let runs = &self.runs;
        let seq = m
            .runs
            .last()
            .and_then(|id| runs.get(id))
            .map_or(0, |r| r.rec.seq + 1);
        let Some(ids) = m.by_cell.get_mut(cell.at()) else {
            return;
        };
        let repetition = ids
            .iter()
            .filter_map(|id| runs.get(id))
            .map(|r| r.rec.repetition + 1)
            .max()
            .unwrap_or(0);
        let rec = RunRecord {
            run_id: RunId::new(*matrix_id, cell, repetition),
            matrix_id: *matrix_id,
            cell,
            repetition,
            seq,
            state: RunState::Queued,
            attempt: 0,
            agent_id: None,
            result: None,
        };
        ids.push(rec.run_id.clone());
        m.runs.push(rec.run_id.clone());
        m.dirty = true;
        self.queues
            .entry((m.rec.seq, cell))
            .or_default()
            .insert(seq, rec.run_id.clone());
        self.ops.push(Op::PutRun(Box::new(rec.clone())));
        self.runs.insert(
            rec.run_id.clone(),
            RunMem {
                holders: Vec::new(),
                rec,
                matrix_seq: m.rec.seq,
                assigned_at: None,
                queued_at: Instant::now(),
                span: Span::none(),
                activity: None,
            },
        );
    }
}
