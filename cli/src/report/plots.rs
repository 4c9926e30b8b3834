//! The report's plots, each one inline `<svg class="plot KIND">`:
//!
//! - [`strip`]: every run of a metric as a dot, the cell beside its baseline,
//!   with boxes (quartiles) and medians;
//! - [`heatmap`]: threads per NUMA node (rows) over time (columns);
//! - [`trend`]: a metric's median over past matrices, change points marked,
//!   the mean between them drawn as a level;
//! - [`ratio`]: the overview's ratio of medians with its interval, on a
//!   shared log scale around ×1.
//!
//! Each returns an empty string when it has nothing to draw, so the page
//! leaves the plot out.

use std::fmt::Write;

use farm_proto::{History, NodeTick};

use super::badge::Badge;
use super::format::{self, num};
use super::svg::{self, Linear, px, text, title};

/// Dots of the baseline's runs, beside the cell's coloured ones.
const BASELINE_GREY: &str = "#8c959f";
const AXIS: &str = r##"font-size="11" fill="#59636e""##;
const GRID: &str = r##"stroke="#e4e8ec" stroke-width="1""##;

/// One metric of one cell as a strip plot draws it.
pub struct Strip<'a> {
    pub metric: &'a str,
    pub unit: &'a str,
    /// The cell's runs, in repetition order.
    pub values: &'a [f64],
    /// The baseline's runs; `None` for a baseline cell itself.
    pub baseline: Option<&'a [f64]>,
    /// Colours the cell's dots.
    pub badge: Badge,
}

