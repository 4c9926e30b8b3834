//! The parts of a cell's section that stand alone: a primary metric's
//! card, the telemetry table, notes, the history plots, and how ratios,
//! intervals and directions read.

use std::fmt::Write;

use farm_proto::{CellSummary, Direction, MetricSummary, Verdict};

use super::badge::Badge;
use super::format::{self, escape, num};
use super::plots;

/// One primary metric of a cell with the values its strip plot shows.
pub(super) struct Shown<'a> {
    pub(super) m: &'a MetricSummary,
    pub(super) values: Vec<f64>,
    pub(super) baseline: Option<Vec<f64>>,
    pub(super) badge: Badge,
}

/// Whether a metric is a workload's own figure rather than one every run
/// has, as the coordinator that judged the matrix says (`primary`);
/// `wall_s` is drawn with the workload's figures anyway.
pub(super) fn is_own_figure(m: &MetricSummary) -> bool {
    m.name != farm_spec::metric::WALL_S.name && m.primary
}

/// The bootstrap interval of a metric's ratio, when the coordinator sent one.
pub(super) fn interval(m: &MetricSummary) -> Option<(f64, f64)> {
    let judged = Verdict::try_from(m.verdict).is_ok_and(|v| v != Verdict::Unspecified);
    (judged
        && m.ci_low.is_finite()
        && m.ci_high.is_finite()
        && m.ci_low > 0.0
        && m.ci_high >= m.ci_low)
        .then_some((m.ci_low, m.ci_high))
}

/// `×1.103 [1.061, 1.152]`.
pub(super) fn ratio_text(m: &MetricSummary) -> String {
    let Some(r) = m.ratio else {
        return "–".into();
    };
    match interval(m) {
        Some((l, u)) => format!("<b>{}</b> [{l:.3}, {u:.3}]", format::ratio(r)),
        None => format!("<b>{}</b>", format::ratio(r)),
    }
}

/// How a ratio reads for this metric: `+10.3%, worse`.
pub(super) fn effect(r: f64, direction: i32) -> String {
    let pct = (r - 1.0) * 100.0;
    let better = match Direction::try_from(direction) {
        Ok(Direction::LowerIsBetter) => Some(r < 1.0),
        Ok(Direction::HigherIsBetter) => Some(r > 1.0),
        _ => None,
    };
    let sign = if pct >= 0.0 { "+" } else { "−" };
    let word = match better {
        _ if pct.abs() < 0.05 => "",
        Some(true) => ", better",
        Some(false) => ", worse",
        None => "",
    };
    format!("{sign}{:.1}%{word}", pct.abs())
}

pub(super) fn direction_text(d: i32) -> &'static str {
    match Direction::try_from(d) {
        Ok(Direction::LowerIsBetter) => "lower is better",
        Ok(Direction::HigherIsBetter) => "higher is better",
        _ => "",
    }
}

