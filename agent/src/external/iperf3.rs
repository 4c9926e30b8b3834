//! iperf3 over loopback, TCP and UDP: a sender and a receiver whose wake-ups
//! the scheduler places, as netperf's in seed 002.
//!
//! The server is `iperf3 -s -1 -B 127.0.0.1 -p PORT` (one test, then it
//! exits; bound to loopback, as the agent starts it as root and the client
//! is on this machine: nobody else on the network may reach it); the client
//! `iperf3 -c 127.0.0.1 -p PORT ... -J` reports in JSON on stdout. The figures
//! are `end.sum_sent` and `end.sum_received` (iperf3 3.12 gives both for UDP
//! too). A failed test is still JSON, with a top-level `error` string:
//!
//! ```text
//! "error": "unable to connect to server: Connection refused"
//! ```
//!
//! and iperf3 may exit with status 0 even then, so the parser checks it.

use serde_json::Value as Json;

use super::spec::{Command, Error, ExternalSpec, Params, Server, Source};
use farm_workload::catalogue;

pub(super) const TCP: ExternalSpec = ExternalSpec {
    workload: catalogue::external("iperf3"),
    source: Source::Debian { package: "iperf3" },
    server: Some("iperf3"),
    build: build_tcp,
    build_server: Some(build_server),
    parse: parse_tcp,
};

pub(super) const UDP: ExternalSpec = ExternalSpec {
    workload: catalogue::external("iperf3-udp"),
    source: Source::Debian { package: "iperf3" },
    server: Some("iperf3"),
    build: build_udp,
    build_server: Some(build_server),
    parse: parse_udp,
};

fn client(p: &Params) -> Vec<String> {
    vec![
        "-c".into(),
        "127.0.0.1".into(),
        "-p".into(),
        p.arg("port"),
        "-t".into(),
        p.arg("seconds"),
    ]
}

fn build_tcp(p: &Params) -> Command {
    let mut argv = client(p);
    argv.extend(["-P".into(), p.arg("streams"), "-J".into()]);
    Command {
        argv,
        env: Vec::new(),
    }
}

fn build_udp(p: &Params) -> Command {
    let mut argv = client(p);
    argv.extend([
        "-u".into(),
        "-b".into(),
        p.arg("bitrate"),
        "-l".into(),
        p.arg("length"),
        "-J".into(),
    ]);
    Command {
        argv,
        env: Vec::new(),
    }
}

fn build_server(p: &Params) -> Server {
    Server {
        command: Command {
            argv: vec![
                "-s".into(),
                "-1".into(),
                "-B".into(),
                "127.0.0.1".into(),
                "-p".into(),
                p.arg("port"),
            ],
            env: Vec::new(),
        },
        port: p.port(),
    }
}

fn parse_tcp(stdout: &str, _stderr: &str) -> Result<Vec<f64>, Error> {
    let tool = TCP.name();
    let report = report(tool, stdout)?;
    Ok(vec![
        get(tool, &report, "end.sum_received.bits_per_second")?,
        get(tool, &report, "end.sum_sent.bits_per_second")?,
        get(tool, &report, "end.sum_sent.retransmits")?,
    ])
}

fn parse_udp(stdout: &str, _stderr: &str) -> Result<Vec<f64>, Error> {
    let tool = UDP.name();
    let report = report(tool, stdout)?;
    Ok(vec![
        get(tool, &report, "end.sum_received.bits_per_second")?,
        get(tool, &report, "end.sum_sent.bits_per_second")?,
        get(tool, &report, "end.sum_received.lost_percent")?,
        get(tool, &report, "end.sum_received.jitter_ms")?,
    ])
}

/// The client's JSON report, refused when it carries an `error`.
fn report(tool: &'static str, stdout: &str) -> Result<Json, Error> {
    let report: Json =
        serde_json::from_str(stdout).map_err(|source| Error::Json { tool, source })?;
    if let Some(error) = report.get("error") {
        return Err(Error::Failed {
            tool,
            message: match error.as_str() {
                Some(text) => text.to_string(),
                None => error.to_string(),
            },
        });
    }
    Ok(report)
}

/// The finite number at a dotted path (`end.sum_sent.bits_per_second`) of
/// the report.
fn get(tool: &'static str, report: &Json, path: &'static str) -> Result<f64, Error> {
    let pointer = format!("/{}", path.replace('.', "/"));
    match report.pointer(&pointer).and_then(Json::as_f64) {
        Some(v) if v.is_finite() => Ok(v),
        _ => Err(Error::Missing { tool, what: path }),
    }
}
