//! Putting a coordinator together: `Options` → [`Options::build`] → [`Coordinator::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use farm_proto::{
    agent_service_server::AgentServiceServer, farm_service_server::FarmServiceServer,
};
use farm_runtime::tls::TlsFiles;
use tokio::net::TcpListener;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::transport::{Server, ServerTlsConfig};
use tracing::info;

use farm_runtime::metrics_http::Layers;

use crate::auth::{Access, Role, Tokens};
use crate::metrics::Metrics;
#[cfg(feature = "ha")]
use crate::route::Route;
use crate::route::Router;
use crate::scheduler::{self, Config, Event, Handle};
use crate::service::{Agents, Farm};
use crate::store::Sqlite;

/// The file in the data directory that holds the address actually bound.
pub const ADDR_FILE: &str = "coordinator.addr";
/// The file in the data directory that holds the metrics endpoint's address.
pub const METRICS_ADDR_FILE: &str = "metrics.addr";
pub const DB_FILE: &str = "farm.db";

#[cfg(feature = "ha")]
mod ha;

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

/// The scheduler: always leading on the embedded store, or elected.
enum Mode {
    Embedded {
        handle: Handle,
        scheduler: std::thread::JoinHandle<Result<(), scheduler::Error>>,
    },
    #[cfg(feature = "ha")]
    Ha(Box<ha::Plane>),
}

