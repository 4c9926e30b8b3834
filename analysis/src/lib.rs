//! Statistics over plain data: no I/O, no async, nothing of ours but numbers.
//!
//! - [`summary`]: medians and ratios, the figures `farmctl results` prints;
//! - [`compare`]: a cell against its baseline, one verdict per metric;
//! - [`changepoint`]: change points in a metric's history;
//! - [`bisect`]: which kernel of an ordered list is the first bad one;
//! - [`resolution`]: why a comparison could not decide, when its runs
//!   spread beyond what it could resolve.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

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
