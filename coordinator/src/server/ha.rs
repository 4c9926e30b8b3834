//! A coordinator of a highly available farm: it campaigns for leadership
//! through etcd, runs the scheduler on etcd's live state while it leads,
//! and stands by (its services answering where the leader is) otherwise.
//!
//! A term: campaign → load the live state (replaying a half-applied
//! batch, `store::etcd`) → schedule → the term ends when the lease may
//! have lapsed, a fenced write fails, or the coordinator stops → the
//! scheduler stops (its agents' streams end, and they find the new
//! leader) → the lease is revoked so a standby takes over at once → and
//! this coordinator campaigns again. So a leader that lost etcd stops
//! dispatching, and leads again when etcd is back if nobody else does.
//!
//! A term that ends on a failure is told to callers in one set of words,
//! "leadership lost: …" with the cause: the scheduler's callers still
//! waiting hear it (`scheduler::Handle::stopping_because`), and so does
//! every later call ([`Route::Lost`]) until another leader is known.

use std::time::Duration;

use etcd_client::{Client, ConnectOptions};
use farm_runtime::metrics_http::Layers;
use prometheus::{IntGaugeVec, Opts, Registry};
use tokio::sync::watch;
use tracing::{info, warn};

use super::drivers::drive;
use super::error::Error;
use super::options::Ha;
use crate::leader::{Elector, Standing};
use crate::metrics::Metrics;
use crate::route::Route;
use crate::scheduler::{self, Config, Event};
use crate::store::etcd::{Etcd, Limits, REQUEST_TIMEOUT};

pub(crate) struct Plane {
    client: Client,
    prefix: String,
    url: String,
    ttl: Duration,
    limits: Limits,
    config: Config,
    archive: crate::archive::Location,
    standing: IntGaugeVec,
}

const STANDINGS: [&str; 3] = ["leading", "following", "unknown"];

