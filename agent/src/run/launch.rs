//! A workload of an assignment, checked against the catalogue and turned
//! into the program to start and the way to read its output.

use std::path::{Path, PathBuf};
use std::time::Duration;

use farm_proto::{Workload, param};
use farm_workload::catalogue::{self, Origin, Value};
use farm_workload::output;

use super::WorkloadCommand;
use super::pin::{self, Pin};
use crate::executor::host;
use crate::external;

/// A workload ready to start.
#[derive(Debug)]
pub(super) struct Launch {
    /// The catalogue name.
    pub name: &'static str,
    pub program: Program,
    /// A client/server tool's server, to start first and stop after.
    pub server: Option<Server>,
    pub output: Output,
    /// Threads to pin once started (udp-stream's sender and receiver).
    pub pins: Vec<Pin>,
}

/// A program with its arguments and the environment to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Program {
    pub path: PathBuf,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Program {
    /// What the host executor starts.
    pub fn spec(&self, cgroups: Vec<PathBuf>, timeout: Duration, perf: bool) -> host::Spec {
        host::Spec {
            program: self.path.clone(),
            args: self.args.clone(),
            env: self.env.clone(),
            timeout,
            cgroups,
            perf,
        }
    }

    /// An external tool's command: its argv starts with the program.
    fn from_command(command: external::Command) -> Result<Program, String> {
        let mut argv = command.argv.into_iter();
        let path = argv.next().ok_or("an external command without a program")?;
        Ok(Program {
            path: path.into(),
            args: argv.collect(),
            env: command.env,
        })
    }
}

/// A server to start before the workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Server {
    pub program: Program,
    /// The loopback TCP port it listens on once ready.
    pub port: u16,
}

/// How a workload reports its figures of merit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Output {
    /// `farm-workload`'s metric lines on stdout.
    MetricLines,
    /// An external tool's own output, read by [`external::parse`] for the
    /// catalogue entry of this name.
    External(&'static str),
}

/// The most of stdout kept as an external tool's log, when it says nothing on
/// stderr; as much as the executor keeps of stderr.
const LOG_TAIL: usize = 8 << 10;

impl Output {
    pub fn metrics(&self, out: &host::Outcome) -> Result<Vec<output::Metric>, String> {
        match self {
            Output::MetricLines => out
                .stdout
                .lines()
                .filter_map(|line| output::parse_metric_line(line).transpose())
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string()),
            Output::External(name) => {
                external::parse(name, &out.stdout, &out.stderr_tail).map_err(|e| e.to_string())
            }
        }
    }

    /// What the result keeps of the workload's output: the tail of its
    /// stderr, or for an external tool that writes only to stdout (stress-ng
    /// is told `--stdout`, iperf3 writes JSON) the tail of that.
    pub fn log_tail(&self, out: &host::Outcome) -> String {
        match self {
            Output::External(_) if out.stderr_tail.trim().is_empty() => {
                let mut start = out.stdout.len().saturating_sub(LOG_TAIL);
                while !out.stdout.is_char_boundary(start) {
                    start += 1;
                }
                out.stdout[start..].to_string()
            }
            _ => out.stderr_tail.clone(),
        }
    }
}

/// Checks `w` against the catalogue and turns it into what starts it: the
/// `farm-workload` binary for a built-in workload, the program this agent
/// found for an external one. Parameters not given take their defaults, so
/// that the command line describes the run completely.
pub(super) fn launch(w: &Workload, cmd: &WorkloadCommand) -> Result<Launch, String> {
    let (spec, resolved) = resolve(w)?;
    match spec.origin {
        Origin::BuiltIn => {
            let mut args = cmd.leading_args.clone();
            args.push(spec.name.to_string());
            for (name, value) in &resolved {
                args.push("--param".into());
                args.push(format!("{name}={value}"));
            }
            Ok(Launch {
                name: spec.name,
                program: Program {
                    path: cmd.program.clone(),
                    args,
                    env: Vec::new(),
                },
                server: None,
                output: Output::MetricLines,
                pins: pin::wanted(spec.name, &resolved),
            })
        }
        Origin::External { program } => {
            let path = cmd.external(spec.name).ok_or_else(|| {
                format!(
                    "external workload `{}` needs {program}, which this agent did not find \
                     (PATH and its tools directories)",
                    spec.name
                )
            })?;
            external_launch(spec.name, path, &resolved)
        }
    }
}

/// An external workload `w` started as `program` (a guest's path to the tool).
pub(super) fn launch_external_at(w: &Workload, program: &Path) -> Result<Launch, String> {
    let (spec, resolved) = resolve(w)?;
    if !matches!(spec.origin, Origin::External { .. }) {
        return Err(format!("`{}` is not an external workload", spec.name));
    }
    external_launch(spec.name, program, &resolved)
}

type Resolved = (&'static catalogue::WorkloadSpec, Vec<(&'static str, Value)>);

/// `w` checked against the catalogue, every parameter resolved.
fn resolve(w: &Workload) -> Result<Resolved, String> {
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
    let spec = catalogue::lookup(&w.name).map_err(|e| e.to_string())?;
    let resolved = catalogue::resolve(spec.name, &given).map_err(|e| e.to_string())?;
    Ok((spec, resolved))
}

fn external_launch(
    name: &'static str,
    path: &Path,
    params: &[(&'static str, Value)],
) -> Result<Launch, String> {
    let tool = external::lookup(name).map_err(|e| e.to_string())?;
    let params: Vec<(&str, Value)> = params.to_vec();
    let command = external::command(tool, path, &params).map_err(|e| e.to_string())?;
    let server = match external::server_command(tool, path, &params).map_err(|e| e.to_string())? {
        Some(server) => Some(Server {
            program: Program::from_command(server.command)?,
            port: server.port,
        }),
        None => None,
    };
    Ok(Launch {
        name,
        program: Program::from_command(command)?,
        server,
        output: Output::External(name),
        pins: Vec::new(),
    })
}
