//! What the scheduler tells [`crate::metrics`]: the parts that read its
//! state. The gauges themselves are computed by pure functions there, and
//! an ended matrix's samples by the results worker (`results`).

use std::collections::{BTreeSet, HashSet};

use farm_proto::MatrixState;

use super::{MatrixMem, Scheduler};
use crate::ids::MatrixId;
use crate::metrics::{Ended, series};

impl Scheduler {
    /// A matrix just ended with every run done (a cancelled one's cells are
    /// partial and show nothing): its cells are now their series' latest.
    /// The worker summarises it and refreshes the gauges; the summaries
    /// come back for its schedule's verdicts (`summarised`).
    pub(super) fn matrix_done(&mut self, matrix_id: &MatrixId) {
        if self
            .matrices
            .get(matrix_id)
            .is_some_and(|m| !m.rec.cancelled)
        {
            self.summarise_ended(matrix_id);
            self.bisection_round_done(matrix_id);
        }
    }

    /// The done matrices, newest first, and the seqs of those that are the
    /// latest of some cell's series: what a restart shows the results
    /// gauges from.
    fn latest_of_series(&self) -> (Vec<&MatrixMem>, BTreeSet<u64>) {
        let done = MatrixState::Done as i32;
        let mut newest_first: Vec<&MatrixMem> = self
            .matrices
            .values()
            .filter(|m| !m.rec.cancelled && m.status.borrow().state == done)
            .collect();
        newest_first.sort_by_key(|m| std::cmp::Reverse(m.rec.seq));
        let mut seen: HashSet<series::Series> = HashSet::new();
        let mut latest: BTreeSet<u64> = BTreeSet::new();
        for m in &newest_first {
            for cell in &m.rec.cells {
                // The series of a cell, whatever its metrics.
                if seen.insert(series::series(cell, "")) {
                    latest.insert(m.rec.seq);
                }
            }
        }
        (newest_first, latest)
    }

    /// After recovery: run counts, and the results of the done matrices that
    /// are the latest of some cell's series. Only those are summarised, so a
    /// long history does not slow the start. They are summarised here from
    /// live points, so that the gauges show at once, and again by the
    /// worker, whose histories have the archive's past (a history's change
    /// needs it), as are ended executions for their verdicts (`farmctl
    /// schedules`).
    pub(super) fn recover_metrics(&mut self) {
        for m in self.matrices.values() {
            self.metrics
                .run_counts_changed(None, m.status.borrow().counts.as_ref());
        }
        let (newest_first, latest) = self.latest_of_series();
        let ended: Vec<Ended> = newest_first
            .iter()
            .filter(|m| latest.contains(&m.rec.seq))
            .map(|m| self.ended_now(m))
            .collect();
        let again: Vec<MatrixId> = newest_first
            .iter()
            .filter(|m| latest.contains(&m.rec.seq) || m.rec.execution.is_some())
            .map(|m| m.rec.id)
            .collect();
        self.metrics.recovered(ended);
        self.summaries.again(again);
        // The gauges have had every recovered end: an ended matrix they
        // do not show now they never will.
        let running = MatrixState::Running as i32;
        for m in self.matrices.values_mut() {
            m.results.recovered(m.status.borrow().state != running);
        }
    }

    /// The fleet gauge from the agents with an open stream.
    pub(super) fn refresh_fleet_metrics(&mut self) {
        let connected = self
            .agents
            .values()
            .filter(|a| a.session.is_some())
            .map(|a| &a.capabilities);
        self.metrics.set_agents_connected(connected);
    }
}
