//! Prometheus metrics of the coordinator, served at `GET /metrics`
//! ([`crate::server::Coordinator::listen_metrics`]).
//!
//! Fleet: agents connected, runs queued and running, runs ended, how long a
//! run waits for an agent and how long it runs, how long a store commit
//! takes. Results: each series' latest median and its baseline's, and the
//! ratio of every regression of a series' latest matrix.
//!
//! The scheduler thread owns [`Metrics`]; the results gauges are a part of
//! it, [`ResultsGauges`], shared (behind a mutex) with the results worker
//! that computes a matrix's summaries off the scheduler thread. The HTTP
//! endpoint only gathers the [`Registry`], so a scrape never waits for
//! either nor makes them compute. The results gauges are recomputed when a
//! matrix ends and at start-up, with the pure functions of [`series`].
//!
//! Cardinality is bounded: each results family shows at most `series_limit`
//! series (default [`DEFAULT_SERIES_LIMIT`]), those of the newest matrices;
//! `farm_metrics_dropped_series` says how many the cap left out. A series
//! whose latest matrix no longer has it, and a regression its latest matrix
//! no longer shows, are removed, not left at their last value. The fleet
//! gauges are bounded by the fleet itself (arch × executor × kernel).

mod fleet;
pub mod series;

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use farm_proto::{Capabilities, RunCounts};
use prometheus::{GaugeVec, Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};

pub use series::{Ended, Sample};

/// Most series each results family shows.
pub const DEFAULT_SERIES_LIMIT: usize = 10_000;

/// A gauge family whose set of series is replaced as a whole: series not in
/// the new set are removed (no stale values), the others set in place (a
/// scrape never sees the family half empty).
struct Replaced {
    vec: GaugeVec,
    shown: HashSet<Vec<String>>,
}

impl Replaced {
    fn new(registry: &Registry, name: &str, help: &str, labels: &[&str]) -> Replaced {
        let vec = GaugeVec::new(Opts::new(name, help), labels).expect("valid gauge options");
        register(registry, vec.clone());
        Replaced {
            vec,
            shown: HashSet::new(),
        }
    }

    fn replace(&mut self, points: &[series::Point]) {
        let next: HashSet<Vec<String>> = points.iter().map(|(l, _)| l.clone()).collect();
        for gone in self.shown.difference(&next) {
            // Only this owner adds or removes series: it is there.
            let _ = self.vec.remove_label_values(&refs(gone));
        }
        for (labels, value) in points {
            if let Ok(g) = self.vec.get_metric_with_label_values(&refs(labels)) {
                g.set(*value);
            }
        }
        self.shown = next;
    }
}

fn refs(labels: &[String]) -> Vec<&str> {
    labels.iter().map(String::as_str).collect()
}

/// Registering distinct, valid families in a registry of their own cannot
/// fail; a failure is a bug in this file, which the unit tests catch.
fn register(registry: &Registry, c: impl prometheus::core::Collector + 'static) {
    registry
        .register(Box::new(c))
        .expect("metric families are distinct and valid");
}

/// A counter family with one label, registered; each of `known` label
/// values exists (at 0) from the start, so that rate() and absent() work
/// before the first event.
fn counters(
    registry: &Registry,
    name: &str,
    help: &str,
    label: &str,
    known: &[&str],
) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), &[label]).expect("valid counter options");
    register(registry, c.clone());
    for v in known {
        c.with_label_values(&[v]).reset();
    }
    c
}

fn histogram(registry: &Registry, name: &str, help: &str, buckets: &[f64]) -> Histogram {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets.to_vec()))
        .expect("valid histogram options");
    register(registry, h.clone());
    h
}

pub struct Metrics {
    registry: Registry,
    agents_connected: Replaced,
    runs: IntGaugeVec,
    runs_finished: IntCounterVec,
    rejected_messages: IntCounterVec,
    sessions_closed: IntCounterVec,
    executions_skipped: IntCounterVec,
    assignment_latency: Histogram,
    run_duration: Histogram,
    store_commit_latency: Histogram,
    archive_backlog: prometheus::IntGauge,
    archived: prometheus::IntCounter,
    archive_failures: prometheus::IntCounter,
    regression_culprit: Replaced,
    results: ResultsGauges,
}

