//! The `farm.v1` gRPC contract: the messages and services coordinator,
//! agents and farmctl exchange, and their conversions to the shared
//! vocabulary. Nothing else: a crate that needs only the messages gets
//! prost, tonic and `farm-spec` with them, no more. How a process runs and
//! talks (TLS, secrets, tracing, `/metrics`, coordinator URLs) is
//! `farm-runtime`'s.
//!
//! # Layout
//! - [`v1`] (re-exported at the root): the messages and services generated
//!   from `proto/farm/v1/farm.proto` at build time.
//! - [`spec`]: `TryFrom`/`From` between the wire's strings and `farm_spec`
//!   types (machine state, kernel build, direction, build progress, guest
//!   shape); each side converts once, at its edge.
//! - The root: the wire's limits both ends set ([`MAX_AGENT_MESSAGE_BYTES`],
//!   [`MAX_RANGE_COMMITS`], [`MAX_COMMIT_SUBJECT_BYTES`]) and the
//!   [`AUTHORIZATION`] metadata key.
#![forbid(unsafe_code)]

/// Generated messages and services of package `farm.v1`.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic)]
    tonic::include_proto!("farm.v1");
}

pub use v1::*;

pub mod spec;

/// The metadata key every RPC carries its token in, as `Bearer <token>`.
pub const AUTHORIZATION: &str = "authorization";

/// The largest message an agent sends (a result with its telemetry) and the
/// coordinator decodes: both sides set it explicitly, so that neither
/// relies on a library default. An agent fails a result that does not fit,
/// once and with its size, rather than send what the coordinator refuses.
pub const MAX_AGENT_MESSAGE_BYTES: usize = 4 << 20;

/// The most commits an agent lists for one git range (`ListCommits`): a
/// bisection over more is 14 steps and longer; first-parent commits between
/// two releases are about a thousand. With subjects cut to
/// [`MAX_COMMIT_SUBJECT_BYTES`] the answer stays within
/// [`MAX_AGENT_MESSAGE_BYTES`].
pub const MAX_RANGE_COMMITS: usize = 10_000;

/// The most bytes of a commit's subject an agent sends.
pub const MAX_COMMIT_SUBJECT_BYTES: usize = 160;
