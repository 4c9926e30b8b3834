//! One run: from a pushed assignment to a result, through the executor its
//! kernel asks for.
//!
//! The assignment is checked again here, though the coordinator already did:
//! an agent trusts nothing it receives. The workload must be in the
//! catalogue, its parameters typed and in range, and it becomes an argument
//! vector, never a shell command: for a built-in workload, the
//! `farm-workload` binary's; for an external one, what
//! [`external::command`](crate::external::command) builds for the program
//! this agent found, whose output [`external::parse`](crate::external::parse)
//! reads.
//!
//! A `debian:` or `file:` kernel boots a guest
//! ([`executor::guest`](crate::executor::guest)); any other runs on the host
//! ([`executor::host`](crate::executor::host)).

use std::path::Path;

use farm_proto::{Metric, RunAssignment, RunResult};
use farm_spec::metric::{HOST_CPUS, HOST_LOAD};

pub use crate::executor::{
    Context, DEFAULT_GUEST_CACHE_MAX_BYTES, Refusal, Run, WorkloadCommand, check,
};
use crate::executor::{Executor, guest::Guest, host::Host};

/// Executes an assignment to the end with the executor it asks for: its
/// kernel, executor and machine state are parsed here, once, and a run
/// whose words do not parse is refused. Blocking; call it from a thread of
/// its own.
pub fn execute(a: &RunAssignment, ctx: &Context<'_>) -> RunResult {
    let run = match Run::of(a) {
        Ok(run) => run,
        Err(e) => {
            return RunResult {
                run: a.run.clone(),
                error: e.to_string(),
                ..Default::default()
            };
        }
    };
    let executor: &dyn Executor = if run.kernel.is_guest() { &Guest } else { &Host };
    let mut result = executor.execute(&run, ctx);
    if result.ok {
        result
            .metrics
            .extend(host_metrics(Path::new("/"), ctx.caps.cpus_online));
    }
    result
}

/// How busy the host was, read as the run ended (whatever its executor):
/// its 1-minute load average, which weighs about the last minute and so
/// covers a run of up to a minute without a sampler (one read, where
/// readings at the start would see a kernel build or the previous run),
/// and its online CPUs to read it against. A load that cannot be read is
/// left out: the run's own figures stand without it.
fn host_metrics(root: &Path, cpus_online: u32) -> Vec<Metric> {
    let mut out = Vec::new();
    match crate::telemetry::loadavg::read(root) {
        Ok(load) => out.push(crate::telemetry::report::known(HOST_LOAD, load.one)),
        Err(e) => tracing::warn!(error = %e, "the host's load average is left out of the run"),
    }
    if cpus_online > 0 {
        out.push(crate::telemetry::report::known(
            HOST_CPUS,
            f64::from(cpus_online),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_load_and_cpus_go_with_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let figures = |ms: Vec<Metric>| -> Vec<(String, f64, String)> {
            ms.into_iter().map(|m| (m.name, m.value, m.unit)).collect()
        };
        // No /proc/loadavg there: the CPUs alone.
        assert_eq!(
            figures(host_metrics(dir.path(), 2)),
            [("host_cpus".to_string(), 2.0, "CPUs".to_string())]
        );
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/loadavg"),
            "2.05 0.97 0.39 3/130 13258\n",
        )
        .unwrap();
        assert_eq!(
            figures(host_metrics(dir.path(), 2)),
            [
                ("host_load".to_string(), 2.05, "threads".to_string()),
                ("host_cpus".to_string(), 2.0, "CPUs".to_string()),
            ]
        );
    }
}
