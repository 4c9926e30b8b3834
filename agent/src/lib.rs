//! The farm agent: runs on each benchmark host, dials out to the coordinator,
//! and executes the runs it is pushed, one at a time.
//!
//! Layout, every module of the crate:
//! - [`capabilities`]: what this machine is and can do, read from /proc and /sys.
//! - [`catalogue`]: the part of it that changes while the agent runs (guest
//!   kernels cached, built or dropped in a kernel directory, KVM found to
//!   work).
//! - [`session`]: the stream to the coordinator, heartbeats, the outbox of
//!   unacknowledged results, reconnection with backoff; it answers the
//!   coordinator's questions too (a bisection's git range).
//! - [`run`]: an assignment handed to the executor its kernel asks for.
//! - [`executor`]: where the workload executes: on this machine
//!   ([`executor::host`]) or in a QEMU guest booted with the run's kernel
//!   ([`executor::guest`]), and the one way either's outcome becomes a result.
//! - [`kernel`]: guest kernels built from the operator's git trees
//!   (repositories, the build user, refs, builds and their progress, the
//!   operator's configurations and patches, bisection ranges); the guest
//!   executor, the session and the catalogue ask it like any caller.
//! - [`cache`]: the guest cache both of them keep entries in (kernels,
//!   builds, sysroots, images), and its eviction.
//! - [`state`]: machine states (hotplug, autogroup, cgroups, scheduler
//!   knobs) and the restore journal that undoes them, also after a crash.
//! - [`telemetry`]: what a run measures on the host (schedstat, run queues,
//!   thread placement, interrupts, the sampler), as plain data.
//! - [`external`]: benchmark programs found on this machine (stress-ng,
//!   sysbench, ..., and user-built ones in `--tools-dir`), their command
//!   lines and the parsers of their output; [`run`] runs them like the
//!   built-in workloads.
//! - [`metrics`]: the agent's own Prometheus metrics (`--metrics-listen`).
//! - [`child`]: children that are not workloads die with the agent.
//!
//! `kernel`, `cache` and `child` sit below the executors: they import
//! nothing of `executor`, `run`, `catalogue` or `session`.

pub mod cache;
pub mod capabilities;
pub mod catalogue;
pub mod child;
pub mod executor;
pub mod external;
pub mod kernel;
pub mod metrics;
pub mod run;
pub mod session;
pub mod state;
pub mod telemetry;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::transport::{ClientTlsConfig, Endpoint};

