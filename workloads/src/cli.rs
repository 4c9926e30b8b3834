//! The `farm-workload` binary: runs one catalogue workload and prints its
//! metrics on stdout in the [`output`] line protocol.
//!
//! ```text
//! farm-workload <name> [--param NAME=VALUE]...
//! farm-workload --list
//! ```
//!
//! The agent runs this binary on the host or copies it into a guest. Its
//! arguments come from a run the coordinator pushed, so they are checked
//! against the catalogue here as well: a value that is not in the catalogue's
//! range is refused, never clamped. It runs the built-in workloads only;
//! `--list` shows the external ones too, and naming one is refused with a
//! line that says which program runs it. Exit status 0 means the metrics were
//! printed, 2 that the command line was refused (one line on stderr says
//! why), 1 that the workload could not run.

use std::fmt;
use std::io::{self, Write};
use std::num::IntErrorKind;

use crate::catalogue::{self, Kind, ParamError, Value, WorkloadSpec};
use crate::hackbench::{self, Mode};
use crate::output::{self, Metric};
use crate::{cpu_hog, lu, oltp, stream, udp_stream};

#[cfg(test)]
mod tests;

const USAGE: &str = "usage: farm-workload <name> [--param NAME=VALUE]... | farm-workload --list";

/// Runs the binary with `args` (without the program name) and returns its
/// exit status.
pub fn main(args: Vec<String>) -> i32 {
    run(&args, &mut io::stdout().lock(), &mut io::stderr().lock())
}

/// [`main`] with its output streams passed in, so that tests can read them.
fn run(args: &[String], stdout: &mut dyn Write, stderr: &mut dyn Write) -> i32 {
    let outcome = match parse(args) {
        Ok(Command::Help) => writeln!(stdout, "{USAGE}").map_err(Failure::Output),
        Ok(Command::List) => list(stdout).map_err(Failure::Output),
        Ok(Command::Run { workload, params }) => execute(workload, &params, stdout, stderr),
        Err(failure) => Err(failure),
    };
    match outcome {
        Ok(()) => 0,
        Err(failure) => {
            // If stderr is gone too there is nobody left to tell.
            let _ = writeln!(stderr, "farm-workload: {failure}");
            failure.exit_status()
        }
    }
}

#[derive(Debug)]
enum Command {
    Help,
    List,
    Run {
        workload: &'static WorkloadSpec,
        params: Vec<(&'static str, Value)>,
    },
}

/// Why the binary did not succeed.
#[derive(Debug)]
enum Failure {
    /// The command line is not of the documented shape.
    Usage(String),
    /// A parameter's value is not a number, or a parameter is given twice.
    Invalid(String),
    /// The catalogue refused the workload or a parameter.
    Param(ParamError),
    /// The workload is an external program's, which agents run, not this binary.
    External {
        workload: &'static str,
        program: &'static str,
    },
    /// The workload could not run (threads could not be created, say).
    Run {
        workload: &'static str,
        error: io::Error,
    },
    /// The metrics could not be written.
    Output(io::Error),
    /// The catalogue and this file disagree about a parameter.
    Internal(String),
}

impl Failure {
    fn exit_status(&self) -> i32 {
        match self {
            Failure::Usage(_)
            | Failure::Invalid(_)
            | Failure::Param(_)
            | Failure::External { .. } => 2,
            Failure::Run { .. } | Failure::Output(_) | Failure::Internal(_) => 1,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage(message) => write!(f, "{message} ({USAGE})"),
            Failure::Invalid(message) => write!(f, "{message}"),
            Failure::Param(error) => write!(f, "{error}"),
            Failure::External { workload, program } => write!(
                f,
                "`{workload}` is an external workload: run by agents where {program} is \
                 installed, not by this binary"
            ),
            Failure::Run { workload, error } => write!(f, "workload `{workload}` failed: {error}"),
            Failure::Output(error) => write!(f, "cannot write the metrics: {error}"),
            Failure::Internal(message) => write!(f, "internal error: {message}"),
        }
    }
}

impl From<ParamError> for Failure {
    fn from(error: ParamError) -> Failure {
        Failure::Param(error)
    }
}

fn parse(args: &[String]) -> Result<Command, Failure> {
    let (first, rest) = match args {
        [] => return Err(Failure::Usage("no workload given".to_string())),
        [first, rest @ ..] => (first.as_str(), rest),
    };
    match first {
        "--help" | "-h" if rest.is_empty() => return Ok(Command::Help),
        "--list" if rest.is_empty() => return Ok(Command::List),
        "--help" | "-h" | "--list" => {
            return Err(Failure::Usage(format!("`{first}` takes no arguments")));
        }
        _ if first.starts_with('-') => {
            return Err(Failure::Usage(format!("unknown option `{first}`")));
        }
        _ => {}
    }
    let workload = catalogue::lookup(first)?;
    if let Some(program) = workload.external_program() {
        return Err(Failure::External {
            workload: workload.name,
            program,
        });
    }
    let mut given: Vec<(String, Value)> = Vec::new();
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        if arg != "--param" {
            return Err(Failure::Usage(format!("unexpected argument `{arg}`")));
        }
        let Some(assignment) = rest.next() else {
            return Err(Failure::Usage("`--param` needs NAME=VALUE".to_string()));
        };
        let (name, value) = parse_assignment(workload, assignment)?;
        // `resolve` would silently take the first of two values; a command
        // line that gives one parameter two values is a mistake, not a choice.
        if given.iter().any(|(n, _)| *n == name) {
            return Err(Failure::Invalid(format!(
                "parameter `{name}` is given twice"
            )));
        }
        given.push((name, value));
    }
    let params = catalogue::resolve(workload.name, &given)?;
    Ok(Command::Run { workload, params })
}

