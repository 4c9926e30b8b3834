//! What every farm process needs to run and talk, beside the contract
//! (`farm-proto`): transport security, secret files, logs and traces, the
//! `/metrics` endpoint and the coordinator URLs a client dials. The
//! coordinator, the agents and farmctl each take these from here, so that
//! they refuse, spell and explain them alike.
//!
//! # Layout
//! - [`tls`]: mutual TLS (the three PEM files, tonic's server and client
//!   configurations), the plaintext rule (loopback only unless asked for by
//!   name) and [`tls::TransportArgs`], the transport options of every binary.
//! - [`secret`]: reading tokens and private keys, refused when others could
//!   read or replace them.
//! - [`trace`]: the subscriber every binary installs (logs on stderr, OTLP
//!   export when configured) and W3C trace context across processes.
//! - [`metrics_http`]: `GET /metrics` over HTTP/1.1, and the loopback rule
//!   of its address.
//! - [`coordinators`]: the one or several coordinator URLs a client dials,
//!   and which of them a standby names as leader.
#![forbid(unsafe_code)]

pub mod coordinators;
pub mod metrics_http;
pub mod secret;
pub mod tls;
pub mod trace;
