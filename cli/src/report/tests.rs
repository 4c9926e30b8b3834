//! The report on hand-built results: a matrix like seed 003 (lu beside CPU
//! hogs on four NUMA nodes, sharing a cgroup or not), and results with parts
//! missing.
//!
//! `FARM_REPORT_SAMPLE=/tmp/sample.html cargo test -p farmctl --bin farmctl
//! report` also writes the sample page there, to look at.

use std::collections::HashMap;

use farm_proto::{
    Cell, CellStatus, CellSummary, ChangePoint, Direction, Drift, GetResultsResponse, History,
    InstancePlacement, MatrixState, MatrixStatus, Metric, MetricSummary, NodeLoad, NodeTick,
    RunCounts, RunRecord, RunResult, SeriesPoint, Telemetry, Verdict, Workload,
};

use super::format::{self, escape};
use super::render;
use super::svg;

const LOWER: i32 = Direction::LowerIsBetter as i32;
const HIGHER: i32 = Direction::HigherIsBetter as i32;

fn counts(n: u32) -> RunCounts {
    RunCounts {
        total: n,
        finished: n,
        ..Default::default()
    }
}

fn cell(index: u32, name: &str, baseline: Option<u32>) -> CellStatus {
    CellStatus {
        cell: Some(Cell {
            index,
            name: name.into(),
            kernel: "running".into(),
            workload: Some(Workload {
                name: "lu".into(),
                params: Vec::new(),
            }),
            baseline,
            ..Default::default()
        }),
        counts: Some(counts(5)),
        waiting_reason: String::new(),
        activities: Vec::new(),
    }
}

/// Threads per node at tick `k` of a 20 s run sampled every 100 ms: the
/// group case piles onto nodes 2 and 3.
fn tick(k: u64, grouped: bool, instance: Option<u32>) -> NodeTick {
    let wave = |n: u64| ((k * 7 + n * 13) % 5) as u32;
    let threads: Vec<u32> = (0..4u64)
        .map(|n| {
            let base = if grouped {
                [12, 13, 26, 27][n as usize]
            } else {
                [20, 20, 19, 19][n as usize]
            };
            match instance {
                None => base + wave(n),
                Some(i) => (base + wave(n) + i) / 8,
            }
        })
        .collect();
    let runnable = threads.iter().map(|t| t * 9 / 10).collect();
    NodeTick {
        t_ms: k * 100,
        threads,
        runnable,
    }
}

fn telemetry(grouped: bool) -> Telemetry {
    let nodes = (0..4)
        .map(|n| NodeLoad {
            node: n,
            cpus: 24,
            avg_threads: if grouped && n >= 2 { 27.6 } else { 20.5 },
            avg_runnable: if grouped && n >= 2 { 25.1 } else { 18.0 },
            peak_threads: 37,
        })
        .collect();
    let instances = (0..4)
        .map(|i| InstancePlacement {
            instance: i,
            numa_nodes: "2 2 3 3".into(),
            avg_threads: (0..4).map(|n| (n, 2.5 + f64::from(n))).collect(),
            avg_runnable: HashMap::new(),
            series: (0..200).map(|k| tick(k, grouped, Some(i))).collect(),
        })
        .collect();
    Telemetry {
        sample_interval_ms: 100,
        nodes,
        series: (0..200).map(|k| tick(k, grouped, None)).collect(),
        instances,
        threads_read_fraction: 1.0,
        ..Default::default()
    }
}

fn run(cell: u32, rep: u32, wall: f64, grouped: bool) -> RunRecord {
    let metric = |name: &str, value: f64, unit: &str, direction: i32| Metric {
        name: name.into(),
        value,
        unit: unit.into(),
        direction,
    };
    RunRecord {
        run_id: format!("r-{cell}-{rep}"),
        cell_index: cell,
        repetition: rep,
        agent_id: "a-1".into(),
        result: Some(RunResult {
            ok: true,
            metrics: vec![
                metric("wall_s", wall, "s", LOWER),
                metric("lu_mops", 1000.0 / wall, "Mop/s", HIGHER),
                metric("cpu_migrations", wall * 300.0, "migrations", LOWER),
            ],
            telemetry: Some(telemetry(grouped)),
            ..Default::default()
        }),
    }
}

