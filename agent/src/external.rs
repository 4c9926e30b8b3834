//! External workloads: benchmark programs that are not part of the farm but
//! may be on the agent's machine, each with a command-line builder and a
//! parser of its output.
//!
//! Two kinds of program:
//! - installed from Debian packages into `PATH`: stress-ng, sysbench,
//!   hackbench (rt-tests) and iperf3;
//! - built by the user and found in configured directories (the agent's
//!   `--tools-dir`): NPB's `lu.<class>.x`, McCalpin's STREAM (`stream`) and
//!   netperf (`netperf` beside `netserver`).
//!
//! Each program, or each way of running one, is an [`ExternalSpec`] in
//! [`EXTERNALS`], keyed by the name of its entry in the catalogue's
//! [`EXTERNAL`](farm_workload::catalogue::EXTERNAL) table, which holds its
//! data: program name, bounded parameters, metrics, documentation. (The
//! coordinator checks matrices against that table and cannot depend on this
//! crate.) Like the built-in workloads, nothing here goes through a shell:
//! [`command`] checks the given values against the entry's bounded
//! [`ParamSpec`](farm_workload::catalogue::ParamSpec)s and builds an
//! argument vector (program first) and the environment variables to add; the
//! only text that reaches the program is this module's fixed words and
//! numbers it formatted. [`parse`] turns the
//! program's stdout and stderr into [`Metric`]s, and fails, naming the tool and
//! the line or the missing piece, when the output is not a successful run:
//! a run whose figure of merit cannot be read is a failed run, not a run
//! without a figure.
//!
//! Layout:
//! - this file: the spec type, the table, [`command`], [`server_command`],
//!   [`parse`], and the line helpers the parsers share;
//! - one module per tool, holding its specs (which catalogue entry, which
//!   Debian package or none, which server), how its arguments are built and
//!   its output parser: `stress_ng`, `sysbench`, `hackbench` (`rt-hackbench`),
//!   `iperf3`, `npb` (one entry per class), `stream` (`stream-bin`),
//!   `netperf`;
//! - `discover`: which of the programs this machine has ([`discover()`]).
//!
//! **Architecture invariant:** this module starts no process. Client/server
//! tools (iperf3, netperf) get a second command from [`server_command`], with
//! the port to wait for; starting the server, waiting for it, running the
//! client and stopping the server is the host executor's job
//! ([`executor::host`](crate::executor::host)).

use std::path::{Path, PathBuf};

use farm_workload::catalogue::{ParamError, Value, WorkloadSpec};
use farm_workload::output::Metric;

mod discover;
mod hackbench;
mod iperf3;
mod netperf;
mod npb;
mod stream;
mod stress_ng;
mod sysbench;
#[cfg(test)]
mod tests;

pub use discover::{discover, discover_installed};

/// Every external workload the agent knows how to run, in the order of the
/// catalogue's `EXTERNAL` table.
pub const EXTERNALS: &[ExternalSpec] = &[
    stress_ng::CPU,
    sysbench::CPU,
    sysbench::THREADS,
    hackbench::SPEC,
    iperf3::TCP,
    iperf3::UDP,
    npb::lu("npb-lu.S"),
    npb::lu("npb-lu.W"),
    npb::lu("npb-lu.A"),
    npb::lu("npb-lu.B"),
    npb::lu("npb-lu.C"),
    npb::lu("npb-lu.D"),
    npb::lu("npb-lu.E"),
    npb::lu("npb-lu.F"),
    stream::SPEC,
    netperf::UDP_STREAM,
];

/// Where a program comes from, which decides where [`discover()`] looks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Installed by this Debian package, so looked for in `PATH` (then in the
    /// configured directories, for a build of one's own).
    Debian { package: &'static str },
    /// Built by the user, so looked for in the configured directories only:
    /// names such as `stream` are too generic to trust from `PATH`.
    UserBuilt,
}

/// One external workload.
#[derive(Debug, Clone, Copy)]
pub struct ExternalSpec {
    /// Its catalogue entry, found at compile time by name
    /// ([`catalogue::external`](farm_workload::catalogue::external)): the
    /// name a matrix uses (e.g. `sysbench-cpu`; one program may serve several
    /// entries), the program's file name, the parameters, and the metrics
    /// [`parse`] returns, in that order.
    pub workload: &'static WorkloadSpec,
    pub source: Source,
    /// For client/server tools, the server program's file name; it must sit
    /// in the same directory as the program, so that both come from one build.
    pub server: Option<&'static str>,
    /// The arguments after the program, and the environment to add.
    build: fn(&Params) -> Command,
    /// The server's arguments and port; `Some` exactly when `server` is.
    build_server: Option<fn(&Params) -> Server>,
    /// One value per entry of `metrics`, in the same order.
    parse: fn(&str, &str) -> Result<Vec<f64>, Error>,
}

