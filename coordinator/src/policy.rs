//! How cells are judged: a verdict policy's defaults and limits, and how
//! one is read.
//!
//! The matrix (`[verdict]`) writes a policy into each cell; results,
//! reruns and histories read it. Both sides import this room, which imports
//! neither: the constants a matrix is checked against and the defaults a
//! comparison falls back to are one set.

use farm_proto::VerdictPolicy;

use crate::cell::Cell;

/// The smallest effect called a change when the matrix does not say, in
/// percent: below LKP's 5% and Perfherder's 2% thresholds' spirit, at the
/// noise our verdicts resolve with 10 runs a side.
pub const DEFAULT_MIN_EFFECT_PCT: f64 = 2.0;

/// The most runs one cell may reach with the runs verdicts add.
pub const MAX_RUNS_PER_CELL: u32 = 1000;

/// The most points a history reads: the latest of its series. Change
/// points are about the recent regimes, and a lookup of a series with
/// years of daily matrices must cost the same as one of a month's.
pub const HISTORY_POINTS: usize = 1_000;

/// The policy of a cell, or the defaults of a matrix without `[verdict]`
/// (cells stored before policies existed).
pub fn of(cell: &Cell) -> VerdictPolicy {
    cell.verdict.clone().unwrap_or(VerdictPolicy {
        min_effect: DEFAULT_MIN_EFFECT_PCT / 100.0,
        min_effect_by_metric: Default::default(),
        max_runs: 0,
        repetitions: 0,
        mix_executors: false,
        drift_window: 0,
    })
}

/// The drift window of a policy: the matrix's, or the default for cells
/// stored before it existed (0).
pub fn drift_window(policy: &VerdictPolicy) -> usize {
    match policy.drift_window {
        0 => farm_analysis::drift::DEFAULT_WINDOW,
        w => w as usize,
    }
}

/// The policy's minimum effect for metric `name`.
pub fn min_effect(policy: &VerdictPolicy, name: &str) -> f64 {
    policy
        .min_effect_by_metric
        .get(name)
        .copied()
        .unwrap_or(policy.min_effect)
}
