//! Why a coordinator could not start or serve.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::scheduler;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "--store etcd://… needs a coordinator built with the `ha` feature \
         (cargo build --features farm-coordinator/ha)"
    )]
    NoHa,
    #[error(
        "--store etcd://… needs --archive postgres://…: ended matrices leave etcd for an \
         archive every coordinator reaches"
    )]
    NoArchive,
    #[cfg(feature = "ha")]
    #[error("etcd: {0}")]
    Etcd(String),
    #[error("data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Auth(#[from] crate::auth::Error),
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    #[error(transparent)]
    Scheduler(#[from] scheduler::Error),
    #[error("listening on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] farm_runtime::tls::Error),
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("the scheduler thread stopped unexpectedly")]
    SchedulerGone,
}
