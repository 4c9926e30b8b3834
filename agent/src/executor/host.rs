//! The host executor: the workload runs on this machine, inside the run's
//! machine state, beside its competing loads.
//!
//! A run: apply the machine state, start the competing loads (and a
//! client/server tool's server), run the workload under the telemetry
//! sampler, stop what runs beside it, restore the state.
//!
//! Layout:
//! - this file: a host run from end to end ([`Host`]) and the order of its
//!   steps;
//! - [`process`]: one child process, measured over its whole process tree,
//!   with timeout and cancellation (guests' QEMU is started the same way);
//! - `background`: the processes that run beside the measured one and are
//!   stopped after it: competing loads, and a client/server tool's server
//!   (started first, waited for until its port listens);
//! - `pin`: udp-stream's threads pinned to the CPUs the run asks for.
//!
//! Telemetry (sampler, perf counters, interrupts) follows the measured
//! process tree only, whatever the workload: for a client/server tool that is
//! the client; the server runs beside it like a load.

mod background;
pub(super) mod pin;
pub mod process;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use farm_proto::{Metric, RunAssignment, RunResult};
use farm_runtime::trace::TARGET;
use farm_spec::metric::{SYS_S, USER_S, WALL_S};
use tracing::{info_span, warn};

use super::contract::{Context, End, Executor, Outcome, Run, known_metric, lock, unix_ms};
use super::launch::{self, Launch, Output};
use crate::state::journal::Journal;
use crate::state::{Applier, Placement};
use crate::telemetry::loads::Tree;
use crate::telemetry::placement::NodeMap;
use crate::telemetry::sampler::{self, Collected, Sampler};
use crate::telemetry::{interrupts, procstat, report, topology};
use background::Background;
use pin::Pinner;
pub use process::{Exit, Running, Spec, run, start};

/// How long a client/server tool's server may take to listen on its port.
const SERVER_READY: Duration = Duration::from_secs(10);

/// Background processes live until stopped; their own timeout, this much
/// after the run's, is only a backstop.
const BACKGROUND_GRACE: Duration = Duration::from_secs(60);

