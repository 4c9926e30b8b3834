//! A matrix's results as farmctl ends with them: printed, and the exit
//! code they mean.

use std::process::ExitCode;

use anyhow::{Context, Result};
use farm_proto::{GetResultsResponse, MatrixState};

use crate::render;

/// 0 when every run finished, 1 when some failed or the matrix was cancelled.
pub fn outcome(r: &GetResultsResponse) -> ExitCode {
    let st = r.status.clone().unwrap_or_default();
    let c = st.counts.unwrap_or_default();
    if st.state == MatrixState::Done as i32 && c.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

pub fn print_results(r: &GetResultsResponse, json: bool) -> Result<()> {
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&render::results_json(r)).context("encoding JSON")?
        );
    } else {
        print!("{}", render::results_table(r));
    }
    Ok(())
}
