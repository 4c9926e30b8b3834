//! The agent's own Prometheus metrics, served at `GET /metrics` when the
//! agent is started with `--metrics-listen`: what this machine ran and how,
//! beside the coordinator's fleet-wide view. Label values are bounded: an
//! outcome is `ok` or `failed`; an executor and arch are the few this agent
//! has; the placement of a run is shown for the latest run only (its id a
//! label), so that Prometheus keeps it run by run while the endpoint holds
//! one run's nodes.

use farm_proto::RunResult;
use prometheus::{GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry};

pub struct Metrics {
    registry: Registry,
    runs: IntCounterVec,
    run_duration: HistogramVec,
    guest_start: HistogramVec,
    running: IntGauge,
    connected: IntGauge,
    threads_per_node: GaugeVec,
    runnable_per_node: GaugeVec,
}

/// Runs last from a second to hours.
const DURATION_BUCKETS: &[f64] = &[
    0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
];
/// A guest starts in 3–4 s warm under TCG, 10–20 s cold (docs/BENCHMARKS.md).
const GUEST_START_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0];

fn register<C: prometheus::core::Collector + Clone + 'static>(r: &Registry, c: &C) {
    r.register(Box::new(c.clone()))
        .expect("each metric is registered once, under a unique name");
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let runs = IntCounterVec::new(
            Opts::new(
                "farm_agent_runs_total",
                "Runs this agent finished, by outcome (ok, failed) and executor (host, tcg, kvm).",
            ),
            &["outcome", "executor"],
        )
        .expect("valid counter options");
        let run_duration = HistogramVec::new(
            HistogramOpts::new(
                "farm_agent_run_duration_seconds",
                "From a run's start on this agent to its result: state, workload, telemetry, \
                 restore (and a guest's boot), by executor.",
            )
            .buckets(DURATION_BUCKETS.to_vec()),
            &["executor"],
        )
        .expect("valid histogram options");
        let guest_start = HistogramVec::new(
            HistogramOpts::new(
                "farm_agent_guest_start_seconds",
                "From a guest run's assignment to its workload's start (kernel, image, boot, \
                 state), by guest arch and accelerator.",
            )
            .buckets(GUEST_START_BUCKETS.to_vec()),
            &["arch", "executor"],
        )
        .expect("valid histogram options");
        let running = IntGauge::new(
            "farm_agent_running",
            "1 while a run is in progress here (one at a time: runs would disturb each other).",
        )
        .expect("valid gauge options");
        let connected = IntGauge::new(
            "farm_agent_connected",
            "1 while the agent's stream to the coordinator is open.",
        )
        .expect("valid gauge options");
        let threads_per_node = GaugeVec::new(
            Opts::new(
                "farm_agent_run_threads_per_node",
                "Average threads of the workload on each NUMA node over the latest run here \
                 (the run label; the previous run's series are removed): NUMA placement run \
                 by run.",
            ),
            &["run", "node"],
        )
        .expect("valid gauge options");
        let runnable_per_node = GaugeVec::new(
            Opts::new(
                "farm_agent_run_runnable_threads_per_node",
                "Average runnable (running or waiting to run) threads of the workload on each \
                 NUMA node over the latest run here.",
            ),
            &["run", "node"],
        )
        .expect("valid gauge options");
        register(&registry, &threads_per_node);
        register(&registry, &runnable_per_node);
        register(&registry, &runs);
        register(&registry, &run_duration);
        register(&registry, &guest_start);
        register(&registry, &running);
        register(&registry, &connected);
        // The outcomes exist from the start, so that rate() works at once.
        for outcome in ["ok", "failed"] {
            runs.with_label_values(&[outcome, farm_spec::Executor::Host.as_str()])
                .reset();
        }
        Metrics {
            registry,
            runs,
            run_duration,
            guest_start,
            running,
            connected,
            threads_per_node,
            runnable_per_node,
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub fn run_started(&self) {
        self.running.set(1);
    }

    /// A run's result, `elapsed` after it started here.
    pub fn run_finished(&self, result: &RunResult, elapsed: std::time::Duration) {
        self.running.set(0);
        let executor = executor_label(&result.executor);
        let outcome = if result.ok { "ok" } else { "failed" };
        self.runs.with_label_values(&[outcome, executor]).inc();
        self.run_duration
            .with_label_values(&[executor])
            .observe(elapsed.as_secs_f64());
        // The latest run's placement only, or none when it has none.
        self.threads_per_node.reset();
        self.runnable_per_node.reset();
        if let (Some(t), Some(run)) = (&result.telemetry, &result.run) {
            for n in &t.nodes {
                let labels = [run.run_id.as_str(), &n.node.to_string()];
                self.threads_per_node
                    .with_label_values(&labels)
                    .set(n.avg_threads);
                self.runnable_per_node
                    .with_label_values(&labels)
                    .set(n.avg_runnable);
            }
        }
        if let Some(m) = result
            .metrics
            .iter()
            .find(|m| m.name == farm_spec::metric::GUEST_START_S.name)
        {
            // One of the few known arches, so that a result cannot grow the
            // label set.
            let arch = result
                .arch
                .parse::<farm_spec::Arch>()
                .map_or("other", farm_spec::Arch::uname);
            self.guest_start
                .with_label_values(&[arch, executor])
                .observe(m.value);
        }
    }

    pub fn set_connected(&self, up: bool) {
        self.connected.set(i64::from(up));
    }
}