impl Plane {
    /// Connects to the cluster (requests wait for it when it is down).
    pub(crate) async fn connect(
        ha: &Ha,
        url: String,
        config: Config,
        archive: crate::archive::Location,
        layers: &Layers,
    ) -> Result<Plane, Error> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(REQUEST_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT)
            // A member that died is noticed within seconds, not minutes.
            .with_keep_alive(Duration::from_secs(2), Duration::from_secs(2))
            .with_keep_alive_while_idle(true);
        let scheme = match &ha.tls {
            Some(files) => {
                let first = ha.endpoints.urls("https").remove(0);
                if let Some(tls) = farm_runtime::tls::client_config(&first, Some(files), false)? {
                    options = options.with_tls(tls);
                }
                "https"
            }
            None => "http",
        };
        let client = Client::connect(ha.endpoints.urls(scheme), Some(options))
            .await
            .map_err(|e| Error::Etcd(format!("connecting to {}: {e}", ha.endpoints)))?;
        let standing = IntGaugeVec::new(
            Opts::new(
                "farm_coordinator_standing",
                "1 for what this coordinator is: leading (it schedules), following (another \
                 leads; it stands by), or unknown (no leader is known: etcd unreachable or an \
                 election under way). A farm with no leading coordinator dispatches nothing.",
            ),
            &["standing"],
        )
        .expect("valid gauge options");
        layers
            .base
            .register(Box::new(standing.clone()))
            .expect("the standing gauge registers once");
        let plane = Plane {
            client,
            prefix: ha.prefix.as_str().to_owned(),
            url,
            ttl: ha.leader_ttl,
            limits: Limits {
                max_ops: ha.max_txn_ops,
                max_request_bytes: ha.max_request_bytes,
            },
            config,
            archive,
            standing,
        };
        plane.show(&Standing::Unknown("starting".into()));
        Ok(plane)
    }

    fn show(&self, s: &Standing) {
        let now = match s {
            Standing::Leading => "leading",
            Standing::Following(_) => "following",
            Standing::Unknown(_) => "unknown",
        };
        for label in STANDINGS {
            self.standing
                .with_label_values(&[label])
                .set(i64::from(label == now));
        }
    }

    /// Terms of leadership, one after the other, until `stop` is set.
    pub(crate) async fn lead(
        self,
        route: watch::Sender<Route>,
        layers: Layers,
        mut stop: watch::Receiver<bool>,
    ) {
        let elector = Elector::new(
            self.client.clone(),
            &self.prefix,
            self.url.clone(),
            self.ttl,
        );
        let tell = |s: Standing| {
            self.show(&s);
            match s {
                Standing::Leading => {}
                Standing::Following(url) => {
                    route.send_replace(Route::Standby {
                        leader: Some(url),
                        why: String::new(),
                    });
                }
                Standing::Unknown(why) => {
                    // A lost term keeps saying why until a leader is
                    // known: campaigning through the same outage fails for
                    // the same cause, in vaguer words.
                    route.send_if_modified(|r| {
                        if matches!(r, Route::Lost(_)) {
                            return false;
                        }
                        *r = Route::Standby { leader: None, why };
                        true
                    });
                }
            }
        };
        let mut delay = Duration::from_millis(100);
        loop {
            let mut term = tokio::select! {
                t = elector.campaign(&tell) => t,
                _ = stop.wait_for(|s| *s) => return,
            };
            let store = Etcd::new(
                &self.client,
                tokio::runtime::Handle::current(),
                &self.prefix,
                term.fence.clone(),
                self.limits,
            )
            .ends_with(term.end());
            let metrics = Metrics::new(self.config.metrics_series_limit);
            let registry: Registry = metrics.registry().clone();
            let (config, archive) = (self.config, self.archive.clone());
            // Recovery reads the whole live state, blocking: off the runtime.
            let spawned = tokio::task::spawn_blocking(move || {
                scheduler::spawn_with(store, archive, config, metrics)
            })
            .await
            .expect("the scheduler's start does not panic");
            let (handle, thread) = match spawned {
                Ok(s) => s,
                Err(e) => {
                    warn!("leading, but the live state could not be loaded: {e}");
                    let why = format!("loading the live state: {e}");
                    self.show(&Standing::Unknown(why.clone()));
                    // Newer than a lost term's words, which `tell` keeps.
                    route.send_replace(Route::Standby { leader: None, why });
                    elector.resign(term).await;
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            delay = Duration::from_millis(100);
            layers.set_current(Some(registry));
            self.show(&Standing::Leading);
            route.send_replace(Route::Leading(handle.clone()));
            info!(url = %self.url, "scheduling: this coordinator leads");
            let drivers = drive(&handle);
            let mut ended = tokio::task::spawn_blocking(move || thread.join());
            let mut stopping = false;
            // Why the term ended, and what callers are told of it.
            let (why, told) = tokio::select! {
                r = &mut ended => {
                    let why = match r {
                        Ok(Ok(Ok(()))) => "the scheduler stopped".to_owned(),
                        Ok(Ok(Err(e))) => format!("{e}"),
                        _ => "the scheduler thread panicked".to_owned(),
                    };
                    warn!("the term ends: {why}");
                    (why, handle.stopped_because().map(str::to_owned))
                }
                lost = term.lost() => {
                    // Before the scheduler is told to stop: the calls
                    // queued behind that are told this, not "shutting down".
                    let told = format!("leadership lost: {lost}");
                    handle.stopping_because(told.clone());
                    ("the leader's lease may have lapsed".to_owned(), Some(told))
                }
                _ = stop.wait_for(|s| *s) => {
                    stopping = true;
                    ("the coordinator is stopping".to_owned(), None)
                }
            };
            match told {
                Some(told) => {
                    self.show(&Standing::Unknown(why));
                    route.send_replace(Route::Lost(told));
                }
                None => tell(Standing::Unknown(why)),
            }
            drivers.abort();
            let _ = handle.send(Event::StepDown).await;
            drop(handle);
            if !ended.is_finished() {
                let _ = ended.await;
            }
            layers.set_current(None);
            elector.resign(term).await;
            if stopping {
                return;
            }
        }
    }
}
