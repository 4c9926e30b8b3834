use farm_proto::{HostSelector, MachineState, MetricSummary, Param, Workload};

use super::*;

/// A cell as the wire has it, converted as it enters the coordinator.
fn cell(index: u32, threads: i64, kernel: &str) -> Cell {
    Cell::try_from(&farm_proto::Cell {
        index,
        kernel: kernel.into(),
        workload: Some(Workload {
            name: "lu".into(),
            params: vec![
                Param {
                    name: "size".into(),
                    value: Some(param::Value::Int(24)),
                },
                Param {
                    name: "threads".into(),
                    value: Some(param::Value::Int(threads)),
                },
            ],
        }),
        state: Some(MachineState {
            name: "default".into(),
            ..Default::default()
        }),
        host: Some(HostSelector {
            name: "any".into(),
            ..Default::default()
        }),
        ..Default::default()
    })
    .unwrap()
}

fn metric(name: &str, median: f64, ratio: Option<f64>, verdict: Verdict) -> MetricSummary {
    MetricSummary {
        name: name.into(),
        median,
        baseline_median: ratio.map(|r| median / r),
        ratio,
        verdict: verdict as i32,
        n: 5,
        ..Default::default()
    }
}

fn sample(workload: &str, metric: &str, median: f64, ratio: Option<f64>) -> Sample {
    Sample {
        series: Series {
            workload: workload.into(),
            metric: metric.into(),
            kernel: "running".into(),
            state: "default".into(),
            host: "any".into(),
            new_kernel: false,
            // `running`'s: its history is the host's own.
            history_class: "",
        },
        median,
        baseline_median: ratio.map(|r| median / r),
        regression_ratio: ratio,
        extra_runs: 0,
        changes: Vec::new(),
        change_regression: None,
        drift_ratio: None,
        drift_regression: None,
        diagnosis: Vec::new(),
    }
}

fn ended(seq: u64, samples: Vec<Sample>) -> Ended {
    Ended {
        seq,
        matrix_id: format!("m{seq}"),
        samples,
        placement: Vec::new(),
    }
}

#[test]
fn samples_name_the_series_and_keep_ratios_of_primary_regressions_only() {
    let cells = vec![cell(0, 1, "running"), cell(1, 2, "running")];
    let summaries = vec![
        CellSummary {
            cell_index: 0,
            metrics: vec![metric("wall_s", 1.0, None, Verdict::Unspecified)],
            ..Default::default()
        },
        CellSummary {
            cell_index: 1,
            metrics: vec![
                metric("wall_s", 2.0, Some(2.0), Verdict::Regression),
                // Telemetry: shown, but explains rather than judges.
                metric("cpu_migrations", 90.0, Some(3.0), Verdict::Regression),
                metric("hog_ops_per_s", 5.0, Some(1.0), Verdict::NoChange),
                // Per-instance figures would make cardinality grow with instances.
                metric("instance3_triad_mbs", 7.0, None, Verdict::Unspecified),
                metric("user_s", f64::NAN, None, Verdict::Unspecified),
            ],
            ..Default::default()
        },
    ];
    let s = samples(&cells, &summaries);
    let names: Vec<&str> = s.iter().map(|x| x.series.metric.as_str()).collect();
    assert_eq!(
        names,
        ["wall_s", "wall_s", "cpu_migrations", "hog_ops_per_s"]
    );
    assert_eq!(s[0].series.workload, "lu(size=24,threads=1)");
    assert_eq!(s[0].series.state, "default");
    assert_eq!(s[0].series.host, "any");
    assert_eq!(s[0].baseline_median, None);
    assert_eq!(s[1].regression_ratio, Some(2.0));
    assert_eq!(s[1].baseline_median, Some(1.0));
    assert_eq!(s[2].regression_ratio, None);
    assert_eq!(s[2].baseline_median, Some(30.0));
    assert_eq!(s[3].regression_ratio, None);
}

#[test]
fn loads_are_part_of_the_workload_label() {
    let mut c = cell(0, 2, "running");
    c.loads = vec![Workload {
        name: "cpu-hog".into(),
        params: vec![Param {
            name: "seconds".into(),
            value: Some(param::Value::Float(0.5)),
        }],
    }];
    assert_eq!(
        workload_label(&c),
        "lu(size=24,threads=2) + cpu-hog(seconds=0.5)"
    );
}

#[test]
fn the_newest_matrix_of_a_series_wins_and_stale_series_go() {
    let old = ended(
        1,
        vec![
            sample("lu", "wall_s", 2.0, Some(2.0)),
            sample("hog", "wall_s", 1.0, None),
        ],
    );
    // The regression is fixed in the newer matrix: its gauge must go.
    let new = ended(2, vec![sample("lu", "wall_s", 1.0, None)]);
    let sel = select([&old, &new], 100);
    assert_eq!(
        sel.median,
        vec![
            (sample("lu", "wall_s", 0.0, None).series.labels(), 1.0),
            (sample("hog", "wall_s", 0.0, None).series.labels(), 1.0),
        ]
    );
    assert!(sel.regression_ratio.is_empty(), "{sel:?}");
    assert!(sel.baseline_median.is_empty(), "{sel:?}");
    assert_eq!(sel.shown, BTreeSet::from([1, 2]));
    assert_eq!(sel.dropped, [0, 0, 0, 0, 0, 0]);
}

