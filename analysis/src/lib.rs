//! Statistics over plain data: no I/O, no async, nothing of ours but numbers.
//!
//! Today: the summary figures `farmctl results` prints (medians, ratios to a
//! baseline). Verdicts, bootstrap intervals and change points come next.
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod summary;

pub use summary::{median, ratio};
