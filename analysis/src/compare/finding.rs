//! What a comparison finds besides its verdict.

/// A finding of its own besides the verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum Finding {
    /// The spread changed (seed 003: 20 s runs became 30–432 s).
    Spread {
        /// Candidate spread / baseline spread: the ratio of the median
        /// absolute deviations from each side's median, of the logarithms
        /// when all values are positive (so a ratio of relative spreads).
        /// Infinite when the baseline does not vary at all.
        ratio: f64,
        /// Two-sided Mann-Whitney test of the absolute deviations.
        p_value: f64,
    },
    /// One side has two modes (seed 001: instances alone on a node or sharing one).
    Bimodal {
        candidate: bool,
        /// The centres of the two modes, low first, and the share of runs in the low one.
        /// Centres are the medians of the runs in each mode.
        low: f64,
        high: f64,
        low_share: f64,
    },
}
