//! Putting a coordinator together: `Options` → [`Options::build`] → [`Coordinator::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use farm_proto::tls::TlsFiles;
use farm_proto::{
    agent_service_server::AgentServiceServer, farm_service_server::FarmServiceServer,
};
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Server, ServerTlsConfig};
use tracing::info;

use crate::auth::{Access, Role, Tokens};
use crate::metrics::Metrics;
use crate::scheduler::{self, Config, Event, Handle};
use crate::service::{Agents, Farm};
use crate::store::Sqlite;

/// The file in the data directory that holds the address actually bound.
pub const ADDR_FILE: &str = "coordinator.addr";
/// The file in the data directory that holds the metrics endpoint's address.
pub const METRICS_ADDR_FILE: &str = "metrics.addr";
pub const DB_FILE: &str = "farm.db";

#[derive(Debug, thiserror::Error)]
pub enum Error {
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
    Tls(#[from] farm_proto::tls::Error),
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("the scheduler thread stopped unexpectedly")]
    SchedulerGone,
}

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
}

pub struct Coordinator {
    listener: TcpListener,
    data_dir: PathBuf,
    /// What `/metrics` serves; the scheduler thread updates it.
    registry: prometheus::Registry,
    metrics_listener: Option<TcpListener>,
    handle: Handle,
    tokens: Tokens,
    access: Access,
    tls: Option<ServerTlsConfig>,
    scheduler: std::thread::JoinHandle<Result<(), scheduler::Error>>,
}

impl Options {
    /// Opens the data directory (tokens, store), recovers state and binds the port.
    pub async fn build(self) -> Result<Coordinator, Error> {
        let dir_err = |source| Error::DataDir {
            path: self.data_dir.clone(),
            source,
        };
        // Refused before anything is opened or bound.
        let tls = match &self.tls {
            // Handed to a server builder here, so that a key or certificate
            // rustls cannot use is refused now, before the port is bound.
            Some(files) => {
                let tls = files.server()?;
                Server::builder().tls_config(tls.clone())?;
                Some(tls)
            }
            None => {
                farm_proto::tls::check_plaintext_listen(self.listen, self.insecure_plaintext)?;
                None
            }
        };
        std::fs::create_dir_all(&self.data_dir).map_err(dir_err)?;
        let tokens = Tokens::load_or_create(&self.data_dir)?;
        let store = Sqlite::open(&self.data_dir.join(DB_FILE))?;
        let metrics = Metrics::new(self.scheduler.metrics_series_limit);
        let registry = metrics.registry().clone();
        let (handle, scheduler) = scheduler::spawn_with(store, self.scheduler, metrics)?;
        let listener = TcpListener::bind(self.listen)
            .await
            .map_err(|source| Error::Listen {
                addr: self.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| Error::Listen {
            addr: self.listen,
            source,
        })?;
        std::fs::write(self.data_dir.join(ADDR_FILE), format!("{addr}\n")).map_err(dir_err)?;
        let access = match tls {
            Some(_) => Access::Certificates,
            None => Access::Tokens(tokens.clone()),
        };
        info!(%addr, data_dir = %self.data_dir.display(), tls = tls.is_some(), "coordinator listening");
        Ok(Coordinator {
            listener,
            data_dir: self.data_dir,
            registry,
            metrics_listener: None,
            handle,
            tokens,
            access,
            tls,
            scheduler,
        })
    }
}

impl Coordinator {
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub fn tokens(&self) -> &Tokens {
        &self.tokens
    }

    /// Binds the Prometheus endpoint (`GET /metrics`, plain HTTP), which
    /// [`Coordinator::run`] then serves; port 0 picks a free port. The
    /// address bound goes to DATA_DIR/metrics.addr.
    ///
    /// A method rather than an `Options` field so that code building
    /// `Options` field by field keeps compiling.
    pub async fn listen_metrics(mut self, addr: SocketAddr) -> Result<Coordinator, Error> {
        let listen_err = |source| Error::Listen { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(listen_err)?;
        let bound = listener.local_addr().map_err(listen_err)?;
        std::fs::write(self.data_dir.join(METRICS_ADDR_FILE), format!("{bound}\n")).map_err(
            |source| Error::DataDir {
                path: self.data_dir.clone(),
                source,
            },
        )?;
        info!(addr = %bound, "metrics endpoint listening");
        self.metrics_listener = Some(listener);
        Ok(self)
    }

    /// The metrics endpoint's address, once [`Coordinator::listen_metrics`] bound it.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listener
            .as_ref()
            .and_then(|l| l.local_addr().ok())
    }

    /// The registry `/metrics` serves.
    pub fn registry(&self) -> &prometheus::Registry {
        &self.registry
    }

    /// Serves until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), Error> {
        let Coordinator {
            listener,
            data_dir: _,
            registry,
            metrics_listener,
            handle,
            tokens: _,
            access,
            tls,
            scheduler,
        } = self;
        let metrics =
            metrics_listener.map(|l| tokio::spawn(farm_proto::metrics_http::serve(l, registry)));
        let ticker = {
            let handle = handle.clone();
            tokio::spawn(async move {
                let mut every = tokio::time::interval(Duration::from_millis(100));
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
                loop {
                    every.tick().await;
                    if handle.send(Event::Tick).await.is_err() {
                        break;
                    }
                }
            })
        };
        let timer = tokio::spawn(crate::timer::drive(
            handle.clone(),
            crate::timer::Clock::system(),
        ));
        let agent_access = access.clone();
        let agents = AgentServiceServer::new(Agents::new(handle.clone()))
            .max_decoding_message_size(farm_proto::MAX_AGENT_MESSAGE_BYTES);
        let agents =
            tonic::service::interceptor::InterceptedService::new(agents, move |mut req| {
                agent_access.check(Role::Agent, &mut req)?;
                Ok(req)
            });
        let farm =
            FarmServiceServer::with_interceptor(Farm::new(handle.clone()), move |mut req| {
                access.check(Role::Submitter, &mut req)?;
                Ok(req)
            });
        let mut server = Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(10)))
            .tcp_nodelay(true);
        if let Some(tls) = tls {
            server = server.tls_config(tls)?;
        }
        let stream = TcpListenerStream::new(listener);
        let served = server
            .add_service(agents)
            .add_service(farm)
            .serve_with_incoming_shutdown(stream, shutdown)
            .await;
        ticker.abort();
        timer.abort();
        if let Some(m) = metrics {
            m.abort();
        }
        drop(handle);
        served?;
        if scheduler.is_finished() {
            match scheduler.join() {
                Ok(r) => r?,
                Err(_) => return Err(Error::SchedulerGone),
            }
        }
        Ok(())
    }
}