fn summary(name: &str, unit: &str, direction: i32, values: &[f64], base: &[f64]) -> MetricSummary {
    let median = svg::median(values).unwrap_or(f64::NAN);
    let baseline_median = svg::median(base);
    MetricSummary {
        name: name.into(),
        unit: unit.into(),
        direction,
        n: values.len() as u32,
        median,
        baseline_median,
        ratio: baseline_median.map(|b| median / b),
        values: values.to_vec(),
        baseline_values: base.to_vec(),
        // As the coordinator decides it.
        primary: farm_spec::metric::is_primary(name),
        baseline_n: base.len() as u32,
        ..Default::default()
    }
}

const NORMAL: [f64; 5] = [15.3, 15.9, 15.1, 16.2, 15.6];
const GROUP: [f64; 5] = [30.0, 164.0, 41.5, 36.2, 88.0];

/// Two cells as in seed 003, plus a third that has no results yet.
fn sample() -> GetResultsResponse {
    let mops = |v: &[f64]| v.iter().map(|w| 1000.0 / w).collect::<Vec<_>>();
    let migr = |v: &[f64]| v.iter().map(|w| w * 300.0).collect::<Vec<_>>();
    let mut wall = summary("wall_s", "s", LOWER, &GROUP, &NORMAL);
    wall.verdict = Verdict::Regression as i32;
    wall.ci_low = 1.9;
    wall.ci_high = 10.2;
    wall.p_value = 0.0002;
    wall.findings = vec!["spread ×12.0 (p = 0.003): runs vary far more than the baseline's".into()];
    let mut lu = summary("lu_mops", "Mop/s", HIGHER, &mops(&GROUP), &mops(&NORMAL));
    lu.verdict = Verdict::Regression as i32;
    lu.ci_low = 0.098;
    lu.ci_high = 0.52;
    lu.p_value = 0.00003;
    let mut cm = summary(
        "cpu_migrations",
        "migrations",
        LOWER,
        &migr(&GROUP),
        &migr(&NORMAL),
    );
    cm.verdict = Verdict::Regression as i32;
    let base_metrics = vec![
        summary("wall_s", "s", LOWER, &NORMAL, &[]),
        summary("lu_mops", "Mop/s", HIGHER, &mops(&NORMAL), &[]),
        summary("cpu_migrations", "migrations", LOWER, &migr(&NORMAL), &[]),
    ];
    let base_metrics = base_metrics
        .into_iter()
        .map(|mut m| {
            m.baseline_median = None;
            m.ratio = None;
            m
        })
        .collect();
    let points: Vec<SeriesPoint> = (0..14)
        .map(|i| SeriesPoint {
            matrix_id: if i == 13 {
                "m-0c3a".into()
            } else {
                format!("m-{i:03}")
            },
            t_ms: 1_700_000_000_000 + i * 86_400_000,
            kernel: if i < 8 {
                "6.1.0-50".into()
            } else {
                "6.1.0-57".into()
            },
            value: if i < 8 { 15.5 } else { 41.0 } + (i % 3) as f64 * 0.8,
        })
        .collect();
    let history = History {
        metric: "wall_s".into(),
        unit: "s".into(),
        points,
        change_points: vec![ChangePoint {
            index: 8,
            mean_before: 16.3,
            mean_after: 41.8,
            p_value: 0.0004,
        }],
        drift: None,
    };
    let mut runs: Vec<RunRecord> = Vec::new();
    for (rep, w) in NORMAL.iter().enumerate() {
        runs.push(run(0, rep as u32, *w, false));
    }
    for (rep, w) in GROUP.iter().enumerate() {
        runs.push(run(1, rep as u32, *w, true));
    }
    GetResultsResponse {
        status: Some(MatrixStatus {
            matrix_id: "m-0c3a".into(),
            name: "group-imbalance".into(),
            state: MatrixState::Done as i32,
            counts: Some(RunCounts {
                total: 15,
                finished: 10,
                queued: 5,
                ..Default::default()
            }),
            cells: vec![
                cell(0, "lu(threads=80) state=shared", None),
                cell(1, "lu(threads=80) state=separate", Some(0)),
                cell(2, "lu(threads=92) state=separate", Some(0)),
            ],
            submitted_unix_ms: 1_764_540_000_000,
            median_run_seconds: 21.0,
            schedule_id: String::new(),
            ..Default::default()
        }),
        runs,
        cells: vec![
            CellSummary {
                cell_index: 0,
                cell_name: "lu(threads=80) state=shared".into(),
                metrics: base_metrics,
                representative_run: "r-0-4".into(),
                notes: vec!["node 0 holds 20.5 threads (18.0 runnable) on 24 CPUs".into()],
                ..Default::default()
            },
            CellSummary {
                cell_index: 1,
                cell_name: "lu(threads=80) state=separate".into(),
                baseline: Some(0),
                metrics: vec![lu, wall, cm],
                representative_run: "r-1-3".into(),
                notes: vec![
                    "node 2 holds 27.6 threads (25.1 runnable) on 24 CPUs — overcommitted".into(),
                ],
                verdict: Verdict::Regression as i32,
                diagnosis: vec![
                    "nodes 2 and 3 overcommitted: 25.1 runnable threads on 24 CPUs".into(),
                    "cpu-migrations ×3.6 (4,680 → 16,560)".into(),
                ],
                extra_runs: 2,
                history: vec![history],
            },
            CellSummary {
                cell_index: 2,
                cell_name: "lu(threads=92) state=separate".into(),
                baseline: Some(0),
                ..Default::default()
            },
        ],
    }
}

fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

/// What every page must be, whatever the data: one document, every plot
/// closed, nothing executable, no number the browser cannot draw.
fn assert_well_formed(html: &str) {
    assert!(
        html.starts_with("<!DOCTYPE html>"),
        "{}",
        &html[..40.min(html.len())]
    );
    assert!(html.trim_end().ends_with("</html>"));
    assert_eq!(count(html, "<svg"), count(html, "</svg>"), "unclosed <svg>");
    assert_eq!(count(html, "<section"), count(html, "</section>"));
    assert_eq!(count(html, "<style>"), 1);
    for bad in [
        "<script", "NaN", "inf\"", "http://", "https://", "url(", "@import",
    ] {
        assert!(!html.contains(bad), "the page contains {bad:?}");
    }
    assert_text_escaped(html);
}

/// Every `<` of a page opens a tag, a closing tag or a declaration: text
/// from data (`p < 0.0001`, a subject `commit <5>`) is escaped wherever it
/// is written, in every cell of every table.
fn assert_text_escaped(html: &str) {
    for (i, _) in html.match_indices('<') {
        let next = html[i + 1..].chars().next();
        assert!(
            next.is_some_and(|c| c.is_ascii_alphabetic() || c == '/' || c == '!'),
            "an unescaped `<` at byte {i}: {:?}",
            &html[i.saturating_sub(40)..(i + 40).min(html.len())]
        );
    }
}