#[test]
fn a_regression_in_the_latest_matrix_is_a_ratio_labelled_with_its_matrix() {
    let old = ended(1, vec![sample("lu", "wall_s", 1.0, None)]);
    let new = ended(
        7,
        vec![Sample {
            extra_runs: 10,
            ..sample("lu", "wall_s", 1.5, Some(1.5))
        }],
    );
    let sel = select([&new, &old], 100);
    let mut labels = sample("lu", "wall_s", 0.0, None).series.labels();
    labels.push("m7".into());
    labels.push("baseline".into());
    assert_eq!(sel.regression_ratio, vec![(labels.clone(), 1.5)]);
    // The reruns that confirmed it, under the same labels.
    assert_eq!(sel.regression_extra_runs, vec![(labels.clone(), 10.0)]);
    let mut with_diagnosis = labels;
    with_diagnosis.push("no scheduler telemetry moved with it".into());
    assert_eq!(sel.regression_diagnosis, vec![(with_diagnosis, 1.0)]);
    assert_eq!(sel.baseline_median.len(), 1);
    assert_eq!(sel.median.len(), 1);
    // Matrix 1 shows nothing any more: it may be forgotten.
    assert_eq!(sel.shown, BTreeSet::from([7]));
}

#[test]
fn the_cap_keeps_the_newest_matrices_and_counts_what_it_drops() {
    let matrices: Vec<Ended> = (0..5)
        .map(|seq| {
            ended(
                seq,
                (0..3)
                    .map(|i| sample(&format!("w{seq}.{i}"), "wall_s", 1.0, Some(1.2)))
                    .collect(),
            )
        })
        .collect();
    let sel = select(&matrices, 7);
    assert_eq!(sel.median.len(), 7);
    assert_eq!(sel.regression_ratio.len(), 7);
    assert_eq!(sel.regression_extra_runs.len(), 7);
    assert_eq!(sel.dropped, [8, 8, 8, 0, 0, 0]);
    // Matrices 4 and 3 whole, then the first cell of matrix 2.
    let workloads: Vec<&str> = sel.median.iter().map(|(l, _)| l[0].as_str()).collect();
    assert_eq!(
        workloads,
        ["w4.0", "w4.1", "w4.2", "w3.0", "w3.1", "w3.2", "w2.0"]
    );
    assert_eq!(sel.shown, BTreeSet::from([2, 3, 4]));
    assert_eq!(
        select(&matrices, 0),
        Selection {
            dropped: [15, 15, 15, 0, 0, 0],
            ..Default::default()
        }
    );
}

#[test]
fn placement_comes_from_each_cells_newest_matrix() {
    let node = |workload: &str, node: u32, threads: f64| NodeSample {
        series: Series {
            workload: workload.into(),
            metric: String::new(),
            kernel: "running".into(),
            state: "default".into(),
            host: "any".into(),
            new_kernel: false,
            // `running`'s: its history is the host's own.
            history_class: "",
        },
        node,
        threads,
        runnable: threads / 2.0,
    };
    let old = Ended {
        placement: vec![
            node("lu", 0, 9.0),
            node("lu", 1, 9.0),
            node("stream", 0, 4.0),
        ],
        ..ended(1, vec![])
    };
    let new = Ended {
        placement: vec![node("lu", 0, 27.0), node("lu", 1, 3.0)],
        ..ended(2, vec![])
    };
    let sel = select([&old, &new], 100);
    let labels = |w: &str, n: &str| -> Vec<String> {
        [w, "running", "default", "any", n]
            .map(String::from)
            .to_vec()
    };
    assert_eq!(
        sel.threads_per_node,
        vec![
            (labels("lu", "0"), 27.0),
            (labels("lu", "1"), 3.0),
            (labels("stream", "0"), 4.0),
        ]
    );
    assert_eq!(sel.runnable_per_node[0], (labels("lu", "0"), 13.5));
    // The cap counts nodes.
    let sel = select([&old, &new], 2);
    assert_eq!(sel.threads_per_node.len(), 2);
    assert_eq!(sel.runnable_per_node.len(), 2);
    assert_eq!(sel.dropped[3], 1);
}

