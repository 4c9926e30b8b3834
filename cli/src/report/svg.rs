//! Drawing primitives for the report's inline SVG: the opening tag, linear
//! scales, round ticks, quantiles and the heat maps' colour ramp. Pure.
//!
//! Every coordinate passes through [`px`], which writes a non-finite number
//! as 0: the browser logs an error for `NaN` in an attribute, and the
//! end-to-end test fails on any error the page logs.

use super::format::escape;

/// A coordinate in pixels, with one decimal.
pub fn px(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "0".into()
    }
}

/// The opening tag of a plot: `class="plot KIND"`, an accessible name, and a
/// size that scales down with the page.
pub fn open(kind: &str, width: f64, height: f64, label: &str) -> String {
    format!(
        r#"<svg class="plot {kind}" role="img" aria-label="{}" width="{w}" height="{h}" viewBox="0 0 {w} {h}">"#,
        escape(label),
        w = px(width),
        h = px(height),
    )
}

/// `<text>` at (x, y) with extra attributes; `text` is escaped.
pub fn text(x: f64, y: f64, attrs: &str, text: &str) -> String {
    format!(
        r#"<text x="{}" y="{}" {attrs}>{}</text>"#,
        px(x),
        px(y),
        escape(text)
    )
}

/// A hover tooltip for the element it is the first child of.
pub fn title(text: &str) -> String {
    format!("<title>{}</title>", escape(text))
}

/// A linear map from a data interval onto a pixel interval.
#[derive(Debug, Clone, Copy)]
pub struct Linear {
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Linear {
    /// An empty domain (`d0 == d1`) maps everything onto the middle.
    pub fn new((d0, d1): (f64, f64), (r0, r1): (f64, f64)) -> Linear {
        Linear { d0, d1, r0, r1 }
    }

    pub fn map(&self, v: f64) -> f64 {
        let span = self.d1 - self.d0;
        if span == 0.0 || !span.is_finite() {
            return (self.r0 + self.r1) / 2.0;
        }
        self.r0 + (v - self.d0) / span * (self.r1 - self.r0)
    }
}

/// The domain a value axis shows for data from `lo` to `hi`: a margin on
/// both sides, and some room around a constant.
pub fn padded(lo: f64, hi: f64) -> (f64, f64) {
    let span = hi - lo;
    let pad = if span > 0.0 {
        span * 0.08
    } else if lo != 0.0 {
        lo.abs() * 0.05
    } else {
        1.0
    };
    (lo - pad, hi + pad)
}

/// Round values from `lo` to `hi`, about `n` of them, and their step.
pub fn ticks(lo: f64, hi: f64, n: usize) -> (Vec<f64>, f64) {
    let span = hi - lo;
    if !span.is_finite() || span <= 0.0 || n == 0 {
        return (Vec::new(), 0.0);
    }
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    let out = (first..=last).map(|k| k as f64 * step).collect();
    (out, step)
}

/// The `q`-quantile of sorted `v` (linear interpolation); `v` is not empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let pos = q * (v.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos.fract());
    match v.get(i + 1) {
        Some(next) => v[i] + (next - v[i]) * frac,
        None => v[i],
    }
}

/// The median of `v` (any order); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    Some(quantile(&s, 0.5))
}

/// A deterministic horizontal offset in [-0.5, 0.5) for the `i`-th dot of a
/// strip: the golden-ratio sequence spreads any number of dots evenly.
pub fn jitter(i: usize) -> f64 {
    ((i as f64 + 1.0) * 0.618_033_988_749_895).fract() - 0.5
}

/// The colour of an empty heat-map cell: no thread there.
pub const EMPTY: &str = "#eef1f4";

/// The heat maps' sequential colour for `t` in [0, 1], light to dark blue
/// (ColorBrewer's Blues, which also reads in greyscale).
pub fn ramp(t: f64) -> String {
    const STOPS: [(f64, [u8; 3]); 5] = [
        (0.0, [0xde, 0xeb, 0xf7]),
        (0.25, [0x9e, 0xca, 0xe1]),
        (0.5, [0x42, 0x92, 0xc6]),
        (0.75, [0x21, 0x71, 0xb5]),
        (1.0, [0x08, 0x30, 0x6b]),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let k = STOPS.iter().rposition(|(s, _)| *s <= t).unwrap_or(0);
    let (s0, c0) = STOPS[k];
    let (s1, c1) = STOPS[(k + 1).min(STOPS.len() - 1)];
    let f = if s1 > s0 { (t - s0) / (s1 - s0) } else { 0.0 };
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    format!(
        "#{:02x}{:02x}{:02x}",
        mix(c0[0], c1[0]),
        mix(c0[1], c1[1]),
        mix(c0[2], c1[2])
    )
}
