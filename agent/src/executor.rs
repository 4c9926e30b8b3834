//! Executors: where and how a run's workload executes.
//!
//! - [`host`]: the workload runs as a child of the agent on the machine
//!   itself, inside the run's machine state, beside its competing loads.
//! - [`guest`]: the workload runs inside a QEMU guest booted with the run's
//!   kernel (`debian:<version>` or `file:<path>`), under TCG or KVM.
//!
//! Both sit behind [`Executor`], and both hand what the workload did back as
//! one [`Outcome`], which [`finish`] alone turns into the result: how it
//! ended, its own figures read from its output ([`launch::Output`]), what
//! the result keeps of its logs. [`launch`] turns a catalogued workload into
//! the program to start, for either executor. A [`Run`] is an assignment
//! whose kernel, executor and machine state `farm_spec` has parsed, once,
//! at the run's edge; [`check`] says whether this agent can execute it at
//! all.

pub(crate) mod contract;
pub mod guest;
pub mod host;
mod killer;
pub(crate) mod launch;

pub use contract::{Context, End, Executor, Outcome, Refusal, Run, check};
pub use killer::Killer;
pub use launch::{DEFAULT_GUEST_CACHE_MAX_BYTES, WorkloadCommand};