/// Runs as dots (jittered deterministically), a box from the first to the
/// third quartile, the median as a bar with its value; the baseline's median
/// carried across the cell's column as a dashed line.
pub fn strip(s: &Strip<'_>) -> String {
    let finite = |v: &[f64]| -> Vec<f64> { v.iter().copied().filter(|x| x.is_finite()).collect() };
    let mine = finite(s.values);
    let base = s.baseline.map(finite).filter(|b| !b.is_empty());
    if mine.is_empty() && base.is_none() {
        return String::new();
    }
    let mut groups: Vec<(&str, &[f64], &str)> = Vec::new();
    if let Some(b) = &base {
        groups.push(("baseline", b, BASELINE_GREY));
        groups.push(("this cell", &mine, s.badge.colour()));
    } else {
        groups.push(("runs", &mine, s.badge.colour()));
    }
    let all = groups.iter().flat_map(|g| g.1.iter().copied());
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(f64::NEG_INFINITY, f64::max);
    let (d0, d1) = svg::padded(lo, hi);
    let (ticks, step) = svg::ticks(d0, d1, 4);
    let labels: Vec<String> = ticks.iter().map(|t| format::tick(*t, step)).collect();
    let (w, h) = (320.0, 196.0);
    let (left, right, top, bottom) = (label_width(&labels) + 12.0, 44.0, 10.0, 36.0);
    let y = Linear::new((d0, d1), (h - bottom, top));
    let label = format!(
        "strip plot of {} ({}): {}",
        s.metric,
        s.unit,
        groups
            .iter()
            .map(|(name, v, _)| format!("{name} {} runs", v.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut o = svg::open("strip", w, h, &label);
    let _ = write!(
        o,
        r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#fafbfc"/>"##,
        px(left),
        px(top),
        px(w - left - right),
        px(h - top - bottom)
    );
    for (t, label) in ticks.iter().zip(&labels) {
        let ty = y.map(*t);
        let _ = write!(
            o,
            r#"<line x1="{}" x2="{}" y1="{ty}" y2="{ty}" {GRID}/>"#,
            px(left),
            px(w - right),
            ty = px(ty)
        );
        o += &text(
            left - 6.0,
            ty + 4.0,
            &format!(r#"text-anchor="end" {AXIS}"#),
            label,
        );
    }
    let col = (w - left - right) / groups.len() as f64;
    let medians: Vec<Option<f64>> = groups.iter().map(|g| svg::median(g.1)).collect();
    for (k, (name, values, colour)) in groups.iter().enumerate() {
        let cx = left + (k as f64 + 0.5) * col;
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        if sorted.len() >= 3 {
            let (q1, q3) = (
                y.map(svg::quantile(&sorted, 0.25)),
                y.map(svg::quantile(&sorted, 0.75)),
            );
            let _ = write!(
                o,
                r#"<rect x="{}" y="{}" width="{}" height="{}" rx="3" fill="{colour}" fill-opacity="0.10" stroke="{colour}" stroke-opacity="0.35"/>"#,
                px(cx - col * 0.24),
                px(q3),
                px(col * 0.48),
                px((q1 - q3).max(1.0)),
            );
        }
        if k == 1
            && let Some(bm) = medians[0]
        {
            // The baseline's median, carried over for the eye to compare.
            let by = px(y.map(bm));
            let _ = write!(
                o,
                r#"<line x1="{}" x2="{}" y1="{by}" y2="{by}" stroke="{BASELINE_GREY}" stroke-width="1.5" stroke-dasharray="4 3"/>"#,
                px(cx - col * 0.42),
                px(cx + col * 0.42),
            );
        }
        for (i, v) in values.iter().enumerate() {
            let _ = write!(
                o,
                r##"<circle cx="{}" cy="{}" r="4" fill="{colour}" fill-opacity="0.8" stroke="#fff" stroke-width="1">{}</circle>"##,
                px(cx + svg::jitter(i) * col * 0.36),
                px(y.map(*v)),
                title(&format!("{name}, run {}: {} {}", i + 1, num(*v), s.unit)),
            );
        }
        if let Some(m) = medians[k] {
            let my = y.map(m);
            let _ = write!(
                o,
                r#"<line x1="{}" x2="{}" y1="{my}" y2="{my}" stroke="{colour}" stroke-width="3" stroke-linecap="round">{}</line>"#,
                px(cx - col * 0.3),
                px(cx + col * 0.3),
                title(&format!("{name} median: {} {}", num(m), s.unit)),
                my = px(my),
            );
            o += &text(
                cx + col * 0.32,
                my + 4.0,
                r##"font-size="11" font-weight="600" fill="#1f2328" stroke="#fff" stroke-width="3" paint-order="stroke""##,
                &median_label(m, step),
            );
        }
        o += &text(
            cx,
            h - bottom + 15.0,
            r##"text-anchor="middle" font-size="12" fill="#1f2328""##,
            name,
        );
        o += &text(
            cx,
            h - bottom + 29.0,
            &format!(r#"text-anchor="middle" {AXIS}"#),
            &format!(
                "{} run{}",
                values.len(),
                if values.len() == 1 { "" } else { "s" }
            ),
        );
    }
    o += "</svg>";
    o
}

/// A median beside its bar: short when large, else fine enough to tell it
/// from the axis' ticks `step` apart (`1.0025` where ticks are `1.002`, `1.004`).
fn median_label(m: f64, step: f64) -> String {
    if m.abs() >= 1e4 {
        return format::short(m);
    }
    let (plain, fine) = (num(m), format::tick(m, step / 10.0));
    if fine.len() > plain.len() {
        fine
    } else {
        plain
    }
}

/// Pixels that axis labels in 11 px type take at most.
fn label_width(labels: &[String]) -> f64 {
    labels.iter().map(|l| l.chars().count()).max().unwrap_or(1) as f64 * 6.6 + 4.0
}

/// One row of a heat map: a NUMA node.
pub struct Row {
    /// `node 1 (24 CPUs)`.
    pub label: String,
    /// The node's CPUs; 0 when unknown.
    pub cpus: u32,
    /// Text right of the row: `avg 21.3 · peak 37`.
    pub note: String,
    /// Draws the note in red: the node was overcommitted.
    pub alarm: bool,
}

/// A heat map of threads per node over time.
pub struct Heat<'a> {
    pub label: &'a str,
    pub rows: &'a [Row],
    pub ticks: &'a [NodeTick],
    /// Threads at which the colour is darkest (shared by maps compared).
    pub max: f64,
    pub width: f64,
    pub row_height: f64,
    /// Ticks are averaged into at most this many columns.
    pub max_columns: usize,
    /// Underlines in red where a node's runnable threads outnumber its CPUs.
    pub mark_overcommit: bool,
}

/// One column of a heat map: ticks averaged.
struct Column {
    t0: f64,
    t1: f64,
    threads: Vec<f64>,
    runnable: Vec<f64>,
}

fn columns(ticks: &[NodeTick], rows: usize, max_columns: usize) -> Vec<Column> {
    let n = ticks.len();
    let cols = n.min(max_columns.max(1));
    let step_ms = if n > 1 {
        (ticks[n - 1].t_ms.saturating_sub(ticks[0].t_ms)) as f64 / (n - 1) as f64
    } else {
        100.0
    };
    let t_of = |i: usize| match ticks.get(i) {
        Some(t) => t.t_ms as f64,
        None => ticks[n - 1].t_ms as f64 + step_ms.max(1.0),
    };
    (0..cols)
        .map(|c| {
            let (a, b) = (c * n / cols, (c + 1) * n / cols);
            let part = &ticks[a..b];
            let mean = |get: &dyn Fn(&NodeTick) -> &[u32]| -> Vec<f64> {
                (0..rows)
                    .map(|r| {
                        part.iter()
                            .map(|t| f64::from(get(t).get(r).copied().unwrap_or(0)))
                            .sum::<f64>()
                            / part.len().max(1) as f64
                    })
                    .collect()
            };
            Column {
                t0: t_of(a),
                t1: t_of(b),
                threads: mean(&|t| &t.threads),
                runnable: mean(&|t| &t.runnable),
            }
        })
        .collect()
}

/// Rows are nodes, columns time, colour the threads there; equal
/// neighbouring cells are drawn as one rectangle.
pub fn heatmap(h: &Heat<'_>) -> String {
    if h.ticks.is_empty() || h.rows.is_empty() {
        return String::new();
    }
    let cols = columns(h.ticks, h.rows.len(), h.max_columns);
    // Room for the longest label left, and for the notes right if any.
    let chars = |f: &dyn Fn(&Row) -> usize| h.rows.iter().map(f).max().unwrap_or(0) as f64;
    let left = 14.0 + 6.2 * chars(&|r| r.label.chars().count());
    let notes = chars(&|r| r.note.chars().count());
    let right = if notes > 0.0 {
        16.0 + 6.2 * notes
    } else {
        12.0
    };
    let top = 4.0;
    let plot_h = h.rows.len() as f64 * h.row_height;
    let height = top + plot_h + 44.0;
    let t_start = cols.first().map_or(0.0, |c| c.t0).min(0.0);
    let t_end = cols.last().map_or(1.0, |c| c.t1);
    let x = Linear::new((t_start, t_end), (left, h.width - right));
    let max = h.max.max(1.0);
    let colour = |v: f64| {
        if v < 0.05 {
            svg::EMPTY.to_string()
        } else {
            svg::ramp(0.12 + 0.88 * v / max)
        }
    };
    let mut o = svg::open("heatmap", h.width, height, h.label);
    for (r, row) in h.rows.iter().enumerate() {
        let ry = top + r as f64 * h.row_height;
        let mid = ry + h.row_height / 2.0 + 4.0;
        o += &text(
            left - 8.0,
            mid,
            r##"text-anchor="end" font-size="11" fill="#1f2328""##,
            &row.label,
        );
        o += &text(
            h.width - right + 8.0,
            mid,
            if row.alarm {
                r##"font-size="11" fill="#c92a2a" font-weight="600""##
            } else {
                AXIS
            },
            &row.note,
        );
        let mut c = 0;
        while c < cols.len() {
            // Merge a run of columns with the same colour.
            let fill = colour(cols[c].threads[r]);
            let mut e = c + 1;
            while e < cols.len() && colour(cols[e].threads[r]) == fill {
                e += 1;
            }
            let (lo, hi) = cols[c..e]
                .iter()
                .map(|k| k.threads[r])
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                    (a.min(v), b.max(v))
                });
            let threads = if (hi - lo).abs() < 0.05 {
                num(lo)
            } else {
                format!("{}–{}", num(lo), num(hi))
            };
            let _ = write!(
                o,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}">{}</rect>"#,
                px(x.map(cols[c].t0)),
                px(ry + 1.0),
                px((x.map(cols[e - 1].t1) - x.map(cols[c].t0)).max(0.5)),
                px(h.row_height - 2.0),
                title(&format!(
                    "{}, {}–{} s: {threads} threads",
                    row.label,
                    num(cols[c].t0 / 1000.0),
                    num(cols[e - 1].t1 / 1000.0)
                )),
            );
            c = e;
        }
        if h.mark_overcommit && row.cpus > 0 {
            let over = |k: &Column| k.runnable[r] > f64::from(row.cpus);
            let mut c = 0;
            while c < cols.len() {
                if !over(&cols[c]) {
                    c += 1;
                    continue;
                }
                let mut e = c + 1;
                while e < cols.len() && over(&cols[e]) {
                    e += 1;
                }
                let _ = write!(
                    o,
                    r##"<rect x="{}" y="{}" width="{}" height="3" fill="#e03131">{}</rect>"##,
                    px(x.map(cols[c].t0)),
                    px(ry + h.row_height - 4.0),
                    px((x.map(cols[e - 1].t1) - x.map(cols[c].t0)).max(0.5)),
                    title(&format!("{}: more runnable threads than CPUs", row.label)),
                );
                c = e;
            }
        }
    }
    // Time axis.
    let axis_y = top + plot_h;
    let (ticks, step) = svg::ticks(t_start / 1000.0, t_end / 1000.0, 6);
    for t in ticks {
        let tx = px(x.map(t * 1000.0));
        let _ = write!(
            o,
            r##"<line x1="{tx}" x2="{tx}" y1="{}" y2="{}" stroke="#8c959f"/>"##,
            px(axis_y),
            px(axis_y + 4.0)
        );
        o += &text(
            x.map(t * 1000.0),
            axis_y + 16.0,
            &format!(r#"text-anchor="middle" {AXIS}"#),
            &format!("{} s", format::tick(t, step)),
        );
    }
    // Legend: the colour scale, and the overcommit mark.
    let ly = axis_y + 26.0;
    o += &text(left, ly + 10.0, AXIS, "threads");
    let swatches = 6;
    let mut lx = left + 50.0;
    for k in 0..=swatches {
        let v = max * k as f64 / swatches as f64;
        let _ = write!(
            o,
            r##"<rect x="{}" y="{}" width="18" height="12" fill="{}" stroke="#d0d7de" stroke-width="0.5"/>"##,
            px(lx),
            px(ly),
            colour(v)
        );
        lx += 18.0;
    }
    o += &text(lx + 6.0, ly + 10.0, AXIS, &format!("0 … {max:.0}"));
    if h.mark_overcommit {
        let mx = lx + 80.0;
        let _ = write!(
            o,
            r##"<rect x="{}" y="{}" width="18" height="3" fill="#e03131"/>"##,
            px(mx),
            px(ly + 5.0)
        );
        o += &text(
            mx + 24.0,
            ly + 10.0,
            AXIS,
            "runnable threads > CPUs of the node",
        );
    }
    o += "</svg>";
    o
}

/// A metric's history: the median of each past matrix, joined; the current
/// matrix ringed; each change point a dashed line with the factor it moved
/// by, and the mean of each stretch between change points as a level; a
/// drift, its fitted line over its window with the factor it moved by.
pub fn trend(h: &History, current_matrix: &str) -> String {
    // Change points index `h.points`: a value that cannot be drawn keeps
    // its place, without a dot.
    let points = &h.points;
    let n = points.len();
    if points.iter().filter(|p| p.value.is_finite()).count() < 2 {
        return String::new();
    }
    let mut cps: Vec<_> = h
        .change_points
        .iter()
        .filter(|c| c.index >= 1 && (c.index as usize) < n)
        .collect();
    cps.sort_by_key(|c| c.index);
    cps.dedup_by_key(|c| c.index);
    // A drift's window must lie within the points to be drawn.
    let drift = h.drift.as_ref().filter(|d| {
        d.points >= 2
            && (d.start_index + d.points) as usize <= n
            && d.level_start.is_finite()
            && d.level_end.is_finite()
    });
    let values = points
        .iter()
        .map(|p| p.value)
        .filter(|v| v.is_finite())
        .chain(
            cps.iter()
                .flat_map(|c| [c.mean_before, c.mean_after])
                .filter(|v| v.is_finite()),
        )
        .chain(drift.iter().flat_map(|d| [d.level_start, d.level_end]));
    let lo = values.clone().fold(f64::INFINITY, f64::min);
    let hi = values.fold(f64::NEG_INFINITY, f64::max);
    let (d0, d1) = svg::padded(lo, hi);
    let (ticks, step) = svg::ticks(d0, d1, 4);
    let labels: Vec<String> = ticks.iter().map(|t| format::tick(*t, step)).collect();
    let (w, hgt) = (620.0, 210.0);
    let (left, right, top, bottom) = (label_width(&labels) + 12.0, 18.0, 24.0, 42.0);
    let x = Linear::new((0.0, (n - 1) as f64), (left + 10.0, w - right - 10.0));
    let y = Linear::new((d0, d1), (hgt - bottom, top));
    let label = format!(
        "trend of {} over {n} matrices with {} change point{}{}",
        h.metric,
        cps.len(),
        if cps.len() == 1 { "" } else { "s" },
        if drift.is_some() { " and a drift" } else { "" }
    );
    let mut o = svg::open("trend", w, hgt, &label);
    for (t, label) in ticks.iter().zip(&labels) {
        let ty = px(y.map(*t));
        let _ = write!(
            o,
            r#"<line x1="{}" x2="{}" y1="{ty}" y2="{ty}" {GRID}/>"#,
            px(left),
            px(w - right)
        );
        o += &text(
            left - 6.0,
            y.map(*t) + 4.0,
            &format!(r#"text-anchor="end" {AXIS}"#),
            label,
        );
    }
    // Levels: the mean of each stretch between change points.
    let half = if n > 1 {
        (x.map(1.0) - x.map(0.0)) / 2.0
    } else {
        0.0
    };
    let mut start = 0usize;
    for (j, c) in cps.iter().enumerate() {
        let end = c.index as usize;
        level(&mut o, (&x, &y), start..end, c.mean_before, half, &h.unit);
        if j + 1 == cps.len() {
            level(&mut o, (&x, &y), end..n, c.mean_after, half, &h.unit);
        }
        start = end;
    }
    // The series.
    let path: Vec<String> = points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.value.is_finite())
        .map(|(i, p)| format!("{},{}", px(x.map(i as f64)), px(y.map(p.value))))
        .collect();
    let _ = write!(
        o,
        r##"<polyline points="{}" fill="none" stroke="#5c6f91" stroke-width="1.5" stroke-linejoin="round"/>"##,
        path.join(" ")
    );
    for (i, p) in points
        .iter()
        .enumerate()
        .filter(|(_, p)| p.value.is_finite())
    {
        let here = !current_matrix.is_empty() && p.matrix_id == current_matrix;
        let tip = title(&format!(
            "{} · {} · kernel {}: {} {}",
            p.matrix_id,
            crate::dates::date(p.t_ms),
            if p.kernel.is_empty() { "?" } else { &p.kernel },
            num(p.value),
            h.unit
        ));
        let (cx, cy) = (px(x.map(i as f64)), px(y.map(p.value)));
        if here {
            let _ = write!(
                o,
                r##"<circle cx="{cx}" cy="{cy}" r="7" fill="none" stroke="#1f2328" stroke-width="2"/>"##
            );
        }
        let _ = write!(
            o,
            r##"<circle cx="{cx}" cy="{cy}" r="3.5" fill="#3b5b8c" stroke="#fff" stroke-width="1">{tip}</circle>"##
        );
    }
    // Change points.
    for c in &cps {
        let i = c.index as usize;
        let cx = (x.map(i as f64 - 1.0) + x.map(i as f64)) / 2.0;
        let factor = if c.mean_before != 0.0 && c.mean_before.is_finite() {
            format::ratio(c.mean_after / c.mean_before)
        } else {
            format!("{} → {}", num(c.mean_before), num(c.mean_after))
        };
        let _ = write!(
            o,
            r##"<line class="change-point" x1="{cx}" x2="{cx}" y1="{}" y2="{}" stroke="#c92a2a" stroke-width="1.5" stroke-dasharray="5 3">{}</line>"##,
            px(top - 4.0),
            px(hgt - bottom),
            title(&format!(
                "change point before {}: mean {} → {} {} ({})",
                points[i].matrix_id,
                num(c.mean_before),
                num(c.mean_after),
                h.unit,
                format::p_value(c.p_value)
            )),
            cx = px(cx),
        );
        o += &text(
            cx + 4.0,
            top - 8.0 + 10.0,
            r##"font-size="11" font-weight="600" fill="#c92a2a""##,
            &factor,
        );
    }
    // The drift: its fitted line over its window.
    if let Some(d) = drift {
        let (i0, i1) = (d.start_index as f64, (d.start_index + d.points - 1) as f64);
        let (x0, x1) = (px(x.map(i0)), px(x.map(i1)));
        let (y0, y1) = (px(y.map(d.level_start)), px(y.map(d.level_end)));
        let _ = write!(
            o,
            r##"<line class="drift" x1="{x0}" x2="{x1}" y1="{y0}" y2="{y1}" stroke="#d9480f" stroke-width="2" stroke-dasharray="2 3">{}</line>"##,
            title(&crate::render::drift_text(&h.metric, d, "matrix")),
        );
        o += &text(
            x.map(i1) - 4.0,
            y.map(d.level_end) - 8.0,
            r##"text-anchor="end" font-size="11" font-weight="600" fill="#d9480f""##,
            &format!("drift {}", format::ratio(d.level_end / d.level_start)),
        );
    }
    // The x axis: dates at the ends, the kernel wherever it changes.
    let axis = hgt - bottom;
    let ends = [(0usize, "start"), (n - 1, "end")];
    for (i, anchor) in ends {
        o += &text(
            x.map(i as f64),
            axis + 30.0,
            &format!(r#"text-anchor="{anchor}" {AXIS}"#),
            &crate::dates::date(points[i].t_ms),
        );
    }
    let mut last_x = f64::NEG_INFINITY;
    for (i, p) in points.iter().enumerate() {
        if p.kernel.is_empty() || (i > 0 && points[i - 1].kernel == p.kernel) {
            continue;
        }
        let kx = x.map(i as f64);
        if kx - last_x < 90.0 {
            continue;
        }
        last_x = kx;
        o += &text(
            kx,
            axis + 15.0,
            r##"text-anchor="start" font-size="10" fill="#3b5b8c""##,
            &p.kernel,
        );
    }
    o += "</svg>";
    o
}

/// The level of one stretch of a trend: the points `stretch`, `half` the
/// distance between points wide on each side.
fn level(
    o: &mut String,
    (x, y): (&Linear, &Linear),
    stretch: std::ops::Range<usize>,
    mean: f64,
    half: f64,
    unit: &str,
) {
    let (a, b) = (stretch.start, stretch.end);
    if !mean.is_finite() || b <= a {
        return;
    }
    let ly = px(y.map(mean));
    let _ = write!(
        o,
        r##"<line class="level" x1="{}" x2="{}" y1="{ly}" y2="{ly}" stroke="#f08c00" stroke-width="3" stroke-opacity="0.75">{}</line>"##,
        px(x.map(a as f64) - half * 0.8),
        px(x.map((b - 1) as f64) + half * 0.8),
        title(&format!("mean {} {unit}", num(mean))),
    );
}

/// Width of the overview's ratio plots.
pub const RATIO_WIDTH: f64 = 240.0;

/// A ratio of medians as a dot, its interval as a bar, on a log scale
/// showing ×e^-`half_ln` to ×e^`half_ln`; ×1 is the grey line.
pub fn ratio(r: f64, ci: Option<(f64, f64)>, half_ln: f64, badge: Badge) -> String {
    if !(r.is_finite() && r > 0.0) {
        return String::new();
    }
    let (w, h) = (RATIO_WIDTH, 22.0);
    let x = Linear::new((-half_ln, half_ln), (8.0, w - 8.0));
    let at = |v: f64| x.map(v.ln().clamp(-half_ln, half_ln));
    let label = match ci {
        Some((l, u)) => format!(
            "ratio {} with interval {:.3} to {:.3}",
            format::ratio(r),
            l,
            u
        ),
        None => format!("ratio {}", format::ratio(r)),
    };
    let mut o = svg::open("ratio", w, h, &label);
    let one = px(at(1.0));
    let _ = write!(
        o,
        r##"<line x1="8" x2="{}" y1="11" y2="11" stroke="#eef1f4" stroke-width="6" stroke-linecap="round"/><line x1="{one}" x2="{one}" y1="2" y2="20" stroke="#8c959f"/>"##,
        px(w - 8.0)
    );
    if let Some((l, u)) = ci.filter(|(l, u)| *l > 0.0 && u >= l && u.is_finite()) {
        let _ = write!(
            o,
            r#"<line x1="{}" x2="{}" y1="11" y2="11" stroke="{c}" stroke-opacity="0.45" stroke-width="6" stroke-linecap="round"/>"#,
            px(at(l)),
            px(at(u)),
            c = badge.colour()
        );
    }
    let _ = write!(
        o,
        r##"<circle cx="{}" cy="11" r="5" fill="{}" stroke="#fff" stroke-width="1.5"/></svg>"##,
        px(at(r)),
        badge.colour()
    );
    o
}