/// Label names of `farm_regression_culprit`: the regressed cell's series
/// without its metric (a bisection names one culprit whichever primary
/// metrics regressed), its matrix, the bisection and the culprit.
pub const CULPRIT_LABELS: [&str; 7] = [
    "workload",
    "kernel",
    "state",
    "host",
    "matrix",
    "bisection",
    "culprit",
];

/// The results gauges: the part of [`Metrics`] that the results worker
/// writes when a matrix ends. Cheap to clone; every clone is the same
/// gauges.
#[derive(Clone)]
pub struct ResultsGauges {
    state: Arc<Mutex<Results>>,
    refresh: Histogram,
}

struct Results {
    series_median: Replaced,
    series_baseline_median: Replaced,
    regression_ratio: Replaced,
    regression_extra_runs: Replaced,
    regression_diagnosis: Replaced,
    change_ratio: Replaced,
    drift_ratio: Replaced,
    threads_per_node: Replaced,
    runnable_per_node: Replaced,
    dropped: IntGaugeVec,
    series_limit: usize,
    /// The samples of the ended matrices the results gauges still show, by
    /// matrix seq: a new matrix is merged with them, not with all history.
    ended: BTreeMap<u64, Ended>,
}

const SERIES_HELP: &str = "in the metric's own unit (the `metric` label, as `farmctl results` \
     shows it; `wall_s` is seconds)";

