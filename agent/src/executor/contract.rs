//! What every executor is given ([`Run`], [`Context`]) and gives back
//! ([`Outcome`]), whether this agent can execute a run at all ([`check`]),
//! and how an outcome becomes the result ([`finish`]). The executors import
//! this, never `executor.rs`, which sits above them and re-exports it.

use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use farm_proto::{Capabilities, Metric, RunAssignment, RunResult, Telemetry};
use farm_spec::kernel::KernelError;
use farm_spec::state::StateError;
use farm_spec::{Kernel, MachineState};

use super::killer::Killer;
pub(crate) use super::launch::tail_bytes;
use super::launch::{Output, WorkloadCommand};
use crate::state::journal::Journal;
use crate::telemetry::downsample;

/// Where a run's workload executes.
pub trait Executor {
    /// Executes `run` to the end (its state applied and restored, its
    /// workload run and read) and says what happened. Blocking; call it
    /// from a thread of its own.
    fn execute(&self, run: &Run<'_>, ctx: &Context<'_>) -> RunResult;
}

/// An assignment with its words parsed, once, at the run's edge: the
/// kernel, the executor asked for (`None`: the agent's choice) and the
/// machine state.
#[derive(Debug, Clone)]
pub struct Run<'a> {
    pub assignment: &'a RunAssignment,
    pub kernel: Kernel,
    pub executor: Option<farm_spec::Executor>,
    pub state: Option<MachineState>,
    /// How a `git:` kernel is built (the default without one).
    pub build: farm_spec::KernelBuild,
}

