//! hackbench from rt-tests: groups of senders and receivers passing messages
//! over socket pairs or pipes, the scheduler's classic wake-up benchmark.
//!
//! `hackbench -g G -f F -l L -s SIZE [-T] [-p]`; the figure is the last line
//! of its stdout:
//!
//! ```text
//! Running in process mode with 2 groups using 10 file descriptors each (== 20 tasks)
//! Each sender will pass 200 messages of 100 bytes
//! Time: 0.020
//! ```

use super::lines::{number, require_key};
use super::spec::{Command, Error, ExternalSpec, Params, Source};
use farm_workload::catalogue;

/// The catalogue's name: `hackbench` is the built-in workload modelled on this.
const TOOL: &str = "rt-hackbench";

pub(super) const SPEC: ExternalSpec = ExternalSpec {
    workload: catalogue::external(TOOL),
    source: Source::Debian {
        package: "rt-tests",
    },
    server: None,
    build,
    build_server: None,
    parse,
};

fn build(p: &Params) -> Command {
    let mut argv = vec![
        "-g".into(),
        p.arg("groups"),
        "-f".into(),
        p.arg("fds"),
        "-l".into(),
        p.arg("loops"),
        "-s".into(),
        p.arg("datasize"),
    ];
    if p.flag("threads") {
        argv.push("-T".into());
    }
    if p.flag("pipe") {
        argv.push("-p".into());
    }
    Command {
        argv,
        env: Vec::new(),
    }
}

fn parse(stdout: &str, _stderr: &str) -> Result<Vec<f64>, Error> {
    let (line, value) = require_key(TOOL, stdout, "Time", ':', "`Time:` line")?;
    Ok(vec![number(TOOL, line, value)?])
}