impl Metrics {
    pub fn new(series_limit: usize) -> Metrics {
        let registry = Registry::new();
        let agents_connected = Replaced::new(
            &registry,
            "farm_agents_connected",
            "Agents with an open stream, by arch, executor and running kernel; an agent \
             offering several executors counts under each. What the fleet can run now.",
            &["arch", "executor", "kernel"],
        );
        let runs = IntGaugeVec::new(
            Opts::new(
                "farm_runs",
                "Runs waiting for an agent (queued) and being executed (running), over all \
                 matrices. A queue that grows while agents idle means cells no agent satisfies.",
            ),
            &["state"],
        )
        .expect("valid gauge options");
        register(&registry, runs.clone());
        let runs_finished = counters(
            &registry,
            "farm_runs_finished_total",
            "Runs ended since the coordinator started: ok (the workload reported its \
             figures) or failed (it did not, or its agents were lost too often).",
            "outcome",
            &["ok", "failed"],
        );
        let rejected_messages = counters(
            &registry,
            "farm_rejected_messages_total",
            "Messages from agents dropped because they concern an attempt not leased to \
             the agent that sent them (a result, a progress report or a claim in its \
             hello), or carry values outside their metric's domain, or try to take over \
             another agent's live session. Any increase is a misbehaving or hostile agent.",
            "reason",
            &[],
        );
        let sessions_closed = counters(
            &registry,
            "farm_agent_sessions_closed_total",
            "Agents' streams the coordinator ended: lease_expired (silent past its lease) \
             or too_slow (it left scheduler::AGENT_OUTBOX_CAPACITY messages unread). Its \
             run is re-queued; the agent reconnects.",
            "reason",
            &["lease_expired", "too_slow"],
        );
        let executions_skipped = counters(
            &registry,
            "farm_schedule_executions_skipped_total",
            "Executions of continuous matrices not started: previous_running (a cron \
             instant while the schedule's previous execution runs) or rate_limit (a new \
             kernel beyond scheduler::MAX_TRIGGERED_EXECUTIONS_PER_HOUR; it \
             is started at a later catalogue change).",
            "reason",
            &["previous_running", "rate_limit"],
        );
        let assignment_latency = histogram(
            &registry,
            "farm_run_assignment_latency_seconds",
            "Time from a run becoming dispatchable (queued, or re-queued after a lost agent) \
             to its push to an agent: milliseconds when agents are idle, the queue's wait \
             otherwise.",
            &[
                0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
                14400.0,
            ],
        );
        let run_duration = histogram(
            &registry,
            "farm_run_duration_seconds",
            "Time from a run's push to an agent to its result: state changes, telemetry, \
             the workload (and a guest's boot), restore.",
            &[
                0.1, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
                7200.0,
            ],
        );
        let store_commit_latency = histogram(
            &registry,
            "farm_store_commit_latency_seconds",
            "Time to commit one batch of the scheduler's changes to the store (one fsync); \
             every ack and assignment waits for it.",
            &[
                0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            ],
        );
        let archive_backlog = prometheus::IntGauge::new(
            "farm_archive_backlog_matrices",
            "Ended matrices still in live state and memory, waiting to be archived (or \
             being archived). Grows while the archive is unreachable, and falls back when \
             it returns; a schedule's latest execution and its last hour's stay live.",
        )
        .expect("valid gauge options");
        register(&registry, archive_backlog.clone());
        let archived = prometheus::IntCounter::new(
            "farm_archived_matrices_total",
            "Ended matrices moved from live state and memory to the archive since the \
             coordinator started.",
        )
        .expect("valid counter options");
        register(&registry, archived.clone());
        let archive_failures = prometheus::IntCounter::new(
            "farm_archive_failures_total",
            "Attempts to archive an ended matrix, or to read its histories' past for its \
             summaries, that the archive failed (unreachable, timed out, refused); each \
             pauses them for archive::ARCHIVE_RETRY, and the matrix waits in live state.",
        )
        .expect("valid counter options");
        register(&registry, archive_failures.clone());
        let results_refresh = histogram(
            &registry,
            "farm_results_refresh_seconds",
            "Time the results worker spends when a matrix ends: its summaries with every \
             cell's history and change points, and the results gauges. The scheduler \
             thread goes on dispatching and committing meanwhile.",
            &[
                0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ],
        );
        let series_median = Replaced::new(
            &registry,
            "farm_series_median",
            &format!(
                "Median of a metric over a cell's finished runs in the latest ended matrix \
                 of its series (workload with parameters and loads, kernel, state, host \
                 class), {SERIES_HELP}."
            ),
            &series::SERIES_LABELS,
        );
        let series_baseline_median = Replaced::new(
            &registry,
            "farm_series_baseline_median",
            &format!(
                "Median of the same metric in the baseline cell the series' latest matrix \
                 compared it with, {SERIES_HELP}."
            ),
            &series::SERIES_LABELS,
        );
        let mut labels = series::SERIES_LABELS.to_vec();
        labels.push("matrix");
        let change_labels = labels.clone();
        labels.push("found_by");
        let regression_ratio = Replaced::new(
            &registry,
            "farm_regression_ratio",
            "Candidate median / baseline median of a primary metric whose verdict is a \
             regression in the latest ended matrix of its series (the matrix label); \
             or, for a history over matrices and kernels (continuous matrices) that now \
             ends in a worse regime, mean after / mean before its last change point, \
             labelled with the kernel and matrix where it began; or, for a history that \
             drifts the wrong way over its drift window by at least the minimum effect, the \
             fitted level at the window's end / its start, labelled with the first point of \
             the drifting regime. `found_by` says which: baseline, history or drift. Gone \
             once a later matrix no longer regresses. Above 1 is slower for times, below 1 \
             is less throughput.",
            &labels,
        );
        let regression_extra_runs = Replaced::new(
            &registry,
            "farm_regression_extra_runs",
            "Runs a side added to a regressed cell and its baseline beyond the matrix's \
             repetitions because their first comparison was inconclusive: above 0, \
             adaptive reruns confirmed the regression (labels as farm_regression_ratio).",
            &labels,
        );
        let mut diagnosis_labels = labels.clone();
        diagnosis_labels.push("diagnosis");
        let regression_diagnosis = Replaced::new(
            &registry,
            "farm_regression_diagnosis",
            "Why a regression of farm_regression_ratio happened, in scheduler terms (the \
             telemetry that moved with it, strongest first: migrations, IPIs, placement, \
             domains) in the `diagnosis` label; always 1. One series per regression.",
            &diagnosis_labels,
        );
        let change_ratio = Replaced::new(
            &registry,
            "farm_series_change_ratio",
            "Every change point of a metric's history over matrices and kernels (as the \
             history's newest matrix left it): mean after / mean before, labelled with the \
             kernel and matrix of the first point after the change. Annotations on trends.",
            &change_labels,
        );
        let drift_ratio = Replaced::new(
            &registry,
            "farm_series_drift_ratio",
            "A metric's history over matrices and kernels that moves steadily over its \
             last points since its last change point (the matrix's [verdict] drift_window, \
             30 by default; the slope's 95% interval, allowing for correlated noise, \
             excludes zero): the fitted level at the window's end / at its start, as the \
             history's newest matrix left it. Absent when the history does not drift.",
            &series::SERIES_LABELS,
        );
        let threads_per_node = Replaced::new(
            &registry,
            "farm_series_threads_per_node",
            "Average threads of the workload on a NUMA node over the representative run \
             (the one whose figures are the cell's medians) of the series' latest matrix; \
             more threads than the node's CPUs is an overcommitted node.",
            &series::NODE_LABELS,
        );
        let runnable_per_node = Replaced::new(
            &registry,
            "farm_series_runnable_threads_per_node",
            "Average runnable (running or waiting to run) threads of the workload on a NUMA \
             node over the same run as farm_series_threads_per_node.",
            &series::NODE_LABELS,
        );
        let dropped = IntGaugeVec::new(
            Opts::new(
                "farm_metrics_dropped_series",
                "Series a results family leaves out because of its cap (the oldest \
                 matrices' first); raise --metrics-series-limit if this is not 0.",
            ),
            &["family"],
        )
        .expect("valid gauge options");
        register(&registry, dropped.clone());
        // Every label value known in advance exists from the start, so that
        // rate() and absent() work before the first event.
        for state in ["queued", "running"] {
            runs.with_label_values(&[state]).set(0);
        }
        for family in FAMILIES {
            dropped.with_label_values(&[family]).set(0);
        }
        let regression_culprit = Replaced::new(
            &registry,
            "farm_regression_culprit",
            "The first bad commit a bisection confirmed for the regression of a cell (its \
             series labels without the metric, and its matrix), in the `culprit` label: the \
             commit's first 12 digits and its subject, or the kernel where no git range was \
             listed; always 1. FarmRegressionDetected takes the label, so the regression's \
             alert names the culprit once it is known.",
            &CULPRIT_LABELS,
        );
        let results = Results {
            series_median,
            series_baseline_median,
            regression_ratio,
            regression_extra_runs,
            regression_diagnosis,
            change_ratio,
            drift_ratio,
            threads_per_node,
            runnable_per_node,
            dropped,
            series_limit,
            ended: BTreeMap::new(),
        };
        Metrics {
            registry,
            agents_connected,
            runs,
            runs_finished,
            rejected_messages,
            sessions_closed,
            executions_skipped,
            assignment_latency,
            run_duration,
            store_commit_latency,
            archive_backlog,
            archived,
            archive_failures,
            regression_culprit,
            results: ResultsGauges {
                state: Arc::new(Mutex::new(results)),
                refresh: results_refresh,
            },
        }
    }

