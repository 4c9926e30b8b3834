//! The highly available backend: live state as keys of an etcd cluster,
//! every write fenced by the writer's leadership.
//!
//! Keys, under the farm's prefix `P` (`--store-prefix`):
//! - `P/m/{matrix}`: a matrix without its cells; `P/c/{matrix}/{index}`:
//!   each cell; `P/x/{matrix}`: present once it is cancelled;
//! - `P/r/{matrix}/{run}`: each run, with its result;
//! - `P/a/{agent}`: each agent, with the certificate name it is bound to;
//! - `P/s/{schedule}`: each schedule, with its cron cursor;
//! - `P/b/{bisection}`: each bisection, its `farm.v1.Bisection` record;
//! - `P/leader`: the leader's key (`crate::leader`), held by its lease;
//! - `P/wal/{term}-{n}/{piece}`: a batch too large for one transaction,
//!   while it is being applied.
//!
//! **Fencing.** Every transaction compares `P/leader`'s create revision
//! with the one this coordinator's campaign created ([`Fence`]): once the
//! key is gone (the lease lapsed) or another leader's, every write fails
//! with [`Error::NotLeader`], however long this process was paused.
//!
//! **Batches.** A batch that fits one transaction (etcd's `--max-txn-ops`
//! and `--max-request-bytes`, [`batch::Limits`]) is one transaction:
//! atomic by etcd. A larger one (a matrix of thousands of runs) is first
//! written whole, as a write-ahead record of pieces under `P/wal/`, each
//! piece in a fenced transaction; then its writes are applied in fenced
//! transactions; then the record is deleted. `apply` returns only after
//! all of it, so nobody has been told of a batch whose record is still
//! there. The one reader that matters, a leader's `load`, first replays
//! every complete record (its writes are puts and deletes of whole
//! records, so applying them again leaves what applying them once did)
//! and deletes every incomplete one (its batch wrote nothing else, and
//! nobody was told of it), and only then reads the live keys, all at one
//! revision. So no reader ever sees half a batch. Batches of one leader
//! are sequential, and a new leader's writes start after its load: at
//! most one record is ever outstanding, and it is the last batch.
//!
//! Validation that SQLite does with constraints (a matrix id is new, an
//! identity binds one agent) is done here against a mirror of those keys,
//! kept from `load` on: the fence makes this process the only writer.

mod batch;
mod records;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, GetOptions, KvClient, Txn, TxnOp};
use prost::Message;
use tokio::sync::watch;
use tracing::{info, warn};

pub use batch::Limits;
use batch::{Write, Writes};

use super::backend::{AgentRecord, Backend, Error, MatrixRecord, Op, Result, Snapshot};
use crate::identity::Name;
use crate::ids::{AgentId, MatrixId};

/// How long one request to etcd may take before it is tried again.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a write or a read is retried through etcd's own failures (a
/// member lost, a leader election: about a second) before the batch fails
/// and this coordinator stops leading.
pub const RETRY_FOR: Duration = Duration::from_secs(8);
/// Keys per page of a read: with values of up to a request's size, a page
/// stays within [`MAX_READ_BYTES`].
const PAGE_KEYS: i64 = 64;
/// The largest response read from etcd: [`PAGE_KEYS`] of the largest
/// values, and some.
const MAX_READ_BYTES: usize = 256 << 20;

/// This coordinator's leadership, as every write checks it: the leader
/// key, and the create revision its campaign made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    pub key: String,
    pub revision: i64,
}

impl Fence {
    fn compare(&self) -> Compare {
        Compare::create_revision(self.key.as_bytes(), CompareOp::Equal, self.revision)
    }
}

/// One write-ahead piece.
#[derive(Clone, PartialEq, prost::Message)]
struct WalPiece {
    #[prost(uint32, tag = "1")]
    index: u32,
    #[prost(uint32, tag = "2")]
    total: u32,
    #[prost(bytes = "vec", tag = "3")]
    bytes: Vec<u8>,
}

