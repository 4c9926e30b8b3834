//! Bisections on the scheduler thread: a request becomes a record and its
//! first round's matrix in one batch; each round's matrix, once done, gives
//! its values to the bisector, which asks for the next round or ends.
//!
//! Invariant: a bisection's record names every round matrix it submitted
//! (`pending_matrices`, then its steps' `matrix_ids`), written in the batch
//! that submits it, so a restart finds the round it waits for.

use farm_proto::{Bisection, CommitInfo, GetResultsResponse, StartBisectionRequest, Verdict};
use farm_spec::Kernel;
use prost::Message as _;
use tracing::{info, warn};

use super::state::bisection::{
    BisectionEvent, MAX_BISECTIONS_PER_EXECUTION, MAX_RUNNING_BISECTIONS, Plan,
};
use super::{Error, MatrixMem, Scheduler, Starter, now_ms};
use crate::bisection::{self, New};
use crate::ids::{BisectionId, CellIndex, MatrixId};

impl Scheduler {
    pub(super) fn on_bisection(&mut self, ev: BisectionEvent) {
        match ev {
            BisectionEvent::Start {
                request,
                between,
                reply,
            } => self.start_bisection(*request, &between, Starter::Rpc(reply)),
            BisectionEvent::Get {
                bisection_id,
                reply,
            } => {
                let r = self.get_bisection(&bisection_id);
                self.reply(reply, r);
            }
            BisectionEvent::ListRange { good, bad, reply } => self.list_range(&good, &bad, reply),
        }
    }

    pub(super) fn start_bisection(
        &mut self,
        req: StartBisectionRequest,
        between: &[Kernel],
        reply: Starter,
    ) {
        if !req.git_range {
            let r = self.create_bisection(&req, between, Vec::new());
            self.started(reply, r);
            return;
        }
        if !req.between.is_empty() {
            let e = Error::Bisection(
                "a git range lists the kernels between itself; give no others".into(),
            );
            self.started(reply, Err(e));
            return;
        }
        let (good, bad) = match self.ends(&req) {
            Ok(ends) => ends,
            Err(e) => {
                self.started(reply, Err(e));
                return;
            }
        };
        let then = super::state::ranges::Then::Bisect {
            request: req,
            starter: reply,
        };
        self.request_range(&good, &bad, then);
    }

    /// `[schedule] bisect`: the regressions an ended execution found
    /// between two `git:` kernels of one repository, each pair of kernels
    /// bisected once (its cells most likely share the culprit, and every
    /// bisection is many builds), at most [`MAX_BISECTIONS_PER_EXECUTION`].
    /// A pair already bisected from this matrix is not again: after a
    /// restart its summary comes back.
    pub(super) fn bisect_regressions(
        &mut self,
        matrix_id: &MatrixId,
        summary: &GetResultsResponse,
    ) {
        let Some(m) = self.matrices.get(matrix_id) else {
            return;
        };
        let wire_id = matrix_id.to_string();
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut cells = Vec::new();
        for c in &summary.cells {
            if Verdict::try_from(c.verdict) != Ok(Verdict::Regression) {
                continue;
            }
            let Some(cell) = m.rec.cells.get(c.cell_index as usize) else {
                continue;
            };
            let Some(base) = cell.baseline.and_then(|b| m.rec.cells.get(b.at())) else {
                continue;
            };
            let one_repo = match (&base.kernel, &cell.kernel) {
                (Kernel::Git(g), Kernel::Git(b)) => g.repo() == b.repo() && g != b,
                _ => false,
            };
            let pair = (base.kernel.to_string(), cell.kernel.to_string());
            let done = self.bisections.has_pair(matrix_id, &pair);
            if !one_repo || done || pairs.contains(&pair) {
                continue;
            }
            if pairs.len() == MAX_BISECTIONS_PER_EXECUTION {
                warn!(matrix = %matrix_id, "more regressed pairs of kernels than \
                      MAX_BISECTIONS_PER_EXECUTION: the rest are not bisected");
                break;
            }
            pairs.push(pair);
            cells.push(c.cell_index);
        }
        for cell in cells {
            let req = StartBisectionRequest {
                matrix_id: wire_id.clone(),
                cell,
                git_range: true,
                ..Default::default()
            };
            let to = Starter::Schedule {
                matrix_id: *matrix_id,
                cell: CellIndex::new(cell),
            };
            self.start_bisection(req, &[], to);
        }
    }

