//! The bisections, each with its record and its bisector ([`Bisections`]),
//! their limits and their events; driven by `scheduler::bisection`.

use std::collections::BTreeMap;

use farm_proto::{Bisection, StartBisectionRequest};
use farm_spec::Kernel;
use tracing::{error, info, warn};

use crate::bisection::{self};
use crate::ids::{BisectionId, MatrixId};
use crate::scheduler::reply::{Error, Reply};
use crate::store::Op;

/// The most bisections the coordinator keeps running at once: each holds
/// a round matrix in the queue, and its record is rewritten every round.
pub const MAX_RUNNING_BISECTIONS: usize = 64;

/// The most culprits `farm_regression_culprit` shows: the newest ones.
pub const MAX_CULPRITS_SHOWN: usize = 1000;

/// The most bisections one execution of a `[schedule] bisect` starts.
pub const MAX_BISECTIONS_PER_EXECUTION: usize = 4;

/// What the bisection feature is asked.
pub enum BisectionEvent {
    Start {
        request: Box<StartBisectionRequest>,
        /// The request's `between`, parsed where it entered (`service`).
        between: Vec<Kernel>,
        reply: Reply<Bisection>,
    },
    Get {
        /// Parsed where it entered (`service`).
        bisection_id: BisectionId,
        reply: Reply<Bisection>,
    },
    /// The ends as `service` parsed them from the request.
    ListRange {
        good: Kernel,
        bad: Kernel,
        reply: Reply<farm_proto::ListRangeResponse>,
    },
}

/// The bisection feature's state: every bisection's record, by id. The
/// rest of the scheduler reads it through the methods below.
#[derive(Default)]
pub(in crate::scheduler) struct Bisections(
    pub(in crate::scheduler) BTreeMap<BisectionId, Bisection>,
);

impl Bisections {
    /// A stored bisection, at recovery: its id is parsed as the store's
    /// records are, a stored record that names none failing the start.
    pub(in crate::scheduler) fn recovered(&mut self, b: Bisection) -> Result<(), Error> {
        let id = b.bisection_id.parse().map_err(crate::store::Error::from)?;
        self.0.insert(id, b);
        Ok(())
    }

    /// How many bisections run (have no outcome).
    pub(in crate::scheduler) fn running(&self) -> usize {
        self.0.values().filter(|b| b.outcome.is_none()).count()
    }

    /// Whether a bisection from `matrix_id` already has the ends `pair`.
    pub(in crate::scheduler) fn has_pair(
        &self,
        matrix_id: &MatrixId,
        pair: &(String, String),
    ) -> bool {
        let matrix_id = matrix_id.to_string();
        self.0.values().any(|b| {
            b.matrix_id == matrix_id
                && b.kernels.first() == Some(&pair.0)
                && b.kernels.last() == Some(&pair.1)
        })
    }

    pub(in crate::scheduler) fn started(&mut self, id: BisectionId, b: Bisection) {
        self.0.insert(id, b);
    }

    /// The metric `id` bisects by.
    pub(in crate::scheduler) fn metric(&self, id: &BisectionId) -> Option<String> {
        self.0.get(id).map(|b| b.metric.clone())
    }

    pub(in crate::scheduler) fn get(&self, id: &BisectionId) -> Result<Bisection, Error> {
        self.0
            .get(id)
            .cloned()
            .ok_or_else(|| Error::UnknownBisection(id.to_string()))
    }

    /// What `id` asks for next: a round's matrix, or nothing more (it
    /// ended, or its record is damaged and it waits, saying why).
    pub(in crate::scheduler) fn plan(&self, id: &BisectionId) -> Plan {
        let Some(b) = self.0.get(id) else {
            return Plan::Waits;
        };
        // An ended record is never planned again: a bisector rebuilt from
        // it has its steps and ends but not its outcome, and would ask for
        // the confirmation once more (a round nobody waits for).
        if let Some(o) = &b.outcome {
            info!(bisection = %id, outcome = %o.kind, last_good = o.last_good,
                  first_bad = o.first_bad, confirmed = o.confirmed, "bisection ended");
            return Plan::Ended;
        }
        let Some(x) = resumed(id, b) else {
            return Plan::Waits;
        };
        let Some(bisection::Round {
            kernels,
            runs,
            focus,
        }) = bisection::next(&x)
        else {
            return Plan::Ended;
        };
        let round = bisection::rounds(b) + 1;
        match bisection::round_matrix(b, &kernels, runs, round, focus) {
            Ok(matrix) => Plan::Round {
                matrix,
                kernels,
                runs,
            },
            Err(e) => {
                // Only a damaged record: its cell and kernels were checked
                // when it was made. It waits, and says why.
                error!(bisection = %id, "a round cannot be made: {e}");
                Plan::Waits
            }
        }
    }

