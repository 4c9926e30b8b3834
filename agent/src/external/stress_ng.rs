//! stress-ng's CPU stressor: seed 003's `stress --cpu 1` competing load, with
//! a figure of merit of its own.
//!
//! `stress-ng --cpu N --cpu-load P --timeout Ss --metrics-brief --stdout`.
//! The figures come from the `--metrics-brief` table:
//!
//! ```text
//! stress-ng: metrc: [12696] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s
//! stress-ng: metrc: [12696]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)
//! stress-ng: metrc: [12696] cpu                1144      1.01      0.65      0.00      1136.34        1767.20
//! ```
//!
//! stress-ng writes its log on stderr unless told `--stdout`; the command
//! asks for stdout, where the executor keeps everything, but the parser reads
//! both streams. Each log line starts with `stress-ng: <level>: [<pid>] `,
//! the level being `metrc` in 0.15 and `info` in older releases, and
//! `--log-brief` drops the prefix: all three forms are accepted.

use super::lines::field;
use super::spec::{Command, Error, ExternalSpec, Params, Source};
use farm_workload::catalogue;

const TOOL: &str = "stress-ng";

pub(super) const CPU: ExternalSpec = ExternalSpec {
    workload: catalogue::external(TOOL),
    source: Source::Debian {
        package: "stress-ng",
    },
    server: None,
    build,
    build_server: None,
    parse,
};

fn build(p: &Params) -> Command {
    Command {
        argv: vec![
            "--cpu".into(),
            p.arg("workers"),
            "--cpu-load".into(),
            p.arg("load"),
            "--timeout".into(),
            format!("{}s", p.arg("seconds")),
            "--metrics-brief".into(),
            "--stdout".into(),
        ],
        env: Vec::new(),
    }
}

fn parse(stdout: &str, stderr: &str) -> Result<Vec<f64>, Error> {
    let lines = || stdout.lines().chain(stderr.lines()).map(strip_log_prefix);
    if let Some(line) = lines().find(|l| l.contains("unsuccessful run completed")) {
        return Err(Error::Failed {
            tool: TOOL,
            message: line.trim().to_string(),
        });
    }
    let mut in_table = false;
    for line in lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("stressor") if line.contains("bogo ops") => in_table = true,
            Some("cpu") if in_table => {
                return Ok(vec![
                    field(TOOL, line, 1, "bogo ops")?,
                    field(TOOL, line, 5, "bogo ops/s (real time)")?,
                    field(TOOL, line, 6, "bogo ops/s (usr+sys time)")?,
                ]);
            }
            _ => {}
        }
    }
    Err(Error::Missing {
        tool: TOOL,
        what: if in_table {
            // --metrics-brief leaves out a stressor that did nothing.
            "`cpu` row in the metrics table"
        } else {
            "metrics table (`stressor bogo ops ...`)"
        },
    })
}

/// Drops `stress-ng: <level>: [<pid>] ` from a log line, if it has it.
fn strip_log_prefix(line: &str) -> &str {
    let Some(rest) = line.strip_prefix("stress-ng:") else {
        return line;
    };
    let rest = rest.trim_start();
    let Some((level, rest)) = rest.split_once(':') else {
        return line;
    };
    if level.contains(char::is_whitespace) {
        return line;
    }
    let rest = rest.trim_start();
    match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
        Some((_pid, rest)) => rest,
        None => rest,
    }
}