#[test]
fn a_history_ending_worse_is_a_regression_until_its_newest_point_says_otherwise() {
    let on = |kernel: &str, median: f64| Sample {
        series: Series {
            kernel: kernel.into(),
            ..sample("lu", "wall_s", median, None).series
        },
        ..sample("lu", "wall_s", median, None)
    };
    let step = Change {
        kernel: "6.13-rc3".into(),
        matrix_id: "m3".into(),
        ratio: 1.4,
    };
    // Kernel rc9's execution found the history stepping up at rc3.
    let found = ended(
        9,
        vec![Sample {
            changes: vec![step.clone()],
            change_regression: Some(step.clone()),
            ..on("6.13-rc9", 1.4)
        }],
    );
    let sel = select([&found], 100);
    let labels = |kernel: &str, matrix: &str| {
        let mut l = on(kernel, 0.0).series.labels();
        l.push(matrix.into());
        l
    };
    let mut found_by = labels("6.13-rc3", "m3");
    found_by.push("history".into());
    assert_eq!(sel.regression_ratio, vec![(found_by.clone(), 1.4)]);
    assert_eq!(sel.regression_extra_runs, vec![(found_by.clone(), 0.0)]);
    assert_eq!(sel.change_ratio, vec![(labels("6.13-rc3", "m3"), 1.4)]);
    let d = &sel.regression_diagnosis[0].0;
    assert_eq!(d[..7], found_by[..]);
    assert_eq!(d[7], "the series' history: a worse regime since 6.13-rc3");
    // rc10 fixed it: a second change point, back down; the history's newest
    // point no longer ends worse, though rc9's series still holds its sample.
    let back = Change {
        kernel: "6.13-rc10".into(),
        matrix_id: "m10".into(),
        ratio: 0.7,
    };
    let fixed = ended(
        10,
        vec![Sample {
            changes: vec![step, back],
            ..on("6.13-rc10", 1.0)
        }],
    );
    let sel = select([&found, &fixed], 100);
    assert!(
        sel.regression_ratio.is_empty(),
        "{:?}",
        sel.regression_ratio
    );
    assert_eq!(
        sel.change_ratio,
        vec![
            (labels("6.13-rc3", "m3"), 1.4),
            (labels("6.13-rc10", "m10"), 0.7)
        ]
    );
    // Both kernels' medians are still their series' latest.
    assert_eq!(sel.median.len(), 2);
}

#[test]
fn a_triggers_new_kernels_trend_apart_from_the_files_fixed_kernel() {
    // One execution: the file's reference kernel and the new image, both
    // with histories; each history's changes are shown.
    let cell = |kernel: &str, new_kernel: bool, change: &str| Sample {
        series: Series {
            kernel: kernel.into(),
            new_kernel,
            ..sample("lu", "wall_s", 1.0, None).series
        },
        changes: vec![Change {
            kernel: change.into(),
            matrix_id: "m5".into(),
            ratio: 1.3,
        }],
        ..sample("lu", "wall_s", 1.0, None)
    };
    let e = ended(
        9,
        vec![
            cell("debian:6.1.0-47-amd64", false, "debian:6.1.0-47-amd64"),
            cell("file:/k/rc9", true, "file:/k/rc5"),
        ],
    );
    let sel = select([&e], 100);
    let kernels: Vec<&str> = sel
        .change_ratio
        .iter()
        .map(|(l, _)| l[2].as_str())
        .collect();
    assert_eq!(kernels, ["debian:6.1.0-47-amd64", "file:/k/rc5"]);
}

#[test]
fn a_drifting_history_shows_its_ratio_and_a_drift_regression() {
    let drift = Change {
        kernel: "6.12".into(),
        matrix_id: "m1".into(),
        ratio: 1.08,
    };
    let newest = ended(
        30,
        vec![
            Sample {
                drift_ratio: Some(1.08),
                drift_regression: Some(drift),
                ..sample("lu", "wall_s", 2.0, None)
            },
            // Drifting, but not by the minimum effect: a ratio, no alert.
            Sample {
                drift_ratio: Some(1.01),
                ..sample("hackbench", "wall_s", 1.0, None)
            },
        ],
    );
    let sel = select([&newest], 100);
    let series_labels = |w: &str| sample(w, "wall_s", 0.0, None).series.labels();
    assert_eq!(
        sel.drift_ratio,
        vec![
            (series_labels("lu"), 1.08),
            (series_labels("hackbench"), 1.01)
        ]
    );
    let mut found_by = series_labels("lu");
    found_by[2] = "6.12".into();
    found_by.push("m1".into());
    found_by.push("drift".into());
    assert_eq!(sel.regression_ratio, vec![(found_by.clone(), 1.08)]);
    assert_eq!(sel.regression_extra_runs, vec![(found_by.clone(), 0.0)]);
    let d = &sel.regression_diagnosis[0].0;
    assert_eq!(d[..7], found_by[..]);
    assert_eq!(d[7], "the series' history drifts the wrong way since 6.12");
    assert_eq!(sel.dropped, [0, 0, 0, 0, 0, 0]);
}
