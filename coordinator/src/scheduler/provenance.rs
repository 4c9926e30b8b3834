//! Provenance: what an agent says is believed only about the attempts that
//! were leased to it, and only with values a run can have.
//!
//! Every agent holds the same token, so a token proves only that the caller
//! is *an* agent. A result, a progress report or a claim in a `Hello` is
//! therefore checked against the lease: it must concern an attempt that was
//! given to the very agent whose session carries it — the one it holds now,
//! one it lost by a lapsed lease or a restart (its late result still
//! counts, as it did before), or the one whose result already ended the
//! run (a repeated delivery). Anything else is dropped, counted in
//! `farm_rejected_messages_total{reason}` and logged once per agent and
//! reason, so that a flood of forgeries is one line, not a flood of lines.
//!
//! A result that comes from its holder but carries a value no run can have
//! (NaN, ±inf, a negative time or count, a wall time longer than the run
//! has been leased) is not a sample: it ends the run as failed, saying which
//! value was wrong.

use std::time::Duration;

use farm_proto::RunResult;
use farm_spec::metric;
use prost::Message;
use tracing::warn;

use super::state::provenance::{
    MAX_LOGGED_REJECTIONS, MAX_METRIC_VALUE, MAX_METRICS_PER_RESULT, Rejection, WALL_TIME_SLACK,
};
use super::{RunMem, Scheduler};
use crate::ids::AgentId;
use crate::store::RunState;

impl Scheduler {
    /// Drops a message of `agent_id`: counted always, logged once per
    /// agent and reason.
    pub(super) fn reject(&mut self, agent_id: &AgentId, why: Rejection, run_id: &str) {
        self.metrics.message_rejected(why.reason());
        let logged = &mut self.rejections.logged;
        if logged.len() >= MAX_LOGGED_REJECTIONS {
            logged.clear();
        }
        if logged.insert((*agent_id, why)) {
            warn!(agent = %agent_id, reason = why.reason(), run = %farm_spec::excerpt(run_id),
                  "message dropped: it concerns an attempt not leased to this agent \
                   (further ones from this agent for this reason are counted, not logged)");
        }
    }
}

/// The agent holds the attempt now: the run is assigned to it at that attempt.
pub(super) fn holds(run: &RunMem, agent_id: &AgentId, attempt: u32) -> bool {
    run.rec.state == RunState::Assigned
        && run.rec.agent_id == Some(*agent_id)
        && run.rec.attempt == attempt
}

/// The attempt was leased to the agent at some time: it holds it now, lost
/// it, or delivered the result that ended the run.
pub(super) fn was_leased(run: &RunMem, agent_id: &AgentId, attempt: u32) -> bool {
    run.holders
        .iter()
        .any(|(a, n)| a == agent_id && *n == attempt)
}

/// Why an ok result cannot be a sample, if it cannot: every metric value
/// finite and in `0..=MAX_METRIC_VALUE`, every telemetry figure finite and
/// non-negative, and the wall time no longer than the attempt has been
/// leased for (when this process leased it).
pub(super) fn bad_value(res: &RunResult, leased_for: Option<Duration>) -> Option<String> {
    if res.metrics.len() > MAX_METRICS_PER_RESULT {
        return Some(format!(
            "{} metrics; a result carries at most {MAX_METRICS_PER_RESULT}",
            res.metrics.len()
        ));
    }
    let mut names = std::collections::HashSet::with_capacity(res.metrics.len());
    for m in &res.metrics {
        if !names.insert(m.name.as_str()) {
            return Some(format!(
                "metric {} appears twice",
                farm_spec::excerpt(&m.name)
            ));
        }
    }
    for m in &res.metrics {
        let v = m.value;
        let name = farm_spec::excerpt(&m.name);
        if !v.is_finite() || !(0.0..=MAX_METRIC_VALUE).contains(&v) {
            return Some(format!(
                "metric {name} = {}: values must be finite and within 0..={MAX_METRIC_VALUE:e}",
                short(v)
            ));
        }
        if m.name == metric::WALL_S.name
            && let Some(leased) = leased_for
            && v > (leased + WALL_TIME_SLACK).as_secs_f64()
        {
            return Some(format!(
                "metric {name} = {} s, but the run was leased {:.1} s ago",
                short(v),
                leased.as_secs_f64()
            ));
        }
    }
    let t = res.telemetry.as_ref()?;
    let figures = t
        .nodes
        .iter()
        .flat_map(|n| {
            [
                ("avg_threads", n.avg_threads),
                ("avg_runnable", n.avg_runnable),
            ]
        })
        .chain(
            t.wasted_cpu_s_per_node
                .values()
                .map(|v| ("wasted_cpu_s_per_node", *v)),
        )
        .chain(t.instances.iter().flat_map(|i| {
            i.avg_threads
                .values()
                .chain(i.avg_runnable.values())
                .map(|v| ("instance threads per node", *v))
        }))
        .chain([("threads_read_fraction", t.threads_read_fraction)]);
    for (what, v) in figures {
        if !v.is_finite() || v < 0.0 {
            return Some(format!(
                "telemetry {what} = {}: must be finite and ≥ 0",
                short(v)
            ));
        }
    }
    None
}

