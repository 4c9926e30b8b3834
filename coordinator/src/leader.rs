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
//!
//! # Why a farm on etcd has one leader and never shows a half batch
//!
//! With `--store etcd://…` any number of coordinators share one etcd cluster;
//! one leads, the others stand by. The argument, in the order a reviewer can
//! check it in the code:
//!
//! 1. **One leader at a time, by etcd.** A coordinator leads once its
//!    transaction `if create_revision(P/leader) == 0 then put(P/leader, url,
//!    lease)` succeeds (`leader.rs`). etcd serialises transactions, so at most
//!    one succeeds while the key exists; the key goes only with its lease
//!    (revoked at a clean stop, or lapsed `--leader-ttl-s` after the last
//!    keep-alive). The leader's **fence** is that put's revision, the key's
//!    create revision: no other campaign can produce it.
//! 2. **Every write is fenced.** Every transaction of `store::etcd` carries
//!    `create_revision(P/leader) == fence` (`Etcd::fenced`). Once the key is
//!    gone or another's, every write fails with `NotLeader` and changes
//!    nothing: a leader that was SIGSTOPped, swapped out or cut off past its
//!    lease cannot commit, however late its writes arrive (tested:
//!    `a_deposed_leader_writes_nothing`, `a_paused_leader_commits_nothing…`).
//!    Its scheduler stops on the failed commit; it never told anyone of the
//!    batch, because replies, acks and assignments leave only after a commit
//!    (below).
//! 3. **Nothing is told before it is durable.** Unchanged from one
//!    coordinator: the scheduler releases what depends on a batch only after
//!    `Backend::apply` returned, and etcd returns a transaction only once a
//!    quorum has it on disk. A failed or unanswered commit ends the term; its
//!    replies are dropped (the callers see `UNAVAILABLE`) and its agents'
//!    streams end.
//! 4. **No half batch is ever read.** A batch that fits one transaction
//!    (`--etcd-max-txn-ops`, `--etcd-max-request-bytes`: etcd's own limits) is
//!    atomic. A larger one is first written whole as a write-ahead record
//!    `P/wal/{fence}-{n}/{piece}` (each piece a fenced transaction), then
//!    applied in fenced transactions, then deleted; `apply` returns after
//!    that. The only reader of live state is a new leader's `load`, which
//!    first replays every complete record (its writes are puts and deletes of
//!    whole records: applying them twice leaves what once did) and drops every
//!    incomplete one (that batch wrote nothing else and was told to nobody),
//!    then reads all keys at one revision. One leader's batches are
//!    sequential and a new leader writes only after its load, so at most one
//!    record is outstanding and it is the last batch. A crash after each
//!    transaction in turn leaves all of the batch or none
//!    (`a_batch_cut_short_at_any_transaction_is_all_or_nothing`). A single
//!    record larger than a transaction is refused where it enters: a
//!    submission with `INVALID_ARGUMENT` naming the part, a result by failing
//!    its run (`provenance::within`), so that no batch can hold one.
//! 5. **A new leader resumes.** It loads live state as recovery does from
//!    SQLite (assigned runs keep their holders; agents reconnect and report
//!    what they ran), so a run that finished before the failover never runs
//!    again, and a result in flight is delivered to the new leader (tested
//!    end to end in `cli/tests/ha.rs`).
//! 6. **Liveness.** Standbys watch the leader's key and campaign when it is
//!    deleted: failover takes the rest of the lease, the load and the agents'
//!    reconnection (they were given every URL, follow a standby's
//!    `farm-leader` only to one of them, and retry every second). A leader
//!    that etcd stops answering gives up by itself a TTL and
//!    `leader::LOSS_GRACE` (2 s, etcd's own election) after its last answered
//!    keep-alive, and campaigns again, so it resumes when etcd is back; a
//!    member lost out of three interrupts nothing (the client retries each
//!    request on the others for `store::etcd::RETRY_FOR`). While no leader is
//!    known, every coordinator's services answer `UNAVAILABLE` with the
//!    reason, and `/metrics` shows `farm_coordinator_standing{standing="unknown"}`.
//!
//! Key layout and validation that SQLite does by constraints (a new matrix id,
//! an identity bound to one agent) are at the top of `store/etcd.rs`.

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
