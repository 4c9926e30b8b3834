//! What the scheduler tells [`crate::metrics`]: the parts that read its
//! state. The gauges themselves are computed by pure functions there.

use std::collections::{BTreeSet, HashSet};

use farm_proto::MatrixState;

use super::{MatrixMem, Scheduler};
use crate::metrics::{Ended, series};
use crate::results;

impl Scheduler {
    /// The samples of an ended matrix: the summaries `GetResults` gives,
    /// histories and their change points included. Change-point detection
    /// runs here on every new point of every series the matrix extends.
    fn ended_samples(&self, m: &MatrixMem) -> (Ended, Vec<farm_proto::CellSummary>) {
        let runs = self.ended_runs(m);
        let summaries = results::summarise(&m.rec.cells, &runs, self.histories(m));
        let ended = Ended {
            seq: m.rec.seq,
            matrix_id: m.rec.id.clone(),
            samples: series::samples(&m.rec.cells, &summaries),
            placement: series::placement(&m.rec.cells, &summaries, &runs),
        };
        (ended, summaries)
    }

    /// A matrix just ended with every run done (a cancelled one's cells are
    /// partial and show nothing): its cells are now their series' latest.
    pub(super) fn matrix_done_metrics(&mut self, matrix_id: &str) {
        let Some(m) = self.matrices.get(matrix_id) else {
            return;
        };
        if m.rec.cancelled {
            return;
        }
        let t = std::time::Instant::now();
        let (ended, summaries) = self.ended_samples(m);
        // An execution of a schedule: what `farmctl schedules` shows of it,
        // from the same summaries, once.
        if let Some(e) = &m.rec.execution {
            let verdicts = super::continuous::verdicts(&m.rec.cells, &summaries);
            if let Some(s) = self.schedules.get_mut(&e.schedule_id) {
                s.verdicts.insert(matrix_id.to_owned(), verdicts);
            }
        }
        self.metrics.matrix_ended(ended);
        self.metrics.results_refreshed(t.elapsed());
    }

    /// After recovery: run counts, and the results of the done matrices that
    /// are the latest of some cell's series. Only those are summarised, so a
    /// long history does not slow the start.
    pub(super) fn recover_metrics(&mut self) {
        for m in self.matrices.values() {
            self.metrics
                .run_counts_changed(None, m.status.borrow().counts.as_ref());
        }
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
        let ended: Vec<Ended> = newest_first
            .iter()
            .filter(|m| latest.contains(&m.rec.seq))
            .map(|m| self.ended_samples(m).0)
            .collect();
        self.metrics.recovered(ended);
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