/// Why a host run did not get as far as a finished workload.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Refused(#[from] super::contract::Refusal),
    #[error("assignment carries no workload")]
    NoWorkload,
    #[error(transparent)]
    Launch(#[from] launch::Error),
    #[error("load `{0}` needs a server of its own; only the measured workload may have one")]
    LoadWithServer(&'static str),
    #[error(transparent)]
    State(#[from] crate::state::Error),
    #[error(transparent)]
    Background(#[from] background::Error),
    #[error(
        "server {0}: port {1} is already in use on this machine; give the workload another `port`"
    )]
    PortInUse(String, u16),
    #[error("server {0}: it did not start")]
    ServerNotStarted(String),
    #[error("server {0}: {1}")]
    ServerNotReady(String, #[source] background::Error),
    #[error("starting the sampler: {0}")]
    Sampler(#[source] std::io::Error),
    #[error("starting the pinning thread: {0}")]
    Pinner(#[source] std::io::Error),
    #[error("running {}: {source}", program.display())]
    Run {
        program: PathBuf,
        source: std::io::Error,
    },
}

/// The host executor.
pub struct Host;

impl Executor for Host {
    fn execute(&self, run: &Run<'_>, ctx: &Context<'_>) -> RunResult {
        let a = run.assignment;
        let caps = ctx.caps;
        let started = SystemTime::now();
        let mut result = RunResult {
            run: a.run.clone(),
            executor: farm_spec::Executor::Host.to_string(),
            arch: caps.arch.clone(),
            kernel_release: caps.kernel_release.clone(),
            started_unix_ms: unix_ms(started),
            ..Default::default()
        };
        let measured = prepare_and_run(run, ctx);
        // Whatever happened, the machine goes back as it was.
        let restored =
            info_span!(target: TARGET, "restore").in_scope(|| lock(ctx.journal).restore());
        result.finished_unix_ms = unix_ms(SystemTime::now());
        match (measured, restored) {
            (Ok((outcome, output)), Ok(_)) => {
                super::contract::finish(&mut result, outcome, output, a.timeout_s)
            }
            (Err(e), Ok(_)) => result.error = e.to_string(),
            (measured, Err(e)) => {
                result.error = format!(
                    "restoring machine state: {e}{}",
                    measured
                        .err()
                        .map(|o| format!(" (after: {o})"))
                        .unwrap_or_default()
                );
            }
        }
        result
    }
}

/// What the process executor starts for `program`.
fn spec(program: &launch::Program, cgroups: Vec<PathBuf>, timeout: Duration, perf: bool) -> Spec {
    Spec {
        program: program.path.clone(),
        args: program.args.clone(),
        env: program.env.clone(),
        timeout,
        cgroups,
        perf,
    }
}

fn tag(a: &RunAssignment) -> String {
    a.run
        .as_ref()
        .map(|r| format!("{}-a{}", r.run_id, r.attempt))
        .unwrap_or_else(|| "run".into())
}

/// The process's outcome as every executor's: its times first.
fn outcome(
    out: process::Outcome,
    metrics: Vec<Metric>,
    telemetry: farm_proto::Telemetry,
) -> Outcome {
    let end = match (&out.exit, out.cancelled, out.timed_out) {
        (_, true, _) => End::Cancelled,
        (_, _, true) => End::TimedOut,
        (Exit::Code(c), _, _) => End::Exited(*c),
        (Exit::Signal(s), _, _) => End::Signalled(*s),
    };
    let mut all = vec![
        known_metric(WALL_S, out.wall.as_secs_f64()),
        known_metric(USER_S, out.user.as_secs_f64()),
        known_metric(SYS_S, out.sys.as_secs_f64()),
    ];
    all.extend(metrics);
    Outcome {
        end,
        stdout: out.stdout,
        stderr: out.stderr_tail,
        metrics: all,
        telemetry: Some(telemetry),
        console: None,
    }
}

fn prepare_and_run(run: &Run<'_>, ctx: &Context<'_>) -> Result<(Outcome, Output), Error> {
    super::contract::check(run, ctx.caps)?;
    let a = run.assignment;
    let workload = a.workload.as_ref().ok_or(Error::NoWorkload)?;
    let launch = launch::launch(workload, ctx.workload)?;
    let loads = a
        .loads
        .iter()
        .map(|l| launch::launch(l, ctx.workload))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(load) = loads.iter().find(|l| l.server.is_some()) {
        return Err(Error::LoadWithServer(load.name));
    }
    let timeout = Duration::from_secs(u64::from(a.timeout_s.max(1)));
    let root = lock(ctx.journal).root().to_path_buf();
    // The topology before the state and after it (seed 000: a level gone after a hotplug cycle).
    let topology_before = topology::read(&root)
        .map_err(|e| warn!("topology: {e}"))
        .ok();
    let placement = match &run.state {
        Some(state) => info_span!(target: TARGET, "state_apply").in_scope(|| {
            let mut journal = lock(ctx.journal);
            Applier {
                journal: &mut journal,
                caps: ctx.caps,
            }
            .apply(state, &tag(a), a.loads.len())
        })?,
        None => Placement {
            workload: Vec::new(),
            loads: vec![Vec::new(); a.loads.len()],
        },
    };
    // Every run, whatever its state, where the kernel has them: the
    // balancing counters of /proc/schedstat count only with them on
    // (journalled, undone with the state).
    // A failure costs the counters, not the run.
    let schedstats = crate::state::sched::enable_schedstats(&mut lock(ctx.journal), &root)
        .unwrap_or_else(|e| {
            warn!("schedstats: {e}");
            false
        });
    let load_specs: Vec<Spec> = loads
        .iter()
        .zip(placement.loads)
        .map(|(l, cgroups)| spec(&l.program, cgroups, timeout + BACKGROUND_GRACE, false))
        .collect();
    let topology_after = topology::read(&root)
        .map_err(|e| warn!("topology: {e}"))
        .ok();
    let allowed = std::fs::read_to_string(root.join("sys/devices/system/cpu/online"))
        .ok()
        .and_then(|s| crate::capabilities::parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(|| ctx.caps.online_cpus.clone());
    let loads = Background::start(load_specs, ctx.journal.clone())?;
    let server = match &launch.server {
        Some(server) => {
            match start_server(server, &placement.workload, timeout, ctx.journal, &root) {
                Ok(server) => Some(server),
                Err(e) => {
                    loads.stop();
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let spec = spec(&launch.program, placement.workload, timeout, true);
    let measured = info_span!(target: TARGET, "workload", program = %spec.program.display())
        .in_scope(|| measure(ctx, &root, &spec, &launch, loads.pids(), schedstats));
    if let Some(server) = server {
        server.stop();
    }
    loads.stop();
    let (out, collected, irqs, load_trees, balancing) = measured?;
    let map = if ctx.caps.numa_nodes.is_empty() {
        NodeMap::single(&ctx.caps.online_cpus)
    } else {
        NodeMap::from_nodes(&ctx.caps.numa_nodes)
    };
    let _telemetry = info_span!(target: TARGET, "telemetry").entered();
    let (mut metrics, telemetry) = report::build(&report::Inputs {
        wall: out.wall,
        counts: out.counts,
        runqueue_wait_s: None,
        irqs: &irqs,
        collected: &collected,
        map: &map,
        allowed: &allowed,
        user_hz: procstat::user_hz(),
        topology: topology_before.as_ref().zip(topology_after.as_ref()),
    });
    if let Some((before, after)) = balancing {
        match crate::telemetry::schedstat::host_balancing(&before, &after, topology_after.as_ref())
        {
            Ok(lb) => metrics.extend(
                lb.into_iter()
                    .map(|(name, unit, v)| report::known_named(name, unit, v as f64)),
            ),
            Err(e) => warn!("schedstat: {e}"),
        }
    }
    let (before, after) = load_trees;
    if let Some(cpus) =
        crate::telemetry::loads::cpus(&before, &after, procstat::user_hz(), out.wall.as_secs_f64())
    {
        metrics.push(report::known(farm_spec::metric::LOADS_CPUS, cpus));
        // Fewer of them on a node is less competition there.
        for (node, threads) in
            crate::telemetry::loads::threads_per_node(&before, &after, map.nodes(), |c| map.node(c))
        {
            let name = farm_spec::metric::loads_node::name(node);
            metrics.push(report::known_named(name, "threads", threads));
        }
    }
    Ok((outcome(out, metrics, telemetry), launch.output))
}

/// Starts a client/server tool's server in the workload's cgroups and waits
/// until its port listens. The port must be free before: a server already
/// there, someone else's, would answer the client in its place.
fn start_server(
    server: &launch::Server,
    cgroups: &[PathBuf],
    timeout: Duration,
    journal: &Arc<Mutex<Journal>>,
    root: &Path,
) -> Result<Background, Error> {
    let name = server.program.path.display().to_string();
    if background::listening(root, server.port) {
        return Err(Error::PortInUse(name, server.port));
    }
    let spec = spec(
        &server.program,
        cgroups.to_vec(),
        timeout + BACKGROUND_GRACE,
        false,
    );
    let started = Background::start(vec![spec], journal.clone())?;
    let ready = match started.pids().first() {
        Some(&pid) => background::wait_listening(root, server.port, pid, SERVER_READY)
            .map_err(|e| Error::ServerNotReady(name, e)),
        None => Err(Error::ServerNotStarted(name)),
    };
    match ready {
        Ok(()) => Ok(started),
        Err(e) => {
            started.stop();
            Err(e)
        }
    }
}

/// What [`measure`] returns: the workload's outcome, the sampler's sweeps,
/// the interrupts' deltas, the loads' trees at its start and end, and
/// `/proc/schedstat` before and after it.
type Measured = (
    process::Outcome,
    Collected,
    Vec<interrupts::IrqDelta>,
    (Vec<Tree>, Vec<Tree>),
    Option<(String, String)>,
);

/// Runs the workload under the sampler, with /proc/interrupts and the
/// competing loads' CPU time (`loads`: their pids) read around it.
fn measure(
    ctx: &Context<'_>,
    root: &Path,
    spec: &Spec,
    launch: &Launch,
    loads: &[i32],
    schedstats: bool,
) -> Result<Measured, Error> {
    let schedstat = || {
        schedstats
            .then(|| std::fs::read_to_string(root.join("proc/schedstat")))
            .and_then(|r| r.map_err(|e| warn!("schedstat: {e}")).ok())
    };
    let load_trees = || -> Vec<Tree> {
        loads
            .iter()
            .map(|&p| crate::telemetry::loads::tree(root, p as u32))
            .collect()
    };
    // Started before the workload so that they do not inherit its counters.
    let sampler = Sampler::spawn(root, sampler::DEFAULT_INTERVAL).map_err(Error::Sampler)?;
    let pinner = Pinner::spawn(root, &launch.pins).map_err(Error::Pinner)?;
    let irq_before = interrupts::read(root)
        .map_err(|e| warn!("interrupts: {e}"))
        .ok();
    let schedstat_before = schedstat();
    let mut loads_before = Vec::new();
    let mut loads_after = Vec::new();
    let out = process::start(spec, ctx.killer).and_then(|running| {
        loads_before = load_trees();
        sampler.track(running.pid() as u32);
        if let Some(pinner) = &pinner {
            pinner.pin(running.pid());
        }
        let out = running.wait();
        loads_after = load_trees();
        out
    });
    if let Some(pinner) = pinner {
        pinner.finish();
    }
    let irq_after = interrupts::read(root)
        .map_err(|e| warn!("interrupts: {e}"))
        .ok();
    let balancing = schedstat_before.zip(schedstat());
    let collected = sampler.finish();
    let out = out.map_err(|source| Error::Run {
        program: spec.program.clone(),
        source,
    })?;
    let irqs = match (irq_before, irq_after) {
        (Some(b), Some(a)) => interrupts::delta(&b, &a)
            .map_err(|e| warn!("interrupts: {e}"))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Ok((out, collected, irqs, (loads_before, loads_after), balancing))
}
