//! Text of the report: escaping, numbers, p-values and dates. Pure.

/// `s` safe inside HTML text and inside a quoted attribute (HTML or SVG).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A value for people: grouped thousands, a precision that fits its size
/// (`56,850`, `231`, `12.4`, `2.31`, `0.0234`), `–` for a missing one.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    let a = v.abs();
    if a >= 1e15 {
        format!("{v:.3e}")
    } else if a >= 1000.0 {
        grouped(v.round())
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a == 0.0 {
        "0".into()
    } else {
        // Three significant digits.
        let decimals = (2.0 - a.log10().floor()).clamp(0.0, 12.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// Large numbers in few characters: `880M`, `27.5k`, `1.02G`; smaller
/// ones as [`num`] writes them.
pub fn short(v: f64) -> String {
    let (scale, suffix) = magnitude(v.abs());
    if scale == 1.0 {
        return num(v);
    }
    let x = v / scale;
    let decimals = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{x:.decimals$}{suffix}")
}

/// The power of 1000 to write `a` (from 10,000 on) with, and its suffix.
fn magnitude(a: f64) -> (f64, &'static str) {
    const SI: [(f64, &str); 4] = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    if !a.is_finite() || a < 1e4 {
        return (1.0, "");
    }
    SI.iter()
        .find(|(s, _)| a >= *s)
        .map_or((1.0, ""), |(s, x)| (*s, *x))
}

/// An axis label for `v` on ticks `step` apart: as many decimals as the step
/// has (`7.5`, `0.25`); large values short (`800M`, `27.5k`).
pub fn tick(v: f64, step: f64) -> String {
    // One scale for the whole axis: the step's.
    let (scale, suffix) = if step.abs() >= 1e3 {
        magnitude(step.abs().max(1e4))
    } else {
        (1.0, "")
    };
    let (v, step) = (v / scale, step / scale);
    let decimals = (0..=9)
        .find(|d| {
            let x = step * 10f64.powi(*d);
            (x - x.round()).abs() < 1e-6 * x.abs().max(1.0)
        })
        .unwrap_or(9) as usize;
    let text = if decimals == 0 && suffix.is_empty() {
        grouped(v.round())
    } else {
        format!("{v:.decimals$}")
    };
    format!("{text}{suffix}")
}

/// An integral `v` with commas between thousands: `-56,850`.
fn grouped(v: f64) -> String {
    let digits = format!("{:.0}", v.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < 0.0 && digits != "0" {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A ratio of medians: `×1.103`.
pub fn ratio(r: f64) -> String {
    if r.is_finite() {
        format!("×{r:.3}")
    } else {
        "–".into()
    }
}

/// A p-value: `p = 0.0002`, `p < 0.0001`.
pub fn p_value(p: f64) -> String {
    if !p.is_finite() {
        "p = –".into()
    } else if p < 1e-4 {
        "p < 0.0001".into()
    } else if p < 1e-3 {
        format!("p = {p:.4}")
    } else if p < 1e-2 {
        format!("p = {p:.3}")
    } else {
        format!("p = {p:.2}")
    }
}