pub struct Etcd {
    kv: KvClient,
    rt: tokio::runtime::Handle,
    prefix: String,
    fence: Fence,
    limits: Limits,
    /// Live matrix ids, and the agent ↔ certificate bindings (see above).
    matrices: HashSet<MatrixId>,
    bindings: HashMap<AgentId, Name>,
    bound: HashMap<Name, AgentId>,
    /// The next write-ahead record's number in this term.
    wal_next: u64,
    /// Transactions left before a simulated crash ([`Etcd::crash_after`]).
    crash_after: Option<usize>,
    /// Set with why once the leader's term is over ([`Etcd::ends_with`]):
    /// a request still retried then fails at once, so that the scheduler
    /// stops, and its callers hear why, without waiting for [`RETRY_FOR`].
    term_end: Option<watch::Receiver<Option<String>>>,
}

impl Etcd {
    /// The store under `prefix` of the cluster `client` talks to, written
    /// under `fence`; `rt` runs its requests (`apply` and `load` block the
    /// calling thread, which must not be one of `rt`'s).
    pub fn new(
        client: &Client,
        rt: tokio::runtime::Handle,
        prefix: &str,
        fence: Fence,
        limits: Limits,
    ) -> Etcd {
        Etcd {
            kv: client.kv_client().max_decoding_message_size(MAX_READ_BYTES),
            rt,
            prefix: prefix.to_owned(),
            fence,
            limits,
            matrices: HashSet::new(),
            bindings: HashMap::new(),
            bound: HashMap::new(),
            wal_next: 0,
            crash_after: None,
            term_end: None,
        }
    }

    /// Requests fail as soon as `term_end` says why the term is over
    /// (`crate::leader::Term::end`).
    pub fn ends_with(mut self, term_end: watch::Receiver<Option<String>>) -> Etcd {
        self.term_end = Some(term_end);
        self
    }

    /// For tests of recovery: after `transactions` more transactions, every
    /// write fails as if the process had died there (nothing more is sent).
    #[doc(hidden)]
    pub fn crash_after(&mut self, transactions: usize) {
        self.crash_after = Some(transactions);
    }

