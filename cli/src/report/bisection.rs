//! A bisection's page (`farmctl report b-…`): its outcome in one line, the
//! steps drawn over the kernels (each step's ratio to good, on a log
//! scale, coloured by its call, the culprit's boundary marked), the steps'
//! table and the diagnosis of first bad against last good. Pure.

use std::fmt::Write as _;

use farm_proto::Bisection;

use super::format::{escape, p_value, ratio};
use super::head;
use super::svg::{self, Linear, px};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 40.0;

/// The whole page; `outcome` is the outcome's line and `diagnosis` the
/// farm's lines for the confirmation's pair, as `farmctl bisection` prints
/// them.
pub fn render(b: &Bisection, outcome: &str, diagnosis: &[String]) -> String {
    let mut o = String::with_capacity(16 * 1024);
    o += &head(&format!("{} — farm bisection", b.bisection_id));
    let _ = write!(
        o,
        r#"<h1>Bisection {id}</h1>
<p class="meta">matrix {matrix}, cell {cell}; {n} kernels from {good} to {bad}; metric {metric}; {runs} runs a round, at most {max} a step</p>
<p class="outcome">{outcome}</p>
"#,
        id = escape(&b.bisection_id),
        matrix = escape(&b.matrix_id),
        cell = b.cell,
        n = b.kernels.len(),
        good = escape(b.kernels.first().map_or("", String::as_str)),
        bad = escape(b.kernels.last().map_or("", String::as_str)),
        metric = escape(&b.metric),
        runs = b.runs,
        max = b.max_runs,
        outcome = escape(outcome),
    );
    if !diagnosis.is_empty() {
        o += "<ul class=\"diagnosis\">\n";
        for d in diagnosis {
            let _ = writeln!(o, "<li>{}</li>", escape(d));
        }
        o += "</ul>\n";
    }
    o += &plot(b);
    o += &table(b);
    o += "</main>\n</body>\n</html>\n";
    o
}

/// The steps over the kernels: x the kernel's index, y its ratio to good.
fn plot(b: &Bisection) -> String {
    let n = b.kernels.len().max(2);
    let x = Linear::new((0.0, (n - 1) as f64), (LEFT, WIDTH - RIGHT));
    let ratios: Vec<f64> = b
        .steps
        .iter()
        .map(|s| s.ratio_vs_good)
        .filter(|r| r.is_finite() && *r > 0.0)
        .chain([1.0])
        .collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min).ln();
    let hi = ratios
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max)
        .ln();
    let (lo, hi) = svg::padded(lo, hi);
    let y = Linear::new((lo, hi), (HEIGHT - BOTTOM, TOP));
    let mut o = svg::open(
        "bisection",
        WIDTH,
        HEIGHT,
        &format!("{}: each step's ratio to the good kernel", b.metric),
    );
    // The good kernel's level, and the axes' words.
    let one = y.map(0.0);
    let _ = write!(
        o,
        r#"<line class="good" x1="{}" x2="{}" y1="{}" y2="{}"/>"#,
        px(LEFT),
        px(WIDTH - RIGHT),
        px(one),
        px(one)
    );
    o += &svg::text(4.0, one + 4.0, r#"class="axis""#, "×1 (good)");
    o += &svg::text(
        LEFT,
        HEIGHT - 8.0,
        r#"class="axis""#,
        &format!("kernels 0 (good) … {} (bad), first-parent order", n - 1),
    );
    if let Some(out) = b
        .outcome
        .as_ref()
        .filter(|o| o.kind == "culprit" || o.kind == "unresolved")
    {
        let at = x.map(f64::from(out.last_good) + 0.5);
        let _ = write!(
            o,
            r#"<line class="culprit" x1="{}" x2="{}" y1="{}" y2="{}">{}</line>"#,
            px(at),
            px(at),
            px(TOP),
            px(HEIGHT - BOTTOM),
            svg::title(&format!(
                "between kernel {} and {}",
                out.last_good, out.first_bad
            ))
        );
    }
    for (i, s) in b.steps.iter().enumerate() {
        let r = s.ratio_vs_good;
        let cy = if r.is_finite() && r > 0.0 {
            y.map(r.ln())
        } else {
            one
        };
        let kernel = b.kernels.get(s.kernel as usize).map_or("?", String::as_str);
        let _ = write!(
            o,
            r#"<circle class="step {}" cx="{}" cy="{}" r="5">{}</circle>"#,
            class(&s.call),
            px(x.map(f64::from(s.kernel))),
            px(cy),
            svg::title(&format!(
                "step {}: kernel {} {kernel}: {} ({} against good)",
                i + 1,
                s.kernel,
                s.call,
                ratio(r)
            ))
        );
        o += &svg::text(
            x.map(f64::from(s.kernel)) + 7.0,
            cy - 7.0,
            r#"class="label""#,
            &(i + 1).to_string(),
        );
    }
    o += "</svg>\n";
    o
}

fn class(call: &str) -> &'static str {
    match call {
        "same_as_good" => "good",
        "same_as_bad" => "bad",
        _ => "unknown",
    }
}

fn table(b: &Bisection) -> String {
    let mut o = String::from(
        "<table class=\"steps\">\n<tr><th>step</th><th>kernel</th><th>subject</th><th>call</th>\
         <th>against good</th><th></th><th>against bad</th><th></th><th>runs</th></tr>\n",
    );
    for (i, s) in b.steps.iter().enumerate() {
        let _ = writeln!(
            o,
            "<tr class=\"{}\"><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            class(&s.call),
            i + 1,
            s.kernel,
            escape(b.kernels.get(s.kernel as usize).map_or("?", String::as_str)),
            escape(b.subjects.get(s.kernel as usize).map_or("", String::as_str)),
            escape(&s.call),
            // As the matrix's page writes them (`report/format.rs`).
            escape(&ratio(s.ratio_vs_good)),
            escape(&p_value(s.p_vs_good)),
            escape(&ratio(s.ratio_vs_bad)),
            escape(&p_value(s.p_vs_bad)),
            s.runs
        );
    }
    o += "</table>\n";
    o
}
