//! The scheduler: one event loop that owns all coordinator state.
//!
//! gRPC handlers never touch state; they send an [`Event`] through a
//! [`Handle`] and await a reply. The loop runs on a thread of its own because
//! it does blocking SQLite commits: it takes every event that is waiting (a
//! batch), applies them in memory, pushes runs to idle agents, commits the
//! batch's store operations in one transaction, and only then sends replies,
//! acknowledgements and assignments. Nothing anyone was told is ever ahead of
//! the disk, and one fsync serves a whole batch.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use farm_proto::trace::{self, TARGET};
use farm_proto::{
    AgentInfo, Capabilities, CellStatus, CoordinatorMessage, GetResultsResponse, Hello,
    MatrixState, MatrixStatus, RunAssignment, RunCounts, RunRef, RunResult, ScheduleInfo,
    SubmitMatrixResponse, agent_message, coordinator_message,
};
use tokio::sync::{mpsc, oneshot, watch};
use tonic::Status;
use tracing::{Span, debug, info, info_span, warn};

use crate::matrix::Matrix;
use crate::metrics::Metrics;
use crate::placement::{self, Requirement};
use crate::results;
use crate::store::{self, AgentRecord, MatrixRecord, Op, RunRecord, RunState, Store};

/// The sending half of an agent's stream.
pub type AgentTx = mpsc::UnboundedSender<Result<CoordinatorMessage, Status>>;

type Reply<T> = oneshot::Sender<Result<T, Status>>;

/// The most events applied before a commit; bounds the latency of a batch.
const MAX_BATCH: usize = 4096;
/// How often a running matrix's status is republished at most.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub heartbeat_ms: u32,
    /// An agent silent for this long loses its run, which is re-queued.
    pub lease_ms: u32,
    /// A run whose agents were lost this many times fails instead of re-queueing.
    pub max_attempts: u32,
    /// Most series each results metric family shows (`crate::metrics`).
    pub metrics_series_limit: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            heartbeat_ms: 1_000,
            lease_ms: 5_000,
            max_attempts: 3,
            metrics_series_limit: crate::metrics::DEFAULT_SERIES_LIMIT,
        }
    }
}

pub enum Event {
    Register {
        capabilities: Box<Capabilities>,
        resume_agent_id: String,
        reply: Reply<String>,
    },
    SessionOpen {
        hello: Hello,
        session: u64,
        tx: AgentTx,
        reply: Reply<()>,
    },
    FromAgent {
        agent_id: String,
        msg: Box<agent_message::Msg>,
    },
    SessionClosed {
        agent_id: String,
        session: u64,
    },
    Submit {
        matrix: Box<Matrix>,
        file_name: String,
        source: String,
        /// The submitter's span (W3C), parent of the matrix's; may be empty.
        traceparent: String,
        reply: Reply<SubmitMatrixResponse>,
    },
    Status {
        matrix_id: String,
        reply: Reply<MatrixStatus>,
    },
    Watch {
        matrix_id: String,
        reply: Reply<watch::Receiver<MatrixStatus>>,
    },
    ListAgents {
        reply: Reply<Vec<AgentInfo>>,
    },
    Cancel {
        matrix_id: String,
        reply: Reply<u32>,
    },
    Results {
        matrix_id: String,
        reply: Reply<GetResultsResponse>,
    },
    /// The cron driver: `at_ms` is due for this schedule.
    CronDue {
        schedule_id: String,
        at_ms: u64,
    },
    ListSchedules {
        reply: Reply<Vec<ScheduleInfo>>,
    },
    CancelSchedule {
        schedule_id: String,
        reply: Reply<()>,
    },
    Tick,
}

/// A cheap, cloneable way to talk to the scheduler.
#[derive(Clone)]
pub struct Handle {
    tx: mpsc::UnboundedSender<Event>,
    pub config: Config,
    /// The schedules with a cron, republished after every commit that
    /// changes them; `crate::timer` waits on it.
    pub crons: watch::Receiver<Vec<CronEntry>>,
}

impl Handle {
    pub fn send(&self, ev: Event) -> Result<(), Status> {
        self.tx
            .send(ev)
            .map_err(|_| Status::unavailable("coordinator is shutting down"))
    }

    /// Sends the event built around a fresh reply channel and awaits the reply.
    pub async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Event) -> Result<T, Status> {
        let (reply, rx) = oneshot::channel();
        self.send(make(reply))?;
        rx.await
            .map_err(|_| Status::unavailable("coordinator is shutting down"))?
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] store::Error),
}

struct Agent {
    capabilities: Capabilities,
    registered_ms: u64,
    /// The open stream, with the number that tells it from earlier ones.
    session: Option<(u64, AgentTx)>,
    /// The attempt this agent is executing (or whose result it is about to
    /// deliver); it is busy until it reports that very attempt.
    current: Option<RunRef>,
    lease_until: Instant,
    last_seen_ms: u64,
}

struct MatrixMem {
    rec: MatrixRecord,
    /// Requirements per cell, computed once: the dispatch loop checks them often.
    reqs: Vec<Vec<Requirement>>,
    /// Run ids in dispatch order.
    runs: Vec<String>,
    /// Run ids of each cell, in dispatch order: comparisons look at a cell
    /// and its baseline without scanning the matrix.
    by_cell: Vec<Vec<String>>,
    /// The cells compared with each cell, computed once: every result looks
    /// them up, and scanning a 10,000-cell matrix per result would be on
    /// the dispatch path.
    candidates: Vec<Vec<u32>>,
    status: watch::Sender<MatrixStatus>,
    dirty: bool,
    /// When watchers last got a status; `None` until the first one.
    published: Option<Instant>,
    /// Durations of finished runs, for ETAs.
    durations_s: Vec<f64>,
    /// The matrix's trace span, from submission until it ends; a matrix
    /// recovered after a restart has none, and its runs' spans are roots.
    span: Span,
}

struct RunMem {
    rec: RunRecord,
    matrix_seq: u64,
    assigned_at: Option<Instant>,
    /// When it last became dispatchable, for the assignment latency.
    queued_at: Instant,
    /// The current attempt's trace span, from assignment until its result
    /// is committed; the agent's spans of the attempt are its children.
    span: Span,
}

