//! NPB's LU solver, `lu.<class>.x` from NPB3.x-OMP, the benchmark of seeds
//! 000 and 003, built by the user (NPB is not packaged).
//!
//! The binary takes no arguments: the problem class is compiled in (it is in
//! the file name; hence one catalogue entry per class, `npb-lu.C` for
//! `lu.C.x`) and the thread count comes from `OMP_NUM_THREADS`. The
//! figures come from the report it prints at the end:
//!
//! ```text
//!  LU Benchmark Completed.
//!  Class           =                        C
//!  Size            =            162x 162x 162
//!  Iterations      =                      250
//!  Time in seconds =                   116.45
//!  ...
//!  Mop/s total     =                 17508.29
//!  ...
//!  Verification    =               SUCCESSFUL
//! ```
//!
//! A run whose verification is not `SUCCESSFUL` computed a wrong answer, so
//! its time is not a measurement: it fails.

use super::lines::{number, require_key};
use super::spec::{Command, Error, ExternalSpec, Params, Source};
use farm_workload::catalogue;

/// How errors name the tool, whatever the class.
const TOOL: &str = "npb-lu";

/// The spec of the catalogue entry `name`: one per class (`npb-lu.C` runs
/// `lu.C.x`), all built and parsed alike.
pub(super) const fn lu(name: &str) -> ExternalSpec {
    ExternalSpec {
        workload: catalogue::external(name),
        source: Source::UserBuilt,
        server: None,
        build,
        build_server: None,
        parse,
    }
}

fn build(p: &Params) -> Command {
    Command {
        argv: Vec::new(),
        env: vec![("OMP_NUM_THREADS".into(), p.arg("threads"))],
    }
}

fn parse(stdout: &str, _stderr: &str) -> Result<Vec<f64>, Error> {
    let (line, verification) =
        require_key(TOOL, stdout, "Verification", '=', "`Verification =` line")?;
    if verification != "SUCCESSFUL" {
        return Err(Error::Failed {
            tool: TOOL,
            message: line.trim().to_string(),
        });
    }
    let (mops_line, mops) = require_key(TOOL, stdout, "Mop/s total", '=', "`Mop/s total =` line")?;
    let (time_line, time) = require_key(
        TOOL,
        stdout,
        "Time in seconds",
        '=',
        "`Time in seconds =` line",
    )?;
    Ok(vec![
        number(TOOL, mops_line, mops)?,
        number(TOOL, time_line, time)?,
    ])
}
