//! sysbench 1.0's `cpu` and `threads` tests, the benchmark of seed 004.
//!
//! `sysbench cpu --threads=N --time=S --cpu-max-prime=P run` and
//! `sysbench threads --threads=N --time=S --thread-yields=Y --thread-locks=L run`.
//! Both print the same report on stdout:
//!
//! ```text
//! CPU speed:
//!     events per second:  4959.76
//!
//! General statistics:
//!     total time:                          1.0005s
//!     total number of events:              4965
//!
//! Latency (ms):
//!          min:                                    0.22
//!          avg:                                    0.40
//!          max:                                   20.28
//!          95th percentile:                        0.26
//! ```
//!
//! Only the cpu test prints `events per second`; for the threads test it is
//! the number of events over the total time, so that both report the same
//! metrics. A `FATAL:` line (a bad option value) fails the run.

use super::lines::{bad_line, number, require_key};
use super::spec::{Command, Error, ExternalSpec, Params, Source};
use farm_workload::catalogue;

pub(super) const CPU: ExternalSpec = ExternalSpec {
    workload: catalogue::external("sysbench-cpu"),
    source: Source::Debian {
        package: "sysbench",
    },
    server: None,
    build: build_cpu,
    build_server: None,
    parse: parse_cpu,
};

pub(super) const THREADS: ExternalSpec = ExternalSpec {
    workload: catalogue::external("sysbench-threads"),
    source: Source::Debian {
        package: "sysbench",
    },
    server: None,
    build: build_threads,
    build_server: None,
    parse: parse_threads,
};

fn build_cpu(p: &Params) -> Command {
    Command {
        argv: vec![
            "cpu".into(),
            format!("--threads={}", p.arg("threads")),
            format!("--time={}", p.arg("seconds")),
            format!("--cpu-max-prime={}", p.arg("max_prime")),
            "run".into(),
        ],
        env: Vec::new(),
    }
}

fn build_threads(p: &Params) -> Command {
    Command {
        argv: vec![
            "threads".into(),
            format!("--threads={}", p.arg("threads")),
            format!("--time={}", p.arg("seconds")),
            format!("--thread-yields={}", p.arg("yields")),
            format!("--thread-locks={}", p.arg("locks")),
            "run".into(),
        ],
        env: Vec::new(),
    }
}

fn parse_cpu(stdout: &str, stderr: &str) -> Result<Vec<f64>, Error> {
    let tool = CPU.name();
    let report = Report::parse(tool, stdout, stderr)?;
    let (line, value) = require_key(
        tool,
        stdout,
        "events per second",
        ':',
        "`events per second:` line",
    )?;
    let per_s = number(tool, line, value)?;
    Ok(vec![report.events, per_s, report.avg_ms, report.p95_ms])
}

fn parse_threads(stdout: &str, stderr: &str) -> Result<Vec<f64>, Error> {
    let tool = THREADS.name();
    let report = Report::parse(tool, stdout, stderr)?;
    if report.seconds <= 0.0 {
        return Err(bad_line(
            tool,
            report.time_line,
            "total time is not positive".into(),
        ));
    }
    Ok(vec![
        report.events,
        report.events / report.seconds,
        report.avg_ms,
        report.p95_ms,
    ])
}

/// What both tests print.
struct Report<'a> {
    seconds: f64,
    time_line: &'a str,
    events: f64,
    avg_ms: f64,
    p95_ms: f64,
}

impl<'a> Report<'a> {
    fn parse(tool: &'static str, stdout: &'a str, stderr: &str) -> Result<Report<'a>, Error> {
        if let Some(line) = stdout
            .lines()
            .chain(stderr.lines())
            .find(|l| l.starts_with("FATAL:"))
        {
            return Err(Error::Failed {
                tool,
                message: line.trim().to_string(),
            });
        }
        let (time_line, time) = require_key(tool, stdout, "total time", ':', "`total time:` line")?;
        let Some(time) = time.strip_suffix('s') else {
            return Err(bad_line(tool, time_line, "no `s` after the time".into()));
        };
        let (events_line, events) = require_key(
            tool,
            stdout,
            "total number of events",
            ':',
            "`total number of events:` line",
        )?;
        // The latency figures are in the unit the section title names.
        if !stdout.lines().any(|l| l.trim() == "Latency (ms):") {
            return Err(Error::Missing {
                tool,
                what: "`Latency (ms):` section",
            });
        }
        let (avg_line, avg) = require_key(tool, stdout, "avg", ':', "latency `avg:` line")?;
        let (p95_line, p95) = require_key(
            tool,
            stdout,
            "95th percentile",
            ':',
            "latency `95th percentile:` line",
        )?;
        Ok(Report {
            seconds: number(tool, time_line, time)?,
            time_line,
            events: number(tool, events_line, events)?,
            avg_ms: number(tool, avg_line, avg)?,
            p95_ms: number(tool, p95_line, p95)?,
        })
    }
}