struct Scheduler {
    store: Store,
    config: Config,
    agents: HashMap<String, Agent>,
    /// Agents with an open stream and no run: the only ones dispatch looks at.
    idle: BTreeSet<String>,
    matrices: HashMap<String, MatrixMem>,
    by_seq: BTreeMap<u64, String>,
    next_seq: u64,
    runs: HashMap<String, RunMem>,
    /// Queued runs per (matrix seq, cell), by run seq: older matrices first,
    /// and within a matrix the repetition-major order of the expansion.
    queues: BTreeMap<(u64, u32), BTreeMap<u64, String>>,
    /// A tick arrived in this batch: publish every changed matrix after it.
    ticked: bool,
    // Effects of the current batch, released only after it is committed.
    ops: Vec<Op>,
    outbox: Vec<(String, CoordinatorMessage)>,
    after_commit: Vec<Box<dyn FnOnce() + Send>>,
    metrics: Metrics,
    /// An agent connected, left or re-registered: the fleet gauge is redone
    /// at the next tick (not per event: thousands may connect at once).
    fleet_changed: bool,
    /// Every cell of every matrix by series (`series_key`), as (matrix
    /// seq, cell index) in submission order: a history is a lookup, not a
    /// scan of every matrix, now that every ended matrix computes its own.
    series: HashMap<Vec<u8>, Vec<(u64, u32)>>,
    schedules: BTreeMap<String, ScheduleMem>,
    /// A schedule was made, cancelled or executed in this batch: the cron
    /// driver hears of it after the commit.
    schedules_changed: bool,
    crons: watch::Sender<Vec<CronEntry>>,
}

/// Starts the scheduler thread on a store and returns the handle to it.
pub fn spawn(
    store: Store,
    config: Config,
) -> Result<(Handle, std::thread::JoinHandle<Result<(), Error>>), Error> {
    spawn_with(store, config, Metrics::new(config.metrics_series_limit))
}

/// [`spawn`], keeping `metrics` up to date (its registry is what a
/// `/metrics` endpoint serves).
pub fn spawn_with(
    store: Store,
    config: Config,
    metrics: Metrics,
) -> Result<(Handle, std::thread::JoinHandle<Result<(), Error>>), Error> {
    let mut s = Scheduler {
        store,
        config,
        agents: HashMap::new(),
        idle: BTreeSet::new(),
        matrices: HashMap::new(),
        by_seq: BTreeMap::new(),
        next_seq: 0,
        runs: HashMap::new(),
        queues: BTreeMap::new(),
        ticked: false,
        ops: Vec::new(),
        outbox: Vec::new(),
        after_commit: Vec::new(),
        metrics,
        fleet_changed: false,
        series: HashMap::new(),
        schedules: BTreeMap::new(),
        schedules_changed: false,
        crons: watch::channel(Vec::new()).0,
    };
    s.recover()?;
    let crons = s.crons.subscribe();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let thread = std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || {
            let result = s.run(&mut rx);
            if let Err(e) = &result {
                tracing::error!("scheduler stopped: {e}");
            }
            result
        })
        .expect("spawning the scheduler thread");
    Ok((Handle { tx, config, crons }, thread))
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

fn random_id(prefix: &str) -> String {
    let mut b = [0u8; 6];
    rand::fill(&mut b);
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{prefix}-{hex}")
}

impl Scheduler {
    /// Rebuilds memory from the store after a (re)start.
    fn recover(&mut self) -> Result<(), Error> {
        let snap = self.store.load()?;
        let lease = Duration::from_millis(u64::from(self.config.lease_ms));
        let now = Instant::now();
        for a in snap.agents {
            self.agents.insert(
                a.agent_id.clone(),
                Agent {
                    capabilities: a.capabilities,
                    registered_ms: a.registered_ms,
                    session: None,
                    current: None,
                    lease_until: now + lease,
                    last_seen_ms: 0,
                },
            );
        }
        for s in snap.schedules {
            self.schedules.insert(s.id.clone(), ScheduleMem::new(s));
        }
        for m in snap.matrices {
            self.next_seq = self.next_seq.max(m.seq + 1);
            if let Some(s) = m
                .execution
                .as_ref()
                .and_then(|e| self.schedules.get_mut(&e.schedule_id))
            {
                // Matrices load in submission order: executions stay in order.
                s.executions.push(m.id.clone());
            }
            self.insert_matrix(m);
        }
        self.crons.send_replace(self.cron_entries());
        let (mut queued, mut assigned) = (0, 0);
        for r in snap.runs {
            let Some(m) = self.matrices.get_mut(&r.matrix_id) else {
                warn!(run = %r.run_id, "run of an unknown matrix in the store; ignored");
                continue;
            };
            m.runs.push(r.run_id.clone());
            if let Some(c) = m.by_cell.get_mut(r.cell as usize) {
                c.push(r.run_id.clone());
            }
            let matrix_seq = m.rec.seq;
            if let Some(res) = &r.result
                && r.state == RunState::Finished
            {
                let d = res.finished_unix_ms.saturating_sub(res.started_unix_ms) as f64 / 1e3;
                m.durations_s.push(d);
            }
            match r.state {
                RunState::Queued => {
                    queued += 1;
                    self.queues
                        .entry((matrix_seq, r.cell))
                        .or_default()
                        .insert(r.seq, r.run_id.clone());
                }
                RunState::Assigned => {
                    // Its agent gets one lease from now to come back and claim it.
                    assigned += 1;
                    if let Some(a) = self.agents.get_mut(&r.agent_id) {
                        a.current = Some(RunRef {
                            run_id: r.run_id.clone(),
                            attempt: r.attempt,
                        });
                    }
                }
                _ => {}
            }
            self.runs.insert(
                r.run_id.clone(),
                RunMem {
                    rec: r,
                    matrix_seq,
                    assigned_at: None,
                    queued_at: now,
                    span: Span::none(),
                },
            );
        }
        for m in self.matrices.values_mut() {
            let runs = &self.runs;
            m.runs.sort_by_key(|id| runs.get(id).map(|r| r.rec.seq));
            for c in &mut m.by_cell {
                c.sort_by_key(|id| runs.get(id).map(|r| r.rec.seq));
            }
        }
        let ids: Vec<String> = self.matrices.keys().cloned().collect();
        for id in ids {
            let st = self.status(&id);
            if let (Some(st), Some(m)) = (st, self.matrices.get_mut(&id)) {
                m.status.send_replace(st);
            }
        }
        info!(
            matrices = self.matrices.len(),
            agents = self.agents.len(),
            queued,
            assigned,
            "recovered state from the store"
        );
        self.recover_metrics();
        Ok(())
    }

