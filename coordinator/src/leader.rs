//! Leader election through etcd: a key held by a lease.
//!
//! A coordinator campaigns by creating `P/leader` (value: the URL agents
//! and farmctl reach it at) with its own lease, in a transaction that
//! succeeds only if the key does not exist. The one that created it
//! leads; its [`Fence`] is the key's create revision, which every write of
//! its store compares (`store::etcd`), so that its writes fail from the
//! moment the key is not its own. The others watch the key and campaign
//! again when it is deleted: when the leader resigns (a clean stop revokes
//! its lease) or its lease lapses (`ttl` after its last keep-alive: the
//! process was killed, paused, or cut off).
//!
//! A leader keeps its lease alive every third of the TTL, and gives up
//! leading by itself ([`Term::lost`]) when etcd says the lease is gone, or
//! once no keep-alive has been answered for a whole TTL and a grace
//! ([`LOSS_GRACE`]): etcd may have expired the lease by then. Safety does
//! not depend on that local clock: the fence does. Liveness does: a leader
//! cut off from etcd stops and lets its agents find the new one. Why the
//! term ended ([`Term::end`]) is what its callers are told.

use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, EventType, Txn, TxnOp, WatchOptions};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::store::etcd::Fence;

/// What this coordinator knows of the leadership while it campaigns, for
/// its services (`crate::route`) and its metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    Leading,
    /// Another coordinator leads, reachable at this URL.
    Following(String),
    /// Nobody is known to lead: why (etcd unreachable, an election).
    Unknown(String),
}

pub struct Elector {
    client: Client,
    key: String,
    url: String,
    ttl: Duration,
}

