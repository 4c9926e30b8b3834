//! Recovery: memory rebuilt from the store after a (re)start, and the
//! in-memory indexes of a matrix built as it is inserted.
//!
//! Invariant: after `recover`, memory is what the store holds and nothing
//! more; every run of a matrix is in its `runs` and `by_cell` in seq order,
//! and every queued run is in its cell's queue.

use std::time::{Duration, Instant};

use farm_proto::MatrixStatus;
use tokio::sync::watch;
use tracing::{Span, error, info, warn};

use super::histories::series_key;
use super::{Agent, Error, MatrixMem, RunMem, Scheduler, activity};
use crate::eligibility;
use crate::ids::{Attempt, MatrixId};
use crate::store::{MatrixRecord, RunState};

impl Scheduler {
    /// Rebuilds memory from the store after a (re)start.
    pub(super) fn recover(&mut self) -> Result<(), Error> {
        let snap = self.store.load()?;
        let lease = Duration::from_millis(u64::from(self.config.lease_ms));
        let now = Instant::now();
        for a in snap.agents {
            self.agents.insert(
                a.agent_id,
                Agent {
                    capabilities: a.capabilities,
                    identity: a.identity,
                    registered_ms: a.registered_ms,
                    session: None,
                    current: None,
                    lease_until: now + lease,
                    // The store does not keep when an agent was last seen:
                    // its absence (and expiry) counts from this start.
                    last_seen_ms: super::now_ms(),
                },
            );
        }
        for s in snap.schedules {
            self.schedules.recovered(s);
        }
        for b in snap.bisections {
            self.bisections.recovered(b)?;
        }
        for u in snap.unreadable {
            self.next_seq = self.next_seq.max(u.record.seq + 1);
            // Once per matrix and start: the store keeps it, so every
            // leader says it again, and nothing else of it is loaded.
            error!(matrix = %u.record.id, name = %u.record.name,
                   "a stored matrix cannot be read and is failed: {}", u.error);
            self.unreadable.insert(u.record.id, u.error.to_string());
        }
        for m in snap.matrices {
            self.next_seq = self.next_seq.max(m.seq + 1);
            if let Some(e) = &m.execution {
                self.schedules.execution_recovered(&e.schedule_id, &m.id);
            }
            self.insert_matrix(m);
        }
        self.schedules.publish();
        let (mut queued, mut assigned) = (0, 0);
        for r in snap.runs {
            let Some(m) = self.matrices.get_mut(&r.matrix_id) else {
                if self.unreadable.contains_key(&r.matrix_id) {
                    continue;
                }
                warn!(run = %r.run_id, "run of an unknown matrix in the store; ignored");
                continue;
            };
            m.runs.push(r.run_id.clone());
            if let Some(c) = m.by_cell.get_mut(r.cell.at()) {
                c.push(r.run_id.clone());
            }
            let matrix_seq = m.rec.seq;
            if let Some(res) = &r.result
                && r.state == RunState::Finished
            {
                m.durations_s.push(activity::run_seconds(res));
                m.build_durations_s.extend(activity::build_seconds(res));
            }
            match r.state {
                RunState::Queued => {
                    queued += 1;
                    self.queues
                        .entry((matrix_seq, r.cell))
                        .or_default()
                        .insert(r.seq, r.run_id.clone());
                }
                RunState::Assigned => {
                    // Its agent gets one lease from now to come back and claim it.
                    assigned += 1;
                    if let Some(a) = r.agent_id.and_then(|id| self.agents.get_mut(&id)) {
                        a.current = Some(Attempt {
                            run: r.run_id.clone(),
                            attempt: r.attempt,
                        });
                    }
                }
                _ => {}
            }
            self.runs.insert(
                r.run_id.clone(),
                RunMem {
                    // Only the last holder is on disk.
                    holders: r.agent_id.map(|a| (a, r.attempt)).into_iter().collect(),
                    rec: r,
                    matrix_seq,
                    assigned_at: None,
                    queued_at: now,
                    span: Span::none(),
                    activity: None,
                },
            );
        }
        for m in self.matrices.values_mut() {
            let runs = &self.runs;
            m.runs.sort_by_key(|id| runs.get(id).map(|r| r.rec.seq));
            for c in &mut m.by_cell {
                c.sort_by_key(|id| runs.get(id).map(|r| r.rec.seq));
            }
        }
        let ids: Vec<MatrixId> = self.matrices.keys().copied().collect();
        for id in ids {
            let st = self.status(&id);
            if let (Some(st), Some(m)) = (st, self.matrices.get_mut(&id)) {
                m.status.send_replace(st);
            }
        }
        info!(
            matrices = self.matrices.len(),
            agents = self.agents.len(),
            queued,
            assigned,
            "recovered state from the store"
        );
        self.recover_metrics();
        self.resume_bisections();
        Ok(())
    }

    /// `UnknownMatrix`, or `Unreadable` for a stored matrix whose cells
    /// could not be read.
    pub(super) fn unknown_matrix(&self, matrix_id: &MatrixId) -> Error {
        match self.unreadable.get(matrix_id) {
            Some(why) => Error::Unreadable {
                matrix_id: matrix_id.to_string(),
                why: why.clone(),
            },
            None => Error::UnknownMatrix(matrix_id.to_string()),
        }
    }

    /// `e`, unless it says the matrix is unknown and it is an unreadable one.
    pub(super) fn unreadable_or(&self, matrix_id: &MatrixId, e: Error) -> Error {
        match e {
            Error::UnknownMatrix(_) => self.unknown_matrix(matrix_id),
            e => e,
        }
    }

    pub(super) fn insert_matrix(&mut self, rec: MatrixRecord) {
        let reqs = rec.cells.iter().map(eligibility::requirements).collect();
        let built = rec.cells.iter().map(eligibility::built_name).collect();
        let by_cell = vec![Vec::new(); rec.cells.len()];
        let mut candidates = vec![Vec::new(); rec.cells.len()];
        for c in &rec.cells {
            if let Some(b) = c.baseline.and_then(|b| candidates.get_mut(b.at())) {
                b.push(c.index);
            }
        }
        let (status, _) = watch::channel(MatrixStatus::default());
        let series_keys: Vec<Vec<u8>> = rec.cells.iter().map(series_key).collect();
        for (c, key) in rec.cells.iter().zip(&series_keys) {
            self.series.add(key, rec.seq, c.index);
        }
        let version = self.summaries.next_version();
        self.by_seq.insert(rec.seq, rec.id);
        self.matrices.insert(
            rec.id,
            MatrixMem {
                rec,
                reqs,
                built,
                runs: Vec::new(),
                by_cell,
                candidates,
                status,
                dirty: true,
                published: None,
                durations_s: Vec::new(),
                build_durations_s: Vec::new(),
                series_keys,
                results: super::state::results::Versions::new(version),
                span: Span::none(),
            },
        );
    }
}
