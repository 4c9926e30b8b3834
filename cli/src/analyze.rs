//! `farmctl analyze`: the farm's statistics on plain files, for other tools.
//!
//! Each file holds one number per line. The interface is fixed (other tools
//! call it): `compare --baseline FILE --candidate FILE [--higher-is-better]
//! [--min-effect PCT] [--json]` and `changepoints --series FILE [--json]`.
//! Bad input is one line naming the file and the line, and exit status 2.

use std::path::Path;

use farm_analysis::{Direction, changepoint, compare};
use serde_json::json;

use crate::input::BadInput;

/// The numbers of `file`, one per line; at least 2.
pub fn read_numbers(file: &Path) -> Result<Vec<f64>, BadInput> {
    let name = file.display();
    let text = std::fs::read_to_string(file).map_err(|e| BadInput(format!("{name}: {e}")))?;
    let mut values = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let field = line.trim();
        let bad = |why: &str| BadInput(format!("{name} line {}: {field:?} {why}", i + 1));
        let value: f64 = field.parse().map_err(|_| bad("is not a number"))?;
        if !value.is_finite() {
            return Err(bad("is not a finite number"));
        }
        values.push(value);
    }
    match values.len() {
        0 => Err(BadInput(format!(
            "{name}: empty, one number per line expected"
        ))),
        1 => Err(BadInput(format!(
            "{name} line 1: only one value; at least 2 are needed"
        ))),
        _ => Ok(values),
    }
}

pub struct CompareArgs<'a> {
    pub baseline: &'a Path,
    pub candidate: &'a Path,
    pub higher_is_better: bool,
    /// Percent.
    pub min_effect: Option<f64>,
    pub json: bool,
}

pub fn compare(a: &CompareArgs<'_>) -> anyhow::Result<()> {
    let baseline = read_numbers(a.baseline)?;
    let candidate = read_numbers(a.candidate)?;
    let mut options = compare::Options::default();
    if let Some(pct) = a.min_effect {
        if !(0.0..100.0).contains(&pct) {
            return Err(BadInput(format!(
                "--min-effect {pct}: a percentage from 0 to below 100 expected"
            ))
            .into());
        }
        options.min_effect = pct / 100.0;
    }
    let direction = if a.higher_is_better {
        Direction::HigherIsBetter
    } else {
        Direction::LowerIsBetter
    };
    let c = compare::compare(&baseline, &candidate, direction, &options)
        .map_err(|e| BadInput(e.to_string()))?;
    if a.json {
        let out = json!({
            "verdict": c.verdict.as_str(),
            "ratio": c.ratio,
            "ci_low": c.ci_low,
            "ci_high": c.ci_high,
            "p_value": c.p_value,
            "n_baseline": c.n_baseline,
            "n_candidate": c.n_candidate,
        });
        println!("{out}");
    } else {
        println!(
            "{}: candidate median ×{:.4} the baseline's (95% CI {:.4}–{:.4}), Mann-Whitney p = {:.3e}, {} vs {} runs",
            c.verdict.as_str(),
            c.ratio,
            c.ci_low,
            c.ci_high,
            c.p_value,
            c.n_candidate,
            c.n_baseline
        );
        for f in &c.findings {
            println!("  {}", farm_analysis::diagnosis::finding_text(f, ""));
        }
    }
    Ok(())
}

pub fn changepoints(series: &Path, drift_window: usize, json: bool) -> anyhow::Result<()> {
    let values = read_numbers(series)?;
    let points = changepoint::try_detect(&values, &changepoint::Options::default())
        .map_err(|e| BadInput(format!("{}: {e}", series.display())))?;
    let since = points.last().map_or(0, |p| p.index);
    let drift = farm_analysis::drift::drift(&values, since, drift_window)
        .map(|d| farm_coordinator::results::wire_drift(&d));
    if json {
        let mut out = json!({
            "change_points": points.iter().map(|p| json!({
                "index": p.index,
                "mean_before": p.mean_before,
                "mean_after": p.mean_after,
                "p_value": p.p_value,
            })).collect::<Vec<_>>(),
        });
        if let Some(d) = &drift {
            out["drift"] = crate::render::drift_json(d);
        }
        println!("{out}");
        return Ok(());
    }
    if let Some(d) = &drift {
        println!("{}", crate::render::drift_text("the series", d, "point"));
    }
    if points.is_empty() {
        println!("no change points in {} values", values.len());
    } else {
        for p in &points {
            println!(
                "at {}: mean {:.6} → {:.6} (×{:.4}), p = {:.3e}",
                p.index,
                p.mean_before,
                p.mean_after,
                p.mean_after / p.mean_before,
                p.p_value
            );
        }
    }
    Ok(())
}
