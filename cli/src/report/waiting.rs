//! The runqueue plot: how many of the workload's threads waited for a CPU
//! over the run, drawn under the placement heat map with the same time
//! axis, so that a crowded node and the wait it caused line up. Pure.

use std::fmt::Write;

use farm_proto::RunqueueTick;

use super::format;
use super::svg::{self, Linear, px, text};

const AXIS: &str = r##"font-size="11" fill="#59636e""##;
const GRID: &str = r##"stroke="#e4e8ec" stroke-width="1""##;

/// An area chart of `ticks` (threads waiting on average since the previous
/// sweep) over `width` pixels; empty when there is nothing to draw.
pub fn plot(ticks: &[RunqueueTick], width: f64, label: &str) -> String {
    let points: Vec<&RunqueueTick> = ticks.iter().filter(|t| t.waiting.is_finite()).collect();
    if points.len() < 2 {
        return String::new();
    }
    let (t0, t1) = (points[0].t_ms as f64, points[points.len() - 1].t_ms as f64);
    let hi = points
        .iter()
        .map(|t| t.waiting)
        .fold(0.0, f64::max)
        .max(1.0);
    let (ticks_y, step) = svg::ticks(0.0, hi, 3);
    let labels: Vec<String> = ticks_y.iter().map(|v| format::tick(*v, step)).collect();
    let height = 120.0;
    let (left, right, top, bottom) = (44.0, 18.0, 10.0, 26.0);
    let x = Linear::new((t0, t1), (left, width - right));
    let y = Linear::new((0.0, hi * 1.05), (height - bottom, top));
    let mut o = svg::open("waiting", width, height, label);
    for (v, l) in ticks_y.iter().zip(&labels) {
        let ty = px(y.map(*v));
        let _ = write!(
            o,
            r#"<line x1="{}" x2="{}" y1="{ty}" y2="{ty}" {GRID}/>"#,
            px(left),
            px(width - right)
        );
        o += &text(
            left - 6.0,
            y.map(*v) + 4.0,
            &format!(r#"text-anchor="end" {AXIS}"#),
            l,
        );
    }
    // A step per sweep: each value holds since the sweep before it.
    let mut path = format!("M{},{}", px(x.map(t0)), px(y.map(0.0)));
    let mut prev = t0;
    for p in &points[1..] {
        let (xa, xb, yv) = (x.map(prev), x.map(p.t_ms as f64), y.map(p.waiting));
        let _ = write!(path, " L{},{} L{},{}", px(xa), px(yv), px(xb), px(yv));
        prev = p.t_ms as f64;
    }
    let _ = write!(path, " L{},{} Z", px(x.map(t1)), px(y.map(0.0)));
    let _ = write!(
        o,
        r##"<path d="{path}" fill="#f4a582" stroke="#b2182b" stroke-width="1"/>"##
    );
    o += &text(
        left,
        height - 8.0,
        AXIS,
        &format!("0 s … {} s", format::num((t1 - t0) / 1e3)),
    );
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(t_ms: u64, waiting: f64) -> RunqueueTick {
        RunqueueTick { t_ms, waiting }
    }

    #[test]
    fn draws_a_step_per_sweep_and_nothing_for_one_point() {
        assert_eq!(plot(&[tick(0, 1.0)], 900.0, "w"), "");
        let svg = plot(
            &[
                tick(0, 0.0),
                tick(100, 2.0),
                tick(200, f64::NAN),
                tick(300, 1.0),
            ],
            900.0,
            "threads waiting",
        );
        assert!(
            svg.starts_with(r#"<svg class="plot waiting" role="img" aria-label="threads waiting""#)
        );
        // Two steps (the NaN is left out), each two segments, and the close.
        assert_eq!(svg.matches(" L").count(), 2 * 2 + 1);
        assert!(!svg.contains("NaN"));
        assert!(svg.contains("0 s … 0.300 s"), "{svg}");
    }
}
