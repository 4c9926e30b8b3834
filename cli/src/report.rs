//! `farmctl report`: one self-contained HTML file per matrix.
//!
//! The page, top to bottom: the matrix (name, id, state, run counts) and a
//! verdict overview — one line per cell with its verdict badge and its
//! headline ratio drawn on a shared scale; then a section per cell: verdict,
//! diagnosis, a strip plot per primary metric (every run beside the
//! baseline's, with ratio, interval, p-value and findings), the scheduler
//! telemetry's figures as a compact table, heat maps of threads per NUMA
//! node over time from the representative run, and each series' history
//! with its change points.
//!
//! Layout: this file builds the page; `report/cell.rs` a cell's cards,
//! telemetry table and history; `report/page.css` is its style sheet;
//! `report/plots.rs` draws the plots,
//! `report/svg.rs` holds scales, ticks and colours, `report/format.rs`
//! escaping and numbers. Everything is a pure function of the
//! `GetResultsResponse` to a `String`.
//!
//! Self-contained means: one inline `<style>`, inline SVG, no script, the
//! system's fonts, and a Content-Security-Policy that forbids the browser to
//! load anything at all, so a reference to the network could not even work.
//! Data the coordinator leaves empty (older results have no verdicts, no
//! run values, no history) leaves its part of the page out.

mod badge;
pub mod bisection;
mod cell;
pub(crate) mod format;
mod plots;
mod svg;
#[cfg(test)]
mod tests;
mod waiting;

use std::fmt::Write;

use farm_proto::{
    Cell, CellSummary, GetResultsResponse, MatrixState, MatrixStatus, MetricSummary, RunRecord,
    Telemetry,
};
use farm_spec::metric::WALL_S;
use farm_workload::catalogue;

use badge::Badge;
use cell::{Shown, card, history, interval, is_own_figure, notes, ratio_text, telemetry_table};
use format::{escape, num};

/// Strip plots per cell; further primary metrics go to the table.
const MAX_STRIPS: usize = 6;
/// Per-instance heat maps per cell (telemetry carries up to 64).
const MAX_INSTANCE_MAPS: usize = 16;

/// The whole report for `results`: one HTML document with inline SVG, no
/// scripts, no fonts or anything else from the network.
pub fn render(results: &GetResultsResponse) -> String {
    let page = Page::new(results);
    let title = if page.status.name.is_empty() {
        page.status.matrix_id.clone()
    } else {
        format!("{} · {}", page.status.name, page.status.matrix_id)
    };
    let mut o = String::with_capacity(64 * 1024);
    o += &head(&format!("{title} — farm report"));
    page.header(&mut o);
    page.overview(&mut o);
    for c in &results.cells {
        page.cell(&mut o, c);
    }
    o += "</main>\n</body>\n</html>\n";
    o
}

/// A page's beginning up to `<main>`: the one stylesheet inline, and a
/// policy that lets the page load nothing (no scripts, fonts or images
/// from anywhere).
fn head(title: &str) -> String {
    format!(
        r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{}</title>
<style>{CSS}</style>
</head>
<body>
<main>
"#,
        escape(title)
    )
}

/// What the page needs at hand while it is written.
struct Page<'a> {
    status: MatrixStatus,
    results: &'a GetResultsResponse,
    /// The darkest colour of every cell's heat map of all threads: one
    /// scale for the whole page, so that cells compare at a glance.
    heat_max: u32,
}

