//! The `[[hosts]]` axis: host selectors, and whether their executors suit the kernels.

use std::ops::RangeInclusive;

use farm_proto::HostSelector;
use farm_spec::{Executor, Kernel};
use toml::Spanned;

use super::checks::{bounded, non_empty, non_empty_axis, unique_name};
use super::location::{Checked, Issue, join};
use super::raw::{RawHost, RawMatrix};

const MIN_CPUS: RangeInclusive<i64> = 1..=100_000;
const MIN_NUMA_NODES: RangeInclusive<i64> = 1..=1024;
const ANY_HOST: &str = "any";

pub(super) fn hosts(raw: Option<&Spanned<Vec<Spanned<RawHost>>>>) -> Checked<Vec<HostSelector>> {
    let Some(raw) = raw else {
        return Ok(vec![HostSelector {
            name: ANY_HOST.to_owned(),
            ..Default::default()
        }]);
    };
    let mut out: Vec<HostSelector> = Vec::new();
    for (i, host) in non_empty_axis(raw, "hosts")?.iter().enumerate() {
        let host = host.get_ref();
        let key = format!("hosts[{i}]");
        let name = unique_name(
            &host.name,
            &key,
            "host",
            out.iter().map(|h| h.name.as_str()),
        )?;
        let arch = match &host.arch {
            None => String::new(),
            Some(a) => non_empty(a, &join(&key, "arch"))?,
        };
        let min_cpus = bounded(
            host.min_cpus.as_ref(),
            &join(&key, "min_cpus"),
            MIN_CPUS,
            0u32,
        )?;
        let min_numa_nodes = bounded(
            host.min_numa_nodes.as_ref(),
            &join(&key, "min_numa_nodes"),
            MIN_NUMA_NODES,
            0u32,
        )?;
        let executor = match &host.executor {
            None => String::new(),
            Some(e) => e
                .get_ref()
                .parse::<Executor>()
                .map_err(|why| Issue::new(e.span(), join(&key, "executor"), why.to_string()))?
                .as_str()
                .to_owned(),
        };
        out.push(HostSelector {
            name,
            arch,
            min_cpus,
            min_numa_nodes,
            executor,
        });
    }
    Ok(out)
}

/// Every kernel meets every host selector (cells are their product), so a
/// selector's executor must suit every kernel: `host` none that boots in a
/// guest, `tcg` and `kvm` only those.
pub(super) fn executors_fit(
    raw: &RawMatrix,
    kernels: &[Kernel],
    hosts: &[HostSelector],
) -> Checked<()> {
    for (h, host) in hosts.iter().enumerate() {
        // Checked by `hosts`; an empty one (left out) suits every kernel.
        let Ok(executor) = host.executor.parse::<Executor>() else {
            continue;
        };
        let guest_executor = executor.is_guest();
        let Some(kernel) = kernels.iter().find(|k| k.is_guest() != guest_executor) else {
            continue;
        };
        let span = raw
            .hosts
            .as_ref()
            .and_then(|v| v.get_ref().get(h))
            .and_then(|e| e.get_ref().executor.as_ref())
            .map_or(0..0, Spanned::span);
        let why = if guest_executor {
            format!("`{kernel}` runs on the agent's own kernel, not in a guest")
        } else {
            format!("`{kernel}` boots in a guest (executor tcg or kvm, or leave it out)")
        };
        return Err(Issue::new(
            span,
            format!("hosts[{h}].executor"),
            format!(
                "executor `{}` cannot run every kernel: {why}",
                host.executor
            ),
        ));
    }
    Ok(())
}
