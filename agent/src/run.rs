//! One run: from a pushed assignment to a result, through the host executor.
//!
//! The assignment is checked again here, though the coordinator already did:
//! an agent trusts nothing it receives. The workload must be in the
//! catalogue, its parameters typed and in range, and it becomes an argument
//! vector for the `farm-workload` binary, never a shell command.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use farm_proto::{Capabilities, Direction, Metric, RunAssignment, RunResult, Workload, param};
use farm_workload::catalogue::{self, Value};
use farm_workload::output;

use crate::executor::host::{self, Exit, Killer, Spec};

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
        // No state kind is implemented yet, so none may be asked for.
        if !s.hotplug.is_empty() || !s.cgroup.is_empty() || s.autogroup.is_some() {
            return Err(format!(
                "machine state `{}` cannot be applied by this agent",
                s.name
            ));
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

/// Executes an assignment to the end; blocking, call it from a thread of its own.
pub fn execute(
    a: &RunAssignment,
    caps: &Capabilities,
    workload: &WorkloadCommand,
    killer: &Killer,
) -> RunResult {
    let started = SystemTime::now();
    let mut result = RunResult {
        run: a.run.clone(),
        executor: HOST_EXECUTOR.into(),
        arch: caps.arch.clone(),
        kernel_release: caps.kernel_release.clone(),
        started_unix_ms: unix_ms(started),
        ..Default::default()
    };
    let prepared = check(a, caps).and_then(|()| {
        a.workload
            .as_ref()
            .ok_or_else(|| "assignment carries no workload".to_string())
            .and_then(workload_args)
    });
    let outcome = prepared.and_then(|args| {
        let spec = Spec {
            program: workload.program.clone(),
            args: workload.leading_args.iter().cloned().chain(args).collect(),
            timeout: Duration::from_secs(u64::from(a.timeout_s.max(1))),
        };
        host::run(&spec, killer)
            .map_err(|e| format!("starting {}: {e}", workload.program.display()))
    });
    result.finished_unix_ms = unix_ms(SystemTime::now());
    let out = match outcome {
        Ok(out) => out,
        Err(e) => {
            result.error = e;
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