    fn insert_matrix(&mut self, rec: MatrixRecord) {
        let reqs = rec.cells.iter().map(placement::requirements).collect();
        let by_cell = vec![Vec::new(); rec.cells.len()];
        let mut candidates = vec![Vec::new(); rec.cells.len()];
        for c in &rec.cells {
            if let Some(b) = c.baseline.and_then(|b| candidates.get_mut(b as usize)) {
                b.push(c.index);
            }
        }
        let (status, _) = watch::channel(MatrixStatus::default());
        for c in &rec.cells {
            self.series
                .entry(series_key(c))
                .or_default()
                .push((rec.seq, c.index));
        }
        self.by_seq.insert(rec.seq, rec.id.clone());
        self.matrices.insert(
            rec.id.clone(),
            MatrixMem {
                rec,
                reqs,
                runs: Vec::new(),
                by_cell,
                candidates,
                status,
                dirty: true,
                published: None,
                durations_s: Vec::new(),
                span: Span::none(),
            },
        );
    }

    fn run(&mut self, rx: &mut mpsc::UnboundedReceiver<Event>) -> Result<(), Error> {
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while let Some(ev) = rx.blocking_recv() {
            batch.push(ev);
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(ev) => batch.push(ev),
                    Err(_) => break,
                }
            }
            for ev in batch.drain(..) {
                self.handle(ev);
            }
            self.dispatch();
            self.commit()?;
            // After the commit: nobody is shown what is not on disk.
            let ticked = std::mem::take(&mut self.ticked);
            self.publish(ticked);
            if ticked && std::mem::take(&mut self.fleet_changed) {
                self.refresh_fleet_metrics();
            }
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), Error> {
        if !self.ops.is_empty() {
            let t = Instant::now();
            self.store.apply(&self.ops)?;
            self.metrics.store_committed(t.elapsed());
            debug!(
                ops = self.ops.len(),
                elapsed_us = t.elapsed().as_micros() as u64,
                "committed"
            );
            self.ops.clear();
        }
        // Before the replies: whoever made a schedule finds the cron driver
        // already told of it.
        if std::mem::take(&mut self.schedules_changed) {
            self.crons.send_replace(self.cron_entries());
        }
        for (agent_id, msg) in self.outbox.drain(..) {
            if let Some((_, tx)) = self.agents.get(&agent_id).and_then(|a| a.session.as_ref()) {
                // A closed stream is fine: the agent's next Hello reconciles.
                let _ = tx.send(Ok(msg));
            }
        }
        for f in self.after_commit.drain(..) {
            f();
        }
        Ok(())
    }

    fn reply<T: Send + 'static>(&mut self, reply: Reply<T>, value: Result<T, Status>) {
        self.after_commit.push(Box::new(move || {
            let _ = reply.send(value);
        }));
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Register {
                capabilities,
                resume_agent_id,
                reply,
            } => {
                let id = self.register(*capabilities, resume_agent_id);
                self.reply(reply, Ok(id));
            }
            Event::SessionOpen {
                hello,
                session,
                tx,
                reply,
            } => {
                let r = self.session_open(hello, session, tx);
                self.reply(reply, r);
            }
            Event::FromAgent { agent_id, msg } => self.on_agent_message(&agent_id, *msg),
            Event::SessionClosed { agent_id, session } => {
                if let Some(a) = self.agents.get_mut(&agent_id)
                    && a.session.as_ref().is_some_and(|(s, _)| *s == session)
                {
                    info!(agent = %agent_id, "agent stream closed");
                    a.session = None;
                    self.fleet_changed = true;
                    self.idle.remove(&agent_id);
                }
            }
            Event::Submit {
                matrix,
                file_name,
                source,
                traceparent,
                reply,
            } => {
                let r = if matrix.schedule.is_some() {
                    self.create_schedule(*matrix, file_name, source)
                } else {
                    self.submit_matrix(*matrix, file_name, source, &traceparent, None)
                };
                self.reply(reply, Ok(r));
            }
            Event::Status { matrix_id, reply } => {
                let r = self
                    .status(&matrix_id)
                    .ok_or_else(|| unknown_matrix(&matrix_id));
                self.reply(reply, r);
            }
            Event::Watch { matrix_id, reply } => {
                // Statuses go out only after the batch is committed; the new
                // watcher gets a fresh one then, whatever the throttle says.
                let r = match self.matrices.get_mut(&matrix_id) {
                    Some(m) => {
                        m.dirty = true;
                        m.published = None;
                        Ok(m.status.subscribe())
                    }
                    None => Err(unknown_matrix(&matrix_id)),
                };
                self.reply(reply, r);
            }
            Event::ListAgents { reply } => {
                let r = self.list_agents();
                self.reply(reply, Ok(r));
            }
            Event::Cancel { matrix_id, reply } => {
                let r = self.cancel(&matrix_id);
                self.reply(reply, r);
            }
            Event::Results { matrix_id, reply } => {
                let r = self.results(&matrix_id);
                self.reply(reply, r);
            }
            Event::CronDue { schedule_id, at_ms } => self.cron_due(&schedule_id, at_ms),
            Event::ListSchedules { reply } => {
                let r = self.list_schedules();
                self.reply(reply, Ok(r));
            }
            Event::CancelSchedule { schedule_id, reply } => {
                let r = self.cancel_schedule(&schedule_id);
                self.reply(reply, r);
            }
            Event::Tick => {
                self.expire_leases();
                self.ticked = true;
            }
        }
    }

    fn register(&mut self, capabilities: Capabilities, resume: String) -> String {
        let now = now_ms();
        let id = if !resume.is_empty() && self.agents.contains_key(&resume) {
            resume
        } else {
            random_id("a")
        };
        info!(agent = %id, host = %capabilities.hostname, arch = %capabilities.arch,
              kernel = %capabilities.kernel_release, cpus = capabilities.cpus_online, "agent registered");
        let lease = self.lease();
        let a = self.agents.entry(id.clone()).or_insert_with(|| Agent {
            capabilities: Capabilities::default(),
            registered_ms: now,
            session: None,
            current: None,
            lease_until: Instant::now() + lease,
            last_seen_ms: now,
        });
        a.capabilities = capabilities;
        a.last_seen_ms = now;
        self.fleet_changed = true;
        self.ops.push(Op::PutAgent(Box::new(AgentRecord {
            agent_id: id.clone(),
            capabilities: a.capabilities.clone(),
            registered_ms: a.registered_ms,
        })));
        let caps = a.capabilities.clone();
        self.catalogue_changed(&caps);
        id
    }

    /// An agent's catalogue changed while it was connected (a kernel
    /// appeared, KVM found to work): placement and triggers see it at once.
    /// Only the catalogue is taken; what the agent registered as (arch,
    /// CPUs, ...) was checked at `Register` and stays.
    fn capabilities_changed(&mut self, agent_id: &str, fresh: Capabilities) {
        let Some(a) = self.agents.get_mut(agent_id) else {
            return;
        };
        let mut caps = a.capabilities.clone();
        caps.guest_kernels = fresh.guest_kernels;
        caps.guest_accelerators = fresh.guest_accelerators;
        caps.executors = fresh.executors;
        info!(agent = %agent_id, guest_kernels = caps.guest_kernels.len(),
              executors = ?caps.executors, "agent catalogue changed");
        a.capabilities = caps.clone();
        self.fleet_changed = true;
        self.ops.push(Op::PutAgent(Box::new(AgentRecord {
            agent_id: agent_id.to_owned(),
            capabilities: caps.clone(),
            registered_ms: a.registered_ms,
        })));
        self.catalogue_changed(&caps);
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(u64::from(self.config.lease_ms))
    }

    fn session_open(&mut self, hello: Hello, session: u64, tx: AgentTx) -> Result<(), Status> {
        let lease = self.lease();
        let Some(a) = self.agents.get_mut(&hello.agent_id) else {
            return Err(Status::not_found(format!(
                "unknown agent id {}; call Register first",
                hello.agent_id
            )));
        };
        a.session = Some((session, tx));
        a.lease_until = Instant::now() + lease;
        self.fleet_changed = true;
        a.last_seen_ms = now_ms();
        let id = hello.agent_id.clone();
        let previous = a.current.take();
        let running = hello.running.filter(|r| !r.run_id.is_empty());
        if let Some(prev) = previous {
            let still_running = running.as_ref().is_some_and(|r| *r == prev);
            let pending = hello.pending_results.contains(&prev);
            if pending && running.is_none() {
                // Its result comes right after this hello; until it is in,
                // the agent stays busy and the lease still guards the run.
                if let Some(a) = self.agents.get_mut(&id) {
                    a.current = Some(prev);
                }
            } else if !still_running && !pending {
                // Lost with the agent's previous process: run it elsewhere now.
                info!(agent = %id, run = %prev.run_id, "agent no longer holds its run; re-queueing");
                self.requeue(&id, &prev.run_id, "its agent restarted");
            }
        }
        if let Some(r) = running {
            self.adopt(&id, r);
        }
        info!(agent = %id, "agent stream open");
        self.refresh_idle(&id);
        Ok(())
    }

    /// An agent says it is executing `r`: it is busy with it whatever we think.
    fn adopt(&mut self, agent_id: &str, r: RunRef) {
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.current = Some(r.clone());
        }
        let Some(run) = self.runs.get_mut(&r.run_id) else {
            self.outbox.push((agent_id.to_string(), cancel_msg(r)));
            return;
        };
        match run.rec.state {
            RunState::Queued => {
                // It was re-queued while the agent was away; it is back, so
                // let it finish rather than start the run again elsewhere.
                if let Some(q) = self.queues.get_mut(&(run.matrix_seq, run.rec.cell)) {
                    q.remove(&run.rec.seq);
                }
                run.rec.state = RunState::Assigned;
                run.rec.agent_id = agent_id.to_string();
                // The attempt the agent runs, so cancels and results match it.
                run.rec.attempt = r.attempt;
                self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
            }
            RunState::Assigned => {}
            RunState::Finished | RunState::Failed | RunState::Cancelled => {
                self.outbox.push((agent_id.to_string(), cancel_msg(r)));
            }
        }
    }

    fn refresh_idle(&mut self, agent_id: &str) {
        match self.agents.get(agent_id) {
            Some(a) if a.session.is_some() && a.current.is_none() => {
                self.idle.insert(agent_id.to_string());
            }
            _ => {
                self.idle.remove(agent_id);
            }
        }
    }

    fn on_agent_message(&mut self, agent_id: &str, msg: agent_message::Msg) {
        let lease = self.lease();
        let Some(a) = self.agents.get_mut(agent_id) else {
            return;
        };
        a.lease_until = Instant::now() + lease;
        a.last_seen_ms = now_ms();
        match msg {
            agent_message::Msg::Hello(_) => {
                warn!(agent = %agent_id, "second hello on a stream ignored");
            }
            agent_message::Msg::Heartbeat(_) => {}
            agent_message::Msg::Progress(p) => {
                debug!(agent = %agent_id, run = ?p.run, phase = %p.phase, "progress");
            }
            agent_message::Msg::Result(res) => self.result(agent_id, res),
            agent_message::Msg::Capabilities(caps) => self.capabilities_changed(agent_id, caps),
        }
    }

    fn result(&mut self, agent_id: &str, res: RunResult) {
        let Some(rref) = res.run.clone() else {
            warn!(agent = %agent_id, "result without a run reference dropped");
            return;
        };
        let ack = (agent_id.to_string(), ack_msg(rref.clone()));
        if let Some(a) = self.agents.get_mut(agent_id)
            && a.current.as_ref() == Some(&rref)
        {
            a.current = None;
        }
        self.refresh_idle(agent_id);
        let Some(run) = self.runs.get_mut(&rref.run_id) else {
            warn!(agent = %agent_id, run = %rref.run_id, "result for an unknown run dropped");
            self.outbox.push(ack);
            return;
        };
        if run.rec.state.is_terminal() {
            // A late or repeated delivery: the run already counts once.
            debug!(agent = %agent_id, run = %rref.run_id, attempt = rref.attempt, "duplicate result dropped");
            self.outbox.push(ack);
            return;
        }
        if run.rec.state == RunState::Queued
            && let Some(q) = self.queues.get_mut(&(run.matrix_seq, run.rec.cell))
        {
            q.remove(&run.rec.seq);
        }
        // Another agent may be running a later attempt: stop it.
        // Another copy may be running — elsewhere, or a later attempt on this
        // very agent: stop it.
        let other = (run.rec.state == RunState::Assigned
            && (run.rec.agent_id != agent_id || run.rec.attempt != rref.attempt))
            .then(|| (run.rec.agent_id.clone(), run.rec.attempt));
        run.rec.state = if res.ok {
            RunState::Finished
        } else {
            RunState::Failed
        };
        run.rec.agent_id = agent_id.to_string();
        run.rec.attempt = rref.attempt;
        if !res.ok {
            warn!(agent = %agent_id, run = %rref.run_id, error = %res.error, "run failed");
        }
        let duration = res.finished_unix_ms.saturating_sub(res.started_unix_ms) as f64 / 1e3;
        run.rec.result = Some(res);
        self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
        // The attempt's span ends once its result is on disk; the store
        // phase is the wait for that commit.
        let span = std::mem::replace(&mut run.span, Span::none());
        span.record(
            "outcome",
            if run.rec.state == RunState::Finished {
                "ok"
            } else {
                "failed"
            },
        );
        let store = info_span!(target: TARGET, parent: &span, "store");
        self.after_commit
            .push(Box::new(move || drop((store, span))));
        let matrix_id = run.rec.matrix_id.clone();
        let finished = run.rec.state == RunState::Finished;
        self.metrics
            .run_ended(finished, run.assigned_at.map(|t| t.elapsed()));
        if let Some((other, attempt)) = other {
            self.outbox.push((
                other,
                cancel_msg(RunRef {
                    run_id: rref.run_id.clone(),
                    attempt,
                }),
            ));
        }
        let cell = run.rec.cell;
        if let Some(m) = self.matrices.get_mut(&matrix_id) {
            m.dirty = true;
            if finished {
                m.durations_s.push(duration);
            }
        }
        self.outbox.push(ack);
        self.decide(&matrix_id, cell);
    }

    /// Once a cell and its baseline have no run left to wait for, compares
    /// them; when the comparison is inconclusive and the matrix allows more
    /// runs, queues more of both, alternating, the way Chromium's Pinpoint
    /// retries. Checks the cell as a candidate and as a baseline.
    fn decide(&mut self, matrix_id: &str, cell: u32) {
        let Some(m) = self.matrices.get(matrix_id) else {
            return;
        };
        if m.rec.cancelled {
            return;
        }
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        if let Some(b) = m.rec.cells.get(cell as usize).and_then(|c| c.baseline) {
            pairs.push((cell, b));
        }
        if let Some(candidates) = m.candidates.get(cell as usize) {
            pairs.extend(candidates.iter().map(|&c| (c, cell)));
        }
        let mut add: Vec<u32> = Vec::new();
        for (candidate, baseline) in pairs {
            let (Some(cand_ids), Some(base_ids)) = (
                m.by_cell.get(candidate as usize),
                m.by_cell.get(baseline as usize),
            ) else {
                continue;
            };
            let recs = |ids: &[String]| -> Vec<&RunRecord> {
                ids.iter()
                    .filter_map(|id| self.runs.get(id))
                    .map(|r| &r.rec)
                    .collect()
            };
            let (cand, base) = (recs(cand_ids), recs(base_ids));
            if cand.iter().chain(&base).any(|r| !r.state.is_terminal()) {
                continue;
            }
            let policy = results::policy(&m.rec.cells[candidate as usize]);
            // Room under the cap, counting runs this call already plans: a
            // baseline shared by several inconclusive candidates grows once.
            let planned = |c: u32| add.iter().filter(|&&a| a == c).count();
            let room = |n: usize, c: u32| (policy.max_runs as usize).saturating_sub(n + planned(c));
            if room(cand.len(), candidate) == 0 {
                continue;
            }
            let verdict = results::pair_verdict(&m.rec.cells[candidate as usize], &cand, &base);
            if verdict != Some(farm_analysis::compare::Verdict::Inconclusive) {
                continue;
            }
            // A round as large as the matrix's repetitions, within the cap,
            // on both sides, alternating.
            let round = (policy.repetitions.max(1) as usize).min(room(cand.len(), candidate));
            let base_round = round.min(room(base.len(), baseline));
            for k in 0..round {
                add.push(candidate);
                if k < base_round {
                    add.push(baseline);
                }
            }
            info!(matrix = %matrix_id, candidate, baseline, round, "inconclusive: adding runs");
        }
        for cell in add {
            self.add_run(matrix_id, cell);
        }
    }

    /// Queues one more run of `cell`, after every run the matrix has.
    fn add_run(&mut self, matrix_id: &str, cell: u32) {
        let Some(m) = self.matrices.get_mut(matrix_id) else {
            return;
        };
        let runs = &self.runs;
        let seq = m
            .runs
            .last()
            .and_then(|id| runs.get(id))
            .map_or(0, |r| r.rec.seq + 1);
        let Some(ids) = m.by_cell.get_mut(cell as usize) else {
            return;
        };
        let repetition = ids
            .iter()
            .filter_map(|id| runs.get(id))
            .map(|r| r.rec.repetition + 1)
            .max()
            .unwrap_or(0);
        let rec = RunRecord {
            run_id: format!("{matrix_id}.c{cell}.r{repetition}"),
            matrix_id: matrix_id.to_string(),
            cell,
            repetition,
            seq,
            state: RunState::Queued,
            attempt: 0,
            agent_id: String::new(),
            result: None,
        };
        ids.push(rec.run_id.clone());
        m.runs.push(rec.run_id.clone());
        m.dirty = true;
        self.queues
            .entry((m.rec.seq, cell))
            .or_default()
            .insert(seq, rec.run_id.clone());
        self.ops.push(Op::PutRun(Box::new(rec.clone())));
        self.runs.insert(
            rec.run_id.clone(),
            RunMem {
                rec,
                matrix_seq: m.rec.seq,
                assigned_at: None,
                queued_at: Instant::now(),
                span: Span::none(),
            },
        );
    }

    /// Puts a run that `agent_id` lost back in its queue, or fails it when it
    /// has used its attempts. A run meanwhile assigned to another agent is
    /// that agent's and is left alone.
    fn requeue(&mut self, agent_id: &str, run_id: &str, why: &str) {
        let max = self.config.max_attempts;
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        if run.rec.state != RunState::Assigned || run.rec.agent_id != agent_id {
            return;
        }
        if run.rec.attempt >= max {
            run.rec.state = RunState::Failed;
            run.rec.result = Some(RunResult {
                run: Some(RunRef {
                    run_id: run_id.to_string(),
                    attempt: run.rec.attempt,
                }),
                ok: false,
                error: format!("lost {} times ({why}); giving up", run.rec.attempt),
                ..Default::default()
            });
            self.metrics.run_ended(false, None);
        } else {
            run.rec.state = RunState::Queued;
            run.queued_at = Instant::now();
            self.queues
                .entry((run.matrix_seq, run.rec.cell))
                .or_default()
                .insert(run.rec.seq, run_id.to_string());
        }
        run.rec.agent_id.clear();
        run.assigned_at = None;
        run.span.record("outcome", "lost");
        run.span = Span::none();
        self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
        if let Some(m) = self.matrices.get_mut(&run.rec.matrix_id) {
            m.dirty = true;
        }
    }

    fn expire_leases(&mut self) {
        let now = Instant::now();
        let expired: Vec<String> = self
            .agents
            .iter()
            .filter(|(_, a)| a.lease_until < now && (a.current.is_some() || a.session.is_some()))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            let Some(a) = self.agents.get_mut(&id) else {
                continue;
            };
            warn!(agent = %id, run = ?a.current, "agent lease expired");
            if let Some((_, tx)) = a.session.take() {
                let _ = tx.send(Err(Status::unavailable("lease expired: no heartbeat")));
                self.fleet_changed = true;
            }
            if let Some(run) = a.current.take() {
                self.requeue(&id, &run.run_id, "its agent's lease expired");
            }
            self.idle.remove(&id);
        }
    }

    fn dispatch(&mut self) {
        if self.queues.is_empty() || self.idle.is_empty() {
            return;
        }
        let idle: Vec<String> = self.idle.iter().cloned().collect();
        for agent_id in idle {
            if self.queues.is_empty() {
                break;
            }
            let Some(run_id) = self.pick(&agent_id) else {
                continue;
            };
            self.assign(&agent_id, &run_id);
        }
    }

    /// The oldest queued run that this agent can serve.
    fn pick(&mut self, agent_id: &str) -> Option<String> {
        let caps = &self.agents.get(agent_id)?.capabilities;
        let mut best: Option<((u64, u32), u64)> = None;
        for (&(mseq, cell), q) in &self.queues {
            if let Some(((bseq, _), _)) = best
                && bseq != mseq
            {
                break;
            }
            let Some((&rseq, _)) = q.first_key_value() else {
                continue;
            };
            let m = self
                .by_seq
                .get(&mseq)
                .and_then(|id| self.matrices.get(id))?;
            let reqs = m.reqs.get(cell as usize)?;
            if placement::satisfies(reqs, caps) && best.is_none_or(|(_, s)| rseq < s) {
                best = Some(((mseq, cell), rseq));
            }
        }
        let (key, _) = best?;
        let q = self.queues.get_mut(&key)?;
        let (_, run_id) = q.pop_first()?;
        if q.is_empty() {
            self.queues.remove(&key);
        }
        Some(run_id)
    }

    fn assign(&mut self, agent_id: &str, run_id: &str) {
        let Some(run) = self.runs.get_mut(run_id) else {
            return;
        };
        let Some(m) = self.matrices.get_mut(&run.rec.matrix_id) else {
            return;
        };
        let Some(cell) = m.rec.cells.get(run.rec.cell as usize) else {
            return;
        };
        run.rec.state = RunState::Assigned;
        run.rec.attempt += 1;
        run.rec.agent_id = agent_id.to_string();
        run.assigned_at = Some(Instant::now());
        let queued = run.queued_at.elapsed();
        self.metrics.run_assigned(queued);
        run.span = info_span!(target: TARGET, parent: &m.span, "run", run = %run_id,
            attempt = run.rec.attempt, cell = run.rec.cell, agent = %agent_id,
            outcome = tracing::field::Empty);
        // Placement is decided by the time the span exists: the phase
        // records who got it and how long the run waited in the queue.
        drop(
            info_span!(target: TARGET, parent: &run.span, "placement", agent = %agent_id,
            queued_ms = queued.as_millis() as u64),
        );
        let msg = CoordinatorMessage {
            msg: Some(coordinator_message::Msg::Assign(RunAssignment {
                run: Some(RunRef {
                    run_id: run_id.to_string(),
                    attempt: run.rec.attempt,
                }),
                matrix_id: m.rec.id.clone(),
                cell_index: run.rec.cell,
                repetition: run.rec.repetition,
                kernel: cell.kernel.clone(),
                workload: cell.workload.clone(),
                state: cell.state.clone(),
                executor: cell
                    .host
                    .as_ref()
                    .map(|h| h.executor.clone())
                    .unwrap_or_default(),
                timeout_s: m.rec.timeout_s,
                loads: cell.loads.clone(),
                guest: cell.guest,
                traceparent: trace::traceparent(&run.span),
            })),
        };
        m.dirty = true;
        debug!(agent = %agent_id, run = %run_id, attempt = run.rec.attempt, "assigned");
        self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
        self.outbox.push((agent_id.to_string(), msg));
        if let Some(a) = self.agents.get_mut(agent_id) {
            a.current = Some(RunRef {
                run_id: run_id.to_string(),
                attempt: run.rec.attempt,
            });
        }
        self.idle.remove(agent_id);
    }

    fn submit_matrix(
        &mut self,
        matrix: Matrix,
        file_name: String,
        source: String,
        traceparent: &str,
        execution: Option<store::Execution>,
    ) -> SubmitMatrixResponse {
        let id = random_id("m");
        let seq = self.next_seq;
        self.next_seq += 1;
        let runs: Vec<RunRecord> = crate::matrix::runs(&matrix)
            .into_iter()
            .map(|r| RunRecord {
                run_id: format!("{id}.c{}.r{}", r.cell_index, r.repetition),
                matrix_id: id.clone(),
                cell: r.cell_index,
                repetition: r.repetition,
                seq: r.seq,
                state: RunState::Queued,
                attempt: 0,
                agent_id: String::new(),
                result: None,
            })
            .collect();
        let rec = MatrixRecord {
            id: id.clone(),
            seq,
            name: matrix.name,
            file_name,
            source,
            submitted_ms: now_ms(),
            timeout_s: matrix.timeout_s,
            cancelled: false,
            cells: matrix.cells,
            execution,
        };
        let response = SubmitMatrixResponse {
            matrix_id: id.clone(),
            cells: rec.cells.len() as u32,
            runs: runs.len() as u32,
            ..Default::default()
        };
        info!(matrix = %id, name = %rec.name, cells = response.cells, runs = response.runs, "matrix submitted");
        self.ops
            .push(Op::PutMatrix(Box::new(rec.clone()), runs.clone()));
        self.insert_matrix(rec);
        if let Some(m) = self.matrices.get_mut(&id) {
            let span = info_span!(target: TARGET, "matrix", matrix = %id, name = %m.rec.name,
                cells = response.cells, runs = response.runs, state = tracing::field::Empty);
            trace::set_parent(&span, traceparent);
            m.span = span;
        }
        for r in runs {
            self.queues
                .entry((seq, r.cell))
                .or_default()
                .insert(r.seq, r.run_id.clone());
            if let Some(m) = self.matrices.get_mut(&id) {
                m.runs.push(r.run_id.clone());
                if let Some(c) = m.by_cell.get_mut(r.cell as usize) {
                    c.push(r.run_id.clone());
                }
            }
            self.runs.insert(
                r.run_id.clone(),
                RunMem {
                    rec: r,
                    matrix_seq: seq,
                    assigned_at: None,
                    queued_at: Instant::now(),
                    span: Span::none(),
                },
            );
        }
        response
    }

    fn cancel(&mut self, matrix_id: &str) -> Result<u32, Status> {
        let m = self
            .matrices
            .get(matrix_id)
            .ok_or_else(|| unknown_matrix(matrix_id))?;
        if !self.has_unended_runs(m) {
            // An ended matrix stays as it ended.
            return Ok(0);
        }
        let m = self
            .matrices
            .get_mut(matrix_id)
            .expect("looked up just above");
        m.rec.cancelled = true;
        m.dirty = true;
        let seq = m.rec.seq;
        let ids = m.runs.clone();
        self.ops.push(Op::CancelMatrix(matrix_id.to_string()));
        let mut n = 0;
        for id in ids {
            let Some(run) = self.runs.get_mut(&id) else {
                continue;
            };
            match run.rec.state {
                RunState::Queued => {}
                RunState::Assigned => {
                    let r = RunRef {
                        run_id: id.clone(),
                        attempt: run.rec.attempt,
                    };
                    self.outbox.push((run.rec.agent_id.clone(), cancel_msg(r)));
                }
                _ => continue,
            }
            run.rec.state = RunState::Cancelled;
            run.span.record("outcome", "cancelled");
            run.span = Span::none();
            self.ops.push(Op::PutRun(Box::new(run.rec.clone())));
            n += 1;
        }
        self.queues.retain(|(mseq, _), _| *mseq != seq);
        info!(matrix = %matrix_id, runs = n, "matrix cancelled");
        Ok(n)
    }

    fn status(&self, matrix_id: &str) -> Option<MatrixStatus> {
        let m = self.matrices.get(matrix_id)?;
        let mut cells: Vec<CellStatus> = m
            .rec
            .cells
            .iter()
            .map(|c| CellStatus {
                cell: Some(c.clone()),
                counts: Some(RunCounts::default()),
                waiting_reason: String::new(),
            })
            .collect();
        let mut total = RunCounts::default();
        for id in &m.runs {
            let Some(run) = self.runs.get(id) else {
                continue;
            };
            let Some(c) = cells
                .get_mut(run.rec.cell as usize)
                .and_then(|c| c.counts.as_mut())
            else {
                continue;
            };
            for counts in [c, &mut total] {
                counts.total += 1;
                match run.rec.state {
                    RunState::Queued => counts.queued += 1,
                    RunState::Assigned => counts.running += 1,
                    RunState::Finished => counts.finished += 1,
                    RunState::Failed => counts.failed += 1,
                    RunState::Cancelled => counts.cancelled += 1,
                }
            }
        }
        let connected: Vec<&Capabilities> = self
            .agents
            .values()
            .filter(|a| a.session.is_some())
            .map(|a| &a.capabilities)
            .collect();
        // Many cells share requirements; explain each distinct set once.
        let mut reasons: HashMap<&[Requirement], Option<String>> = HashMap::new();
        for (i, c) in cells.iter_mut().enumerate() {
            if c.counts.as_ref().is_some_and(|k| k.queued > 0) {
                let reqs = m.reqs[i].as_slice();
                let reason = reasons
                    .entry(reqs)
                    .or_insert_with(|| placement::waiting_reason(reqs, connected.iter().copied()));
                c.waiting_reason = reason.clone().unwrap_or_default();
            }
        }
        let state = if m.rec.cancelled {
            MatrixState::Cancelled
        } else if total.queued + total.running == 0 {
            MatrixState::Done
        } else {
            MatrixState::Running
        };
        Some(MatrixStatus {
            matrix_id: m.rec.id.clone(),
            name: m.rec.name.clone(),
            state: state as i32,
            counts: Some(total),
            cells,
            submitted_unix_ms: m.rec.submitted_ms,
            median_run_seconds: farm_analysis::median(&m.durations_s).unwrap_or(0.0),
            schedule_id: m
                .rec
                .execution
                .as_ref()
                .map(|e| e.schedule_id.clone())
                .unwrap_or_default(),
        })
    }

    /// Sends fresh statuses to watchers of changed matrices, at most every
    /// [`PUBLISH_EVERY`] while a matrix runs, and at once when it ends.
    fn publish(&mut self, tick: bool) {
        let mut just_done = Vec::new();
        let dirty: Vec<String> = self
            .matrices
            .iter()
            .filter(|(_, m)| m.dirty)
            .map(|(id, _)| id.clone())
            .collect();
        for id in dirty {
            let Some(st) = self.status(&id) else { continue };
            let Some(m) = self.matrices.get_mut(&id) else {
                continue;
            };
            let ended = st.state != MatrixState::Running as i32;
            if ended || tick || m.published.is_none_or(|t| t.elapsed() >= PUBLISH_EVERY) {
                if ended && m.status.borrow().state == MatrixState::Running as i32 {
                    info!(matrix = %id, state = ?MatrixState::try_from(st.state).ok(), "matrix ended");
                }
                if ended {
                    let state = if m.rec.cancelled { "cancelled" } else { "done" };
                    m.span.record("state", state);
                    m.span = Span::none();
                }
                let done = MatrixState::Done as i32;
                if st.state == done && m.status.borrow().state != done {
                    just_done.push(id.clone());
                }
                self.metrics
                    .run_counts_changed(m.status.borrow().counts.as_ref(), st.counts.as_ref());
                m.status.send_replace(st);
                m.dirty = false;
                m.published = Some(Instant::now());
            }
        }
        // After the statuses: a watcher is not kept waiting for the summaries.
        for id in just_done {
            self.matrix_done_metrics(&id);
        }
    }

    fn list_agents(&self) -> Vec<AgentInfo> {
        let mut out: Vec<AgentInfo> = self
            .agents
            .iter()
            .map(|(id, a)| AgentInfo {
                agent_id: id.clone(),
                capabilities: Some(a.capabilities.clone()),
                connected: a.session.is_some(),
                current_run: a
                    .current
                    .as_ref()
                    .map(|r| r.run_id.clone())
                    .unwrap_or_default(),
                last_seen_unix_ms: a.last_seen_ms,
            })
            .collect();
        out.sort_by(|a, b| a.agent_id.cmp(&b.agent_id));
        out
    }

    fn results(&self, matrix_id: &str) -> Result<GetResultsResponse, Status> {
        let m = self
            .matrices
            .get(matrix_id)
            .ok_or_else(|| unknown_matrix(matrix_id))?;
        let runs = self.ended_runs(m);
        let histories = self.histories(m);
        Ok(GetResultsResponse {
            status: self.status(matrix_id),
            cells: results::summarise(&m.rec.cells, &runs, histories),
            runs: runs
                .iter()
                .map(|r| farm_proto::RunRecord {
                    run_id: r.run_id.clone(),
                    cell_index: r.cell,
                    repetition: r.repetition,
                    agent_id: r.agent_id.clone(),
                    result: r.result.clone(),
                })
                .collect(),
        })
    }
}