impl<'a> Page<'a> {
    fn new(results: &'a GetResultsResponse) -> Page<'a> {
        let mut page = Page {
            status: results.status.clone().unwrap_or_default(),
            results,
            heat_max: 0,
        };
        page.heat_max = results
            .cells
            .iter()
            .filter_map(|c| page.telemetry_of(c))
            .flat_map(|(_, t)| t.series.iter().flat_map(|k| k.threads.iter()))
            .copied()
            .max()
            .unwrap_or(0);
        page
    }

    fn cell_def(&self, index: u32) -> Option<&Cell> {
        self.status
            .cells
            .iter()
            .filter_map(|s| s.cell.as_ref())
            .find(|c| c.index == index)
    }

    fn summary(&self, index: u32) -> Option<&CellSummary> {
        self.results.cells.iter().find(|c| c.cell_index == index)
    }

    fn cell_name(&self, index: u32) -> String {
        self.summary(index)
            .map(|c| c.cell_name.clone())
            .or_else(|| self.cell_def(index).map(|c| c.name.clone()))
            .unwrap_or_else(|| format!("cell {index}"))
    }

    /// Finished runs of a cell, in repetition order.
    fn runs_of(&self, index: u32) -> Vec<&RunRecord> {
        let mut runs: Vec<&RunRecord> = self
            .results
            .runs
            .iter()
            .filter(|r| r.cell_index == index && r.result.as_ref().is_some_and(|x| x.ok))
            .collect();
        runs.sort_by_key(|r| r.repetition);
        runs
    }

    /// A metric's value in every finished run of a cell: for results from
    /// before the coordinator sent them with the summary.
    fn values_from_runs(&self, index: u32, metric: &str) -> Vec<f64> {
        self.runs_of(index)
            .iter()
            .filter_map(|r| {
                r.result
                    .as_ref()?
                    .metrics
                    .iter()
                    .find(|m| m.name == metric)
                    .map(|m| m.value)
            })
            .collect()
    }

    fn header(&self, o: &mut String) {
        let s = &self.status;
        let c = s.counts.unwrap_or_default();
        let state = match MatrixState::try_from(s.state) {
            Ok(MatrixState::Running) => "running",
            Ok(MatrixState::Done) => "done",
            Ok(MatrixState::Cancelled) => "cancelled",
            _ => "unknown",
        };
        let name = if s.name.is_empty() { "matrix" } else { &s.name };
        let _ = write!(
            o,
            r#"<header><h1>{} <span class="id">{}</span></h1><p class="meta"><span class="state s-{state}">{state}</span>"#,
            escape(name),
            escape(&s.matrix_id),
        );
        if s.submitted_unix_ms > 0 {
            let _ = write!(
                o,
                " · submitted {}",
                crate::dates::datetime(s.submitted_unix_ms)
            );
        }
        let _ = write!(
            o,
            " · {} cells · {} runs: {} finished",
            self.results.cells.len().max(s.cells.len()),
            c.total,
            c.finished
        );
        for (n, what) in [
            (c.failed, "failed"),
            (c.running, "running"),
            (c.queued, "queued"),
            (c.cancelled, "cancelled"),
        ] {
            if n > 0 {
                let _ = write!(o, r#", <span class="c-{what}">{n} {what}</span>"#);
            }
        }
        if s.median_run_seconds > 0.0 {
            let _ = write!(o, " · median run {} s", num(s.median_run_seconds));
        }
        o.push_str("</p>");
        // The tally of verdicts, worst first.
        let badges: Vec<Badge> = self
            .results
            .cells
            .iter()
            .map(|c| Badge::of(c.verdict, c.baseline.is_none()))
            .collect();
        let mut tally = Vec::new();
        for b in [
            Badge::Regression,
            Badge::Inconclusive,
            Badge::Improvement,
            Badge::NoChange,
        ] {
            let n = badges.iter().filter(|x| **x == b).count();
            if n > 0 {
                tally.push(format!(
                    r#"<span class="badge {}">{n} {}</span>"#,
                    b.class(),
                    b.label()
                ));
            }
        }
        if !tally.is_empty() {
            let _ = write!(o, r#"<p class="tally">{}</p>"#, tally.join(" "));
        }
        let waiting: Vec<&str> = s
            .cells
            .iter()
            .map(|c| c.waiting_reason.as_str())
            .filter(|r| !r.is_empty())
            .collect();
        if let Some(first) = waiting.first() {
            let _ = write!(
                o,
                r#"<p class="warn">{} cell{} waiting: {}</p>"#,
                waiting.len(),
                if waiting.len() == 1 { "" } else { "s" },
                escape(first)
            );
        }
        o.push_str("</header>\n");
    }

    /// Primary metrics first (the workload's own figures in catalogue order,
    /// then wall time), then the rest, as the coordinator sent them.
    fn split_metrics<'c>(
        &self,
        c: &'c CellSummary,
    ) -> (Vec<&'c MetricSummary>, Vec<&'c MetricSummary>) {
        let spec = self
            .cell_def(c.cell_index)
            .and_then(|d| d.workload.as_ref())
            .and_then(|w| catalogue::find(&w.name));
        let mut primary: Vec<&MetricSummary> = Vec::new();
        if let Some(spec) = spec {
            for s in spec.metrics {
                primary.extend(c.metrics.iter().find(|m| m.name == s.name));
            }
        }
        primary.extend(c.metrics.iter().find(|m| m.name == WALL_S.name));
        if spec.is_none() {
            primary.extend(c.metrics.iter().filter(|m| is_own_figure(m)));
        }
        primary.truncate(MAX_STRIPS);
        let rest = c
            .metrics
            .iter()
            .filter(|m| !primary.iter().any(|p| std::ptr::eq(*p, *m)))
            .collect();
        (primary, rest)
    }

    fn shown<'c>(&self, c: &CellSummary, m: &'c MetricSummary) -> Shown<'c> {
        let values = if m.values.is_empty() {
            self.values_from_runs(c.cell_index, &m.name)
        } else {
            m.values.clone()
        };
        let baseline = c.baseline.map(|b| {
            if m.baseline_values.is_empty() {
                self.values_from_runs(b, &m.name)
            } else {
                m.baseline_values.clone()
            }
        });
        Shown {
            m,
            values,
            baseline,
            badge: Badge::of(m.verdict, c.baseline.is_none()),
        }
    }

