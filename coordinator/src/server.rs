//! Putting a coordinator together: `Options` → [`Options::build`] → [`Coordinator::run`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use farm_proto::{
    agent_service_server::AgentServiceServer, farm_service_server::FarmServiceServer,
};
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
use crate::scheduler::{self, Handle};
use crate::service::{Agents, Farm};
use crate::store::Sqlite;

/// The file in the data directory that holds the address actually bound.
pub const ADDR_FILE: &str = "coordinator.addr";
/// The file in the data directory that holds the metrics endpoint's address.
pub const METRICS_ADDR_FILE: &str = "metrics.addr";
pub const DB_FILE: &str = "farm.db";

mod drivers;
mod error;
#[cfg(feature = "ha")]
mod ha;
mod options;

pub use error::Error;
pub use options::{Ha, Options};

use drivers::{Drivers, drive};

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
