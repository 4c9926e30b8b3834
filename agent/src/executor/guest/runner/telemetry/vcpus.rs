//! The guest's vCPUs as its host gave them, for reading a verdict's spread
//! against: how many were online during the workload (`guest_cpus`), and
//! the share of their time the hypervisor stole (`steal_pct`, the `cpu`
//! line's steal column between the first and the last sweep). Under TCG
//! steal is never accounted (it reads 0); under KVM it is the time the
//! host ran something else while a vCPU wanted to run.

use farm_proto::Metric;
use farm_spec::metric;

use super::Sweep;
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

#[cfg(test)]
mod tests {
    use super::super::Observed;

    fn feed(lines: &[&str]) -> Vec<(String, f64)> {
        let mut obs = Observed::new();
        for line in lines {
            let (kind, rest) = line.split_once(' ').unwrap();
            assert!(obs.line(kind, rest).unwrap(), "{line}");
        }
        super::metrics(&obs.sweeps)
            .into_iter()
            .map(|m| (m.name, m.value))
            .collect()
    }

    #[test]
    fn vcpus_online_and_the_share_stolen() {
        // A 2-vCPU KVM guest whose host ran something else for 40 of the
        // 320 ticks between the first sweep and the last.
        assert_eq!(
            feed(&[
                "sample 5.10",
                "cpu cpu  1000 0 100 500 0 0 0 100 0 0",
                "cpu cpu0 500 0 50 250 0 0 0 50 0 0",
                "cpu cpu1 500 0 50 250 0 0 0 50 0 0",
                "sample 5.60",
                "cpu cpu  1100 0 110 530 0 0 0 120 0 0",
                "sample 6.10",
                "cpu cpu  1200 0 120 560 0 0 0 140 0 0",
                "cpu cpu0 600 0 60 280 0 0 0 70 0 0",
                "cpu cpu1 600 0 60 280 0 0 0 70 0 0",
            ]),
            [
                ("guest_cpus".to_string(), 2.0),
                ("steal_pct".to_string(), 12.5)
            ]
        );
        // TCG accounts no steal; one sweep has no interval to speak of.
        assert_eq!(
            feed(&[
                "sample 5.10",
                "cpu cpu  1026 0 456 11801 6 0 17 0 0 0",
                "cpu cpu0 310 0 120 2890 3 0 5 0 0 0",
            ]),
            [("guest_cpus".to_string(), 1.0)]
        );
        assert_eq!(feed(&["sample 5.10"]), []);
    }
}