impl<'a> Run<'a> {
    /// Parses `a`'s kernel, executor, state and build.
    pub fn of(a: &'a RunAssignment) -> Result<Run<'a>, Refusal> {
        let kernel = a.kernel.parse().map_err(Refusal::BadKernel)?;
        let executor = match a.executor.as_str() {
            "" => None,
            e => Some(
                e.parse()
                    .map_err(|_| Refusal::Executor(a.executor.clone()))?,
            ),
        };
        let state = a
            .state
            .as_ref()
            .map(|s| {
                MachineState::try_from(s).map_err(|source| Refusal::BadState {
                    state: s.name.clone(),
                    source,
                })
            })
            .transpose()?;
        let build = match &a.build {
            None => farm_spec::KernelBuild::default(),
            Some(b) => farm_spec::KernelBuild::try_from(b).map_err(Refusal::BadBuild)?,
        };
        Ok(Run {
            assignment: a,
            kernel,
            executor,
            state,
            build,
        })
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
    /// Where the run says what it does before its workload (a kernel
    /// build's step): the session sends the latest to the coordinator.
    pub progress: &'a dyn Fn(Option<farm_spec::progress::BuildProgress>),
}

/// Why this agent cannot execute an assignment as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("kernel refused: {0}")]
    BadKernel(#[source] KernelError),
    #[error("build refused: {0}")]
    BadBuild(farm_spec::build::BuildFieldError),
    #[error("state `{state}`: {source}")]
    BadState { state: String, source: StateError },
    #[error("kernel `{0}` needs a guest, and this agent boots none")]
    NoGuests(String),
    #[error("executor `{0}` is not offered by this agent")]
    Executor(String),
    #[error("kernel `{asked}` requested but `{running}` is running")]
    Kernel { asked: String, running: String },
    #[error("machine state `{state}` needs {kind}, which this agent cannot apply")]
    State { state: String, kind: &'static str },
}

/// Whether this agent can execute the run as asked.
pub fn check(run: &Run<'_>, caps: &Capabilities) -> Result<(), Refusal> {
    if run.kernel.is_guest() {
        // Booted in a guest: this agent must boot guests at all; the guest
        // executor checks the rest.
        if caps.guest_arches.is_empty() {
            return Err(Refusal::NoGuests(run.kernel.to_string()));
        }
        return Ok(());
    }
    if let Some(e) = run.executor
        && e != farm_spec::Executor::Host
    {
        return Err(Refusal::Executor(e.to_string()));
    }
    match &run.kernel {
        Kernel::Release(r) if *r != caps.kernel_release => {
            return Err(Refusal::Kernel {
                asked: r.clone(),
                running: caps.kernel_release.clone(),
            });
        }
        _ => {}
    }
    if let Some(s) = &run.state {
        for kind in s.kinds() {
            if !caps.state_kinds.iter().any(|k| k == kind.as_str()) {
                return Err(Refusal::State {
                    state: s.name.clone(),
                    kind: kind.as_str(),
                });
            }
        }
    }
    Ok(())
}

/// How a workload ended, wherever it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// It exited with this status.
    Exited(i32),
    /// A signal killed it.
    Signalled(i32),
    /// Killed because it outlived its timeout.
    TimedOut,
    /// Killed on request (the coordinator cancelled the run).
    Cancelled,
}

/// What an executor brings back of a workload that ran.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub end: End,
    pub stdout: String,
    /// The tail of its stderr.
    pub stderr: String,
    /// The executor's own figures (wall and CPU times, telemetry), which
    /// come before the workload's in the result.
    pub metrics: Vec<Metric>,
    pub telemetry: Option<Telemetry>,
    /// A guest's console tail: then the result's log is the console (led by
    /// the workload's stderr when it failed), and the failure says "in the
    /// guest".
    pub console: Option<String>,
}

/// Fills `result` from what the workload did: the executor's figures, then
/// whether it failed (ended badly, or its output could not be read) and
/// else its own figures read from its output as `output` says. `timeout_s`
/// is the assignment's, for the message of a timeout. Its telemetry's
/// series are thinned to fit [`downsample::RESULT_BUDGET_BYTES`].
pub(crate) fn finish(result: &mut RunResult, outcome: Outcome, output: Output, timeout_s: u32) {
    let Outcome {
        end,
        stdout,
        stderr,
        metrics,
        telemetry,
        console,
    } = outcome;
    result.log_tail = match &console {
        Some(console) => console.clone(),
        None => output.log_tail(&stdout, &stderr),
    };
    result.metrics.extend(metrics);
    result.telemetry = telemetry;
    let place = if console.is_some() {
        " in the guest"
    } else {
        ""
    };
    result.error = match end {
        End::Cancelled => "cancelled by the coordinator".into(),
        End::TimedOut => format!("timed out after {timeout_s} s"),
        End::Exited(0) => String::new(),
        End::Exited(c) => format!("workload exited with status {c}{place}"),
        End::Signalled(s) => format!("workload killed by signal {s}{place}"),
    };
    if !result.error.is_empty() {
        if let Some(console) = &console {
            if !stderr.trim().is_empty() {
                result.log_tail = format!("{stderr}\n--- console ---\n{console}");
            }
            result.log_tail = tail_bytes(&result.log_tail);
        }
    } else {
        match output.metrics(&stdout, &stderr) {
            Ok(ms) => result.metrics.extend(
                ms.into_iter()
                    .map(|m| metric(&m.name, m.value, &m.unit, m.direction)),
            ),
            Err(e) => {
                result.error = format!("workload output: {e}");
                if console.is_some() {
                    result.log_tail = tail_bytes(&stdout);
                }
            }
        }
    }
    result.ok = result.error.is_empty();
    // Last, when everything else the result holds is in it.
    downsample::to_budget(result, downsample::RESULT_BUDGET_BYTES);
}

pub(crate) fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub(crate) fn metric(
    name: &str,
    value: f64,
    unit: &str,
    direction: farm_spec::Direction,
) -> Metric {
    Metric {
        name: name.into(),
        value,
        unit: unit.into(),
        direction: farm_proto::Direction::from(direction) as i32,
    }
}

pub(crate) use crate::telemetry::report::known as known_metric;

pub(crate) fn lock(j: &Mutex<Journal>) -> std::sync::MutexGuard<'_, Journal> {
    j.lock().unwrap_or_else(|e| e.into_inner())
}