impl Scheduler {
    /// Whether any of the matrix's runs is still queued, assigned or running.
    fn has_unended_runs(&self, m: &MatrixMem) -> bool {
        m.runs
            .iter()
            .filter_map(|id| self.runs.get(id))
            .any(|r| !r.rec.state.is_terminal())
    }

    /// The matrix's runs that have a result (finished or failed).
    fn ended_runs(&self, m: &MatrixMem) -> Vec<&RunRecord> {
        m.runs
            .iter()
            .filter_map(|id| self.runs.get(id))
            .map(|r| &r.rec)
            .filter(|r| matches!(r.state, RunState::Finished | RunState::Failed))
            .collect()
    }

    /// Each cell's history: the same cell (workload, state, loads, host
    /// class; any kernel, any name) in every matrix, oldest first, and by
    /// cell order within a matrix (kernel-major, so a kernel axis reads in
    /// the order the file gave).
    /// A series shared by several cells of `m` (they differ only in their
    /// kernel) is given to the first of them.
    fn histories(&self, m: &MatrixMem) -> Vec<Vec<farm_proto::History>> {
        let keys: Vec<Vec<u8>> = m.rec.cells.iter().map(series_key).collect();
        let mut given: HashSet<&[u8]> = HashSet::new();
        keys.iter()
            .map(|key| {
                if !given.insert(key.as_slice()) {
                    return Vec::new();
                }
                let mut cells: Vec<(u64, &MatrixMem, u32)> = self
                    .series
                    .get(key)
                    .into_iter()
                    .flatten()
                    .filter_map(|&(seq, index)| {
                        let mm = self.by_seq.get(&seq).and_then(|id| self.matrices.get(id))?;
                        Some((seq, mm, index))
                    })
                    .collect();
                cells.sort_by_key(|(seq, _, index)| (*seq, *index));
                let series: Vec<results::SeriesCell<'_>> = cells
                    .iter()
                    .map(|(_, mm, index)| results::SeriesCell {
                        matrix_id: mm.rec.id.clone(),
                        submitted_ms: mm.rec.submitted_ms,
                        kernel: mm.rec.cells[*index as usize].kernel.clone(),
                        runs: mm.by_cell[*index as usize]
                            .iter()
                            .filter_map(|id| self.runs.get(id))
                            .map(|r| &r.rec)
                            .collect(),
                    })
                    .collect();
                results::histories(&series)
            })
            .collect()
    }
}