    /// Tells whoever waits how the start went.
    pub(super) fn started(&mut self, to: Starter, r: Result<Bisection, Error>) {
        match to {
            Starter::Rpc(reply) => self.reply(reply, r),
            Starter::Schedule { matrix_id, cell } => match r {
                Ok(b) => info!(matrix = %matrix_id, %cell, bisection = %b.bisection_id,
                               "a schedule's regression is being bisected"),
                Err(e) => warn!(matrix = %matrix_id, %cell,
                                "a schedule's regression cannot be bisected: {e}"),
            },
        }
    }

    /// A git-range bisection over an agent's checked listing.
    pub(super) fn range_bisection(
        &mut self,
        req: &StartBisectionRequest,
        kernels: &[Kernel],
        commits: &[CommitInfo],
    ) -> Result<Bisection, Error> {
        let between = &kernels[1..kernels.len() - 1];
        let subjects = commits.iter().map(|c| c.subject.clone()).collect();
        self.create_bisection(req, between, subjects)
    }

    /// The matrix a request bisects a cell of. Its id is parsed here, where
    /// the request (kept whole while a git range is listed) is first read:
    /// a string that is no matrix id names no matrix.
    fn bisected(&self, req: &StartBisectionRequest) -> Result<&MatrixMem, Error> {
        req.matrix_id
            .parse::<MatrixId>()
            .ok()
            .and_then(|id| self.matrices.get(&id))
            .ok_or_else(|| Error::UnknownMatrix(req.matrix_id.clone()))
    }

    /// The good and the bad kernel of a request: its cell's baseline's and
    /// its own.
    fn ends(&self, req: &StartBisectionRequest) -> Result<(Kernel, Kernel), Error> {
        let m = self.bisected(req)?;
        let cell = m.rec.cells.get(req.cell as usize).ok_or_else(|| {
            Error::Bisection(format!(
                "matrix {} has {} cells; there is no cell {}",
                m.rec.id,
                m.rec.cells.len(),
                req.cell
            ))
        })?;
        let base = cell.baseline.ok_or_else(|| {
            Error::Bisection(bisection::Error::NoBaseline { cell: req.cell }.to_string())
        })?;
        Ok((m.rec.cells[base.at()].kernel.clone(), cell.kernel.clone()))
    }

    fn create_bisection(
        &mut self,
        req: &StartBisectionRequest,
        between: &[Kernel],
        subjects: Vec<String>,
    ) -> Result<Bisection, Error> {
        if self.bisections.running() >= MAX_RUNNING_BISECTIONS {
            return Err(Error::Busy {
                what: "the coordinator's running bisections",
                limit: "MAX_RUNNING_BISECTIONS",
                capacity: MAX_RUNNING_BISECTIONS,
            });
        }
        let good = self.ends(req)?.0;
        let bad = |why: String| Error::Bisection(why);
        // `ends` found both.
        let m = self.bisected(req)?;
        let cell = &m.rec.cells[req.cell as usize];
        // The metric and its direction, from the cell's and its baseline's
        // finished runs.
        let runs_of = |c: usize| -> Vec<&crate::store::RunRecord> {
            m.by_cell
                .get(c)
                .into_iter()
                .flatten()
                .filter_map(|id| self.runs.get(id))
                .map(|r| &r.rec)
                .collect()
        };
        let base = cell.baseline.unwrap_or_default().at();
        // Every round builds its kernels as the bad one is built: ends
        // built otherwise (a patch, a configuration) are no range of commits.
        if let Some(b) = m.rec.cells.get(base)
            && b.build != cell.build
        {
            return Err(bad(format!(
                "`{}` and `{}` are built otherwise ([build] / [builds.<name>]): a bisection \
                 changes only the commit",
                b.kernel, cell.kernel
            )));
        }
        let min_effect = cell.verdict.as_ref().map_or(0.02, |v| v.min_effect);
        let (metric, direction) = bisection::choose_metric(
            req.cell,
            &runs_of(req.cell as usize),
            &runs_of(base),
            &req.metric,
            min_effect,
        )
        .map_err(|e| bad(e.to_string()))?;
        let id = BisectionId::random();
        let mut b = bisection::create(New {
            id,
            matrix_id: m.rec.id,
            matrix_name: m.rec.name.clone(),
            timeout_s: m.rec.timeout_s,
            cell,
            good: &good,
            between,
            metric,
            direction,
            runs: req.runs,
            max_runs: req.max_runs,
            created_ms: now_ms(),
        })
        .map_err(|e| bad(e.to_string()))?;
        b.subjects = subjects;
        // Its record grows by the ends' values and a step per round: a
        // quarter of the store's limit leaves them room.
        let limit = self.store.max_value_bytes() / 4;
        if b.encoded_len() > limit {
            return Err(Error::TooLargeForStore {
                what: format!("the bisection of {} kernels", b.kernels.len()),
                bytes: b.encoded_len(),
                limit,
            });
        }
        info!(bisection = %id, matrix = %b.matrix_id, cell = b.cell, kernels = b.kernels.len(),
              metric = %b.metric, "bisection started");
        self.bisections.started(id, b);
        self.advance_bisection(&id);
        self.bisections.get(&id)
    }

