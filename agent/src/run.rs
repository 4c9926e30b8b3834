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

use farm_proto::{RunAssignment, RunResult};

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
    executor.execute(&run, ctx)
}