/// One term of leadership.
pub struct Term {
    pub fence: Fence,
    lease: i64,
    /// Why the term is over, once it is (the keep-alive task says).
    lost: watch::Receiver<Option<String>>,
    keeper: tokio::task::JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
#[error("etcd: {what}: {source}")]
pub struct Error {
    what: &'static str,
    source: etcd_client::Error,
}

fn err(what: &'static str) -> impl FnOnce(etcd_client::Error) -> Error {
    move |source| Error { what, source }
}

/// How long a request of the election may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

async fn timed<T>(
    what: &'static str,
    f: impl std::future::Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, Error> {
    match tokio::time::timeout(REQUEST_TIMEOUT, f).await {
        Ok(r) => r.map_err(err(what)),
        Err(_) => Err(Error {
            what,
            source: etcd_client::Error::InvalidArgs(format!(
                "no answer in {} ms",
                REQUEST_TIMEOUT.as_millis()
            )),
        }),
    }
}

impl Elector {
    /// Campaigns for `prefix`/leader as the coordinator reachable at `url`.
    pub fn new(client: Client, prefix: &str, url: String, ttl: Duration) -> Elector {
        Elector {
            client,
            key: format!("{prefix}/leader"),
            url,
            ttl,
        }
    }

    /// Waits until this coordinator leads, telling `standing` who does
    /// meanwhile; failures of etcd are retried (and told) until it answers.
    pub async fn campaign(&self, standing: &impl Fn(Standing)) -> Term {
        let mut delay = Duration::from_millis(100);
        loop {
            match self.try_campaign(standing).await {
                Ok(term) => return term,
                Err(e) => {
                    warn!("no leader: {e}");
                    standing(Standing::Unknown(format!("{e}")));
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    async fn try_campaign(&self, standing: &impl Fn(Standing)) -> Result<Term, Error> {
        let mut client = self.client.clone();
        let ttl_s = self.ttl.as_secs().max(1) as i64;
        loop {
            // A lease per attempt: a standby's would lapse while it waits.
            let lease = timed("granting a lease", client.lease_grant(ttl_s, None))
                .await?
                .id();
            let txn = Txn::new()
                .when([Compare::create_revision(
                    self.key.as_bytes(),
                    CompareOp::Equal,
                    0,
                )])
                .and_then([TxnOp::put(
                    self.key.as_bytes(),
                    self.url.as_bytes(),
                    Some(etcd_client::PutOptions::new().with_lease(lease)),
                )])
                .or_else([TxnOp::get(self.key.as_bytes(), None)]);
            let r = timed("campaigning", client.txn(txn)).await?;
            let revision = r.header().map_or(0, |h| h.revision());
            if r.succeeded() {
                info!(key = %self.key, revision, "leading");
                let (lost_tx, lost) = watch::channel(None);
                let keeper =
                    tokio::spawn(keep_alive(self.client.clone(), lease, self.ttl, lost_tx));
                return Ok(Term {
                    fence: Fence {
                        key: self.key.clone(),
                        revision,
                    },
                    lease,
                    lost,
                    keeper,
                });
            }
            let leader = r
                .op_responses()
                .into_iter()
                .find_map(|op| match op {
                    etcd_client::TxnOpResponse::Get(g) => g
                        .kvs()
                        .first()
                        .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
                    _ => None,
                })
                .unwrap_or_default();
            info!(%leader, "standing by");
            standing(Standing::Following(leader));
            // Unused, it would only lapse.
            let _ = timed("revoking an unused lease", client.lease_revoke(lease)).await;
            self.wait_for_vacancy(revision).await?;
        }
    }

    /// Returns once the leader key is deleted after `revision`.
    async fn wait_for_vacancy(&self, revision: i64) -> Result<(), Error> {
        let mut client = self.client.clone();
        let mut stream = timed(
            "watching the leader",
            client.watch(
                self.key.as_bytes(),
                Some(WatchOptions::new().with_start_revision(revision + 1)),
            ),
        )
        .await?;
        loop {
            // A watch sees no traffic while the leader lives: no timeout
            // here, but etcd's own keep-alives end a dead stream.
            let Some(r) = stream.message().await.map_err(err("watching the leader"))? else {
                return Ok(());
            };
            if r.canceled()
                || r.events()
                    .iter()
                    .any(|e| e.event_type() == EventType::Delete)
            {
                return Ok(());
            }
        }
    }

    /// Gives up leading now: the lease is revoked, its key deleted, and a
    /// standby takes over without waiting for a TTL.
    pub async fn resign(&self, term: Term) {
        term.keeper.abort();
        let mut client = self.client.clone();
        match timed("resigning", client.lease_revoke(term.lease)).await {
            Ok(_) => info!("resigned the leadership"),
            Err(e) => warn!("{e}; the leadership lapses with its lease"),
        }
    }
}

impl Term {
    /// Resolves once the lease may have lapsed: this term is over, and why.
    pub async fn lost(&mut self) -> String {
        let why = match self.lost.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            Err(_) => None,
        };
        match why {
            Some(why) => why,
            // The keeper is gone only when the term is dropped or
            // resigned; until then it never stops without saying why.
            None => std::future::pending().await,
        }
    }

    /// What says why the term is over once it is: the store's requests
    /// watch it (`store::etcd::Etcd::ends_with`).
    pub fn end(&self) -> watch::Receiver<Option<String>> {
        self.lost.clone()
    }
}

impl Drop for Term {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Keeps `lease` alive every third of `ttl`; sets `lost` (with why) once
/// no keep-alive was answered for `ttl`, or etcd says the lease is gone.
///
/// A failed keep-alive is tried again at once, on a new stream: the
/// client's channel spreads requests over the cluster's members, and a
/// stream to a member that died fails while the others answer.
async fn keep_alive(
    client: Client,
    lease: i64,
    ttl: Duration,
    lost: watch::Sender<Option<String>>,
) {
    let every = ttl / 3;
    let mut alive_until = Instant::now() + ttl;
    let mut stream = None;
    loop {
        let round = Instant::now();
        loop {
            if Instant::now() >= alive_until + LOSS_GRACE {
                warn!(
                    lease,
                    "no keep-alive answered for a whole TTL: the leadership is lost"
                );
                lost.send_replace(Some(format!(
                    "etcd unreachable (no keep-alive answered for {} ms)",
                    (ttl + LOSS_GRACE).as_millis()
                )));
                return;
            }
            let sent = Instant::now();
            let answer = async {
                if stream.is_none() {
                    stream = Some(client.clone().lease_keep_alive(lease).await?);
                }
                let (keeper, replies) = stream.as_mut().expect("just opened");
                keeper.keep_alive().await?;
                replies.message().await
            };
            match tokio::time::timeout(KEEP_ALIVE_TIMEOUT, answer).await {
                Ok(Ok(Some(r))) if r.ttl() > 0 => {
                    alive_until = sent + ttl;
                    break;
                }
                Ok(Ok(Some(_))) => {
                    warn!(lease, "etcd says the lease is gone: the leadership is lost");
                    lost.send_replace(Some("etcd says the leader's lease is gone".into()));
                    return;
                }
                Ok(Ok(None)) | Ok(Err(_)) | Err(_) => {
                    stream = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        tokio::time::sleep_until((round + every).into()).await;
    }
}

/// How long past its TTL a leader that etcd does not answer goes on trying
/// before it gives up: etcd renews every lease when its raft elects a new
/// leader (a second or two with its defaults, during which nothing is
/// answered), so a leader that gave up at the TTL would step down for
/// nothing whenever etcd's leader member dies. Leading on meanwhile is
/// safe: if the lease did lapse, a keep-alive says so, and every write
/// fails its fence.
const LOSS_GRACE: Duration = Duration::from_secs(2);

/// How long one keep-alive may wait for its answer before it is sent again.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_millis(500);