/// A primary metric's card: title and verdict, the strip plot, the
/// comparison in one line, findings.
pub(super) fn card(s: &Shown<'_>) -> String {
    let m = s.m;
    let plot = plots::strip(&plots::Strip {
        metric: &m.name,
        unit: &m.unit,
        values: &s.values,
        baseline: s.baseline.as_deref(),
        badge: s.badge,
    });
    if plot.is_empty() {
        return String::new();
    }
    let mut o = String::new();
    let _ = write!(
        o,
        r#"<div class="card metric"><h4>{} <span class="muted">{}{}{}</span>{}</h4>{plot}"#,
        escape(&m.name),
        escape(&m.unit),
        if m.unit.is_empty() || direction_text(m.direction).is_empty() {
            ""
        } else {
            " · "
        },
        direction_text(m.direction),
        if s.badge == Badge::Baseline {
            String::new()
        } else {
            format!(" {}", s.badge.html())
        },
    );
    if let Some(r) = m.ratio.filter(|r| r.is_finite()) {
        let n = if m.n > 0 {
            m.n as usize
        } else {
            s.values.len()
        };
        let bn = if m.baseline_n > 0 {
            m.baseline_n as usize
        } else {
            s.baseline.as_ref().map_or(0, Vec::len)
        };
        let mut line = ratio_text(m);
        if interval(m).is_some() {
            let _ = write!(line, ", {}", escape(&format::p_value(m.p_value)));
        }
        let _ = write!(line, ", {n} vs {bn} runs");
        let _ = write!(
            o,
            r#"<p class="stat">{line}<br><span class="effect {}">{}</span> <span class="muted">median {} vs {} {}</span></p>"#,
            s.badge.class(),
            effect(r, m.direction),
            format::short(m.median),
            m.baseline_median.map_or_else(|| "–".into(), format::short),
            escape(&m.unit)
        );
    } else {
        let _ = write!(
            o,
            r#"<p class="stat muted">median {} {} over {} runs</p>"#,
            num(m.median),
            escape(&m.unit),
            s.values.len()
        );
    }
    if !m.findings.is_empty() {
        o.push_str(r#"<ul class="findings">"#);
        for f in &m.findings {
            let _ = write!(o, "<li>{}</li>", escape(f));
        }
        o.push_str("</ul>");
    }
    o.push_str("</div>");
    o
}

/// The other figures (the scheduler telemetry every run has): one row each;
/// figures zero on both sides say nothing and are left out.
pub(super) fn telemetry_table(o: &mut String, c: &CellSummary, rest: &[&MetricSummary]) {
    let rows: Vec<&&MetricSummary> = rest
        .iter()
        .filter(|m| m.median != 0.0 || m.baseline_median.is_some_and(|b| b != 0.0))
        .collect();
    if rows.is_empty() {
        return;
    }
    let moved = rows
        .iter()
        .filter(|m| {
            matches!(
                Badge::of(m.verdict, false),
                Badge::Regression | Badge::Improvement
            )
        })
        .count();
    let _ = write!(
        o,
        r#"<details class="figures" open><summary>Scheduler telemetry and other figures: {} metric{}{}</summary><table class="figures"><thead><tr><th>metric</th><th class="num">median</th>"#,
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        if moved > 0 {
            format!(", {moved} moved")
        } else {
            String::new()
        }
    );
    let compared = c.baseline.is_some();
    if compared {
        o.push_str(r#"<th class="num">baseline</th><th class="num">ratio</th><th>verdict</th>"#);
    }
    o.push_str("</tr></thead><tbody>");
    for m in rows {
        let _ = write!(
            o,
            r#"<tr><td>{} <span class="muted">{}</span></td><td class="num">{}</td>"#,
            escape(&m.name),
            escape(&m.unit),
            num(m.median)
        );
        if compared {
            let b = Badge::of(m.verdict, false);
            let _ = write!(
                o,
                r#"<td class="num">{}</td><td class="num {}">{}</td><td>{}</td>"#,
                m.baseline_median.map_or_else(|| "–".into(), num),
                b.class(),
                m.ratio.map_or_else(|| "–".into(), format::ratio),
                // Badges for what moved; the rest quietly.
                match b {
                    Badge::Regression | Badge::Improvement => b.html(),
                    Badge::Unjudged => String::new(),
                    _ => format!(r#"<span class="muted">{}</span>"#, b.label()),
                }
            );
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table></details>");
}

pub(super) fn notes(o: &mut String, notes: &[String]) {
    if notes.is_empty() {
        return;
    }
    o.push_str(r#"<ul class="notes">"#);
    for n in notes {
        let _ = write!(o, "<li>{}</li>", escape(n));
    }
    o.push_str("</ul>");
}

/// Each series' trend over past matrices, with its change points listed.
pub(super) fn history(o: &mut String, c: &CellSummary, matrix_id: &str) {
    let plots: Vec<String> = c
        .history
        .iter()
        .filter_map(|h| {
            let plot = plots::trend(h, matrix_id);
            if plot.is_empty() {
                return None;
            }
            let mut card = format!(
                r#"<div class="card trend"><h4>{} <span class="muted">{} · {} matrices</span></h4>{plot}"#,
                escape(&h.metric),
                escape(&h.unit),
                h.points.len()
            );
            let mut cps: Vec<_> = h.change_points.iter().collect();
            cps.sort_by_key(|c| c.index);
            if !cps.is_empty() {
                card.push_str(r#"<ul class="changes">"#);
                for cp in cps {
                    let Some(p) = h.points.get(cp.index as usize) else {
                        continue;
                    };
                    let _ = write!(
                        card,
                        "<li>from <code>{}</code>{}: {} → {} {} ({})</li>",
                        escape(&p.matrix_id),
                        if p.kernel.is_empty() {
                            String::new()
                        } else {
                            format!(" (kernel {})", escape(&p.kernel))
                        },
                        num(cp.mean_before),
                        num(cp.mean_after),
                        escape(&h.unit),
                        escape(&format::p_value(cp.p_value))
                    );
                }
                card.push_str("</ul>");
            }
            if let Some(d) = &h.drift {
                let _ = write!(
                    card,
                    r#"<p class="drift">{}</p>"#,
                    escape(&crate::render::drift_text(&h.metric, d, "matrix"))
                );
            }
            card.push_str("</div>");
            Some(card)
        })
        .collect();
    if plots.is_empty() {
        return;
    }
    let _ = write!(
        o,
        r#"<h3>History <span class="muted">— this cell's median in past matrices; dashed: change points, orange: the mean between them</span></h3><div class="grid wide">{}</div>"#,
        plots.concat()
    );
}
