//! A run whose kernel is `debian:<version>`: the workload runs inside a
//! QEMU guest booted with that kernel (see [`crate::guest`]), under TCG.
//!
//! The guest applies the run's hotplug and autogroup before the workload
//! and reports its sched domains before and after (booted with
//! `sched_verbose`), which become the run's topology telemetry: seed 000's
//! "a domain level missing after a hotplug cycle", on a 2-node guest.
//!
//! What a guest run does not do yet, and refuses rather than fakes: cgroup
//! layouts and competing loads inside the guest, external workloads, the
//! placement sampler and perf counters (a guest result carries `wall_s`,
//! the workload's own figures and the topology), cancellation before the
//! guest powers off, and KVM (nested KVM does not boot on the farm's hosts).

use std::time::{Duration, SystemTime};

use farm_proto::{Direction, RunAssignment, RunResult};
use farm_workload::catalogue;

use super::launch::{self, Output};
use super::{Context, metric, unix_ms};
use crate::guest::{initramfs, job, kernels, qemu};

/// The executor name guest results carry.
pub const TCG: &str = "tcg";

/// The arch of the guests this agent boots.
pub const GUEST_ARCH: &str = "x86_64";

/// The guest machine: 4 vCPUs on 2 NUMA nodes, the topology the host lacks.
const CPUS: u32 = 4;
const NODES: u32 = 2;
const MEMORY_MIB: u32 = 512;
/// Booting under TCG before the workload starts, beyond its own timeout.
const BOOT_ALLOWANCE: Duration = Duration::from_secs(120);

/// Executes `a` in a guest; the result says `tcg`, the guest's arch and the
/// release the guest actually booted.
pub fn execute(a: &RunAssignment, ctx: &Context<'_>) -> RunResult {
    let mut result = RunResult {
        run: a.run.clone(),
        executor: TCG.into(),
        arch: GUEST_ARCH.into(),
        started_unix_ms: unix_ms(SystemTime::now()),
        ..Default::default()
    };
    match run(a, ctx) {
        Ok((g, prepared)) => {
            result.kernel_release = g.release.clone();
            result.log_tail = g.console_tail.clone();
            result.telemetry = Some(topology(&g));
            if let Some(begin) = g.begin_after {
                // From the assignment to the workload's start: kernel and
                // image (cached or not), boot, state.
                result.metrics.push(metric(
                    "guest_start_s",
                    prepared.as_secs_f64() + begin.as_secs_f64(),
                    "s",
                    Direction::LowerIsBetter,
                ));
            }
            result
                .metrics
                .push(metric("wall_s", g.wall_s, "s", Direction::LowerIsBetter));
            result.metrics.extend(g.metrics.iter().map(|m| {
                let direction = match m.direction {
                    catalogue::Direction::LowerIsBetter => Direction::LowerIsBetter,
                    catalogue::Direction::HigherIsBetter => Direction::HigherIsBetter,
                };
                metric(&m.name, m.value, &m.unit, direction)
            }));
            if g.exit_code != 0 {
                result.error = format!("workload exited with status {} in the guest", g.exit_code);
            }
        }
        Err(e) => result.error = e,
    }
    result.finished_unix_ms = unix_ms(SystemTime::now());
    result.ok = result.error.is_empty();
    result
}

/// The assignment's machine state as the guest applies it: hotplug and
/// autogroup; cgroups and competing loads are refused (the coordinator
/// refuses such matrices up front).
fn guest_state(a: &RunAssignment) -> Result<job::GuestState, String> {
    if !a.loads.is_empty() {
        return Err("competing loads inside guests are not supported yet".into());
    }
    let mut out = job::GuestState::default();
    let Some(s) = &a.state else {
        return Ok(out);
    };
    if !s.cgroup.is_empty() {
        return Err("cgroup layouts inside guests are not supported yet".into());
    }
    if !s.hotplug.is_empty() {
        let plan = crate::state::hotplug::parse(&s.hotplug)?;
        if plan.cpus.contains(&0) {
            return Err(format!("hotplug `{}`: cpu0 stays online", s.hotplug));
        }
        if let Some(c) = plan.cpus.iter().find(|&&c| c >= CPUS) {
            return Err(format!(
                "hotplug `{}`: the guest has cpus 0-{} (cpu{c} asked)",
                s.hotplug,
                CPUS - 1
            ));
        }
        match plan.mode {
            crate::state::hotplug::Mode::Cycle => out.cycle = plan.cpus,
            crate::state::hotplug::Mode::Offline => out.offline = plan.cpus,
        }
    }
    out.autogroup = s.autogroup.map(|v| v != 0);
    Ok(out)
}

