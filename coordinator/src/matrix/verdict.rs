//! `[verdict]`: how cells are judged against their baselines.

use std::collections::HashMap;

use farm_proto::VerdictPolicy;
use toml::Spanned;

use crate::policy::{DEFAULT_MIN_EFFECT_PCT, HISTORY_POINTS, MAX_RUNS_PER_CELL};

use super::checks::bounded;
use super::location::{Checked, Issue};
use super::raw::{Number, RawVerdict};

/// The `[verdict]` table, checked.
pub(super) fn verdict_policy(
    raw: Option<&Spanned<RawVerdict>>,
    repetitions: u32,
) -> Checked<VerdictPolicy> {
    let pct = |v: &Spanned<Number>, key: String| -> Checked<f64> {
        let x = match *v.get_ref() {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        };
        if !(0.0..=100.0).contains(&x) {
            return Err(Issue::new(
                v.span(),
                key,
                format!("{x} is out of range 0..=100 (percent)"),
            ));
        }
        Ok(x / 100.0)
    };
    let default_max = repetitions.saturating_mul(3).min(MAX_RUNS_PER_CELL);
    let Some(raw) = raw else {
        return Ok(VerdictPolicy {
            min_effect: DEFAULT_MIN_EFFECT_PCT / 100.0,
            min_effect_by_metric: Default::default(),
            max_runs: default_max,
            repetitions,
            mix_executors: false,
            // 0: the default (`policy::drift_window`); a field left at its
            // default costs no bytes in every cell.
            drift_window: 0,
        });
    };
    let raw = raw.get_ref();
    let min_effect = match &raw.min_effect_pct {
        Some(v) => pct(v, "verdict.min_effect_pct".into())?,
        None => DEFAULT_MIN_EFFECT_PCT / 100.0,
    };
    let max_runs = bounded(
        raw.max_runs.as_ref(),
        "verdict.max_runs",
        i64::from(repetitions)..=i64::from(MAX_RUNS_PER_CELL.max(repetitions)),
        default_max.max(repetitions),
    )?;
    // At least the points a drift needs; at most the points a history
    // keeps.
    let drift_window = bounded(
        raw.drift_window.as_ref(),
        "verdict.drift_window",
        farm_analysis::drift::MIN_POINTS as i64..=HISTORY_POINTS as i64,
        0,
    )?;
    let mut by_metric = HashMap::new();
    for (name, v) in &raw.min_effect_pct_by_metric {
        let key = format!("verdict.min_effect_pct_by_metric.{}", name.get_ref());
        by_metric.insert(name.get_ref().clone(), pct(v, key)?);
    }
    Ok(VerdictPolicy {
        min_effect,
        min_effect_by_metric: by_metric,
        max_runs,
        repetitions,
        mix_executors: raw.mix_executors,
        drift_window,
    })
}
