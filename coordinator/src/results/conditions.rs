//! What the hosts were like over a comparison's runs, from the runs'
//! telemetry (`host_load`, `host_cpus`, `guest_cpus`, `steal_pct`,
//! `guest_slowdown`, the executor): the figures `farm_analysis::resolution` reads a spread
//! against when it says why a comparison could not decide.

use farm_analysis::compare::Comparison;
use farm_analysis::resolution::{self, Conditions, Range};
use farm_proto::VerdictPolicy;
use farm_spec::metric::{GUEST_CPUS, GUEST_SLOWDOWN, HOST_CPUS, HOST_LOAD, STEAL_PCT};

use super::values::Values;
use crate::store::{RunRecord, RunState};

/// The conditions over the finished runs of both sides; `values` are both
/// sides' metrics as [`values`](super::values::values) gives them.
pub(super) fn of(runs: [&[&RunRecord]; 2], values: [&[Values]; 2]) -> Conditions {
    let all = |name: &'static str| {
        values
            .into_iter()
            .flatten()
            .filter(move |v| v.name == name)
            .flat_map(|v| v.values.iter().copied())
    };
    let mut executors = runs
        .into_iter()
        .flatten()
        .filter(|r| r.state == RunState::Finished)
        .filter_map(|r| r.result.as_ref().map(|x| x.executor.as_str()))
        .filter(|e| !e.is_empty());
    let first = executors.next();
    let executor = first
        .filter(|f| executors.all(|e| e == *f))
        .map(str::to_owned);
    Conditions {
        load: Range::of(all(HOST_LOAD.name)),
        host_cpus: Range::of(all(HOST_CPUS.name)),
        guest_cpus: Range::of(all(GUEST_CPUS.name)).map(|r| r.high as u32),
        executor,
        steal_pct: Range::of(all(STEAL_PCT.name)),
        slowdown: Range::of(all(GUEST_SLOWDOWN.name)),
    }
}

/// The why-line of a primary metric's comparison, when its runs spread
/// beyond what it could resolve.
pub(super) fn why_undecided(
    policy: &VerdictPolicy,
    c: &Comparison,
    values: [&Values; 2],
    conditions: &Conditions,
) -> Option<String> {
    let [baseline, candidate] = values;
    resolution::why_undecided(
        &resolution::Question {
            comparison: c,
            baseline: &baseline.values,
            candidate: &candidate.values,
            unit: &candidate.unit,
            min_effect: crate::policy::min_effect(policy, &candidate.name),
            max_runs: policy.max_runs,
            runs_limit: crate::policy::MAX_RUNS_PER_CELL,
        },
        conditions,
    )
}