#[test]
fn sample_page_is_well_formed_and_complete() {
    let html = render(&sample());
    if let Ok(path) = std::env::var("FARM_REPORT_SAMPLE") {
        std::fs::write(&path, &html).unwrap();
    }
    assert_well_formed(&html);
    // Cell 0 (a baseline) and cell 1 plot lu_mops and wall_s: the primary
    // metrics; cpu_migrations goes to the table.
    assert_eq!(count(&html, r#"class="plot strip""#), 4);
    // Cells 0 and 1: all threads, then each of 4 instances.
    assert_eq!(count(&html, r#"class="plot heatmap""#), 2 * 5);
    assert_eq!(count(&html, r#"class="plot trend""#), 1);
    assert_eq!(count(&html, r#"class="plot ratio""#), 1);
    assert!(html.contains("cpu_migrations"));
    // The comparison line of wall_s, as the issue spells it.
    let r = svg::median(&GROUP).unwrap() / svg::median(&NORMAL).unwrap();
    let line = format!("<b>×{r:.3}</b> [1.900, 10.200], p = 0.0002, 5 vs 5 runs");
    assert!(html.contains(&line), "missing {line:?}");
    assert!(html.contains(", p &lt; 0.0001, "), "lu's p-value, escaped");
    assert!(html.contains("2 adaptive reruns"));
    assert!(html.contains("runs vary far more"));
    assert!(html.contains(r#"<ol class="diagnosis"><li>nodes 2 and 3 overcommitted"#));
    // Whole series: no word of thinning.
    assert_eq!(count(&html, "samples kept"), 0);
}

#[test]
fn thinned_series_say_so() {
    let mut page = sample();
    for r in &mut page.runs {
        if let Some(t) = r.result.as_mut().and_then(|res| res.telemetry.as_mut()) {
            t.downsampled_from = 6000;
        }
    }
    let html = render(&page);
    assert_well_formed(&html);
    // One note per cell's placement map (cells 0 and 1).
    assert_eq!(
        count(
            &html,
            "200 of the run's 6000 samples kept (evenly, first and last included) to fit the \
             result's size budget; averages and peaks are over all of them."
        ),
        2
    );
}

#[test]
fn verdict_badges_name_every_cell() {
    let html = render(&sample());
    // In the overview and in the cell's heading.
    assert!(
        count(
            &html,
            r#"<span class="badge v-regression">regression</span>"#
        ) >= 2
    );
    assert!(count(&html, r#"<span class="badge v-baseline">baseline</span>"#) >= 2);
    // Cell 2 is compared but has no verdict yet.
    assert!(count(&html, r#"<span class="badge v-none">no verdict</span>"#) >= 2);
    for b in ["no_change", "improvement", "inconclusive"] {
        let mut r = sample();
        r.cells[1].verdict = match b {
            "no_change" => Verdict::NoChange,
            "improvement" => Verdict::Improvement,
            _ => Verdict::Inconclusive,
        } as i32;
        let html = render(&r);
        assert!(html.contains(&format!(r#"class="badge v-{b}""#)), "{b}");
    }
}

#[test]
fn change_points_are_marked_with_their_levels() {
    let mut r = sample();
    let html = render(&r);
    assert_eq!(count(&html, r#"class="change-point""#), 1);
    // Before and after the change.
    assert_eq!(count(&html, r#"class="level""#), 2);
    assert!(html.contains("×2.564"), "the factor of the change");
    // Two change points: three levels. One out of range is left out.
    let h = &mut r.cells[1].history[0];
    h.change_points.push(ChangePoint {
        index: 11,
        mean_before: 41.8,
        mean_after: 30.0,
        p_value: 0.01,
    });
    h.change_points.push(ChangePoint {
        index: 99,
        mean_before: 1.0,
        mean_after: 2.0,
        p_value: 0.5,
    });
    let html = render(&r);
    assert_well_formed(&html);
    assert_eq!(count(&html, r#"class="change-point""#), 2);
    assert_eq!(count(&html, r#"class="level""#), 3);
    // No change points: a trend without markers.
    r.cells[1].history[0].change_points.clear();
    let html = render(&r);
    assert_eq!(count(&html, r#"class="plot trend""#), 1);
    assert_eq!(count(&html, r#"class="change-point""#), 0);
}

#[test]
fn a_drift_is_drawn_over_its_window_and_said() {
    let mut r = sample();
    // The last 6 of the history's 12 points, 40 → 43.
    r.cells[1].history[0].drift = Some(Drift {
        start_index: 6,
        points: 6,
        slope: 0.6,
        slope_low: 0.2,
        slope_high: 1.0,
        level_start: 40.0,
        level_end: 43.0,
    });
    let html = render(&r);
    assert_well_formed(&html);
    assert_eq!(
        count(&html, r#"class="drift""#),
        2,
        "the line and the sentence"
    );
    assert!(
        html.contains("drift ×1.075"),
        "the factor at the line's end"
    );
    assert!(
        html.contains(
            "wall_s drifts +1.50% per matrix over the last 6 (95%: +0.50% to +2.50%), ×1.075 over them"
        ),
        "the sentence"
    );
    assert!(html.contains("change point and a drift"));
    // A window past the points is not drawn, but still said.
    r.cells[1].history[0].drift.as_mut().unwrap().start_index = 10;
    let html = render(&r);
    assert_eq!(count(&html, r#"class="drift""#), 1);
}

#[test]
fn text_from_data_is_escaped() {
    let mut r = sample();
    let evil = r#"<script>alert("x")</script> & 'q'"#;
    r.status.as_mut().unwrap().name = evil.into();
    r.cells[1].cell_name = evil.into();
    r.cells[1].diagnosis.push(evil.into());
    r.cells[1].notes.push(evil.into());
    r.cells[1].metrics[0].name = evil.into();
    r.cells[1].metrics[0].findings.push(evil.into());
    r.cells[1].history[0].metric = evil.into();
    r.cells[1].history[0].points[3].kernel = evil.into();
    r.runs[7].run_id = evil.into();
    r.cells[1].representative_run = evil.into();
    let html = render(&r);
    assert_well_formed(&html);
    assert!(!html.contains("<script"));
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"));
}

#[test]
fn escape_covers_markup_and_quotes() {
    for (input, want) in [
        ("plain", "plain"),
        ("a < b > c", "a &lt; b &gt; c"),
        ("x & y", "x &amp; y"),
        (r#"say "hi""#, "say &quot;hi&quot;"),
        ("it's", "it&#39;s"),
        ("&amp;", "&amp;amp;"),
        ("×1.10 → ü", "×1.10 → ü"),
        ("", ""),
    ] {
        assert_eq!(escape(input), want, "{input:?}");
    }
}

#[test]
fn missing_data_leaves_parts_out_without_panicking() {
    // Nothing at all.
    let html = render(&GetResultsResponse::default());
    assert_well_formed(&html);
    assert!(html.contains("No results yet"));
    assert_eq!(count(&html, "<svg"), 0);

    // Old results: no verdicts, no values in the summaries (the runs have
    // them), no history; telemetry without a series; a run without a result.
    let mut r = sample();
    for c in &mut r.cells {
        c.verdict = 0;
        c.history.clear();
        c.diagnosis.clear();
        for m in &mut c.metrics {
            m.verdict = 0;
            m.values.clear();
            m.baseline_values.clear();
        }
    }
    for run in &mut r.runs {
        if let Some(t) = run.result.as_mut().and_then(|x| x.telemetry.as_mut()) {
            t.series.clear();
        }
    }
    r.runs.push(RunRecord {
        run_id: "r-x".into(),
        cell_index: 1,
        ..Default::default()
    });
    let html = render(&r);
    assert_well_formed(&html);
    assert_eq!(
        count(&html, r#"class="plot strip""#),
        4,
        "values from the runs"
    );
    assert_eq!(count(&html, r#"class="plot heatmap""#), 0);
    assert_eq!(count(&html, r#"class="plot trend""#), 0);
    assert!(!html.contains(r#"class="badge v-regression""#));

    // Odd numbers: NaN and infinite values, empty ticks, a one-point history,
    // an empty representative run, ticks with fewer nodes than telemetry.
    let mut r = sample();
    r.status = None;
    let c = &mut r.cells[1];
    c.metrics[1].values = vec![f64::NAN, f64::INFINITY, 3.0];
    c.metrics[1].ratio = Some(f64::NAN);
    c.metrics[1].ci_low = f64::NAN;
    c.metrics[0].values = vec![f64::NAN];
    c.metrics[0].baseline_values = vec![];
    c.history[0].points[2].value = f64::NAN;
    let mut one = c.history[0].clone();
    one.points.truncate(1);
    c.history.push(one);
    c.representative_run.clear();
    for run in &mut r.runs {
        if let Some(t) = run.result.as_mut().and_then(|x| x.telemetry.as_mut()) {
            t.series[0].threads.clear();
            t.series[1].threads = vec![1; 9];
            t.nodes.truncate(1);
            t.instances.truncate(1);
        }
    }
    let html = render(&r);
    assert_well_formed(&html);
    assert!(count(&html, r#"class="plot heatmap""#) >= 1);
    // A NaN point is left out; a one-point history draws nothing.
    assert_eq!(count(&html, r#"class="plot trend""#), 1);
    assert_eq!(count(&html, r#"class="change-point""#), 1);
}

#[test]
fn numbers_read_like_the_seeds() {
    for (v, want) in [
        (56_850.0, "56,850"),
        (4084.0, "4,084"),
        (-1_234_567.0, "-1,234,567"),
        (231.4, "231"),
        (12.44, "12.4"),
        (2.314, "2.31"),
        (0.0234, "0.0234"),
        (0.000_234_1, "0.000234"),
        (0.0, "0"),
        (f64::NAN, "–"),
    ] {
        assert_eq!(format::num(v), want, "{v}");
    }
    for (p, want) in [
        (0.0002, "p = 0.0002"),
        (0.00001, "p < 0.0001"),
        (0.004, "p = 0.004"),
        (0.31, "p = 0.31"),
    ] {
        assert_eq!(format::p_value(p), want);
    }
    assert_eq!(crate::dates::datetime(0), "1970-01-01 00:00 UTC");
    assert_eq!(
        crate::dates::datetime(1_709_210_096_000),
        "2024-02-29 12:34 UTC"
    );
    assert_eq!(crate::dates::date(951_782_400_000), "2000-02-29");
}

#[test]
fn ticks_are_round_and_inside() {
    for (lo, hi, want) in [
        (0.0, 10.0, vec![0.0, 2.5, 5.0, 7.5, 10.0]),
        (14.2, 16.9, vec![15.0, 16.0]),
        (0.0, 0.0, vec![]),
        (f64::NAN, 1.0, vec![]),
    ] {
        assert_eq!(svg::ticks(lo, hi, 4).0, want, "{lo}..{hi}");
    }
    for (v, step, want) in [
        (2500.0, 500.0, "2,500"),
        (0.25, 0.05, "0.25"),
        (7.5, 2.5, "7.5"),
        (15.0, 1.0, "15"),
        (800e6, 200e6, "800M"),
        (27_500.0, 2_500.0, "27.5k"),
        (0.0, 2e9, "0G"),
    ] {
        assert_eq!(format::tick(v, step), want, "{v} by {step}");
    }
    for (v, want) in [
        (880_251_828.0, "880M"),
        (1_020_000_000.0, "1.02G"),
        (27_500.0, "27.5k"),
        (9_999.0, "9,999"),
        (2.314, "2.31"),
    ] {
        assert_eq!(format::short(v), want);
    }
}

#[test]
fn a_bisection_page_draws_each_step_by_its_call_and_marks_the_culprit() {
    use super::bisection;
    use farm_proto::{Bisection, BisectionOutcome, BisectionStep};
    let step = |kernel: u32, call: &str, r: f64| BisectionStep {
        kernel,
        call: call.into(),
        runs: 5,
        ratio_vs_good: r,
        p_vs_good: 0.5,
        ratio_vs_bad: r / 4.0,
        p_vs_bad: if call == "same_as_good" {
            0.00002
        } else {
            0.0079
        },
        ..Default::default()
    };
    let b = Bisection {
        bisection_id: "b-1".into(),
        matrix_id: "m-1".into(),
        cell: 1,
        kernels: (0..8).map(|i| format!("git:linux@c{i}")).collect(),
        subjects: (0..8).map(|i| format!("commit <{i}>")).collect(),
        metric: "tps".into(),
        runs: 5,
        max_runs: 10,
        steps: vec![
            step(3, "same_as_good", 1.08),
            step(5, "same_as_bad", 0.26),
            step(4, "same_as_good", f64::NAN),
        ],
        outcome: Some(BisectionOutcome {
            kind: "culprit".into(),
            last_good: 4,
            first_bad: 5,
            confirmed: true,
            ..Default::default()
        }),
        ..Default::default()
    };
    let page = bisection::render(
        &b,
        "first bad: git:linux@c5",
        &["context-switches ×0.27".into()],
    );
    assert_eq!(page.matches(r#"<circle class="step good""#).count(), 2);
    assert_eq!(page.matches(r#"<circle class="step bad""#).count(), 1);
    // Between kernels 4 and 5: x = 64 + 4.5 / 7 × 680.
    assert!(
        page.contains(r#"<line class="culprit" x1="501.1" x2="501.1""#),
        "{page}"
    );
    assert_eq!(page.matches("<tr class=").count(), 3);
    assert!(page.contains("<td>commit &lt;5&gt;</td>"));
    // Ratios and p-values as the matrix's page writes them.
    assert!(
        page.contains("<td>×0.260</td><td>p = 0.50</td><td>×0.065</td><td>p = 0.008</td>"),
        "{page}"
    );
    assert!(page.contains("<td>–</td><td>p = 0.50</td><td>–</td><td>p &lt; 0.0001</td>"));
    assert_text_escaped(&page);
    assert!(page.contains("<li>context-switches ×0.27</li>"));
    // A ratio not measured is drawn on the good line, never as NaN.
    assert!(!page.contains("NaN"));
}
