//! The farm's built-in workloads and their catalogue.
//!
//! Layout:
//! - [`catalogue`]: names, typed parameters with bounds, and reported metrics;
//!   shared by the coordinator (matrix validation) and the agent (run validation).
//! - [`output`]: the line protocol a workload uses to report its metrics.
//! - one module per workload, each shaped like what a seed ran: [`lu`] (NPB
//!   LU, seeds 000 and 003), [`cpu_hog`] (`stress --cpu`, seed 003),
//!   [`stream`] (STREAM instances, seed 001), [`udp_stream`] (netperf
//!   `UDP_STREAM`, seed 002), [`oltp`] (sysbench OLTP, seed 004) and
//!   [`hackbench`] (rt-tests' hackbench).
//! - [`cli`]: the `farm-workload` binary's entry point.
//! - `gate` (private): holds a workload's threads until all of them exist, so
//!   that a failed spawn ends the run instead of hanging it.
//!
//! This crate has no dependencies: it is copied into VM guests.
#![forbid(unsafe_code)]

pub mod catalogue;
pub mod cli;
pub mod cpu_hog;
mod gate;
pub mod hackbench;
pub mod lu;
pub mod oltp;
pub mod output;
pub mod stream;
pub mod udp_stream;
