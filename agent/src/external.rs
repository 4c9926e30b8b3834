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
//! Layout (each module imports only those listed after it; this file sits
//! above them all):
//! - this file: the table, [`discover()`], [`command`], [`server_command`]
//!   and [`parse`];
//! - one module per tool, holding its specs (which catalogue entry, which
//!   Debian package or none, which server), how its arguments are built and
//!   its output parser: `stress_ng`, `sysbench`, `hackbench` (`rt-hackbench`),
//!   `iperf3`, `npb` (one entry per class), `stream` (`stream-bin`),
//!   `netperf`;
//! - `discover`: which of the programs this machine has;
//! - `spec`: the spec type, the checked parameters, the errors;
//! - `lines`: the line helpers the parsers share.
//!
//! **Architecture invariant:** this module starts no process. Client/server
//! tools (iperf3, netperf) get a second command from [`server_command`], with
//! the port to wait for; starting the server, waiting for it, running the
//! client and stopping the server is the host executor's job
//! ([`executor::host`](crate::executor::host)).

use std::path::{Path, PathBuf};

use farm_workload::catalogue::Value;
use farm_workload::output::Metric;

mod discover;
mod hackbench;
mod iperf3;
mod lines;
mod netperf;
mod npb;
mod spec;
mod stream;
mod stress_ng;
mod sysbench;
#[cfg(test)]
mod tests;

pub use spec::{Command, Error, ExternalSpec, Server, Source};

use spec::Params;

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

/// The external workloads whose programs are present, each with the
/// program's path, in the order of [`EXTERNALS`].
///
/// `path_env` is a `PATH` value; its relative and empty entries are skipped
/// (a program found through them would depend on the agent's working
/// directory). Debian-packaged programs are looked for in `PATH`, then in
/// `extra_dirs`; user-built ones only in `extra_dirs`. The first directory
/// that has an executable regular file (or a link to one) of the program's
/// name wins. A client/server tool counts only where its server sits in the
/// same directory.
pub fn discover(path_env: &str, extra_dirs: &[PathBuf]) -> Vec<(&'static str, PathBuf)> {
    discover::present(EXTERNALS, path_env, extra_dirs)
}

/// [`discover()`] with this process's `PATH`: what the agent can run.
pub fn discover_installed(extra_dirs: &[PathBuf]) -> Vec<(&'static str, PathBuf)> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    discover(&path.to_string_lossy(), extra_dirs)
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
