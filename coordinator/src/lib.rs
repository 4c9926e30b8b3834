//! The farm's coordinator: takes matrices, pushes runs to agents, stores results.
//!
//! Layout (each pure-logic room beside the scheduler part that drives it,
//! named alike: `results` and `scheduler::results`, …):
//! - [`server`]: options, start-up and the gRPC endpoint; [`leader`]
//!   (feature `ha`): leadership on etcd; [`route`]: where a follower sends
//!   callers.
//! - [`service`]: `AgentService` and `FarmService`, thin adapters to events.
//! - [`scheduler`]: the single event loop that owns all state, batches
//!   commits, pushes runs to idle agents and enforces leases.
//! - [`store`]: live state, durable before acknowledged: embedded SQLite or
//!   etcd (feature `ha`); [`archive`]: ended matrices, in SQLite or
//!   PostgreSQL.
//! - [`matrix`]: matrix files: parsing, validation, expansion into cells and runs.
//! - [`eligibility`]: which agent may serve which cell, and why none can.
//! - [`policy`]: how cells are judged: a verdict policy's defaults and limits.
//! - [`results`]: per-cell verdicts, histories, change points, diagnoses.
//! - [`bisection`]: bisections' pure steps; [`schedule`]: when continuous
//!   matrices run; [`cron`]: the cron driver, which tells the scheduler.
//! - [`cell`] and [`ids`]: the coordinator's own cell and run ids, typed.
//! - [`metrics`]: Prometheus metrics of the fleet and the results, `/metrics`.
//! - [`auth`]: agent and submitter tokens; [`identity`]: who a caller is
//!   (token or certificate); [`pki`]: the farm's certificate authority.
#![forbid(unsafe_code)]

pub mod archive;
pub mod auth;
pub mod bisection;
pub mod cell;
pub mod cron;
pub mod eligibility;
pub mod identity;
pub mod ids;
#[cfg(feature = "ha")]
pub mod leader;
pub mod matrix;
pub mod metrics;
pub mod pki;
pub mod policy;
pub mod results;
pub mod route;
pub mod schedule;
pub mod scheduler;
pub mod server;
pub mod service;
pub mod store;

/// The etcd client the `ha` feature uses, for tests and tools that talk to
/// the same cluster.
#[cfg(feature = "ha")]
pub use etcd_client;
pub use server::{Coordinator, Options};