/// Parses `NAME=VALUE`. The value is read as an integer if it is one and as a
/// number otherwise; whether that suits the parameter is `resolve`'s call.
fn parse_assignment(workload: &WorkloadSpec, assignment: &str) -> Result<(String, Value), Failure> {
    let Some((name, text)) = assignment.split_once('=') else {
        return Err(Failure::Usage(format!(
            "`--param {assignment}` is not NAME=VALUE"
        )));
    };
    if name.is_empty() {
        return Err(Failure::Usage(format!(
            "`--param {assignment}` has no parameter name"
        )));
    }
    // An unknown name is reported as such, not as a bad value.
    let spec = workload.param(name)?;
    let value = match (text.parse::<i64>(), text.parse::<f64>()) {
        (Ok(v), _) => Value::Int(v),
        // Read as a float, an integer too large for i64 would be refused as
        // "not an integer", which is misleading.
        (Err(e), _)
            if matches!(
                e.kind(),
                IntErrorKind::PosOverflow | IntErrorKind::NegOverflow
            ) =>
        {
            return Err(Failure::Invalid(format!(
                "parameter `{name}` = {text} does not fit in 64 bits"
            )));
        }
        (Err(_), Ok(v)) => Value::Float(v),
        (Err(_), Err(_)) => {
            return Err(Failure::Invalid(format!(
                "parameter `{name}` must be {}, got `{text}`",
                spec.expected()
            )));
        }
    };
    Ok((name.to_string(), value))
}

fn list(out: &mut dyn Write) -> io::Result<()> {
    for workload in catalogue::all() {
        writeln!(out, "{}\n    {}", workload.name, workload.doc)?;
        if let Some(program) = workload.external_program() {
            writeln!(
                out,
                "    external workload: run by agents where {program} is installed"
            )?;
        }
        for p in workload.params {
            let range = match p.kind {
                Kind::Int { min, max } => format!("integer {min}..={max}"),
                Kind::Float { min, max } => format!("number {min}..={max}"),
            };
            writeln!(
                out,
                "    --param {}=<{range}>  default {}: {}",
                p.name, p.default, p.doc
            )?;
        }
        for m in workload.metrics {
            let better = output::direction_word(m.direction);
            writeln!(
                out,
                "    reports {} in {}, {better} is better",
                m.name, m.unit
            )?;
        }
    }
    Ok(())
}

