use farm_proto::RunCounts;
use prometheus::TextEncoder;

use super::*;

fn text(m: &Metrics) -> String {
    TextEncoder::new()
        .encode_to_string(&m.registry().gather())
        .unwrap()
}

fn series(workload: &str) -> series::Series {
    series::Series {
        workload: workload.into(),
        metric: "wall_s".into(),
        kernel: "running".into(),
        state: "default".into(),
        host: "any".into(),
        new_kernel: false,
        history_class: "",
    }
}

fn ended(seq: u64, workloads: &[(&str, Option<f64>)]) -> Ended {
    Ended {
        seq,
        matrix_id: format!("m{seq}"),
        placement: Vec::new(),
        samples: workloads
            .iter()
            .map(|(w, ratio)| Sample {
                series: series(w),
                median: 2.0,
                baseline_median: ratio.map(|r| 2.0 / r),
                regression_ratio: *ratio,
                extra_runs: 0,
                changes: Vec::new(),
                change_regression: None,
                drift_ratio: None,
                drift_regression: None,
                diagnosis: Vec::new(),
            })
            .collect(),
    }
}

#[test]
fn every_family_is_registered_with_help_and_known_labels_exist() {
    let mut m = Metrics::new(DEFAULT_SERIES_LIMIT);
    // Families without a series are not exposed: give each one.
    m.set_agents_connected([&Capabilities::default()]);
    let mut e = ended(1, &[("a", Some(1.5))]);
    e.samples[0].changes.push(series::Change {
        kernel: "k".into(),
        matrix_id: "m0".into(),
        ratio: 1.5,
    });
    m.recovered([e]);
    let t = text(&m);
    for line in [
        "farm_runs{state=\"queued\"} 0",
        "farm_runs_finished_total{outcome=\"failed\"} 0",
        "farm_agent_sessions_closed_total{reason=\"too_slow\"} 0",
        "farm_schedule_executions_skipped_total{reason=\"rate_limit\"} 0",
        "farm_metrics_dropped_series{family=\"farm_regression_ratio\"} 0",
        "# TYPE farm_run_assignment_latency_seconds histogram",
        "# TYPE farm_store_commit_latency_seconds histogram",
        "farm_archive_backlog_matrices 0",
        "farm_archived_matrices_total 0",
        "farm_archive_failures_total 0",
    ] {
        assert!(t.contains(line), "{line} missing from:\n{t}");
    }
    let types: Vec<&str> = t
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(types.len(), 19, "{t}");
    for name in types {
        assert!(name.starts_with("farm_"), "{name}");
        let help = t
            .lines()
            .find_map(|l| l.strip_prefix(&format!("# HELP {name} ")));
        assert!(help.is_some_and(|h| h.len() > 40), "{name}: {help:?}");
    }
}

#[test]
fn run_counts_follow_the_changes_of_each_matrix() {
    let m = Metrics::new(10);
    let c = |queued, running| RunCounts {
        queued,
        running,
        ..Default::default()
    };
    m.run_counts_changed(None, Some(&c(10, 0)));
    m.run_counts_changed(None, Some(&c(4, 0)));
    m.run_counts_changed(Some(&c(10, 0)), Some(&c(8, 2)));
    let t = text(&m);
    assert!(t.contains("farm_runs{state=\"queued\"} 12"), "{t}");
    assert!(t.contains("farm_runs{state=\"running\"} 2"), "{t}");
    m.run_counts_changed(Some(&c(8, 2)), Some(&c(0, 0)));
    m.run_counts_changed(Some(&c(4, 0)), Some(&c(0, 0)));
    let t = text(&m);
    assert!(t.contains("farm_runs{state=\"queued\"} 0"), "{t}");
    assert!(t.contains("farm_runs{state=\"running\"} 0"), "{t}");
}

#[test]
fn stale_results_series_are_removed_and_the_cap_is_reported() {
    let mut m = Metrics::new(2);
    m.recovered([ended(1, &[("a", Some(1.5)), ("b", None)])]);
    let t = text(&m);
    assert!(t.contains("farm_regression_ratio{"), "{t}");
    assert!(t.contains("matrix=\"m1\""), "{t}");
    assert!(t.contains("workload=\"b\""), "{t}");
    // Matrix 2 fixes `a` and brings two new series: the cap of 2 keeps
    // matrix 2's, drops `b`, and the fixed regression is gone.
    m.matrix_ended(ended(2, &[("a", None), ("c", None)]));
    let t = text(&m);
    assert!(!t.contains("farm_regression_ratio{"), "{t}");
    assert!(!t.contains("farm_series_baseline_median{"), "{t}");
    assert!(!t.contains("workload=\"b\""), "{t}");
    assert!(
        t.contains("farm_metrics_dropped_series{family=\"farm_series_median\"} 1"),
        "{t}"
    );
    // Matrix 1 shows nothing any more and is forgotten.
    assert_eq!(
        m.results.lock().ended.keys().copied().collect::<Vec<_>>(),
        [2]
    );
}

#[test]
fn agents_connected_is_replaced_as_a_whole() {
    let mut m = Metrics::new(10);
    let caps = |kernel: &str| Capabilities {
        arch: "x86_64".into(),
        kernel_release: kernel.into(),
        executors: vec!["host".into()],
        ..Default::default()
    };
    let (a, b) = (caps("6.1"), caps("6.6"));
    m.set_agents_connected([&a, &b, &b]);
    let t = text(&m);
    assert!(
        t.contains("farm_agents_connected{arch=\"x86_64\",executor=\"host\",kernel=\"6.6\"} 2"),
        "{t}"
    );
    m.set_agents_connected([&b]);
    let t = text(&m);
    assert!(!t.contains("kernel=\"6.1\""), "{t}");
    assert!(t.contains("kernel=\"6.6\"} 1"), "{t}");
}
