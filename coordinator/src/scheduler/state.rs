//! What the scheduler keeps, one module per feature: each feature's state
//! and its events, held by [`Scheduler`](super) and driven by the feature's
//! part of the scheduler (`scheduler::schedule` drives `state::schedule`).
//! Nothing here names the scheduler or its parts: they sit above it.

pub mod activity;
pub mod archive;
pub mod bisection;
pub mod histories;
pub mod provenance;
pub mod ranges;
pub mod results;
pub mod schedule;
