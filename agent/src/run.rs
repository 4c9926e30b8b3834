//! One run: from a pushed assignment to a result, through the host executor.
//!
//! The assignment is checked again here, though the coordinator already did:
//! an agent trusts nothing it receives. The workload must be in the
//! catalogue, its parameters typed and in range, and it becomes an argument
//! vector, never a shell command: for a built-in workload, the
//! `farm-workload` binary's; for an external one, what
//! [`external::command`](crate::external::command) builds for the program
//! this agent found, whose output [`external::parse`](crate::external::parse)
//! reads.
//!
//! Layout:
//! - this file: an assignment from end to end ([`execute`]), the order of
//!   its steps, and what the result holds;
//! - `launch`: a workload, checked, turned into the program to start and the
//!   way to read its output;
//! - `background`: the processes that run beside the measured one and are
//!   stopped after it: competing loads, and a client/server tool's server
//!   (started first, waited for until its port listens);
//! - `pin`: udp-stream's threads pinned to the CPUs the run asks for.
//!
//! Telemetry (sampler, perf counters, interrupts) follows the measured
//! process tree only, whatever the workload: for a client/server tool that is
//! the client; the server runs beside it like a load.

mod background;
pub mod guest;
mod launch;
mod pin;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use farm_proto::trace::TARGET;
use farm_proto::{Capabilities, Direction, Metric, RunAssignment, RunResult};
use farm_workload::catalogue;
use tracing::{info_span, warn};

use crate::executor::host::{self, Exit, Killer};
use crate::state::journal::Journal;
use crate::state::{Applier, Placement};
use crate::telemetry::placement::NodeMap;
use crate::telemetry::sampler::{self, Collected, Sampler};
use crate::telemetry::{interrupts, procstat, report, topology};
use background::Background;
use launch::{Launch, Output};
use pin::Pinner;

/// The executor this agent offers.
pub const HOST_EXECUTOR: &str = "host";

/// How long a client/server tool's server may take to listen on its port.
const SERVER_READY: Duration = Duration::from_secs(10);

/// Background processes live until stopped; their own timeout, this much
/// after the run's, is only a backstop.
const BACKGROUND_GRACE: Duration = Duration::from_secs(60);

/// How to start workloads: built-in ones through the `farm-workload` binary,
/// or a program that embeds it behind leading arguments (`farmctl
/// workload`); external ones through the programs found on this machine.
#[derive(Debug, Clone)]
pub struct WorkloadCommand {
    pub program: PathBuf,
    pub leading_args: Vec<String>,
    /// The external workloads this agent can run, each with its program's
    /// path, as [`external::discover`](crate::external::discover()) found
    /// them. The agent advertises exactly these names besides the built-in
    /// ones, and refuses a run of any other external workload.
    pub externals: Vec<(&'static str, PathBuf)>,
    /// Where guest kernels, images and logs are cached: runs of a
    /// `debian:<version>` kernel boot a guest ([`guest`]); `None`, or a
    /// machine without QEMU and busybox-static, boots none.
    pub guest_cache: Option<PathBuf>,
    /// Directories of kernel images this agent boots as `file:<path>`
    /// kernels (nothing outside them is ever read for a matrix).
    pub kernel_dirs: Vec<PathBuf>,
    /// The most bytes of kernels, tool packages and images the guest cache
    /// keeps; the least recently used go after each guest run.
    pub guest_cache_max_bytes: u64,
}

/// The guest cache's default budget: a few dozen kernels and their images.
pub const DEFAULT_GUEST_CACHE_MAX_BYTES: u64 = 10 << 30;

impl WorkloadCommand {
    /// The `farm-workload` binary at `program`, with no external programs.
    pub fn binary(program: impl Into<PathBuf>) -> WorkloadCommand {
        WorkloadCommand {
            program: program.into(),
            leading_args: Vec::new(),
            externals: Vec::new(),
            guest_cache: None,
            kernel_dirs: Vec::new(),
            guest_cache_max_bytes: DEFAULT_GUEST_CACHE_MAX_BYTES,
        }
    }

    /// The program found for the external workload `name`.
    pub fn external(&self, name: &str) -> Option<&Path> {
        self.externals
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, path)| path.as_path())
    }
}

