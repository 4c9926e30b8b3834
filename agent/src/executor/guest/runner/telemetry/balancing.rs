//! The guest's `/proc/schedstat` before and after the workload (`schedstat
//! <before|after> <line>`, the runner having set kernel.sched_schedstats=1
//! first), turned into load-balancing metrics per sched-domain level
//! ([`crate::telemetry::schedstat`]), named by the domain levels the guest
//! reported after its state.

use std::collections::BTreeMap;

use farm_proto::Metric;

use super::{BuildError, Phase, Reason};
use crate::telemetry::report::known_named;
use crate::telemetry::schedstat;

/// Lines of one reading at most: 1,024 CPUs with a few levels each.
const MAX_LINES: usize = 8192;

#[derive(Debug, Clone, Default)]
pub(super) struct Readings {
    before: Vec<String>,
    after: Vec<String>,
}

impl Readings {
    pub(super) fn line(&mut self, rest: &str) -> Result<(), Reason> {
        let (phase, raw) = rest.split_once(' ').unwrap_or((rest, ""));
        let lines = match Phase::parse(phase)? {
            Phase::Before => &mut self.before,
            Phase::After => &mut self.after,
        };
        if lines.len() >= MAX_LINES {
            return Err(Reason::TooManyLines(MAX_LINES));
        }
        lines.push(raw.to_owned());
        Ok(())
    }

    /// The levels' counters as metrics; none when the guest's kernel has
    /// no /proc/schedstat (no readings at all).
    pub(super) fn metrics(
        &self,
        domains: &BTreeMap<u32, Vec<String>>,
    ) -> Result<Vec<Metric>, BuildError> {
        match (self.before.is_empty(), self.after.is_empty()) {
            (true, true) => Ok(Vec::new()),
            (false, true) => Err(BuildError::BeforeOnly("schedstat")),
            (true, false) => Err(BuildError::AfterOnly("schedstat")),
            (false, false) => {
                Ok(
                    schedstat::balancing(&self.before.join("\n"), &self.after.join("\n"), domains)
                        .map_err(|e| BuildError::Schedstat(e.to_string()))?
                        .into_iter()
                        .map(|(name, unit, v)| known_named(name, unit, v as f64))
                        .collect(),
                )
            }
        }
    }
}