    fn crash_point(&mut self) -> Result<()> {
        match &mut self.crash_after {
            Some(0) => Err(Error::Etcd("a crash simulated by the test".into())),
            Some(n) => {
                *n -= 1;
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn key(&self, kind: &str, id: &str) -> Vec<u8> {
        format!("{}/{kind}/{id}", self.prefix).into_bytes()
    }

    /// `f` until it succeeds, a failure that is not etcd's own passing
    /// trouble, or [`RETRY_FOR`].
    fn call<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T>
    where
        F: FnMut(KvClient) -> Fut,
        Fut: std::future::Future<Output = Result<T, etcd_client::Error>>,
    {
        let start = Instant::now();
        let mut delay = Duration::from_millis(50);
        let mut term_end = self.term_end.clone();
        loop {
            let r = self.rt.block_on(async {
                let request = tokio::time::timeout(REQUEST_TIMEOUT, f(self.kv.clone()));
                match &mut term_end {
                    Some(end) => tokio::select! {
                        r = request => Ok(r),
                        Ok(why) = end.wait_for(Option::is_some) => Err(why.clone()),
                    },
                    None => Ok(request.await),
                }
            });
            let e = match r {
                Ok(Ok(Ok(v))) => return Ok(v),
                Ok(Ok(Err(e))) if !passing(&e) => {
                    return Err(Error::Etcd(format!("{what}: {e}")));
                }
                Ok(Ok(Err(e))) => e.to_string(),
                Ok(Err(_)) => format!("no answer in {} ms", REQUEST_TIMEOUT.as_millis()),
                Err(why) => return Err(Error::TermEnded(why.unwrap_or_default())),
            };
            if start.elapsed() >= RETRY_FOR {
                return Err(Error::Unreachable(format!(
                    "{what}: {e}, tried for {} s",
                    RETRY_FOR.as_secs()
                )));
            }
            warn!("etcd: {what}: {e}; trying again");
            std::thread::sleep(delay);
            delay = (delay * 2).min(Duration::from_millis(500));
        }
    }

    /// `writes` in one transaction, if this coordinator still leads.
    fn fenced(&mut self, writes: &[Write]) -> Result<()> {
        self.crash_point()?;
        let ops: Vec<TxnOp> = writes
            .iter()
            .map(|w| match &w.value {
                Some(v) => TxnOp::put(w.key.clone(), v.clone(), None),
                None => TxnOp::delete(w.key.clone(), None),
            })
            .collect();
        let txn = Txn::new().when([self.fence.compare()]).and_then(ops);
        let r = self.call("writing a batch", |mut kv| {
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })?;
        if r.succeeded() {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }

    /// Deletes every key under `prefix`, if this coordinator still leads.
    fn fenced_delete_prefix(&mut self, prefix: &[u8]) -> Result<()> {
        self.crash_point()?;
        let txn = Txn::new()
            .when([self.fence.compare()])
            .and_then([TxnOp::delete(
                prefix.to_vec(),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            )]);
        let r = self.call("deleting a write-ahead record", |mut kv| {
            let txn = txn.clone();
            async move { kv.txn(txn).await }
        })?;
        if r.succeeded() {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }

    /// Every key and value under `prefix`, read at one revision.
    fn read_prefix(&self, prefix: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let end = prefix_end(prefix);
        let mut out = Vec::new();
        let mut from = prefix.to_vec();
        let mut revision = 0;
        loop {
            let opts = GetOptions::new()
                .with_range(end.clone())
                .with_limit(PAGE_KEYS)
                .with_revision(revision);
            let mut r = self.call("reading the live state", |mut kv| {
                let (from, opts) = (from.clone(), opts.clone());
                async move { kv.get(from, Some(opts)).await }
            })?;
            if revision == 0 {
                revision = r.header().map_or(0, |h| h.revision());
            }
            let more = r.more();
            let kvs = r.take_kvs();
            let Some(last) = kvs.last() else { break };
            from = last.key().to_vec();
            from.push(0);
            out.extend(kvs.into_iter().map(|kv| kv.into_key_value()));
            if !more {
                break;
            }
        }
        Ok(out)
    }

    /// Writes `writes`, one transaction if they fit, else through a
    /// write-ahead record (see the module's comment).
    fn write(&mut self, writes: &[Write]) -> Result<()> {
        let Some(chunks) = batch::chunks(writes, self.limits, 0) else {
            let w = writes
                .iter()
                .max_by_key(|w| batch::cost(w))
                .expect("a write too large");
            return Err(Error::TooLarge {
                what: String::from_utf8_lossy(&w.key).chars().take(96).collect(),
                bytes: batch::cost(w),
                limit: self.limits.budget(),
            });
        };
        if chunks.len() <= 1 {
            return self.fenced(writes);
        }
        let record = format!(
            "{}/wal/{:020}-{:010}/",
            self.prefix, self.fence.revision, self.wal_next
        );
        self.wal_next += 1;
        let bytes = Writes {
            writes: writes.to_vec(),
        }
        .encode_to_vec();
        let piece_bytes = self.limits.max_value_bytes(record.len() + 16) - 16;
        let pieces = batch::pieces(&bytes, piece_bytes);
        let total = pieces.len() as u32;
        for (index, p) in pieces.into_iter().enumerate() {
            let piece = WalPiece {
                index: index as u32,
                total,
                bytes: p.to_vec(),
            };
            self.fenced(&[Write {
                key: format!("{record}{index:06}").into_bytes(),
                value: Some(piece.encode_to_vec()),
            }])?;
        }
        for c in chunks {
            self.fenced(&writes[c])?;
        }
        self.fenced_delete_prefix(record.as_bytes())
    }

    /// Applies every complete write-ahead record left by a leader that
    /// stopped half-way, and drops every incomplete one.
    fn replay(&mut self) -> Result<()> {
        let wal = format!("{}/wal/", self.prefix);
        let mut records: BTreeMap<Vec<u8>, Vec<WalPiece>> = BTreeMap::new();
        for (k, v) in self.read_prefix(wal.as_bytes())? {
            let Some(slash) = k.iter().rposition(|&b| b == b'/') else {
                continue;
            };
            let piece = WalPiece::decode(v.as_slice()).map_err(|source| Error::Decode {
                what: String::from_utf8_lossy(&k).into_owned(),
                source,
            })?;
            records.entry(k[..=slash].to_vec()).or_default().push(piece);
        }
        for (record, mut pieces) in records {
            pieces.sort_by_key(|p| p.index);
            let complete = pieces
                .first()
                .is_some_and(|p| p.total as usize == pieces.len())
                && pieces
                    .iter()
                    .enumerate()
                    .all(|(i, p)| p.index as usize == i);
            let name = String::from_utf8_lossy(&record).into_owned();
            if complete {
                let bytes: Vec<u8> = pieces.into_iter().flat_map(|p| p.bytes).collect();
                let writes = Writes::decode(bytes.as_slice())
                    .map_err(|source| Error::Decode {
                        what: name.clone(),
                        source,
                    })?
                    .writes;
                info!(record = %name, writes = writes.len(), "replaying a batch the last leader left half-applied");
                let chunks = batch::chunks(&writes, self.limits, 0).ok_or_else(|| {
                    Error::Etcd(format!("{name}: a write larger than a transaction"))
                })?;
                for c in chunks {
                    self.fenced(&writes[c])?;
                }
            } else {
                info!(record = %name, "dropping a batch the last leader never finished writing");
            }
            self.fenced_delete_prefix(&record)?;
        }
        Ok(())
    }

    /// The writes of `ops`, checked against the mirror as it will be once
    /// the earlier ops of the batch are applied; the mirror is changed
    /// only when the batch is written.
    fn writes(&self, ops: &[Op], stage: &mut Stage) -> Result<Vec<Write>> {
        let mut out = Vec::new();
        let put = |key: Vec<u8>, value: Vec<u8>| Write {
            key,
            value: Some(value),
        };
        for op in ops {
            match op {
                Op::PutMatrix(m, runs) => {
                    if self.matrices.contains(&m.id) || !stage.matrices.insert(m.id) {
                        return Err(Error::Exists(m.id));
                    }
                    out.push(put(self.key("m", &m.id.to_string()), records::matrix(m)));
                    for c in &m.cells {
                        let id = format!("{}/{:010}", m.id, c.index);
                        out.push(put(
                            self.key("c", &id),
                            farm_proto::Cell::from(c).encode_to_vec(),
                        ));
                    }
                    if m.cancelled {
                        out.push(put(self.key("x", &m.id.to_string()), Vec::new()));
                    }
                    for r in runs {
                        let id = format!("{}/{}", r.matrix_id, r.run_id);
                        out.push(put(self.key("r", &id), records::run(r)));
                    }
                }
                Op::PutRun(r) => {
                    let id = format!("{}/{}", r.matrix_id, r.run_id);
                    out.push(put(self.key("r", &id), records::run(r)));
                }
                Op::CancelMatrix(id) => out.push(put(self.key("x", &id.to_string()), Vec::new())),
                Op::PutAgent(a) => {
                    let identity = stage.bind(self, a)?;
                    let rec = AgentRecord {
                        identity,
                        ..(**a).clone()
                    };
                    out.push(put(
                        self.key("a", &a.agent_id.to_string()),
                        records::agent(&rec),
                    ));
                }
                Op::ForgetAgent(id) => {
                    stage.unbind(self, id);
                    out.push(Write {
                        key: self.key("a", &id.to_string()),
                        value: None,
                    });
                }
                Op::PutSchedule(s) => {
                    out.push(put(self.key("s", &s.id.to_string()), records::schedule(s)))
                }
                Op::PutBisection(b) => {
                    out.push(put(self.key("b", &b.bisection_id), b.encode_to_vec()))
                }
                Op::ForgetMatrix { id, cells, runs } => {
                    stage.forgotten.insert(*id);
                    let delete = |key: Vec<u8>| Write { key, value: None };
                    out.push(delete(self.key("m", &id.to_string())));
                    out.push(delete(self.key("x", &id.to_string())));
                    for index in 0..*cells {
                        out.push(delete(self.key("c", &format!("{id}/{index:010}"))));
                    }
                    for run in runs {
                        out.push(delete(self.key("r", &format!("{id}/{run}"))));
                    }
                }
            }
        }
        Ok(batch::last_per_key(out))
    }
}

/// The mirror's changes by a batch not yet written.
#[derive(Default)]
struct Stage {
    matrices: HashSet<MatrixId>,
    /// Matrices the batch deletes (archived).
    forgotten: HashSet<MatrixId>,
    /// agent → its binding after the batch (`None`: none).
    bindings: HashMap<AgentId, Option<Name>>,
    /// identity → the agent it binds after the batch (`None`: none).
    bound: HashMap<Name, Option<AgentId>>,
}

impl Stage {
    fn binding(&self, s: &Etcd, agent: &AgentId) -> Option<Name> {
        match self.bindings.get(agent) {
            Some(b) => b.clone(),
            None => s.bindings.get(agent).cloned(),
        }
    }

    fn holder(&self, s: &Etcd, identity: &Name) -> Option<AgentId> {
        match self.bound.get(identity) {
            Some(h) => *h,
            None => s.bound.get(identity).cloned(),
        }
    }

    /// The binding `a` is stored with: an existing one is kept (a binding
    /// lasts as long as its agent), a new one must name an identity no
    /// other agent holds.
    fn bind(&mut self, s: &Etcd, a: &AgentRecord) -> Result<Option<Name>> {
        if let Some(existing) = self.binding(s, &a.agent_id) {
            return Ok(Some(existing));
        }
        let Some(identity) = &a.identity else {
            return Ok(None);
        };
        if let Some(other) = self.holder(s, identity) {
            return Err(Error::IdentityTaken {
                identity: identity.to_string(),
                agent: other.to_string(),
            });
        }
        self.bindings.insert(a.agent_id, Some(identity.clone()));
        self.bound.insert(identity.clone(), Some(a.agent_id));
        Ok(Some(identity.clone()))
    }

    fn unbind(&mut self, s: &Etcd, agent: &AgentId) {
        if let Some(identity) = self.binding(s, agent) {
            self.bound.insert(identity, None);
        }
        self.bindings.insert(*agent, None);
    }
}

impl Backend for Etcd {
    fn apply(&mut self, ops: &[Op]) -> Result<()> {
        if ops.is_empty() {
            return Ok(());
        }
        let mut stage = Stage::default();
        let writes = self.writes(ops, &mut stage)?;
        self.write(&writes)?;
        self.matrices.extend(stage.matrices);
        for id in &stage.forgotten {
            self.matrices.remove(id);
        }
        for (agent, b) in stage.bindings {
            match b {
                Some(n) => self.bindings.insert(agent, n),
                None => self.bindings.remove(&agent),
            };
        }
        for (identity, h) in stage.bound {
            match h {
                Some(a) => self.bound.insert(identity, a),
                None => self.bound.remove(&identity),
            };
        }
        Ok(())
    }

    fn load(&mut self) -> Result<Snapshot> {
        self.replay()?;
        let root = format!("{}/", self.prefix);
        let mut snap = Snapshot::default();
        let mut matrices: BTreeMap<String, MatrixRecord> = BTreeMap::new();
        let mut cancelled: HashSet<String> = HashSet::new();
        let mut cells: Vec<(String, farm_proto::Cell)> = Vec::new();
        for (k, v) in self.read_prefix(root.as_bytes())? {
            let rel = String::from_utf8_lossy(&k[root.len()..]).into_owned();
            let (kind, id) = rel.split_once('/').unwrap_or((rel.as_str(), ""));
            match kind {
                "m" => {
                    matrices.insert(id.to_owned(), records::matrix_of(&v, false)?);
                }
                "c" => {
                    let (matrix, _) = id.split_once('/').unwrap_or((id, ""));
                    cells.push((matrix.to_owned(), records::cell_of(&v)?));
                }
                "x" => {
                    cancelled.insert(id.to_owned());
                }
                "r" => snap.runs.push(records::run_of(&v)?),
                "a" => snap.agents.push(records::agent_of(&v)?),
                "s" => snap.schedules.push(records::schedule_of(&v)?),
                "b" => snap
                    .bisections
                    .push(
                        farm_proto::Bisection::decode(v.as_slice()).map_err(|source| {
                            Error::Decode {
                                what: format!(
                                    "bisection {}",
                                    id.chars().take(64).collect::<String>()
                                ),
                                source,
                            }
                        })?,
                    ),
                "leader" | "wal" => {}
                _ => return Err(Error::UnknownKey(rel.chars().take(96).collect())),
            }
        }
        let mut wire: BTreeMap<String, Vec<farm_proto::Cell>> = BTreeMap::new();
        for (matrix, cell) in cells {
            if !matrices.contains_key(&matrix) {
                return Err(Error::Orphan(format!("a cell of matrix {matrix}")));
            }
            wire.entry(matrix).or_default().push(cell);
        }
        for id in cancelled {
            match matrices.get_mut(&id) {
                Some(m) => m.cancelled = true,
                None => return Err(Error::Orphan(format!("the cancel of matrix {id}"))),
            }
        }
        self.matrices = matrices.values().map(|m| m.id).collect();
        for (id, m) in matrices {
            let mut cells = wire.remove(&id).unwrap_or_default();
            cells.sort_by_key(|c| c.index);
            super::backend::typed(m, &cells, &mut snap);
        }
        snap.matrices.sort_by_key(|m| m.seq);
        snap.unreadable.sort_by_key(|u| u.record.seq);
        snap.schedules
            .sort_by(|a, b| (a.created_ms, &a.id).cmp(&(b.created_ms, &b.id)));
        snap.bisections
            .sort_by(|a, b| (a.created_ms, &a.bisection_id).cmp(&(b.created_ms, &b.bisection_id)));
        self.bindings.clear();
        self.bound.clear();
        for a in &snap.agents {
            if let Some(n) = &a.identity {
                self.bindings.insert(a.agent_id, n.clone());
                self.bound.insert(n.clone(), a.agent_id);
            }
        }
        Ok(snap)
    }

    fn max_value_bytes(&self) -> usize {
        // Keys are the prefix and ids of a few dozen bytes.
        self.limits.max_value_bytes(self.prefix.len() + 256)
    }
}

/// etcd's own passing trouble, which a retry outlasts: no leader for a
/// moment, a member gone, a request that timed out in the cluster.
fn passing(e: &etcd_client::Error) -> bool {
    use tonic::Code;
    match e {
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => true,
        etcd_client::Error::GRpcStatus(s) => matches!(
            s.code(),
            Code::Unavailable
                | Code::DeadlineExceeded
                | Code::Unknown
                | Code::Aborted
                | Code::Cancelled
        ),
        _ => false,
    }
}

/// The first key after every key that starts with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}
