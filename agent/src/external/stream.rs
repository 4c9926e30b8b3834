//! McCalpin's STREAM (`stream.c`), built by the user: the memory-bandwidth
//! benchmark of seed 001, where instances sharing a NUMA node took twice as
//! long.
//!
//! The binary takes no arguments (array size and repetitions are compiled
//! in); an OpenMP build takes its thread count from `OMP_NUM_THREADS`, which
//! a serial build ignores. The figures are the best rates of its table:
//!
//! ```text
//! Function    Best Rate MB/s  Avg time     Min time     Max time
//! Copy:           35164.2     0.004638     0.004550     0.004780
//! Scale:          24364.4     0.006632     0.006567     0.006715
//! Add:            27021.6     0.008960     0.008882     0.009057
//! Triad:          27223.4     0.008936     0.008816     0.009071
//! -------------------------------------------------------------
//! Solution Validates: avg error less than 1.000000e-13 on all three arrays
//! ```
//!
//! The header is 5.10's; 5.9 prints `Function      Rate (MB/s)   Avg time ...`,
//! also accepted. Without `Solution Validates` the kernels computed wrong
//! values and the run fails.

use super::lines::field;
use super::spec::{Command, Error, ExternalSpec, Params, Source};
use farm_workload::catalogue;

/// The catalogue's name: `stream` is the built-in workload.
const TOOL: &str = "stream-bin";

/// The kernels, as their rows start, in the order of the metrics.
const KERNELS: [&str; 4] = ["Copy:", "Scale:", "Add:", "Triad:"];

pub(super) const SPEC: ExternalSpec = ExternalSpec {
    workload: catalogue::external(TOOL),
    source: Source::UserBuilt,
    server: None,
    build,
    build_server: None,
    parse,
};

fn build(p: &Params) -> Command {
    Command {
        argv: Vec::new(),
        env: vec![("OMP_NUM_THREADS".into(), p.arg("threads"))],
    }
}

fn parse(stdout: &str, _stderr: &str) -> Result<Vec<f64>, Error> {
    if let Some(line) = stdout.lines().find(|l| l.contains("Failed Validation")) {
        return Err(Error::Failed {
            tool: TOOL,
            message: line.trim().to_string(),
        });
    }
    let mut lines = stdout
        .lines()
        .skip_while(|l| !(l.starts_with("Function") && l.contains("MB/s")));
    if lines.next().is_none() {
        return Err(Error::Missing {
            tool: TOOL,
            what: "`Function    Best Rate MB/s ...` table",
        });
    }
    let rows: Vec<&str> = lines.take(KERNELS.len()).collect();
    let mut rates = Vec::with_capacity(KERNELS.len());
    for (i, kernel) in KERNELS.iter().enumerate() {
        let Some(row) = rows
            .get(i)
            .filter(|r| r.split_whitespace().next() == Some(kernel))
        else {
            return Err(Error::Missing {
                tool: TOOL,
                what: match i {
                    0 => "`Copy:` row after the table header",
                    1 => "`Scale:` row after `Copy:`",
                    2 => "`Add:` row after `Scale:`",
                    _ => "`Triad:` row after `Add:`",
                },
            });
        };
        rates.push(field(TOOL, row, 1, "best rate in MB/s")?);
    }
    if !stdout.lines().any(|l| l.starts_with("Solution Validates")) {
        return Err(Error::Missing {
            tool: TOOL,
            what: "`Solution Validates` line",
        });
    }
    Ok(rates)
}
