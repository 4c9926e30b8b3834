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

use super::{Command, Error, ExternalSpec, Params, Source, int, number, require_key};
use farm_workload::catalogue::{Direction, MetricSpec};

const TOOL: &str = "hackbench";

pub(super) const SPEC: ExternalSpec = ExternalSpec {
    name: TOOL,
    program: "hackbench",
    source: Source::Debian {
        package: "rt-tests",
    },
    server: None,
    // Each group is 2 × fds tasks: the bounds keep a run under 20,000 tasks.
    params: &[
        int(
            "groups",
            1,
            100,
            10,
            "groups of senders and receivers (`-g`)",
        ),
        int(
            "fds",
            1,
            100,
            20,
            "senders, and as many receivers, per group (`-f`)",
        ),
        int(
            "loops",
            1,
            10_000_000,
            100,
            "messages each sender sends to each receiver of its group (`-l`)",
        ),
        int("datasize", 1, 65_536, 100, "bytes per message (`-s`)"),
        int(
            "threads",
            0,
            1,
            0,
            "1: tasks are threads of one process (`-T`); 0: processes",
        ),
        int(
            "pipe",
            0,
            1,
            0,
            "1: messages go through pipes (`-p`); 0: through socket pairs",
        ),
    ],
    metrics: &[MetricSpec {
        name: "hackbench_time_s",
        unit: "s",
        direction: Direction::LowerIsBetter,
    }],
    doc: "hackbench (rt-tests): time for every sender to pass its messages to every \
          receiver of its group",
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