/// Whether this agent can execute the assignment as asked.
pub fn check(a: &RunAssignment, caps: &Capabilities) -> Result<(), String> {
    if a.kernel.starts_with("debian:") || a.kernel.starts_with("file:") {
        // Booted in a guest: this agent must boot guests at all; the guest
        // path checks the rest.
        if caps.guest_arches.is_empty() {
            return Err(format!(
                "kernel `{}` needs a guest, and this agent boots none",
                a.kernel
            ));
        }
        return Ok(());
    }
    if !a.executor.is_empty() && a.executor != HOST_EXECUTOR {
        return Err(format!(
            "executor `{}` is not offered by this agent",
            a.executor
        ));
    }
    if a.kernel != "running" && a.kernel != caps.kernel_release {
        return Err(format!(
            "kernel `{}` requested but `{}` is running",
            a.kernel, caps.kernel_release
        ));
    }
    if let Some(s) = &a.state {
        let wanted = [
            (!s.hotplug.is_empty(), "hotplug"),
            (!s.cgroup.is_empty(), "cgroup"),
            (s.autogroup.is_some(), "autogroup"),
        ];
        for (asked, kind) in wanted {
            if asked && !caps.state_kinds.iter().any(|k| k == kind) {
                return Err(format!(
                    "machine state `{}` needs {kind}, which this agent cannot apply",
                    s.name
                ));
            }
        }
    }
    Ok(())
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn metric(name: &str, value: f64, unit: &str, direction: Direction) -> Metric {
    Metric {
        name: name.into(),
        value,
        unit: unit.into(),
        direction: direction as i32,
    }
}

/// What a run needs besides its assignment.
pub struct Context<'a> {
    pub caps: &'a Capabilities,
    pub workload: &'a WorkloadCommand,
    /// Shared with the background processes' threads, which journal the
    /// processes they start.
    pub journal: &'a Arc<Mutex<Journal>>,
    pub killer: &'a Killer,
}

fn lock(j: &Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(|e| e.into_inner())
}

/// Executes an assignment to the end: apply the machine state, start the
/// competing loads (and a tool's server), run the workload, stop what runs
/// beside it, restore the state. Blocking; call it from a thread of its own.
pub fn execute(a: &RunAssignment, ctx: &Context<'_>) -> RunResult {
    if a.kernel.starts_with("debian:") || a.kernel.starts_with("file:") {
        if let Err(e) = check(a, ctx.caps) {
            return RunResult {
                run: a.run.clone(),
                error: e,
                ..Default::default()
            };
        }
        return guest::execute(a, ctx);
    }
    let caps = ctx.caps;
    let started = SystemTime::now();
    let mut result = RunResult {
        run: a.run.clone(),
        executor: HOST_EXECUTOR.into(),
        arch: caps.arch.clone(),
        kernel_release: caps.kernel_release.clone(),
        started_unix_ms: unix_ms(started),
        ..Default::default()
    };
    let outcome = prepare_and_run(a, ctx);
    // Whatever happened, the machine goes back as it was.
    let restored = info_span!(target: TARGET, "restore").in_scope(|| lock(ctx.journal).restore());
    result.finished_unix_ms = unix_ms(SystemTime::now());
    let Measured {
        out,
        metrics: telemetry_metrics,
        telemetry,
        output,
    } = match (outcome, restored) {
        (Ok(m), Ok(_)) => m,
        (Err(e), Ok(_)) => {
            result.error = e;
            return result;
        }
        (outcome, Err(e)) => {
            result.error = format!(
                "restoring machine state: {e}{}",
                outcome
                    .err()
                    .map(|o| format!(" (after: {o})"))
                    .unwrap_or_default()
            );
            return result;
        }
    };
    result.log_tail = output.log_tail(&out);
    result.metrics = vec![
        metric(
            "wall_s",
            out.wall.as_secs_f64(),
            "s",
            Direction::LowerIsBetter,
        ),
        metric(
            "user_s",
            out.user.as_secs_f64(),
            "s",
            Direction::LowerIsBetter,
        ),
        metric(
            "sys_s",
            out.sys.as_secs_f64(),
            "s",
            Direction::LowerIsBetter,
        ),
    ];
    result.metrics.extend(telemetry_metrics);
    result.telemetry = Some(telemetry);
    result.error = match (&out.exit, out.cancelled, out.timed_out) {
        (_, true, _) => "cancelled by the coordinator".into(),
        (_, _, true) => format!("timed out after {} s", a.timeout_s),
        (Exit::Code(0), _, _) => String::new(),
        (Exit::Code(c), _, _) => format!("workload exited with status {c}"),
        (Exit::Signal(s), _, _) => format!("workload killed by signal {s}"),
    };
    if result.error.is_empty() {
        match output.metrics(&out) {
            Ok(metrics) => result.metrics.extend(metrics.into_iter().map(|m| {
                let direction = match m.direction {
                    catalogue::Direction::LowerIsBetter => Direction::LowerIsBetter,
                    catalogue::Direction::HigherIsBetter => Direction::HigherIsBetter,
                };
                metric(&m.name, m.value, &m.unit, direction)
            })),
            Err(e) => result.error = format!("workload output: {e}"),
        }
    }
    result.ok = result.error.is_empty();
    result
}

fn tag(a: &RunAssignment) -> String {
    a.run
        .as_ref()
        .map(|r| format!("{}-a{}", r.run_id, r.attempt))
        .unwrap_or_else(|| "run".into())
}

/// A finished workload with what telemetry saw of it.
struct Measured {
    out: host::Outcome,
    metrics: Vec<Metric>,
    telemetry: farm_proto::Telemetry,
    /// How its own figures are read from `out`.
    output: Output,
}