    pub(super) fn get_bisection(&self, id: &BisectionId) -> Result<Bisection, Error> {
        self.bisections.get(id)
    }

    /// Submits the round the bisector asks for, or records its end; writes
    /// the record either way (not a damaged one, which waits).
    fn advance_bisection(&mut self, id: &BisectionId) {
        let round = match self.bisections.plan(id) {
            Plan::Waits => return,
            Plan::Ended => None,
            Plan::Round {
                matrix,
                kernels,
                runs,
            } => {
                let file_name = format!("bisection {id}");
                let (m, _) = self.submit_matrix(matrix, file_name, String::new(), "", None);
                info!(bisection = %id, matrix = %m, ?kernels, runs, "bisection round");
                Some(m)
            }
        };
        let ended = round.is_none();
        self.ops.extend(self.bisections.advanced(id, round));
        if ended {
            self.export_culprits();
        }
    }

    /// `farm_regression_culprit`: the confirmed culprits of the newest
    /// [`MAX_CULPRITS_SHOWN`] bisections that found one.
    pub(super) fn export_culprits(&mut self) {
        self.metrics.set_culprits(&self.bisections.culprits());
    }

    /// A matrix is done: if it is the round a bisection waits for, its
    /// values go to the bisector, and the next round is submitted.
    pub(super) fn bisection_round_done(&mut self, matrix_id: &MatrixId) {
        let Some(id) = self.bisections.waiting_for(matrix_id) else {
            return;
        };
        let Some(m) = self.matrices.get(matrix_id) else {
            return;
        };
        let Some(metric) = self.bisections.metric(&id) else {
            return;
        };
        let values = bisection::round_values(&self.ended_runs(m), m.rec.cells.len(), &metric);
        if self.bisections.observed(&id, matrix_id, values) {
            self.advance_bisection(&id);
        }
    }

    /// A matrix was cancelled: if it is the round a bisection waits for,
    /// the bisection ends `cancelled` (`farmctl cancel` of a round is how a
    /// user stops a bisection).
    pub(super) fn bisection_round_cancelled(&mut self, matrix_id: &MatrixId) {
        self.ops.extend(self.bisections.round_cancelled(matrix_id));
    }

    /// After recovery: a bisection whose round ended while no coordinator
    /// led takes it now.
    pub(super) fn resume_bisections(&mut self) {
        let waiting = self.bisections.waiting_rounds();
        for matrix_id in waiting {
            let Some(m) = self.matrices.get(&matrix_id) else {
                continue;
            };
            if m.rec.cancelled {
                self.bisection_round_cancelled(&matrix_id);
            } else if !self.has_unended_runs(m) {
                self.bisection_round_done(&matrix_id);
            }
        }
        self.export_culprits();
    }
}