    /// `id` goes on: its record, with the round `matrix` it now waits for
    /// if one was submitted, to store.
    pub(in crate::scheduler) fn advanced(
        &mut self,
        id: &BisectionId,
        matrix: Option<MatrixId>,
    ) -> Option<Op> {
        let b = self.0.get_mut(id)?;
        if let Some(m) = matrix {
            b.pending_matrices.push(m.to_string());
        }
        Some(Op::PutBisection(Box::new(b.clone())))
    }

    /// The running bisection whose current round is `matrix_id`.
    pub(in crate::scheduler) fn waiting_for(&self, matrix_id: &MatrixId) -> Option<BisectionId> {
        let matrix_id = matrix_id.to_string();
        self.0
            .iter()
            .find(|(_, b)| b.outcome.is_none() && b.pending_matrices.last() == Some(&matrix_id))
            .map(|(id, _)| *id)
    }

    /// The round `id` waited for gave `values`: the bisector takes them;
    /// false when it cannot (the record is left as it was).
    pub(in crate::scheduler) fn observed(
        &mut self,
        id: &BisectionId,
        matrix_id: &MatrixId,
        values: Vec<Vec<f64>>,
    ) -> bool {
        let Some(b) = self.0.get_mut(id) else {
            return false;
        };
        let Some(mut x) = resumed(id, b) else {
            return false;
        };
        if let Err(e) = x.observe(values) {
            warn!(bisection = %id, matrix = %matrix_id, "round not taken: {e}");
            return false;
        }
        bisection::record(b, &x);
        true
    }

    /// `matrix_id` was cancelled: the bisection waiting for it ends
    /// `cancelled`; its record to store.
    pub(in crate::scheduler) fn round_cancelled(&mut self, matrix_id: &MatrixId) -> Option<Op> {
        let id = self.waiting_for(matrix_id)?;
        let b = self.0.get_mut(&id)?;
        bisection::cancelled(b, matrix_id);
        info!(bisection = %id, matrix = %matrix_id, "bisection cancelled with its round");
        Some(Op::PutBisection(Box::new(b.clone())))
    }

    /// The rounds running bisections wait for.
    pub(in crate::scheduler) fn waiting_rounds(&self) -> Vec<MatrixId> {
        // A stored round that is no matrix id is no live matrix either.
        self.0
            .values()
            .filter(|b| b.outcome.is_none())
            .filter_map(|b| b.pending_matrices.last()?.parse().ok())
            .collect()
    }

    /// `farm_regression_culprit`'s labels: the confirmed culprits of the
    /// newest [`MAX_CULPRITS_SHOWN`] bisections that found one.
    pub(in crate::scheduler) fn culprits(&self) -> Vec<Vec<String>> {
        let mut found: Vec<(u64, Vec<String>)> = self
            .0
            .values()
            .filter_map(|b| bisection::culprit_labels(b).map(|l| (b.created_ms, l)))
            .collect();
        found.sort_by(|a, b| b.cmp(a));
        found.truncate(MAX_CULPRITS_SHOWN);
        found.into_iter().map(|(_, l)| l).collect()
    }

    /// The bisections started from `matrix_id`'s regressions, oldest first.
    pub(in crate::scheduler) fn briefs_of(
        &self,
        matrix_id: &MatrixId,
    ) -> Vec<farm_proto::BisectionBrief> {
        // The records are the wire's, which spells an id one way.
        let matrix_id = matrix_id.to_string();
        let mut started: Vec<&Bisection> = self
            .0
            .values()
            .filter(|b| b.matrix_id == matrix_id)
            .collect();
        started.sort_by_key(|b| (b.created_ms, b.bisection_id.clone()));
        started
            .into_iter()
            .map(|b| farm_proto::BisectionBrief {
                bisection_id: b.bisection_id.clone(),
                status: bisection::brief(b),
            })
            .collect()
    }
}

/// The bisector `b` holds; `None`, said, when its record is damaged.
pub(in crate::scheduler) fn resumed(
    id: &BisectionId,
    b: &Bisection,
) -> Option<farm_analysis::bisect::Bisector> {
    bisection::bisector(b)
        .map_err(|e| warn!(bisection = %id, "cannot resume: {e}"))
        .ok()
}

/// What a bisection asks for next.
pub(in crate::scheduler) enum Plan {
    Round {
        matrix: crate::matrix::Matrix,
        /// The kernels measured, as indices into the record's.
        kernels: Vec<usize>,
        runs: u32,
    },
    Ended,
    Waits,
}