/// The executor as a label: one of the few known, so that a result cannot
/// grow the label set (a refused run has none).
fn executor_label(executor: &str) -> &'static str {
    executor
        .parse::<farm_spec::Executor>()
        .map_or("none", farm_spec::Executor::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_proto::{Direction, Metric};
    use prometheus::TextEncoder;

    fn text(m: &Metrics) -> String {
        TextEncoder::new()
            .encode_to_string(&m.registry().gather())
            .unwrap()
    }

    #[test]
    fn runs_are_counted_by_outcome_and_executor_and_guest_starts_by_arch() {
        let m = Metrics::new();
        m.set_connected(true);
        m.run_started();
        assert!(text(&m).contains("farm_agent_running 1"));
        let guest = RunResult {
            ok: true,
            executor: "tcg".into(),
            arch: "s390x".into(),
            metrics: vec![Metric {
                name: "guest_start_s".into(),
                value: 3.6,
                unit: "s".into(),
                direction: Direction::LowerIsBetter as i32,
            }],
            ..Default::default()
        };
        m.run_finished(&guest, std::time::Duration::from_secs(9));
        // A refused assignment: no executor, and an executor no agent has.
        m.run_finished(&RunResult::default(), std::time::Duration::ZERO);
        m.run_finished(
            &RunResult {
                executor: "x\"}".into(),
                ..Default::default()
            },
            std::time::Duration::ZERO,
        );
        let t = text(&m);
        for line in [
            "farm_agent_running 0",
            "farm_agent_connected 1",
            "farm_agent_runs_total{executor=\"host\",outcome=\"ok\"} 0",
            "farm_agent_runs_total{executor=\"tcg\",outcome=\"ok\"} 1",
            "farm_agent_runs_total{executor=\"none\",outcome=\"failed\"} 2",
            "farm_agent_guest_start_seconds_count{arch=\"s390x\",executor=\"tcg\"} 1",
            "farm_agent_run_duration_seconds_count{executor=\"tcg\"} 1",
        ] {
            assert!(t.contains(line), "{line} missing from:\n{t}");
        }
    }

    #[test]
    fn placement_is_the_latest_runs_only() {
        let m = Metrics::new();
        let run = |id: &str, threads: &[f64]| RunResult {
            ok: true,
            run: Some(farm_proto::RunRef {
                run_id: id.into(),
                attempt: 1,
            }),
            telemetry: Some(farm_proto::Telemetry {
                nodes: threads
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| farm_proto::NodeLoad {
                        node: i as u32,
                        avg_threads: t,
                        avg_runnable: t / 2.0,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        m.run_finished(&run("m-1.c0.r0", &[2.0, 0.0]), std::time::Duration::ZERO);
        m.run_finished(&run("m-1.c1.r0", &[1.0, 1.0]), std::time::Duration::ZERO);
        let t = text(&m);
        assert!(!t.contains("m-1.c0.r0"), "{t}");
        for line in [
            "farm_agent_run_threads_per_node{node=\"0\",run=\"m-1.c1.r0\"} 1",
            "farm_agent_run_threads_per_node{node=\"1\",run=\"m-1.c1.r0\"} 1",
            "farm_agent_run_runnable_threads_per_node{node=\"1\",run=\"m-1.c1.r0\"} 0.5",
        ] {
            assert!(t.contains(line), "{line} missing from:\n{t}");
        }
    }
}