impl ExternalSpec {
    /// The catalogue name, as matrices and capabilities spell it.
    pub fn name(&self) -> &'static str {
        self.workload.name
    }

    /// The program's file name. Every entry of the catalogue's `EXTERNAL`
    /// table has one (its tests say so).
    pub fn program(&self) -> &'static str {
        self.workload.external_program().unwrap_or_default()
    }
}

/// A program to start: no shell, no `PATH` lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The program's path first, then its arguments.
    pub argv: Vec<String>,
    /// Variables to add to the inherited environment (NPB and STREAM take
    /// their thread count from `OMP_NUM_THREADS`).
    pub env: Vec<(String, String)>,
}

/// The server half of a client/server tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    pub command: Command,
    /// The TCP port it listens on once ready, on loopback. Wait for it to be
    /// in LISTEN state (`/proc/net/tcp`, `/proc/net/tcp6`) before starting the
    /// client; do not connect to probe it: iperf3 takes a probe for a client
    /// that failed, and logs an error about it.
    pub port: u16,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("unknown external workload `{name}` (known: {known})")]
    UnknownSpec { name: String, known: String },
    #[error("{tool}: unknown parameter `{param}` (known: {known})")]
    UnknownParam {
        tool: &'static str,
        param: String,
        known: String,
    },
    #[error("{tool}: parameter `{param}` is given twice")]
    DuplicateParam { tool: &'static str, param: String },
    #[error("{tool}: {source}")]
    Param {
        tool: &'static str,
        source: ParamError,
    },
    #[error("{tool}: program path {path:?} is not UTF-8")]
    ProgramPath { tool: &'static str, path: PathBuf },
    /// The output lacks a piece every successful run prints.
    #[error("{tool}: no {what} in its output")]
    Missing {
        tool: &'static str,
        what: &'static str,
    },
    /// A line that should hold a figure does not.
    #[error("{tool}: cannot read line {line:?}: {why}")]
    BadLine {
        tool: &'static str,
        line: String,
        why: String,
    },
    /// The tool itself reports that the run failed or its result is wrong.
    #[error("{tool} reports failure: {message}")]
    Failed { tool: &'static str, message: String },
    #[error("{tool}: output is not JSON: {source}")]
    Json {
        tool: &'static str,
        source: serde_json::Error,
    },
}

/// The spec called `name`.
pub fn lookup(name: &str) -> Result<&'static ExternalSpec, Error> {
    EXTERNALS
        .iter()
        .find(|s| s.name() == name)
        .ok_or_else(|| Error::UnknownSpec {
            name: name.to_string(),
            known: EXTERNALS
                .iter()
                .map(ExternalSpec::name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// The command that runs `spec` with the program at `program` (as found by
/// [`discover()`]) and the given parameters; parameters not given take their
/// defaults.
pub fn command(
    spec: &ExternalSpec,
    program: &Path,
    params: &[(&str, Value)],
) -> Result<Command, Error> {
    let params = Params::resolve(spec, params)?;
    let mut command = (spec.build)(&params);
    command.argv.insert(0, path_arg(spec, program)?);
    Ok(command)
}

/// The server to start before the client, for the specs that need one;
/// `client` is the client program's path, as given to [`command`].
pub fn server_command(
    spec: &ExternalSpec,
    client: &Path,
    params: &[(&str, Value)],
) -> Result<Option<Server>, Error> {
    let (Some(server), Some(build)) = (spec.server, spec.build_server) else {
        return Ok(None);
    };
    let params = Params::resolve(spec, params)?;
    let mut out = build(&params);
    out.command
        .argv
        .insert(0, path_arg(spec, &client.with_file_name(server))?);
    Ok(Some(out))
}

/// Reads the metrics of a finished run of the spec called `spec_name` from
/// its stdout and stderr, in the order of the spec's `metrics`.
pub fn parse(spec_name: &str, stdout: &str, stderr: &str) -> Result<Vec<Metric>, Error> {
    let spec = lookup(spec_name)?;
    let values = (spec.parse)(stdout, stderr)?;
    let metrics = spec.workload.metrics;
    debug_assert_eq!(values.len(), metrics.len(), "{}", spec.name());
    Ok(metrics
        .iter()
        .zip(values)
        .map(|(m, value)| Metric {
            name: m.name.to_string(),
            value,
            unit: m.unit.to_string(),
            direction: m.direction,
        })
        .collect())
}

fn path_arg(spec: &ExternalSpec, path: &Path) -> Result<String, Error> {
    path.to_str()
        .map(str::to_string)
        .ok_or_else(|| Error::ProgramPath {
            tool: spec.name(),
            path: path.to_path_buf(),
        })
}

/// Checked values of every parameter of one spec, defaults filled in.
struct Params {
    values: Vec<(&'static str, Value)>,
}

impl Params {
    fn resolve(spec: &ExternalSpec, given: &[(&str, Value)]) -> Result<Params, Error> {
        let (tool, params) = (spec.name(), spec.workload.params);
        for (i, (name, _)) in given.iter().enumerate() {
            if !params.iter().any(|p| p.name == *name) {
                return Err(Error::UnknownParam {
                    tool,
                    param: name.to_string(),
                    known: params.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
                });
            }
            if given[..i].iter().any(|(n, _)| n == name) {
                return Err(Error::DuplicateParam {
                    tool,
                    param: name.to_string(),
                });
            }
        }
        let mut values = Vec::with_capacity(params.len());
        for p in params {
            let value = match given.iter().find(|(n, _)| *n == p.name) {
                None => Ok(p.default),
                Some((_, Value::Int(v))) => p.check_int(*v),
                Some((_, Value::Float(v))) => p.check_float(*v),
            }
            .map_err(|source| Error::Param { tool, source })?;
            values.push((p.name, value));
        }
        Ok(Params { values })
    }

    /// The value of a parameter the spec declares.
    ///
    /// Only the tool modules call this, with names from their own tables; a
    /// name missing there is a bug that the argv test of every spec catches.
    fn value(&self, name: &str) -> Value {
        match self.values.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => *value,
            None => panic!("parameter `{name}` is not in the spec"),
        }
    }

    /// A parameter as a command-line argument.
    fn arg(&self, name: &str) -> String {
        self.value(name).to_string()
    }

    /// An on/off parameter: an integer bounded to 0..=1, on when 1.
    fn flag(&self, name: &str) -> bool {
        self.value(name) == Value::Int(1)
    }

    /// The `port` parameter, which the catalogue bounds to 1024..=65535.
    fn port(&self) -> u16 {
        match self.value("port") {
            Value::Int(v) => u16::try_from(v).unwrap_or(0),
            Value::Float(_) => panic!("parameter `port` is not an integer"),
        }
    }
}

// ------------------------------------------------------------ line helpers

/// Splits `key <sep> value` and trims both sides.
fn key_value(line: &str, sep: char) -> Option<(&str, &str)> {
    let (k, v) = line.split_once(sep)?;
    Some((k.trim(), v.trim()))
}

/// The first line whose key (before `sep`, trimmed) is exactly `key`,
/// together with its trimmed value.
fn find_key<'a>(text: &'a str, key: &str, sep: char) -> Option<(&'a str, &'a str)> {
    text.lines().find_map(|line| match key_value(line, sep) {
        Some((k, v)) if k == key => Some((line, v)),
        _ => None,
    })
}

/// Like [`find_key`], but a missing line is an error naming what is missing.
fn require_key<'a>(
    tool: &'static str,
    text: &'a str,
    key: &str,
    sep: char,
    what: &'static str,
) -> Result<(&'a str, &'a str), Error> {
    find_key(text, key, sep).ok_or(Error::Missing { tool, what })
}

/// Parses one figure of `line`. Non-finite values are refused, as in the
/// metric protocol: a tool that prints `nan` has failed.
fn number(tool: &'static str, line: &str, text: &str) -> Result<f64, Error> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(bad_line(tool, line, format!("`{text}` is not a number"))),
    }
}

/// The `i`th whitespace-separated field of `line` as a number.
fn field(tool: &'static str, line: &str, i: usize, what: &str) -> Result<f64, Error> {
    match line.split_whitespace().nth(i) {
        Some(text) => number(tool, line, text),
        None => Err(bad_line(tool, line, format!("no field {} ({what})", i + 1))),
    }
}

fn bad_line(tool: &'static str, line: &str, why: String) -> Error {
    Error::BadLine {
        tool,
        line: line.trim().to_string(),
        why,
    }
}
