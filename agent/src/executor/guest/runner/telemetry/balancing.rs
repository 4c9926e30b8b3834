//! The guest's `/proc/schedstat` before and after the workload (`schedstat
//! <before|after> <line>`, the runner having set kernel.sched_schedstats=1
//! first), turned into load-balancing metrics per sched-domain level
//! ([`crate::telemetry::schedstat`]), named by the domain levels the guest
//! reported after its state.

use std::collections::BTreeMap;

use farm_proto::Metric;

use super::error::{BuildError, Reason};
use super::sweep::Phase;
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

    /// The levels' counters as metrics, and the runqueue wait of every
    /// task in the guest over the workload (s); none when the guest's
    /// kernel has no /proc/schedstat (no readings at all).
    pub(super) fn metrics(
        &self,
        domains: &BTreeMap<u32, Vec<String>>,
    ) -> Result<(Vec<Metric>, Option<f64>), BuildError> {
        match (self.before.is_empty(), self.after.is_empty()) {
            (true, true) => Ok((Vec::new(), None)),
            (false, true) => Err(BuildError::BeforeOnly("schedstat")),
            (true, false) => Err(BuildError::AfterOnly("schedstat")),
            (false, false) => {
                let parse = |lines: &[String]| {
                    schedstat::parse(&lines.join("\n"))
                        .map_err(|e| BuildError::Schedstat(e.to_string()))
                };
                let (before, after) = (parse(&self.before)?, parse(&self.after)?);
                let levels = schedstat::delta(&before, &after, domains);
                let metrics = schedstat::metrics(&levels)
                    .into_iter()
                    .map(|(name, unit, v)| known_named(name, unit, v as f64))
                    .collect();
                Ok((metrics, Some(schedstat::wait_s(&before, &after))))
            }
        }
    }
}
