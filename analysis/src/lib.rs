//! Statistics over plain data: no I/O, no async, nothing of ours but numbers.
//!
//! # Layout
//! Each module imports only modules listed after it (and `farm_spec`'s
//! `Direction`, re-exported here):
//! - [`bisect`]: which kernel of an ordered list is the first bad one, each
//!   step judged with [`compare`];
//! - [`resolution`]: why a comparison could not decide, when its runs
//!   spread beyond what it could resolve;
//! - [`diagnosis`]: why a cell regressed, in lines read off its telemetry
//!   against its baseline's;
//! - [`compare`]: a cell against its baseline, one verdict per metric (a
//!   bootstrap interval on the ratio, an adaptive rank test);
//! - [`changepoint`]: where a metric's history steps (E-divisive means on
//!   ranks, then stages for trends, dependent noise, wanders, persistence
//!   and swings, each a module under it);
//! - [`drift`]: how fast a history moves after its last step;
//! - [`summary`]: medians and ratios, the figures `farmctl results` prints;
//! - `normal` (private): standard normal draws for the simulations and tests.
#![forbid(unsafe_code)]

pub mod bisect;
pub mod changepoint;
pub mod compare;
pub mod diagnosis;
pub mod drift;
mod normal;
pub mod resolution;
pub mod summary;

pub use summary::{median, ratio};

/// Whether smaller or larger values of a metric are better: the farm's one
/// `Direction`, shared with the workloads and the wire.
pub use farm_spec::Direction;
