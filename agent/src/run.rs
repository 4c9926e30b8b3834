//! One run: from a pushed assignment to a result, through the host executor.
//!
//! The assignment is checked again here, though the coordinator already did:
//! an agent trusts nothing it receives. The workload must be in the
//! catalogue, its parameters typed and in range, and it becomes an argument
//! vector for the `farm-workload` binary, never a shell command.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use farm_proto::{Capabilities, Direction, Metric, RunAssignment, RunResult, Workload, param};
use farm_workload::catalogue::{self, Value};
use farm_workload::output;

use crate::executor::host::{self, Exit, Killer};
use crate::state::journal::{self, Entry, Journal};
use crate::state::{Applier, Placement};
use crate::telemetry::placement::NodeMap;
use crate::telemetry::sampler::{self, Collected, Sampler};
use crate::telemetry::{interrupts, procstat, report, topology};
use tracing::warn;

/// The executor this agent offers.
pub const HOST_EXECUTOR: &str = "host";

/// How to start the workload binary: `farm-workload`, or a program that
/// embeds it behind leading arguments (`farmctl workload`).
#[derive(Debug, Clone)]
pub struct WorkloadCommand {
    pub program: PathBuf,
    pub leading_args: Vec<String>,
}

impl WorkloadCommand {
    pub fn binary(program: impl Into<PathBuf>) -> WorkloadCommand {
        WorkloadCommand {
            program: program.into(),
            leading_args: Vec::new(),
        }
    }
}

/// Turns a workload into the `farm-workload` argument vector.
pub fn workload_args(w: &Workload) -> Result<Vec<String>, String> {
    let mut given = Vec::with_capacity(w.params.len());
    for p in &w.params {
        let v = match &p.value {
            Some(param::Value::Int(v)) => Value::Int(*v),
            Some(param::Value::Float(v)) => Value::Float(*v),
            Some(param::Value::Text(_)) | Some(param::Value::Flag(_)) | None => {
                return Err(format!(
                    "parameter `{}` of `{}` must be a number",
                    p.name, w.name
                ));
            }
        };
        given.push((p.name.clone(), v));
    }
    let resolved = catalogue::resolve(&w.name, &given).map_err(|e| e.to_string())?;
    let mut args = vec![w.name.clone()];
    for (name, value) in resolved {
        args.push("--param".into());
        args.push(format!("{name}={value}"));
    }
    Ok(args)
}

/// Whether this agent can execute the assignment as asked.
pub fn check(a: &RunAssignment, caps: &Capabilities) -> Result<(), String> {
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
    /// Shared with the loads' thread, which journals the processes it starts.
    pub journal: &'a Arc<Mutex<Journal>>,
    pub killer: &'a Killer,
}

fn lock(j: &Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(|e| e.into_inner())
}

