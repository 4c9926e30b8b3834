//! The `farm.v1` gRPC contract: the only thing coordinator, agents and farmctl share.
#![deny(rust_2018_idioms)]

/// Generated messages and services of package `farm.v1`.
pub mod v1 {
    #![allow(clippy::all, clippy::pedantic)]
    tonic::include_proto!("farm.v1");
}

pub use v1::*;

/// The metadata key every RPC carries its token in, as `Bearer <token>`.
pub const AUTHORIZATION: &str = "authorization";