    /// The metric that speaks for a cell in the overview: its worst-judged
    /// primary metric, the first one on a tie.
    fn headline<'c>(&self, c: &'c CellSummary) -> Option<&'c MetricSummary> {
        let (primary, _) = self.split_metrics(c);
        primary
            .iter()
            .filter(|m| m.ratio.is_some())
            .rev()
            .max_by_key(|m| Badge::of(m.verdict, false).severity())
            .copied()
    }

    fn overview(&self, o: &mut String) {
        if self.results.cells.is_empty() {
            o.push_str(r#"<p class="empty">No results yet.</p>"#);
            return;
        }
        let heads: Vec<Option<&MetricSummary>> = self
            .results
            .cells
            .iter()
            .map(|c| self.headline(c))
            .collect();
        // One log scale for every row, symmetric around ×1.
        let half_ln = heads
            .iter()
            .flatten()
            .flat_map(|m| {
                let ci = interval(m).map(|(l, u)| [l, u]).unwrap_or([1.0, 1.0]);
                [m.ratio.unwrap_or(1.0), ci[0], ci[1]]
            })
            .filter(|r| r.is_finite() && *r > 0.0)
            .map(|r| r.ln().abs())
            .fold(0.05f64, f64::max)
            * 1.15;
        o.push_str(r#"<section class="overview"><h2>Verdicts</h2><table class="overview"><thead><tr><th>verdict</th><th>cell</th><th>headline metric</th>"#);
        let _ = write!(
            o,
            r#"<th><div class="scale"><span>×{:.2}</span><span>×1</span><span>×{:.2}</span></div></th><th class="num">ratio [interval]</th><th class="num">runs</th></tr></thead><tbody>"#,
            (-half_ln).exp(),
            half_ln.exp()
        );
        for (c, head) in self.results.cells.iter().zip(&heads) {
            let badge = Badge::of(c.verdict, c.baseline.is_none());
            let counts = self
                .status
                .cells
                .iter()
                .find(|s| s.cell.as_ref().is_some_and(|d| d.index == c.cell_index))
                .and_then(|s| s.counts)
                .unwrap_or_default();
            let _ = write!(
                o,
                r##"<tr><td>{}</td><td><a href="#cell-{}">{}</a></td>"##,
                badge.html(),
                c.cell_index,
                escape(&c.cell_name)
            );
            match head {
                Some(m) => {
                    let hb = Badge::of(m.verdict, false);
                    let _ = write!(
                        o,
                        r#"<td>{}</td><td>{}</td><td class="num">{}</td>"#,
                        escape(&m.name),
                        plots::ratio(m.ratio.unwrap_or(f64::NAN), interval(m), half_ln, hb),
                        ratio_text(m)
                    );
                }
                None if c.baseline.is_none() => {
                    o.push_str(r#"<td class="muted" colspan="3">compared with, not judged</td>"#)
                }
                None => o.push_str(r#"<td class="muted" colspan="3">no ratio yet</td>"#),
            }
            let _ = write!(o, r#"<td class="num">{}/{}"#, counts.finished, counts.total);
            if counts.failed > 0 {
                let _ = write!(
                    o,
                    r#" <span class="c-failed">{} failed</span>"#,
                    counts.failed
                );
            }
            if c.extra_runs > 0 {
                let _ = write!(o, r#" <span class="muted">+{} reruns</span>"#, c.extra_runs);
            }
            o.push_str("</td></tr>");
        }
        o.push_str("</tbody></table></section>\n");
    }

    fn cell(&self, o: &mut String, c: &CellSummary) {
        let badge = Badge::of(c.verdict, c.baseline.is_none());
        let _ = write!(
            o,
            r#"<section class="cell" id="cell-{}"><h2>{} {}</h2><p class="meta">"#,
            c.cell_index,
            badge.html(),
            escape(&c.cell_name)
        );
        match c.baseline {
            Some(b) => {
                let _ = write!(
                    o,
                    r##"compared with <a href="#cell-{b}">{}</a>"##,
                    escape(&self.cell_name(b))
                );
            }
            None => o.push_str("baseline"),
        }
        let runs = self.runs_of(c.cell_index).len();
        let _ = write!(
            o,
            " · {runs} finished run{}",
            if runs == 1 { "" } else { "s" }
        );
        if c.extra_runs > 0 {
            let _ = write!(
                o,
                " · {} adaptive rerun{} added to decide",
                c.extra_runs,
                if c.extra_runs == 1 { "" } else { "s" }
            );
        }
        o.push_str("</p>");
        if !c.diagnosis.is_empty() {
            o.push_str(r#"<ol class="diagnosis">"#);
            for d in &c.diagnosis {
                let _ = write!(o, "<li>{}</li>", escape(d));
            }
            o.push_str("</ol>");
        }
        self.failures(o, c.cell_index);
        let (primary, rest) = self.split_metrics(c);
        let cards: Vec<String> = primary
            .iter()
            .map(|m| card(&self.shown(c, m)))
            .filter(|s| !s.is_empty())
            .collect();
        if !cards.is_empty() {
            let _ = write!(o, r#"<div class="grid">{}</div>"#, cards.concat());
        } else if runs == 0 {
            let waiting = self
                .status
                .cells
                .iter()
                .find(|s| s.cell.as_ref().is_some_and(|d| d.index == c.cell_index))
                .map(|s| s.waiting_reason.as_str())
                .filter(|r| !r.is_empty());
            let _ = write!(
                o,
                r#"<p class="empty">No finished runs yet{}.</p>"#,
                waiting.map_or_else(String::new, |w| format!(": {}", escape(w)))
            );
        }
        telemetry_table(o, c, &rest);
        self.placement(o, c);
        history(o, c, &self.status.matrix_id);
        o.push_str("</section>\n");
    }

    /// Failed runs of a cell, with why (first few, distinct reasons).
    fn failures(&self, o: &mut String, index: u32) {
        let failed: Vec<&RunRecord> = self
            .results
            .runs
            .iter()
            .filter(|r| r.cell_index == index && r.result.as_ref().is_some_and(|x| !x.ok))
            .collect();
        if failed.is_empty() {
            return;
        }
        let _ = write!(
            o,
            r#"<details class="failed"><summary>{} run{} failed</summary><ul>"#,
            failed.len(),
            if failed.len() == 1 { "" } else { "s" }
        );
        for r in failed.iter().take(5) {
            let error = r.result.as_ref().map(|x| x.error.as_str()).unwrap_or("");
            let _ = write!(
                o,
                "<li><code>{}</code> (repetition {}): {}</li>",
                escape(&r.run_id),
                r.repetition,
                escape(if error.is_empty() {
                    "no reason given"
                } else {
                    error
                })
            );
        }
        o.push_str("</ul></details>");
    }

    /// The representative run's telemetry: the one the coordinator named,
    /// else the first finished run of the cell that has a placement series.
    fn telemetry_of(&self, c: &CellSummary) -> Option<(&str, &Telemetry)> {
        let runs = self.runs_of(c.cell_index);
        let named = runs.iter().find(|r| r.run_id == c.representative_run);
        let with_series = |r: &&&RunRecord| {
            r.result
                .as_ref()
                .and_then(|x| x.telemetry.as_ref())
                .is_some_and(|t| !t.series.is_empty())
        };
        let run = named
            .filter(with_series)
            .or_else(|| runs.iter().find(with_series))?;
        let t = run.result.as_ref()?.telemetry.as_ref()?;
        Some((run.run_id.as_str(), t))
    }

    /// Heat maps of threads per NUMA node over time: all of the workload's
    /// threads, then each instance's (when there are several: with one, its
    /// map would repeat the first), and the notes that describe placement.
    fn placement(&self, o: &mut String, c: &CellSummary) {
        let Some((run, t)) = self.telemetry_of(c) else {
            notes(o, &c.notes);
            return;
        };
        let width = t.series.iter().map(|k| k.threads.len()).max().unwrap_or(0);
        let rows: Vec<plots::Row> = (0..width.max(t.nodes.len()))
            .map(|i| match t.nodes.get(i) {
                Some(n) => plots::Row {
                    label: format!(
                        "node {} ({} CPU{})",
                        n.node,
                        n.cpus,
                        if n.cpus == 1 { "" } else { "s" }
                    ),
                    cpus: n.cpus,
                    note: format!("avg {} · peak {}", num(n.avg_threads), n.peak_threads),
                    alarm: n.cpus > 0 && n.avg_runnable > f64::from(n.cpus),
                },
                None => plots::Row {
                    label: format!("node #{i}"),
                    cpus: 0,
                    note: String::new(),
                    alarm: false,
                },
            })
            .collect();
        let main = plots::heatmap(&plots::Heat {
            label: &format!(
                "heat map of the threads of all instances per NUMA node over time, run {run}"
            ),
            rows: &rows,
            ticks: &t.series,
            max: f64::from(self.heat_max),
            width: 900.0,
            row_height: if rows.len() > 8 { 14.0 } else { 26.0 },
            max_columns: 160,
            mark_overcommit: true,
        });
        let _ = write!(
            o,
            r#"<h3>Where the threads ran <span class="muted">— threads per NUMA node over time, run <code>{}</code>{}</span></h3>"#,
            escape(run),
            if t.threads_read_fraction > 0.0 && t.threads_read_fraction < 0.995 {
                format!(
                    ", estimated from {:.0}% of the threads per sweep",
                    t.threads_read_fraction * 100.0
                )
            } else {
                String::new()
            }
        );
        if t.downsampled_from > 0 {
            // The agent kept evenly spaced samples so the result fits its
            // budget: the map is true in shape, coarser in time.
            let _ = write!(
                o,
                r#"<p class="muted">{} of the run's {} samples kept (evenly, first and last included) to fit the result's size budget; averages and peaks are over all of them.</p>"#,
                t.series.len(),
                t.downsampled_from
            );
        }
        o.push_str(&main);
        let waiting = waiting::plot(
            &t.runqueue,
            900.0,
            &format!("threads of the workload waiting for a CPU over time, run {run}"),
        );
        if !waiting.is_empty() {
            o.push_str(
                r#"<h4>Waiting for a CPU <span class="muted">— the workload's runnable threads that were not running, on average between sweeps (schedstat; a wait is booked when it ends)</span></h4>"#,
            );
            o.push_str(&waiting);
        }
        let instances: Vec<_> = t
            .instances
            .iter()
            .filter(|i| !i.series.is_empty())
            .collect();
        if instances.len() > 1 {
            let imax = instances
                .iter()
                .flat_map(|i| i.series.iter().flat_map(|k| k.threads.iter()))
                .copied()
                .max()
                .unwrap_or(0);
            let irows: Vec<plots::Row> = rows
                .iter()
                .zip(0..)
                .map(|(r, i)| plots::Row {
                    label: t
                        .nodes
                        .get(i)
                        .map_or_else(|| r.label.clone(), |n| format!("node {}", n.node)),
                    cpus: r.cpus,
                    note: String::new(),
                    alarm: false,
                })
                .collect();
            let _ = write!(
                o,
                r#"<h4>Each instance <span class="muted">— the same colour scale, up to {imax} threads</span></h4><div class="grid instances">"#
            );
            for i in instances.iter().take(MAX_INSTANCE_MAPS) {
                let mut avg: Vec<(&u32, &f64)> = i.avg_threads.iter().collect();
                avg.sort_by_key(|(n, _)| **n);
                let avg: Vec<String> = avg
                    .iter()
                    .map(|(n, v)| format!("{n}: {}", num(**v)))
                    .collect();
                let map = plots::heatmap(&plots::Heat {
                    label: &format!(
                        "heat map of instance {} per NUMA node over time",
                        i.instance
                    ),
                    rows: &irows,
                    ticks: &i.series,
                    max: f64::from(imax),
                    width: 440.0,
                    row_height: 14.0,
                    max_columns: 80,
                    mark_overcommit: false,
                });
                let _ = write!(
                    o,
                    r#"<div class="card"><h5>instance {} <span class="muted">average threads per node {}</span></h5>{map}</div>"#,
                    i.instance,
                    escape(&avg.join(", "))
                );
            }
            o.push_str("</div>");
            if instances.len() > MAX_INSTANCE_MAPS {
                let _ = write!(
                    o,
                    r#"<p class="muted">and {} more instances, not drawn</p>"#,
                    instances.len() - MAX_INSTANCE_MAPS
                );
            }
        }
        notes(o, &c.notes);
    }
}

/// The page's style sheet, inlined into every page.
const CSS: &str = include_str!("report/page.css");