    /// What the HTTP endpoint gathers; cheap to clone, shared with the owner.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// A queued run was pushed to an agent after waiting `waited`.
    pub fn run_assigned(&self, waited: Duration) {
        self.assignment_latency.observe(waited.as_secs_f64());
    }

    /// A run ended, `ran` after its push when this process pushed it.
    pub fn run_ended(&self, ok: bool, ran: Option<Duration>) {
        let outcome = if ok { "ok" } else { "failed" };
        self.runs_finished.with_label_values(&[outcome]).inc();
        if let Some(d) = ran {
            self.run_duration.observe(d.as_secs_f64());
        }
    }

    /// A message of an agent was dropped for `reason` (`scheduler::provenance`).
    pub fn message_rejected(&self, reason: &str) {
        self.rejected_messages.with_label_values(&[reason]).inc();
    }

    /// The coordinator ended an agent's stream for `reason` (`scheduler::outbox`).
    pub fn session_closed(&self, reason: &str) {
        self.sessions_closed.with_label_values(&[reason]).inc();
    }

    /// `n` executions of a schedule were not started, for `reason`
    /// (`scheduler::continuous`).
    pub fn execution_skipped(&self, reason: &str, n: u64) {
        self.executions_skipped
            .with_label_values(&[reason])
            .inc_by(n);
    }

    pub fn archive_backlog(&self, matrices: usize) {
        self.archive_backlog.set(matrices as i64);
    }

    pub fn matrix_archived(&self) {
        self.archived.inc();
    }

    pub fn archive_failed(&self) {
        self.archive_failures.inc();
    }

    /// The results gauges, for the thread that computes summaries.
    pub fn results_gauges(&self) -> ResultsGauges {
        self.results.clone()
    }

    pub fn store_committed(&self, took: Duration) {
        self.store_commit_latency.observe(took.as_secs_f64());
    }

