//! netperf's UDP_STREAM test over loopback, the benchmark of seed 002, built
//! by the user (netperf is in no reachable package archive).
//!
//! The server is `netserver -D -f -L 127.0.0.1 -p PORT`: in the
//! foreground, serving tests one after the other in one process, so that
//! stopping it is killing one pid; bound to loopback, as the agent starts it
//! as root and the client is on this machine: nobody else on the network
//! may reach it. The client is
//! `netperf -H 127.0.0.1 -p PORT -t UDP_STREAM -l S -- -m SIZE [-s BUF -S BUF]`
//! and prints:
//!
//! ```text
//! MIGRATED UDP STREAM TEST from 0.0.0.0 (0.0.0.0) port 0 AF_INET to 127.0.0.1 () port 0 AF_INET
//! Socket  Message  Elapsed      Messages
//! Size    Size     Time         Okay Errors   Throughput
//! bytes   bytes    secs            #      #   10^6bits/sec
//!
//! 212992    1024   10.00     2873460      0    2353.93
//! 212992           10.00     2873457           2353.93
//! ```
//!
//! The first data line is the sender's, the second the receiver's; with UDP
//! they differ by what was dropped, and the receiver's is the throughput
//! that counts (the seed's regression was on the receiving side, woken by
//! rescheduling IPIs).

use super::lines::{bad_line, field};
use super::spec::{Command, Error, ExternalSpec, Params, Server, Source};
use farm_workload::catalogue::{self, Value};

const TOOL: &str = "netperf-udp-stream";

pub(super) const UDP_STREAM: ExternalSpec = ExternalSpec {
    workload: catalogue::external(TOOL),
    source: Source::UserBuilt,
    server: Some("netserver"),
    build,
    build_server: Some(build_server),
    parse,
};

fn build(p: &Params) -> Command {
    let mut argv = vec![
        "-H".into(),
        "127.0.0.1".into(),
        "-p".into(),
        p.arg("port"),
        "-t".into(),
        "UDP_STREAM".into(),
        "-l".into(),
        p.arg("seconds"),
        "--".into(),
        "-m".into(),
        p.arg("message_size"),
    ];
    if p.value("socket_buffer") != Value::Int(0) {
        let size = p.arg("socket_buffer");
        argv.extend(["-s".into(), size.clone(), "-S".into(), size]);
    }
    Command {
        argv,
        env: Vec::new(),
    }
}

fn build_server(p: &Params) -> Server {
    Server {
        command: Command {
            argv: vec![
                "-D".into(),
                "-f".into(),
                "-L".into(),
                "127.0.0.1".into(),
                "-p".into(),
                p.arg("port"),
            ],
            env: Vec::new(),
        },
        port: p.port(),
    }
}

fn parse(stdout: &str, _stderr: &str) -> Result<Vec<f64>, Error> {
    let mut lines = stdout
        .lines()
        .skip_while(|l| !(l.contains("Okay Errors") && l.contains("Throughput")));
    if lines.next().is_none() {
        return Err(Error::Missing {
            tool: TOOL,
            what: "UDP_STREAM result table (`... Okay Errors   Throughput`)",
        });
    }
    let Some(units) = lines.next() else {
        return Err(Error::Missing {
            tool: TOOL,
            what: "units line of the result table",
        });
    };
    // netperf prints 10^6bits/sec unless told otherwise with -f, which the
    // command does not pass; any other unit would be misread.
    if !units.contains("10^6bits/sec") {
        return Err(bad_line(
            TOOL,
            units,
            "throughput is not in 10^6bits/sec".into(),
        ));
    }
    let mut data = lines.filter(|l| !l.trim().is_empty());
    let (Some(sent), Some(received)) = (data.next(), data.next()) else {
        return Err(Error::Missing {
            tool: TOOL,
            what: "sender and receiver lines of the result table",
        });
    };
    // Sender: socket size, message size, elapsed, messages okay, errors,
    // throughput. Receiver: socket size, elapsed, messages okay, throughput.
    // With -c/-C, CPU columns follow; the positions hold.
    let sent_mbit = field(TOOL, sent, 5, "sender throughput")?;
    let elapsed = field(TOOL, received, 1, "receiver elapsed seconds")?;
    let messages = field(TOOL, received, 2, "messages received")?;
    let received_mbit = field(TOOL, received, 3, "receiver throughput")?;
    if elapsed <= 0.0 {
        return Err(bad_line(
            TOOL,
            received,
            "elapsed time is not positive".into(),
        ));
    }
    Ok(vec![received_mbit, messages / elapsed, sent_mbit])
}