fn execute(
    workload: &'static WorkloadSpec,
    params: &[(&'static str, Value)],
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), Failure> {
    let failed = |error| Failure::Run {
        workload: workload.name,
        error,
    };
    let metrics: Vec<Metric> = match workload.name {
        "cpu-hog" => {
            cpu_hog::run(count(params, "threads")?, number(params, "seconds")?).map_err(failed)?
        }
        "lu" => {
            let solution = lu::run(
                count(params, "threads")?,
                count(params, "size")?,
                count(params, "iterations")?,
            )
            .map_err(failed)?;
            // A sanity check for people, not a metric: a run whose residual
            // did not fall has computed garbage, however fast.
            let _ = writeln!(
                stderr,
                "lu: residual {:e} -> {:e} after {} iterations on {}^3 in {:.3} s",
                solution.initial_residual(),
                solution.final_residual(),
                solution.iterations,
                solution.size,
                solution.elapsed.as_secs_f64()
            );
            solution.metrics()
        }
        "stream" => {
            let outcome = stream::run(
                count(params, "instances")?,
                count(params, "size_mb")?,
                count(params, "ntimes")?,
            )
            .map_err(failed)?;
            // All four kernels, as STREAM prints them; only triad is a metric.
            for (n, instance) in outcome.instances.iter().enumerate() {
                let rates: Vec<String> = stream::Kernel::ALL
                    .iter()
                    .map(|k| format!("{} {:.1}", k.name(), instance.rate_mbs(*k)))
                    .collect();
                let _ = writeln!(
                    stderr,
                    "stream: instance {n}: {} MB/s; runtime {:.3} s",
                    rates.join(", "),
                    instance.runtime.as_secs_f64()
                );
            }
            outcome.metrics()
        }
        "udp-stream" => {
            let outcome = udp_stream::run(
                number(params, "seconds")?,
                count(params, "message_size")?,
                cpu(params, "sender_cpu")?,
                cpu(params, "receiver_cpu")?,
                stderr,
            )
            .map_err(failed)?;
            let _ = writeln!(
                stderr,
                "udp-stream: sent {} and received {} datagrams of {} bytes in {:.3} s",
                outcome.sent,
                outcome.received,
                outcome.message_size,
                outcome.elapsed.as_secs_f64()
            );
            outcome.metrics()
        }
        "oltp" => {
            let outcome = oltp::run(
                count(params, "threads")?,
                number(params, "seconds")?,
                count(params, "tables")?,
            )
            .map_err(failed)?;
            let _ = writeln!(
                stderr,
                "oltp: {} transactions in {:.3} s",
                outcome.transactions,
                outcome.elapsed.as_secs_f64()
            );
            outcome.metrics()
        }
        "hackbench" => {
            let mode =
                Mode::from_param(integer(params, "mode")?).ok_or_else(|| mismatch("mode"))?;
            let outcome = hackbench::run(
                count(params, "groups")?,
                count(params, "fds")?,
                count(params, "loops")?,
                mode,
            )
            .map_err(failed)?;
            let _ = writeln!(
                stderr,
                "hackbench: {} messages over {}s in {:.3} s",
                outcome.messages,
                mode.name(),
                outcome.elapsed.as_secs_f64()
            );
            outcome.metrics()
        }
        other => {
            return Err(failed(io::Error::other(format!(
                "`{other}` is in the catalogue but this binary cannot run it"
            ))));
        }
    };
    for m in &metrics {
        writeln!(stdout, "{}", m.to_line()).map_err(Failure::Output)?;
    }
    stdout.flush().map_err(Failure::Output)
}

/// A resolved parameter as a count. `resolve` has checked the type and the
/// range, so a failure here means the catalogue and this file disagree.
fn count(params: &[(&'static str, Value)], name: &str) -> Result<usize, Failure> {
    usize::try_from(integer(params, name)?).map_err(|_| mismatch(name))
}

fn integer(params: &[(&'static str, Value)], name: &str) -> Result<i64, Failure> {
    match params.iter().find(|(n, _)| *n == name) {
        Some((_, Value::Int(v))) => Ok(*v),
        _ => Err(mismatch(name)),
    }
}

/// A CPU number, where -1 means none.
fn cpu(params: &[(&'static str, Value)], name: &str) -> Result<Option<usize>, Failure> {
    match integer(params, name)? {
        -1 => Ok(None),
        v => usize::try_from(v).map(Some).map_err(|_| mismatch(name)),
    }
}

fn number(params: &[(&'static str, Value)], name: &str) -> Result<f64, Failure> {
    match params.iter().find(|(n, _)| *n == name) {
        Some((_, Value::Float(v))) => Ok(*v),
        Some((_, Value::Int(v))) => Ok(*v as f64),
        None => Err(mismatch(name)),
    }
}

fn mismatch(name: &str) -> Failure {
    Failure::Internal(format!("the catalogue has no fitting parameter `{name}`"))
}