fn prepare_and_run(a: &RunAssignment, ctx: &Context<'_>) -> Result<Measured, String> {
    check(a, ctx.caps)?;
    let workload = a
        .workload
        .as_ref()
        .ok_or("assignment carries no workload")?;
    let launch = launch::launch(workload, ctx.workload)?;
    let loads = a
        .loads
        .iter()
        .map(|l| launch::launch(l, ctx.workload))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(load) = loads.iter().find(|l| l.server.is_some()) {
        return Err(format!(
            "load `{}` needs a server of its own; only the measured workload may have one",
            load.name
        ));
    }
    let timeout = Duration::from_secs(u64::from(a.timeout_s.max(1)));
    let root = lock(ctx.journal).root().to_path_buf();
    // The topology before the state and after it (seed 000: a level gone after a hotplug cycle).
    let topology_before = topology::read(&root)
        .map_err(|e| warn!("topology: {e}"))
        .ok();
    let placement = match &a.state {
        Some(state) => info_span!(target: TARGET, "state_apply").in_scope(|| {
            let mut journal = lock(ctx.journal);
            Applier {
                journal: &mut journal,
                caps: ctx.caps,
            }
            .apply(state, &tag(a), a.loads.len())
            .map_err(|e| e.to_string())
        })?,
        None => Placement {
            workload: Vec::new(),
            loads: vec![Vec::new(); a.loads.len()],
        },
    };
    let load_specs: Vec<host::Spec> = loads
        .iter()
        .zip(placement.loads)
        .map(|(l, cgroups)| l.program.spec(cgroups, timeout + BACKGROUND_GRACE, false))
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
    let spec = launch.program.spec(placement.workload, timeout, true);
    let measured = info_span!(target: TARGET, "workload", program = %spec.program.display())
        .in_scope(|| measure(ctx, &root, &spec, &launch));
    if let Some(server) = server {
        server.stop();
    }
    loads.stop();
    let (out, collected, irqs) = measured?;
    let map = if ctx.caps.numa_nodes.is_empty() {
        NodeMap::single(&ctx.caps.online_cpus)
    } else {
        NodeMap::from_nodes(&ctx.caps.numa_nodes)
    };
    let _telemetry = info_span!(target: TARGET, "telemetry").entered();
    let (metrics, telemetry) = report::build(&report::Inputs {
        wall: out.wall,
        counts: out.counts,
        irqs: &irqs,
        collected: &collected,
        map: &map,
        allowed: &allowed,
        user_hz: procstat::user_hz(),
        topology: topology_before.as_ref().zip(topology_after.as_ref()),
    });
    Ok(Measured {
        out,
        metrics,
        telemetry,
        output: launch.output,
    })
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
) -> Result<Background, String> {
    let name = server.program.path.display();
    if background::listening(root, server.port) {
        return Err(format!(
            "server {name}: port {} is already in use on this machine; give the workload \
             another `port`",
            server.port
        ));
    }
    let spec = server
        .program
        .spec(cgroups.to_vec(), timeout + BACKGROUND_GRACE, false);
    let started = Background::start(vec![spec], journal.clone())?;
    let ready = match started.pids().first() {
        Some(&pid) => background::wait_listening(root, server.port, pid, SERVER_READY),
        None => Err("it did not start".to_string()),
    };
    match ready {
        Ok(()) => Ok(started),
        Err(e) => {
            started.stop();
            Err(format!("server {name}: {e}"))
        }
    }
}

/// Runs the workload under the sampler, with /proc/interrupts read around it.
fn measure(
    ctx: &Context<'_>,
    root: &Path,
    spec: &host::Spec,
    launch: &Launch,
) -> Result<(host::Outcome, Collected, Vec<interrupts::IrqDelta>), String> {
    // Started before the workload so that they do not inherit its counters.
    let sampler = Sampler::spawn(root, sampler::DEFAULT_INTERVAL)
        .map_err(|e| format!("starting the sampler: {e}"))?;
    let pinner = Pinner::spawn(root, &launch.pins)
        .map_err(|e| format!("starting the pinning thread: {e}"))?;
    let irq_before = interrupts::read(root)
        .map_err(|e| warn!("interrupts: {e}"))
        .ok();
    let out = host::start(spec, ctx.killer).and_then(|running| {
        sampler.track(running.pid() as u32);
        if let Some(pinner) = &pinner {
            pinner.pin(running.pid());
        }
        running.wait()
    });
    if let Some(pinner) = pinner {
        pinner.finish();
    }
    let irq_after = interrupts::read(root)
        .map_err(|e| warn!("interrupts: {e}"))
        .ok();
    let collected = sampler.finish();
    let out = out.map_err(|e| format!("running {}: {e}", spec.program.display()))?;
    let irqs = match (irq_before, irq_after) {
        (Some(b), Some(a)) => interrupts::delta(&b, &a)
            .map_err(|e| warn!("interrupts: {e}"))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Ok((out, collected, irqs))
}