pub struct Coordinator {
    listener: TcpListener,
    data_dir: PathBuf,
    /// What `/metrics` serves; the scheduler thread updates it.
    layers: Layers,
    metrics_listener: Option<TcpListener>,
    mode: Mode,
    tokens: Tokens,
    access: Access,
    tls: Option<ServerTlsConfig>,
    archive: crate::archive::Location,
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
                farm_runtime::tls::check_plaintext_listen(self.listen, self.insecure_plaintext)?;
                None
            }
        };
        let archive = match (&self.archive, &self.ha) {
            (Some(a), _) => a.clone(),
            (None, None) => crate::archive::Location::Sqlite(self.data_dir.join(DB_FILE)),
            (None, Some(_)) => return Err(Error::NoArchive),
        };
        std::fs::create_dir_all(&self.data_dir).map_err(dir_err)?;
        let tokens = Tokens::load_or_create(&self.data_dir)?;
        let layers = Layers::default();
        let mode = match &self.ha {
            None => {
                let store = Sqlite::open(&self.data_dir.join(DB_FILE))?;
                let metrics = Metrics::new(self.scheduler.metrics_series_limit);
                layers.set_current(Some(metrics.registry().clone()));
                let (handle, scheduler) =
                    scheduler::spawn_with(store, archive.clone(), self.scheduler, metrics)?;
                Some(Mode::Embedded { handle, scheduler })
            }
            // Made once the address is bound: it is what standbys advertise.
            Some(_) => None,
        };
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
        let mode = match (mode, &self.ha) {
            (Some(m), _) => m,
            #[cfg(feature = "ha")]
            (None, Some(ha)) => {
                let scheme = if tls.is_some() { "https" } else { "http" };
                let url = ha
                    .advertise
                    .clone()
                    .unwrap_or_else(|| format!("{scheme}://{addr}"));
                Mode::Ha(Box::new(
                    ha::Plane::connect(ha, url, self.scheduler, archive.clone(), &layers).await?,
                ))
            }
            _ => return Err(Error::NoHa),
        };
        let access = match tls {
            Some(_) => Access::Certificates,
            None => Access::Tokens(tokens.clone()),
        };
        info!(%addr, data_dir = %self.data_dir.display(), tls = tls.is_some(),
              archive = %archive.describe(), "coordinator listening");
        Ok(Coordinator {
            listener,
            data_dir: self.data_dir,
            layers,
            metrics_listener: None,
            mode,
            tokens,
            access,
            tls,
            archive,
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

    /// Serves until `shutdown` resolves.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<(), Error> {
        let Coordinator {
            listener,
            data_dir: _,
            layers,
            metrics_listener,
            mode,
            tokens: _,
            access,
            tls,
            archive,
        } = self;
        let metrics = metrics_listener
            .map(|l| tokio::spawn(farm_runtime::metrics_http::serve(l, layers.clone())));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (router, life) = match mode {
            Mode::Embedded { handle, scheduler } => {
                let drivers = drive(&handle);
                (
                    Router::fixed(handle.clone()),
                    Life::Embedded {
                        handle,
                        scheduler,
                        drivers,
                    },
                )
            }
            #[cfg(feature = "ha")]
            Mode::Ha(plane) => {
                let (route, routes) = tokio::sync::watch::channel(Route::Standby {
                    leader: None,
                    why: "electing a leader".into(),
                });
                let lead = tokio::spawn(plane.lead(route, layers.clone(), stopped));
                (Router::new(routes), Life::Ha(lead))
            }
        };
        #[cfg(not(feature = "ha"))]
        let _ = stopped;
        let agent_access = access.clone();
        let agents = AgentServiceServer::new(Agents::new(router.clone()))
            .max_decoding_message_size(farm_proto::MAX_AGENT_MESSAGE_BYTES);
        let agents =
            tonic::service::interceptor::InterceptedService::new(agents, move |mut req| {
                agent_access.check(Role::Agent, &mut req)?;
                Ok(req)
            });
        let farm = FarmServiceServer::with_interceptor(
            Farm::new(router, crate::archive::Shared::new(archive)),
            move |mut req| {
                access.check(Role::Submitter, &mut req)?;
                Ok(req)
            },
        );
        let mut server = Server::builder()
            .http2_keepalive_interval(Some(Duration::from_secs(10)))
            .tcp_nodelay(true);
        if let Some(tls) = tls {
            server = server.tls_config(tls)?;
        }
        let stream = TcpListenerStream::new(listener);
        // A leader steps down first (its agents' streams end with its
        // scheduler), so that the server's graceful stop has nothing to wait for.
        let shutdown = async move {
            shutdown.await;
            let _ = stop.send(true);
        };
        let served = server
            .add_service(agents)
            .add_service(farm)
            .serve_with_incoming_shutdown(stream, shutdown)
            .await;
        if let Some(m) = metrics {
            m.abort();
        }
        match life {
            Life::Embedded {
                handle,
                scheduler,
                drivers,
            } => {
                drivers.abort();
                drop(handle);
                served?;
                if scheduler.is_finished() {
                    match scheduler.join() {
                        Ok(r) => r?,
                        Err(_) => return Err(Error::SchedulerGone),
                    }
                }
            }
            #[cfg(feature = "ha")]
            Life::Ha(lead) => {
                served?;
                let _ = lead.await;
            }
        }
        Ok(())
    }
}

/// What runs beside the gRPC server until it stops.
enum Life {
    Embedded {
        handle: Handle,
        scheduler: std::thread::JoinHandle<Result<(), scheduler::Error>>,
        drivers: Drivers,
    },
    #[cfg(feature = "ha")]
    Ha(tokio::task::JoinHandle<()>),
}

/// The tasks that send a scheduler its ticks and its cron instants.
pub(crate) struct Drivers {
    ticker: tokio::task::JoinHandle<()>,
    timer: tokio::task::JoinHandle<()>,
}

impl Drivers {
    pub(crate) fn abort(self) {
        self.ticker.abort();
        self.timer.abort();
    }
}

/// Starts the ticker (every 100 ms: leases, publishing) and the cron
/// driver of the scheduler behind `handle`.
pub(crate) fn drive(handle: &Handle) -> Drivers {
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
    let timer = tokio::spawn(crate::cron::drive(
        handle.clone(),
        crate::cron::Clock::system(),
    ));
    Drivers { ticker, timer }
}
