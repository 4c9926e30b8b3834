//! The guest's vCPUs as its host gave them, for reading a verdict's spread
//! against: how many were online during the workload (`guest_cpus`), and
//! the share of their time the hypervisor stole (`steal_pct`, the `cpu`
//! line's steal column between the first and the last sweep). Under TCG
//! steal is never accounted (it reads 0); under KVM it is the time the
//! host ran something else while a vCPU wanted to run.

use farm_proto::Metric;
use farm_spec::metric;

use super::sweep::Sweep;
use crate::telemetry::report::known;

/// `guest_cpus` from the last sweep's `cpu<N>` lines (the CPUs online then,
/// after the state's hotplug), `steal_pct` over the sweeps' `cpu` lines;
/// either left out when the sweeps did not read them.
pub(super) fn metrics(sweeps: &[Sweep]) -> Vec<Metric> {
    let mut out = Vec::new();
    if let Some(last) = sweeps.iter().rev().find(|s| !s.per_cpu.is_empty()) {
        out.push(known(metric::GUEST_CPUS, last.per_cpu.len() as f64));
    }
    let mut totals = sweeps.iter().filter_map(|s| s.total.as_ref());
    if let (Some(first), Some(last)) = (totals.next(), totals.next_back()) {
        let all = last.total().saturating_sub(first.total());
        let stolen = last.steal.saturating_sub(first.steal);
        if all > 0 {
            out.push(known(metric::STEAL_PCT, stolen as f64 / all as f64 * 100.0));
        }
    }
    out
}