/// Executes an assignment to the end: apply the machine state, start the
/// competing loads, run the workload, stop the loads, restore the state.
/// Blocking; call it from a thread of its own.
pub fn execute(a: &RunAssignment, ctx: &Context<'_>) -> RunResult {
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
    let restored = lock(ctx.journal).restore();
    result.finished_unix_ms = unix_ms(SystemTime::now());
    let Measured {
        out,
        metrics: telemetry_metrics,
        telemetry,
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
    result.log_tail = out.stderr_tail.clone();
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
        for line in out.stdout.lines() {
            match output::parse_metric_line(line) {
                Ok(Some(m)) => result.metrics.push(metric(
                    &m.name,
                    m.value,
                    &m.unit,
                    match m.direction {
                        catalogue::Direction::LowerIsBetter => Direction::LowerIsBetter,
                        catalogue::Direction::HigherIsBetter => Direction::HigherIsBetter,
                    },
                )),
                Ok(None) => {}
                Err(e) => {
                    result.error = format!("workload output: {e}");
                    break;
                }
            }
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
}

fn prepare_and_run(a: &RunAssignment, ctx: &Context<'_>) -> Result<Measured, String> {
    check(a, ctx.caps)?;
    let workload = a
        .workload
        .as_ref()
        .ok_or("assignment carries no workload")?;
    let args = workload_args(workload)?;
    let load_args = a
        .loads
        .iter()
        .map(workload_args)
        .collect::<Result<Vec<_>, _>>()?;
    let timeout = Duration::from_secs(u64::from(a.timeout_s.max(1)));
    let root = lock(ctx.journal).root().to_path_buf();
    // The topology before the state and after it (seed 000: a level gone after a hotplug cycle).
    let topology_before = topology::read(&root)
        .map_err(|e| warn!("topology: {e}"))
        .ok();
    let placement = match &a.state {
        Some(state) => {
            let mut journal = lock(ctx.journal);
            Applier {
                journal: &mut journal,
                caps: ctx.caps,
            }
            .apply(state, &tag(a), a.loads.len())
            .map_err(|e| e.to_string())?
        }
        None => Placement {
            workload: Vec::new(),
            loads: vec![Vec::new(); a.loads.len()],
        },
    };
    let spec =
        |args: Vec<String>, cgroups: Vec<std::path::PathBuf>, timeout: Duration, perf: bool| {
            host::Spec {
                program: ctx.workload.program.clone(),
                args: ctx
                    .workload
                    .leading_args
                    .iter()
                    .cloned()
                    .chain(args)
                    .collect(),
                timeout,
                cgroups,
                perf,
            }
        };
    // Loads live until stopped; their own timeout is only a backstop.
    let loads: Vec<host::Spec> = load_args
        .into_iter()
        .zip(placement.loads)
        .map(|(args, cgroups)| spec(args, cgroups, timeout + Duration::from_secs(60), false))
        .collect();
    let topology_after = topology::read(&root)
        .map_err(|e| warn!("topology: {e}"))
        .ok();
    let allowed = std::fs::read_to_string(root.join("sys/devices/system/cpu/online"))
        .ok()
        .and_then(|s| crate::capabilities::parse_cpu_list(s.trim()).ok())
        .unwrap_or_else(|| ctx.caps.online_cpus.clone());
    let loads = Loads::start(loads, ctx.journal.clone())?;
    let measured = measure(ctx, &root, &spec(args, placement.workload, timeout, true));
    loads.stop();
    let (out, collected, irqs) = measured?;
    let map = if ctx.caps.numa_nodes.is_empty() {
        NodeMap::single(&ctx.caps.online_cpus)
    } else {
        NodeMap::from_nodes(&ctx.caps.numa_nodes)
    };
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
    })
}

