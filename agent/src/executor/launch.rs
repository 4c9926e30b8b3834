//! A workload of an assignment, checked against the catalogue and turned
//! into the program to start and the way to read its output.

use std::path::{Path, PathBuf};

use farm_proto::{Workload, param};
use farm_workload::catalogue::{self, Origin, Value};
use farm_workload::output;

use farm_workload::udp_stream;

use crate::external;

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
    /// The repositories `git:<repo>@<ref>` kernels are built from, and the
    /// user that builds them; `None` builds none.
    pub trees: Option<crate::kernel::Trees>,
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
            trees: None,
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

/// As much of a log as a result keeps (as the host executor's stderr tail).
const LOG_TAIL: usize = 8 << 10;

/// The last [`LOG_TAIL`] bytes of `text`, cut at a character boundary.
pub(crate) fn tail_bytes(text: &str) -> String {
    let mut start = text.len().saturating_sub(LOG_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Why a workload cannot be launched as asked.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("an external command without a program")]
    NoProgram,
    #[error("parameter `{param}` of `{workload}` must be a number")]
    NotANumber { param: String, workload: String },
    #[error(transparent)]
    Catalogue(#[from] catalogue::ParamError),
    #[error(transparent)]
    External(#[from] external::Error),
    #[error(
        "external workload `{workload}` needs {program}, which this agent did not find \
         (PATH and its tools directories)"
    )]
    NotFound {
        workload: &'static str,
        program: &'static str,
    },
    #[error("`{0}` is not an external workload")]
    NotExternal(&'static str),
}

/// Why a workload's output gave no figures.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OutputError {
    #[error(transparent)]
    MetricLine(#[from] output::OutputError),
    #[error(transparent)]
    External(#[from] external::Error),
}

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
    /// An external tool's command: its argv starts with the program.
    fn from_command(command: external::Command) -> Result<Program, Error> {
        let mut argv = command.argv.into_iter();
        let path = argv.next().ok_or(Error::NoProgram)?;
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
pub(crate) enum Output {
    /// `farm-workload`'s metric lines on stdout.
    MetricLines,
    /// An external tool's own output, read by [`external::parse`] for the
    /// catalogue entry of this name.
    External(&'static str),
}

impl Output {
    /// The workload's figures, read from its `stdout` and the tail of its
    /// `stderr`.
    pub fn metrics(&self, stdout: &str, stderr: &str) -> Result<Vec<output::Metric>, OutputError> {
        Ok(match self {
            Output::MetricLines => stdout
                .lines()
                .filter_map(|line| output::parse_metric_line(line).transpose())
                .collect::<Result<_, _>>()?,
            Output::External(name) => external::parse(name, stdout, stderr)?,
        })
    }

    /// What the result keeps of the workload's output: the tail of its
    /// stderr, or for an external tool that writes only to stdout (stress-ng
    /// is told `--stdout`, iperf3 writes JSON) the tail of that.
    pub fn log_tail(&self, stdout: &str, stderr: &str) -> String {
        match self {
            Output::External(_) if stderr.trim().is_empty() => tail_bytes(stdout),
            _ => stderr.to_string(),
        }
    }
}

/// Checks `w` against the catalogue and turns it into what starts it: the
/// `farm-workload` binary for a built-in workload, the program this agent
/// found for an external one. Parameters not given take their defaults, so
/// that the command line describes the run completely.
pub(super) fn launch(w: &Workload, cmd: &WorkloadCommand) -> Result<Launch, Error> {
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
                pins: wanted(spec.name, &resolved),
            })
        }
        Origin::External { program } => {
            let path = cmd.external(spec.name).ok_or(Error::NotFound {
                workload: spec.name,
                program,
            })?;
            external_launch(spec.name, path, &resolved)
        }
    }
}

/// An external workload `w` started as `program` (a guest's path to the tool).
pub(super) fn launch_external_at(w: &Workload, program: &Path) -> Result<Launch, Error> {
    let (spec, resolved) = resolve(w)?;
    if !matches!(spec.origin, Origin::External { .. }) {
        return Err(Error::NotExternal(spec.name));
    }
    external_launch(spec.name, program, &resolved)
}

type Resolved = (&'static catalogue::WorkloadSpec, Vec<(&'static str, Value)>);

/// `w` checked against the catalogue, every parameter resolved.
fn resolve(w: &Workload) -> Result<Resolved, Error> {
    let mut given = Vec::with_capacity(w.params.len());
    for p in &w.params {
        let v = match &p.value {
            Some(param::Value::Int(v)) => Value::Int(*v),
            Some(param::Value::Float(v)) => Value::Float(*v),
            Some(param::Value::Text(_)) | Some(param::Value::Flag(_)) | None => {
                return Err(Error::NotANumber {
                    param: p.name.clone(),
                    workload: w.name.clone(),
                });
            }
        };
        given.push((p.name.clone(), v));
    }
    let spec = catalogue::lookup(&w.name)?;
    let resolved = catalogue::resolve(spec.name, &given)?;
    Ok((spec, resolved))
}

fn external_launch(
    name: &'static str,
    path: &Path,
    params: &[(&'static str, Value)],
) -> Result<Launch, Error> {
    let tool = external::lookup(name)?;
    let params: Vec<(&str, Value)> = params.to_vec();
    let command = external::command(tool, path, &params)?;
    let server = match external::server_command(tool, path, &params)? {
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

/// One thread to pin, found by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pin {
    /// The thread's name, as `comm` shows it.
    pub thread: &'static str,
    pub cpu: usize,
}

/// The pins a built-in workload's resolved parameters ask for: udp-stream's
/// `sender_cpu` and `receiver_cpu`, where not -1.
pub(crate) fn wanted(workload: &str, params: &[(&'static str, Value)]) -> Vec<Pin> {
    if workload != "udp-stream" {
        return Vec::new();
    }
    let cpu = |name: &str| match params.iter().find(|(n, _)| *n == name) {
        Some((_, Value::Int(v))) => usize::try_from(*v).ok(),
        _ => None,
    };
    [
        (udp_stream::SENDER_THREAD, cpu("sender_cpu")),
        (udp_stream::RECEIVER_THREAD, cpu("receiver_cpu")),
    ]
    .into_iter()
    .filter_map(|(thread, cpu)| Some(Pin { thread, cpu: cpu? }))
    .collect()
}