    /// A matrix's run counts went from `old` to `new` (either may be unset).
    pub fn run_counts_changed(&self, old: Option<&RunCounts>, new: Option<&RunCounts>) {
        let get = |c: Option<&RunCounts>| c.map_or((0, 0), |c| (c.queued, c.running));
        let ((oq, or), (nq, nr)) = (get(old), get(new));
        for (state, o, n) in [("queued", oq, nq), ("running", or, nr)] {
            let delta = i64::from(n) - i64::from(o);
            if delta != 0 {
                self.runs.with_label_values(&[state]).add(delta);
            }
        }
    }

    /// The connected agents, all of them.
    pub fn set_agents_connected<'a>(
        &mut self,
        connected: impl IntoIterator<Item = &'a Capabilities>,
    ) {
        self.agents_connected
            .replace(&fleet::agents_connected(connected));
    }

    /// A matrix ended (done, not cancelled): its series' latest points.
    pub fn matrix_ended(&mut self, ended: Ended) {
        self.results.matrix_ended(ended);
    }

    /// Start-up: the ended matrices that may be the latest of a series.
    pub fn recovered(&mut self, ended: impl IntoIterator<Item = Ended>) {
        self.results.recovered(ended);
    }

    /// The seqs of the ended matrices the results gauges show.
    pub fn shown_matrices(&self) -> BTreeSet<u64> {
        self.results.shown()
    }

    /// The culprits confirmed bisections found (labels [`CULPRIT_LABELS`]).
    pub fn set_culprits(&mut self, culprits: &[Vec<String>]) {
        let points: Vec<series::Point> = culprits.iter().map(|l| (l.clone(), 1.0)).collect();
        self.regression_culprit.replace(&points);
    }
}

impl ResultsGauges {
    /// A matrix ended (done, not cancelled): its series' latest points.
    pub fn matrix_ended(&self, ended: Ended) {
        let mut r = self.lock();
        r.ended.insert(ended.seq, ended);
        r.refresh();
    }

    /// Start-up: the ended matrices that may be the latest of a series.
    pub fn recovered(&self, ended: impl IntoIterator<Item = Ended>) {
        let mut r = self.lock();
        r.ended.extend(ended.into_iter().map(|e| (e.seq, e)));
        r.refresh();
    }

    /// The seqs of the ended matrices the gauges show now: what a restart
    /// shows them from, so those matrices stay live (`archive`). At most
    /// the series limit per family.
    pub fn shown(&self) -> BTreeSet<u64> {
        self.lock().ended.keys().copied().collect()
    }

    /// A matrix's end took `took` (summaries, gauges).
    pub fn refreshed(&self, took: Duration) {
        self.refresh.observe(took.as_secs_f64());
    }

    /// A writer that panicked leaves at worst a family half replaced,
    /// which the next refresh replaces whole: the gauges stay usable.
    fn lock(&self) -> std::sync::MutexGuard<'_, Results> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Results {
    fn refresh(&mut self) {
        let sel = series::select(self.ended.values(), self.series_limit);
        self.series_median.replace(&sel.median);
        self.series_baseline_median.replace(&sel.baseline_median);
        self.regression_ratio.replace(&sel.regression_ratio);
        self.regression_extra_runs
            .replace(&sel.regression_extra_runs);
        self.change_ratio.replace(&sel.change_ratio);
        self.drift_ratio.replace(&sel.drift_ratio);
        self.regression_diagnosis.replace(&sel.regression_diagnosis);
        self.threads_per_node.replace(&sel.threads_per_node);
        self.runnable_per_node.replace(&sel.runnable_per_node);
        for (family, n) in FAMILIES.iter().zip(sel.dropped) {
            self.dropped
                .with_label_values(&[*family])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        // A matrix that shows nothing now never will again: newer matrices
        // only take series away from it.
        self.ended.retain(|seq, _| sel.shown.contains(seq));
    }
}

/// The results families, in the order of `series::Selection::dropped`.
const FAMILIES: [&str; 6] = [
    "farm_series_median",
    "farm_series_baseline_median",
    "farm_regression_ratio",
    "farm_series_threads_per_node",
    "farm_series_change_ratio",
    "farm_series_drift_ratio",
];

#[cfg(test)]
mod tests;
