//! What a coordinator is started with.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use farm_runtime::tls::TlsFiles;

use crate::scheduler::Config;

#[derive(Debug, Clone)]
pub struct Options {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    pub scheduler: Config,
    /// Mutual TLS for the gRPC endpoint (rustls): callers are then known
    /// by their client certificates. Plaintext with tokens when `None`,
    /// which [`Options::build`] allows only on loopback unless
    /// `insecure_plaintext`.
    pub tls: Option<TlsFiles>,
    pub insecure_plaintext: bool,
    /// Live state on etcd, with leader election, instead of the embedded
    /// SQLite file.
    pub ha: Option<Ha>,
    /// Where ended matrices go; `None`: the embedded SQLite file, which a
    /// highly available farm cannot use (`Error::NoArchive`).
    pub archive: Option<crate::archive::Location>,
}

/// A coordinator of a highly available farm: live state and leadership on
/// an etcd cluster (`store::etcd`, `leader`).
#[derive(Debug, Clone)]
pub struct Ha {
    pub endpoints: crate::store::Endpoints,
    pub prefix: crate::store::Prefix,
    /// A client certificate for etcd, when the cluster wants one; its
    /// endpoints are then https.
    pub tls: Option<TlsFiles>,
    /// The URL agents and farmctl reach this coordinator at, which
    /// standbys tell them; by default the address bound.
    pub advertise: Option<String>,
    /// How long a leader's lease outlives its last keep-alive: the time a
    /// standby waits before it takes over from a leader that died.
    pub leader_ttl: Duration,
    /// The cluster's `--max-txn-ops` and `--max-request-bytes`.
    pub max_txn_ops: usize,
    pub max_request_bytes: usize,
}