/// What makes two cells of different matrices points of one series: the
/// workload and its parameters, the machine state, the competing loads and
/// the host selector, without the names a file gives states and hosts.
fn series_key(cell: &farm_proto::Cell) -> Vec<u8> {
    use prost::Message;
    let mut state = cell.state.clone().unwrap_or_default();
    state.name.clear();
    let mut host = cell.host.clone().unwrap_or_default();
    host.name.clear();
    // A guest kernel's arch and machine are part of what a point measures:
    // an s390x figure does not continue an x86_64 trend.
    let guest_arch = match crate::matrix::kernel_kind(&cell.kernel) {
        crate::matrix::KernelKind::Debian { arch } => arch.as_bytes().to_vec(),
        // Its arch is the image's: a series of its own, never the host's.
        crate::matrix::KernelKind::File => b"file".to_vec(),
        _ => Vec::new(),
    };
    let mut key = Vec::new();
    for part in [
        cell.workload.clone().unwrap_or_default().encode_to_vec(),
        state.encode_to_vec(),
        host.encode_to_vec(),
        guest_arch,
        cell.guest.unwrap_or_default().encode_to_vec(),
        // New kernels of a trigger trend apart from a file's fixed kernels,
        // which run again beside each of them.
        vec![u8::from(cell.new_kernel)],
        cell.loads
            .iter()
            .flat_map(|l| l.encode_length_delimited_to_vec())
            .collect(),
    ] {
        key.extend((part.len() as u32).to_le_bytes());
        key.extend(part);
    }
    key
}

fn unknown_matrix(id: &str) -> Status {
    Status::not_found(format!("no matrix {id}"))
}

fn ack_msg(r: RunRef) -> CoordinatorMessage {
    CoordinatorMessage {
        msg: Some(coordinator_message::Msg::Ack(r)),
    }
}

fn cancel_msg(r: RunRef) -> CoordinatorMessage {
    CoordinatorMessage {
        msg: Some(coordinator_message::Msg::Cancel(r)),
    }
}

mod continuous;
mod observe;
pub use continuous::CronEntry;
use continuous::ScheduleMem;
#[cfg(test)]
mod tests;