/// A value as a person reads it: 1e308, not 309 digits.
fn short(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-3..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// `res` turned into the failed result that says why its values were refused.
/// What a stored run holds beside its result: ids, state, attempt, agent.
const RUN_RECORD_OVERHEAD_BYTES: usize = 1024;
/// The most of a refused result's error and log tail kept.
const REFUSED_TEXT_BYTES: usize = 4096;

/// `res`, or its refusal when the run holding it would be larger than
/// the store keeps in one record (`Backend::max_value_bytes`: etcd's
/// request limit): refused here, the one run fails with the reason, where
/// a record too large would fail its whole batch, and again after every
/// failover when its agent sends it anew.
pub(super) fn within(res: RunResult, limit: usize) -> RunResult {
    let size = res.encoded_len() + RUN_RECORD_OVERHEAD_BYTES;
    if size <= limit {
        return res;
    }
    let mut res = refused(
        res,
        format!("it is {size} bytes; the store keeps at most {limit} per run"),
    );
    for text in [&mut res.error, &mut res.log_tail] {
        if text.len() > REFUSED_TEXT_BYTES {
            let mut end = REFUSED_TEXT_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
    }
    res
}

pub(super) fn refused(mut res: RunResult, why: String) -> RunResult {
    res.ok = false;
    res.error = format!("result refused: {why}");
    res.metrics.clear();
    res.telemetry = None;
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_larger_than_a_stored_run_is_refused_and_cut() {
        let mut big = result("wall_s", 1.0);
        big.log_tail = "é".repeat(10_000);
        let size = big.encoded_len() + RUN_RECORD_OVERHEAD_BYTES;
        assert_eq!(within(big.clone(), size), big);
        let cut = within(big, size - 1);
        assert!(!cut.ok);
        assert_eq!(
            cut.error,
            format!(
                "result refused: it is {size} bytes; the store keeps at most {} per run",
                size - 1
            )
        );
        assert!(cut.metrics.is_empty());
        // Cut at a character boundary: 2048 'é' of 2 bytes.
        assert_eq!(cut.log_tail.len(), REFUSED_TEXT_BYTES);
    }
    use farm_proto::{Metric, NodeLoad, Telemetry};

    fn result(name: &str, value: f64) -> RunResult {
        RunResult {
            ok: true,
            metrics: vec![Metric {
                name: name.into(),
                value,
                unit: "s".into(),
                direction: 1,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn values_outside_the_domain_are_named() {
        let cases = [
            (
                f64::NAN,
                "metric wall_s = NaN: values must be finite and within 0..=1e15",
            ),
            (
                f64::INFINITY,
                "metric wall_s = inf: values must be finite and within 0..=1e15",
            ),
            (
                -1.98,
                "metric wall_s = -1.98: values must be finite and within 0..=1e15",
            ),
            (
                1e308,
                "metric wall_s = 1e308: values must be finite and within 0..=1e15",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(bad_value(&result("wall_s", v), None).as_deref(), Some(want));
        }
        assert_eq!(bad_value(&result("wall_s", 0.0), None), None);
        assert_eq!(bad_value(&result("context_switches", 4084.0), None), None);
    }

    #[test]
    fn too_many_or_repeated_metrics_are_refused() {
        let mut r = result("wall_s", 1.0);
        r.metrics.push(r.metrics[0].clone());
        assert_eq!(
            bad_value(&r, None).as_deref(),
            Some("metric wall_s appears twice")
        );
        r.metrics = (0..=MAX_METRICS_PER_RESULT)
            .map(|i| Metric {
                name: format!("m{i}"),
                value: 1.0,
                ..Default::default()
            })
            .collect();
        assert_eq!(
            bad_value(&r, None).as_deref(),
            Some("257 metrics; a result carries at most 256")
        );
        r.metrics.pop();
        assert_eq!(bad_value(&r, None), None);
    }

    #[test]
    fn a_wall_time_longer_than_the_lease_is_refused() {
        let leased = Some(Duration::from_secs(10));
        assert_eq!(bad_value(&result("wall_s", 129.0), leased), None);
        assert_eq!(
            bad_value(&result("wall_s", 131.0), leased).as_deref(),
            Some("metric wall_s = 131 s, but the run was leased 10.0 s ago")
        );
        // Other times are CPU-seconds, which many CPUs make faster than wall time.
        assert_eq!(bad_value(&result("user_s", 131.0), leased), None);
    }

    #[test]
    fn telemetry_figures_are_checked() {
        let mut r = result("wall_s", 1.0);
        r.telemetry = Some(Telemetry {
            nodes: vec![NodeLoad {
                avg_threads: f64::NAN,
                ..Default::default()
            }],
            threads_read_fraction: 1.0,
            ..Default::default()
        });
        assert_eq!(
            bad_value(&r, None).as_deref(),
            Some("telemetry avg_threads = NaN: must be finite and ≥ 0")
        );
        let refused = refused(r, "x".into());
        assert!(!refused.ok);
        assert_eq!(refused.error, "result refused: x");
        assert_eq!(refused.metrics.len(), 0);
    }
}
