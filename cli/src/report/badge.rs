//! A verdict as the page shows it: a coloured badge.

use farm_proto::Verdict;

/// A verdict as the page shows it: a coloured badge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Badge {
    Regression,
    Improvement,
    NoChange,
    Inconclusive,
    /// A baseline cell: compared with, not judged.
    Baseline,
    /// A compared cell or metric the coordinator gave no verdict.
    Unjudged,
}

impl Badge {
    pub(super) fn of(verdict: i32, baseline: bool) -> Badge {
        match Verdict::try_from(verdict) {
            Ok(Verdict::Regression) => Badge::Regression,
            Ok(Verdict::Improvement) => Badge::Improvement,
            Ok(Verdict::NoChange) => Badge::NoChange,
            Ok(Verdict::Inconclusive) => Badge::Inconclusive,
            _ if baseline => Badge::Baseline,
            _ => Badge::Unjudged,
        }
    }

    /// The CSS class, `v-` and the name the JSON interface uses.
    pub(super) fn class(self) -> &'static str {
        match self {
            Badge::Regression => "v-regression",
            Badge::Improvement => "v-improvement",
            Badge::NoChange => "v-no_change",
            Badge::Inconclusive => "v-inconclusive",
            Badge::Baseline => "v-baseline",
            Badge::Unjudged => "v-none",
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Badge::Regression => "regression",
            Badge::Improvement => "improvement",
            Badge::NoChange => "no change",
            Badge::Inconclusive => "inconclusive",
            Badge::Baseline => "baseline",
            Badge::Unjudged => "no verdict",
        }
    }

    pub(super) fn colour(self) -> &'static str {
        match self {
            Badge::Regression => "#d6336c",
            Badge::Improvement => "#2b8a3e",
            Badge::NoChange => "#6c7a89",
            Badge::Inconclusive => "#e67700",
            Badge::Baseline => "#3b5bdb",
            Badge::Unjudged => "#5c6f91",
        }
    }

    /// Worst first: what decides the headline of a cell.
    pub(super) fn severity(self) -> u8 {
        match self {
            Badge::Regression => 5,
            Badge::Inconclusive => 4,
            Badge::Improvement => 3,
            Badge::NoChange => 2,
            Badge::Unjudged => 1,
            Badge::Baseline => 0,
        }
    }

    pub(super) fn html(self) -> String {
        format!(
            r#"<span class="badge {}">{}</span>"#,
            self.class(),
            self.label()
        )
    }
}
