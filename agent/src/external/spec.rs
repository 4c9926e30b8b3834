//! What one external workload is ([`ExternalSpec`]): its catalogue entry,
//! where its program comes from, how its command is built from checked
//! [`Params`], and the [`Error`]s of building and parsing. The tool modules
//! each define specs of this type; `external.rs` lists them.

use std::path::PathBuf;

use farm_workload::catalogue::{ParamError, Value, WorkloadSpec};

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
    pub(super) build: fn(&Params) -> Command,
    /// The server's arguments and port; `Some` exactly when `server` is.
    pub(super) build_server: Option<fn(&Params) -> Server>,
    /// One value per entry of `metrics`, in the same order.
    pub(super) parse: fn(&str, &str) -> Result<Vec<f64>, Error>,
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

/// Checked values of every parameter of one spec, defaults filled in.
pub(super) struct Params {
    values: Vec<(&'static str, Value)>,
}

impl Params {
    pub(super) fn resolve(spec: &ExternalSpec, given: &[(&str, Value)]) -> Result<Params, Error> {
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
    pub(super) fn value(&self, name: &str) -> Value {
        match self.values.iter().find(|(n, _)| *n == name) {
            Some((_, value)) => *value,
            None => panic!("parameter `{name}` is not in the spec"),
        }
    }

    /// A parameter as a command-line argument.
    pub(super) fn arg(&self, name: &str) -> String {
        self.value(name).to_string()
    }

    /// An on/off parameter: an integer bounded to 0..=1, on when 1.
    pub(super) fn flag(&self, name: &str) -> bool {
        self.value(name) == Value::Int(1)
    }

    /// The `port` parameter, which the catalogue bounds to 1024..=65535.
    pub(super) fn port(&self) -> u16 {
        match self.value("port") {
            Value::Int(v) => u16::try_from(v).unwrap_or(0),
            Value::Float(_) => panic!("parameter `port` is not an integer"),
        }
    }
}