use executor::guest::arch::GuestArch;
use executor::guest::machine::{self, kvm};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Capabilities(#[from] capabilities::Error),
    #[error("coordinator address {url}: {source}")]
    Endpoint {
        url: String,
        source: tonic::transport::Error,
    },
    #[error(
        "workload binary {0} not found (build it with `cargo build -p farmctl --bin farm-workload`)"
    )]
    WorkloadBin(PathBuf),
    #[error("machine state left by an earlier run could not be restored: {0}")]
    Restore(#[from] state::journal::Error),
    #[error("guest cache {0}: {1}")]
    GuestCache(PathBuf, std::io::Error),
    /// Kernels from trees would be built where the build user cannot go.
    #[error(transparent)]
    BuildCache(#[from] kernel::reach::Error),
}

#[derive(Clone)]
pub struct Options {
    /// e.g. `http://127.0.0.1:7700`, or `https://coordinator:7700` with
    /// `tls`; several for a highly available farm, of which the agent finds
    /// the leader.
    pub coordinators: farm_runtime::coordinators::Urls,
    /// The agent token, over plaintext; `None` with mutual TLS.
    pub token: Option<String>,
    /// How to start catalogued workloads, built-in and external; the
    /// external ones it holds are advertised in the capabilities.
    pub workload: run::WorkloadCommand,
    /// Where /proc and /sys are; "/" except in tests.
    pub root: PathBuf,
    /// Holds the restore journal (`journal`); it must survive the agent.
    pub state_dir: PathBuf,
    pub tls: Option<ClientTlsConfig>,
}

impl std::fmt::Debug for Options {
    // By hand, so that the token never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("coordinators", &self.coordinators)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("workload", &self.workload)
            .field("root", &self.root)
            .field("state_dir", &self.state_dir)
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

pub struct Agent {
    session: session::Session,
    /// Where `/metrics` is served, once [`Agent::listen_metrics`] bound it.
    metrics_listener: Option<std::net::TcpListener>,
}

impl Options {
    pub fn build(self) -> Result<Agent, Error> {
        // Before anything else: put back what a crashed run left changed,
        // and only then look at the machine.
        let mut journal = state::Journal::open(&self.state_dir.join("journal"), &self.root)?;
        let undone = journal.restore()?;
        if undone > 0 {
            tracing::warn!(
                entries = undone,
                "restored machine state left by an interrupted run"
            );
        }
        let mut capabilities = capabilities::discover(&self.root)?;
        capabilities.state_kinds = state::kinds(&capabilities)
            .iter()
            .map(|k| k.as_str().to_string())
            .collect();
        // Besides the built-in workloads: exactly the external ones it runs.
        capabilities.workloads.extend(
            self.workload
                .externals
                .iter()
                .map(|(name, _)| name.to_string()),
        );
        tracing::info!(workloads = ?capabilities.workloads, "workloads this agent runs");
        if let Some(cache) = &self.workload.guest_cache {
            for arch in GuestArch::ALL {
                match machine::available(arch) {
                    Ok(()) => {
                        std::fs::create_dir_all(cache)
                            .map_err(|e| Error::GuestCache(cache.clone(), e))?;
                        capabilities.guest_arches.push(arch.uname().to_owned());
                        tracing::info!(cache = %cache.display(), %arch, "boots guests");
                    }
                    Err(why) => tracing::info!(%arch, %why, "boots no guests of this arch"),
                }
            }
            if let Some(kvm::Verdict::Fails(why)) = kvm::kept_verdict(cache) {
                tracing::info!(%why, "KVM probed before and found not to boot guests");
            }
            if let Some(trees) = &self.workload.trees {
                trees.check_cache(cache)?;
            }
        }
        catalogue::refresh(&mut capabilities, &self.workload);
        if !self.workload.program.is_file() {
            return Err(Error::WorkloadBin(self.workload.program));
        }
        let mut endpoints = Vec::with_capacity(self.coordinators.len());
        for url in self.coordinators.as_slice() {
            let endpoint_err = |source| Error::Endpoint {
                url: url.clone(),
                source,
            };
            // HTTP/2 pings find a coordinator that stopped answering (paused,
            // or its host cut off) within seconds, so that the agent moves to
            // the new leader instead of waiting for TCP to give up.
            let mut endpoint = Endpoint::from_shared(url.clone())
                .map_err(endpoint_err)?
                .connect_timeout(Duration::from_secs(5))
                .tcp_nodelay(true)
                .http2_keep_alive_interval(session::KEEPALIVE_INTERVAL)
                .keep_alive_timeout(session::KEEPALIVE_TIMEOUT)
                .keep_alive_while_idle(true);
            if let Some(tls) = &self.tls {
                endpoint = endpoint.tls_config(tls.clone()).map_err(endpoint_err)?;
            }
            endpoints.push(endpoint);
        }
        Ok(Agent {
            session: session::Session {
                urls: self.coordinators,
                endpoints,
                current: std::sync::atomic::AtomicUsize::new(0),
                token: self.token,
                capabilities: Mutex::new(capabilities),
                rescan: catalogue::RESCAN,
                workload: self.workload,
                journal: Arc::new(Mutex::new(journal)),
                shared: Arc::new(Mutex::new(Default::default())),
                result_ready: Arc::new(tokio::sync::Notify::new()),
                metrics: Arc::new(metrics::Metrics::new()),
            },
            metrics_listener: None,
        })
    }
}

impl Agent {
    /// What it advertises now (the catalogue part changes as kernels come).
    pub fn capabilities(&self) -> farm_proto::Capabilities {
        self.session.capabilities()
    }

    /// How often the catalogue is looked at again (default
    /// [`catalogue::RESCAN`]); a change is sent to the coordinator at once.
    pub fn rescan_every(mut self, every: Duration) -> Agent {
        self.session.rescan = every;
        self
    }

    /// Binds the `/metrics` endpoint (served once [`Agent::run`] runs);
    /// port 0 picks a free one: the address bound is returned.
    pub fn listen_metrics(
        &mut self,
        addr: std::net::SocketAddr,
    ) -> std::io::Result<std::net::SocketAddr> {
        let l = std::net::TcpListener::bind(addr)?;
        l.set_nonblocking(true)?;
        let bound = l.local_addr()?;
        self.metrics_listener = Some(l);
        Ok(bound)
    }

    /// Serves the coordinator until `shutdown` resolves, reconnecting as needed.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        let endpoint = match self.metrics_listener {
            Some(l) => match tokio::net::TcpListener::from_std(l) {
                Ok(l) => Some(tokio::spawn(farm_runtime::metrics_http::serve(
                    l,
                    self.session.metrics.registry().clone(),
                ))),
                Err(e) => {
                    tracing::warn!("the metrics endpoint cannot be served: {e}");
                    None
                }
            },
            None => None,
        };
        self.session.run(shutdown).await;
        if let Some(task) = endpoint {
            task.abort();
        }
    }
}