/// The guest's sched domains before and after its state, as the host
/// executor reports topology (names only: debugfs gives no spans here).
fn topology(g: &job::GuestRun) -> farm_proto::Telemetry {
    use crate::telemetry::topology::{self as topo, Domains, Level, Source, Topology};
    type PerCpu = std::collections::BTreeMap<u32, Vec<String>>;
    let snapshot = |m: &PerCpu| Topology {
        source: Source::Debugfs,
        domains: Domains {
            per_cpu: m
                .iter()
                .map(|(cpu, names)| {
                    let levels = names
                        .iter()
                        .map(|n| Level {
                            name: n.clone(),
                            flags: Vec::new(),
                            span: Vec::new(),
                        })
                        .collect();
                    (*cpu, levels)
                })
                .collect(),
        },
    };
    let lines = |m: &PerCpu| -> Vec<String> {
        m.iter()
            .map(|(cpu, names)| format!("cpu{cpu}: {}", names.join(" ")))
            .collect()
    };
    let (before, after) = (snapshot(&g.domains_before), snapshot(&g.domains_after));
    farm_proto::Telemetry {
        topology_source: "guest debugfs sched/domains (sched_verbose)".into(),
        topology_before: lines(&g.domains_before),
        topology_after: lines(&g.domains_after),
        topology_changes: topo::diff(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect(),
        ..Default::default()
    }
}

/// The guest's run, and how long preparing it took (kernel, image).
fn run(a: &RunAssignment, ctx: &Context<'_>) -> Result<(job::GuestRun, Duration), String> {
    let t0 = std::time::Instant::now();
    let cache = ctx
        .workload
        .guest_cache
        .as_ref()
        .ok_or("this agent boots no guests")?;
    let state = guest_state(a)?;
    let w = a
        .workload
        .as_ref()
        .ok_or("the assignment has no workload")?;
    let l = launch::launch(w, ctx.workload)?;
    if !matches!(l.output, Output::MetricLines) {
        return Err(format!(
            "`{}` is an external workload; guests run built-in ones only, for now",
            w.name
        ));
    }
    // A guest boots faster with the small farm-workload binary than with
    // farmctl (which embeds it behind `workload`): use it when it is beside.
    let sibling = ctx.workload.program.with_file_name("farm-workload");
    let skip = ctx.workload.leading_args.len();
    let (binary, args) = if skip > 0 && sibling.is_file() {
        (sibling, l.program.args[skip..].to_vec())
    } else {
        (ctx.workload.program.clone(), l.program.args)
    };
    let job = job::Job::from_args(args).map_err(|e| e.to_string())?;
    let kernel = kernels::resolve(&a.kernel, &cache.join("kernels")).map_err(|e| e.to_string())?;
    let image = job::build_initramfs(
        &cache.join("images"),
        std::path::Path::new(initramfs::BUSYBOX),
        &binary,
        &job,
        &state,
    )
    .map_err(|e| e.to_string())?;
    let dir = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(cache)
        .map_err(|e| {
            format!(
                "a directory for the guest's logs under {}: {e}",
                cache.display()
            )
        })?;
    let machine = qemu::Machine {
        cpus: CPUS,
        memory_mib: MEMORY_MIB,
        nodes: NODES,
        timeout: Duration::from_secs(u64::from(a.timeout_s)) + BOOT_ALLOWANCE,
    };
    tracing::info!(kernel = %kernel.version, downloaded = kernel.downloaded, image_built = image.built, "booting the run's guest");
    let prepared = t0.elapsed();
    let g =
        job::run(&machine, &kernel.vmlinuz, &image.path, dir.path()).map_err(|e| e.to_string())?;
    Ok((g, prepared))
}
