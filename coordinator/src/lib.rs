//! The farm's coordinator: takes matrices, pushes runs to agents, stores results.
//!
//! Layout:
//! - [`server`]: options, start-up and the gRPC endpoint.
//! - [`service`]: `AgentService` and `FarmService`, thin adapters to events.
//! - [`scheduler`]: the single event loop that owns all state, batches
//!   commits, pushes runs to idle agents and enforces leases.
//! - [`store`]: the embedded SQLite store (durable before acknowledged).
//! - [`matrix`]: matrix files: parsing, validation, expansion into cells and runs.
//! - [`placement`]: which agent can serve which cell, and why none can.
//! - [`results`]: per-cell medians and ratios to baselines.
//! - [`metrics`]: Prometheus metrics of the fleet and the results, `/metrics`.
//! - [`auth`]: agent and submitter tokens.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod archive;
pub mod auth;
pub mod bisection;
pub mod identity;
#[cfg(feature = "ha")]
pub mod leader;
pub mod matrix;
pub mod metrics;
pub mod pki;
pub mod placement;
pub mod policy;
pub mod results;
pub mod route;
pub mod schedule;
pub mod scheduler;
pub mod server;
pub mod service;
pub mod store;
pub mod timer;

/// The etcd client the `ha` feature uses, for tests and tools that talk to
/// the same cluster.
#[cfg(feature = "ha")]
pub use etcd_client;
pub use server::{Coordinator, Options};