/// Runs the workload under the sampler, with /proc/interrupts read around it.
fn measure(
    ctx: &Context<'_>,
    root: &std::path::Path,
    spec: &host::Spec,
) -> Result<(host::Outcome, Collected, Vec<interrupts::IrqDelta>), String> {
    // Started before the workload so that it does not inherit its counters.
    let sampler = Sampler::spawn(root, sampler::DEFAULT_INTERVAL)
        .map_err(|e| format!("starting the sampler: {e}"))?;
    let irq_before = interrupts::read(root)
        .map_err(|e| warn!("interrupts: {e}"))
        .ok();
    let out = host::start(spec, ctx.killer).and_then(|running| {
        sampler.track(running.pid() as u32);
        running.wait()
    });
    let irq_after = interrupts::read(root)
        .map_err(|e| warn!("interrupts: {e}"))
        .ok();
    let collected = sampler.finish();
    let out = out.map_err(|e| format!("running {}: {e}", ctx.workload.program.display()))?;
    let irqs = match (irq_before, irq_after) {
        (Some(b), Some(a)) => interrupts::delta(&b, &a)
            .map_err(|e| warn!("interrupts: {e}"))
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    Ok((out, collected, irqs))
}

/// Competing programs (seed 003's `stress --cpu 1` beside lu), started
/// before the workload and stopped after it. They run from a thread of
/// their own that lives as long as they do: their PR_SET_PDEATHSIG is tied
/// to it, and perf counters inherited by the workload's thread stay theirs.
struct Loads {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Loads {
    fn start(specs: Vec<host::Spec>, journal: Arc<Mutex<Journal>>) -> Result<Loads, String> {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("loads".into())
            .spawn(move || {
                let mut running = Vec::new();
                let mut failed = None;
                for spec in &specs {
                    let killer = Killer::default();
                    match host::start(spec, &killer) {
                        Ok(r) => {
                            let pid = r.pid();
                            let mut j = lock(&journal);
                            let start_time =
                                journal::process_start_time(j.root(), pid).unwrap_or(0);
                            if let Err(e) = j.record(&Entry::Process { pid, start_time }) {
                                failed = Some(e.to_string());
                            }
                            drop(j);
                            running.push((r, killer));
                        }
                        Err(e) => failed = Some(format!("starting a load: {e}")),
                    }
                    if failed.is_some() {
                        break;
                    }
                }
                let _ = ready_tx.send(failed.map_or(Ok(()), Err));
                // Until told to stop, or until the run's thread is gone.
                let _ = stop_rx.recv();
                for (r, killer) in running {
                    killer.cancel();
                    let _ = r.wait();
                }
            })
            .map_err(|e| format!("starting the loads thread: {e}"))?;
        let loads = Loads { stop, thread };
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(loads),
            Ok(Err(e)) => {
                loads.stop();
                Err(e)
            }
            Err(_) => Err("the loads thread died".into()),
        }
    }

    fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_proto::{MachineState, Param};

    fn lu(params: Vec<Param>) -> Workload {
        Workload {
            name: "lu".into(),
            params,
        }
    }

    fn int(name: &str, v: i64) -> Param {
        Param {
            name: name.into(),
            value: Some(param::Value::Int(v)),
        }
    }

    #[test]
    fn args_are_validated_and_complete() {
        let args = workload_args(&lu(vec![int("threads", 3)])).unwrap();
        assert_eq!(args[0], "lu");
        assert!(args.contains(&"threads=3".to_string()), "{args:?}");
        // Defaults are filled in, so the run is fully described by its args.
        assert_eq!(
            args.iter().filter(|a| *a == "--param").count(),
            catalogue::find("lu").unwrap().params.len()
        );
        let bad: &[(Workload, &str)] = &[
            (lu(vec![int("threads", 0)]), "out of range"),
            (lu(vec![int("bogus", 1)]), "unknown parameter"),
            (
                Workload {
                    name: "rm -rf /".into(),
                    params: vec![],
                },
                "unknown workload",
            ),
            (
                lu(vec![Param {
                    name: "threads".into(),
                    value: Some(param::Value::Text("2; reboot".into())),
                }]),
                "number",
            ),
        ];
        for (w, want) in bad {
            let e = workload_args(w).unwrap_err();
            assert!(e.contains(want), "{w:?}: {e}");
        }
    }

    #[test]
    fn assignments_this_agent_cannot_serve_are_refused() {
        let caps = Capabilities {
            kernel_release: "6.1.0".into(),
            ..Default::default()
        };
        let ok = RunAssignment {
            kernel: "running".into(),
            ..Default::default()
        };
        assert!(check(&ok, &caps).is_ok());
        let cases = [
            RunAssignment {
                kernel: "6.12".into(),
                ..Default::default()
            },
            RunAssignment {
                kernel: "running".into(),
                executor: "kvm".into(),
                ..Default::default()
            },
            RunAssignment {
                kernel: "running".into(),
                state: Some(MachineState {
                    name: "c".into(),
                    hotplug: "cycle:1".into(),
                    ..Default::default()
                }),
                ..Default::default()
            },
        ];
        for a in cases {
            assert!(check(&a, &caps).is_err(), "{a:?}");
        }
    }
}
