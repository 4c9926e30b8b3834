//! The scheduler: one event loop that owns all coordinator state.
//!
//! gRPC handlers never touch state; they send an [`Event`] through a
//! [`Handle`] and await a reply. The loop runs on a thread of its own because
//! it does blocking SQLite commits: it takes every event that is waiting (a
//! batch), applies them in memory, pushes runs to idle agents, commits the
//! batch's store operations in one transaction, and only then sends replies,
//! acknowledgements and assignments. Nothing anyone was told is ever ahead of
//! the disk, and one fsync serves a whole batch.
//!
//! This file holds the [`Scheduler`] struct, the loop, the commit and
//! `handle`, which only dispatches each event to the method of its
//! concern. Below it: `reply` (replies, errors, agents' streams), `clock`,
//! `state` (what each feature keeps, one module each, with its events),
//! `event` (every [`Event`]) and `worker` (the results worker's thread).
//! Above it, each part adds an `impl Scheduler` that drives its state and
//! the core's (no part imports another's state to change it):
//! - `agents`: registration, sessions, catalogue changes, the idle set;
//! - `leases`: silent agents lose their runs, which are queued again;
//! - `dispatch`: idle agents get the oldest run they can serve;
//! - `ingest`: results from agents end their runs;
//! - `activity`: what running attempts report doing (kernel builds), and
//!   run and build times for ETAs;
//! - `reruns`: inconclusive comparisons get more runs;
//! - `matrices`: submission, cancellation, status, publishing;
//! - `results`: summaries computed off this thread, cached per matrix;
//! - `histories`: cells by series and each cell's history;
//! - `archive`: ended matrices leave for the archive;
//! - `recovery`: memory rebuilt from the store at start-up;
//! - `schedule`: schedules and their executions;
//! - `bisection`, with `ranges` (git ranges listed by agents): bisections;
//! - `provenance`: messages accepted only from the identity they concern;
//! - `observe`: what the metrics are told;
//! - `outbox`: messages to agents, and agents too slow to read them.
//!
//! A scheduler part is named as the pure-logic room it drives and as the
//! state it keeps (`crate::results`, `results` and `state::results`;
//! `crate::archive`, `archive` and `state::archive`; `crate::bisection`,
//! `bisection` and `state::bisection`; `crate::schedule`, `schedule` and
//! `state::schedule`).
//!
//! Backpressure, and why it cannot deadlock. Every channel is bounded:
//! events ([`EVENT_CAPACITY`]), each agent's stream
//! ([`AGENT_OUTBOX_CAPACITY`]) and the results worker's jobs
//! (`results::RESULTS_QUEUE_CAPACITY`). The rule is that only the
//! scheduler thread is ever waited for, and it waits for nothing but the
//! store:
//! - gRPC handlers, the ticker and the cron driver `send().await` into the
//!   event channel: when it is full they wait, so a flood is slowed where it
//!   enters (HTTP/2 flow control then slows the client). A `Tick` or a
//!   `CronDue` waits like any event, and is never dropped; a tick delayed
//!   by a full channel finds leases checked by the batch it lands in.
//! - The results worker, a plain thread, `blocking_send`s `Summarised`.
//! - The scheduler thread never sends to itself and never waits for room:
//!   it reserves the worker's slots with `try_reserve` when it handles a
//!   request (refusing `GetResults` with [`Error::Busy`] when there are
//!   none, keeping an ended matrix to summarise at a later batch), and it
//!   checks each agent's room before its batch is committed: an agent that
//!   cannot take the batch's messages is too slow, and its session is
//!   closed as when its lease expires (its run re-queued). A slow agent
//!   slows nobody else.
//!
//! So every wait is for the scheduler thread, which drains its channel
//! whatever the others do: no cycle of waits exists.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use farm_proto::{Capabilities, CoordinatorMessage, MatrixStatus};
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{Span, debug};

use crate::eligibility::Requirement;
use crate::identity::Name;
use crate::ids::{AgentId, Attempt, CellIndex, MatrixId, RunId};
use crate::metrics::Metrics;
use crate::store::{Backend, MatrixRecord, Op, RunRecord};

/// The most events applied before a commit; bounds the latency of a batch.
const MAX_BATCH: usize = 4096;
/// The events waiting for the scheduler thread, at most. Senders wait for
/// room (see "Backpressure" above): a flood of RPCs is throttled where it
/// enters, and the events of a full channel are at most two batches' work.
pub const EVENT_CAPACITY: usize = 1024;
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
    /// A registered agent without a stream or a run for this long is
    /// forgotten (memory and store): hosts come and go, and a fleet's
    /// agent table must not grow for ever. It registers anew if it returns.
    pub agent_expiry_ms: u64,
}

/// One week: an agent down for maintenance over a weekend is still known.
pub const DEFAULT_AGENT_EXPIRY_MS: u64 = 7 * 24 * 3600 * 1000;

impl Default for Config {
    fn default() -> Config {
        Config {
            heartbeat_ms: 1_000,
            lease_ms: 5_000,
            max_attempts: 3,
            metrics_series_limit: crate::metrics::DEFAULT_SERIES_LIMIT,
            agent_expiry_ms: DEFAULT_AGENT_EXPIRY_MS,
        }
    }
}

/// A cheap, cloneable way to talk to the scheduler.
#[derive(Clone)]
pub struct Handle {
    tx: mpsc::Sender<Event>,
    pub config: Config,
    /// The schedules with a cron, republished after every commit that
    /// changes them; `crate::cron` waits on it.
    pub crons: watch::Receiver<Vec<CronEntry>>,
    /// Why the thread stopped or is stopping, when that is not a plain
    /// stop: set before the event channel and the pending replies are
    /// dropped, so that every caller still waiting, and every later one,
    /// hears it ([`Error::Stopped`]) instead of [`Error::ShuttingDown`].
    pub(crate) stopped: Arc<OnceLock<String>>,
}

impl Handle {
    /// Sends an event, waiting for room in the channel ([`EVENT_CAPACITY`]).
    pub async fn send(&self, ev: Event) -> Result<(), Error> {
        self.tx.send(ev).await.map_err(|_| self.gone())
    }

    /// Sends an event if there is room now, for tests that drive the
    /// scheduler from a blocking context.
    #[cfg(test)]
    pub(crate) fn try_send(&self, ev: Event) -> Result<(), Error> {
        self.tx.try_send(ev).map_err(|_| self.gone())
    }

    /// Sends the event built around a fresh reply channel and awaits the reply.
    pub async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Event) -> Result<T, Error> {
        let (reply, rx) = oneshot::channel();
        self.send(make(reply)).await?;
        rx.await.map_err(|_| self.gone())?
    }

    /// Says why the scheduler stops, to everyone it will not answer
    /// (`Error::Stopped`); the first reason given is kept. Its thread
    /// gives the commit that failed; a leader whose term ended otherwise
    /// gives that before it stops it (`server::ha`).
    pub fn stopping_because(&self, why: String) {
        let _ = self.stopped.set(why);
    }

    /// Why the scheduler stopped, if [`Handle::stopping_because`] was told.
    pub fn stopped_because(&self) -> Option<&str> {
        self.stopped.get().map(String::as_str)
    }

    /// What a caller the scheduler will not answer is told.
    fn gone(&self) -> Error {
        match self.stopped.get() {
            Some(why) => Error::Stopped(why.clone()),
            None => Error::ShuttingDown,
        }
    }
}

struct Agent {
    capabilities: Capabilities,
    /// The certificate name this agent id is bound to, until the agent is
    /// forgotten (`Config::agent_expiry_ms`); `None`
    /// for an agent that registered with a token.
    identity: Option<Name>,
    registered_ms: u64,
    /// The open stream, with the number that tells it from earlier ones.
    session: Option<(u64, AgentTx)>,
    /// The attempt this agent is executing (or whose result it is about to
    /// deliver); it is busy until it reports that very attempt.
    current: Option<Attempt>,
    lease_until: Instant,
    last_seen_ms: u64,
}

struct MatrixMem {
    rec: MatrixRecord,
    /// Requirements per cell, computed once: the dispatch loop checks them often.
    reqs: Vec<Vec<Requirement>>,
    /// Each cell's build by its catalogue name (`git:` kernels): agents
    /// that keep it are preferred.
    built: Vec<Option<String>>,
    /// Run ids in dispatch order.
    runs: Vec<RunId>,
    /// Run ids of each cell, in dispatch order: comparisons look at a cell
    /// and its baseline without scanning the matrix.
    by_cell: Vec<Vec<RunId>>,
    /// The cells compared with each cell, computed once: every result looks
    /// them up, and scanning a 10,000-cell matrix per result would be on
    /// the dispatch path.
    candidates: Vec<Vec<CellIndex>>,
    status: watch::Sender<MatrixStatus>,
    dirty: bool,
    /// When watchers last got a status; `None` until the first one.
    published: Option<Instant>,
    /// Durations of finished runs, their builds left out, for ETAs
    /// (`activity::run_seconds`).
    durations_s: Vec<f64>,
    /// Durations of the builds finished runs made, for ETAs.
    build_durations_s: Vec<f64>,
    /// Each cell's `series_key`, computed once: every ended run looks up
    /// the matrices that share its series.
    series_keys: Vec<Vec<u8>>,
    /// What the results feature keeps of it (`state::results::Versions`).
    results: state::results::Versions,
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
    /// Every (agent, attempt) this run was leased to: only their messages
    /// about it count (`provenance`), a late result of a lost attempt
    /// included. As long as its attempts (`max_attempts`, plus the rare
    /// adoption of a run back from an agent that lost it).
    holders: Vec<(AgentId, u32)>,
    /// What its holder last said it does (its kernel's build), in memory
    /// only (`activity`).
    activity: Option<state::activity::Activity>,
}

struct Scheduler {
    store: Box<dyn Backend>,
    config: Config,
    agents: HashMap<AgentId, Agent>,
    /// Agents with an open stream and no run: the only ones dispatch looks at.
    idle: BTreeSet<AgentId>,
    matrices: HashMap<MatrixId, MatrixMem>,
    /// Stored matrices whose cells no longer convert (`store::Unreadable`),
    /// by id, with why: failed for every caller, left in the store as they
    /// are, and out of every other path (dispatch, histories, archiving).
    unreadable: BTreeMap<MatrixId, String>,
    by_seq: BTreeMap<u64, MatrixId>,
    next_seq: u64,
    runs: HashMap<RunId, RunMem>,
    /// Queued runs per (matrix seq, cell), by run seq: older matrices first,
    /// and within a matrix the repetition-major order of the expansion.
    queues: BTreeMap<(u64, CellIndex), BTreeMap<u64, RunId>>,
    /// A tick arrived in this batch: publish every changed matrix after it.
    ticked: bool,
    // Effects of the current batch, released only after it is committed.
    ops: Vec<Op>,
    outbox: Vec<(AgentId, CoordinatorMessage)>,
    after_commit: Vec<Box<dyn FnOnce() + Send>>,
    metrics: Metrics,
    /// An agent connected, left or re-registered: the fleet gauge is redone
    /// at the next tick (not per event: thousands may connect at once).
    fleet_changed: bool,
    series: state::histories::Series,
    schedules: state::schedule::Schedules,
    bisections: state::bisection::Bisections,
    /// Git ranges asked of agents, by request id.
    listings: state::ranges::Listings,
    summaries: worker::Worker,
    rejections: state::provenance::Rejections,
    /// A `StepDown` arrived: the loop ends after this batch.
    stepping_down: bool,
    archiving: state::archive::State,
}

/// Starts the scheduler thread on a store and returns the handle to it.
pub fn spawn(
    store: impl Backend + 'static,
    archive: crate::archive::Location,
    config: Config,
) -> Result<(Handle, std::thread::JoinHandle<Result<(), Error>>), Error> {
    spawn_with(
        store,
        archive,
        config,
        Metrics::new(config.metrics_series_limit),
    )
}

/// [`spawn`], keeping `metrics` up to date (its registry is what a
/// `/metrics` endpoint serves).
pub fn spawn_with(
    store: impl Backend + 'static,
    archive: crate::archive::Location,
    config: Config,
    metrics: Metrics,
) -> Result<(Handle, std::thread::JoinHandle<Result<(), Error>>), Error> {
    // The worker's end is weak: the scheduler stops once every handle is gone.
    let (tx, mut rx) = mpsc::channel(EVENT_CAPACITY);
    let summaries = worker::Worker::spawn(metrics.results_gauges(), tx.downgrade(), archive);
    let mut s = Scheduler {
        store: Box::new(store),
        config,
        agents: HashMap::new(),
        idle: BTreeSet::new(),
        matrices: HashMap::new(),
        unreadable: BTreeMap::new(),
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
        series: state::histories::Series::default(),
        schedules: state::schedule::Schedules::new(),
        bisections: state::bisection::Bisections::default(),
        listings: state::ranges::Listings::default(),
        summaries,
        rejections: state::provenance::Rejections::default(),
        stepping_down: false,
        archiving: state::archive::State::default(),
    };
    s.recover()?;
    let crons = s.schedules.crons();
    let stopped = Arc::new(OnceLock::new());
    let why = Arc::clone(&stopped);
    let thread = std::thread::Builder::new()
        .name("scheduler".into())
        .spawn(move || {
            let result = s.run(&mut rx);
            if let Err(e) = &result {
                tracing::error!("scheduler stopped: {e}");
                let _ = why.set(match e {
                    Error::Store(s) => match s.lost_leadership() {
                        Some(cause) => format!("leadership lost: {cause}"),
                        None => format!("the scheduler stopped: {e}"),
                    },
                    e => format!("the scheduler stopped: {e}"),
                });
            }
            // Only now are the callers it did not answer let go: they
            // find the reason set.
            drop((s, rx));
            result
        })
        .expect("spawning the scheduler thread");
    Ok((
        Handle {
            tx,
            config,
            crons,
            stopped,
        },
        thread,
    ))
}

impl Scheduler {
    fn run(&mut self, rx: &mut mpsc::Receiver<Event>) -> Result<(), Error> {
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
            self.close_slow_sessions();
            self.commit()?;
            // After the commit: nobody is shown what is not on disk.
            let ticked = std::mem::take(&mut self.ticked);
            self.publish(ticked);
            if ticked && std::mem::take(&mut self.fleet_changed) {
                self.refresh_fleet_metrics();
            }
            self.summarise_pending();
            if self.stepping_down {
                tracing::info!("the scheduler stops: this coordinator no longer leads");
                break;
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
        self.schedules.publish();
        self.deliver();
        for f in self.after_commit.drain(..) {
            f();
        }
        Ok(())
    }

    /// The periodic tick: leases are checked, and every changed matrix is
    /// published after this batch whatever the throttle says.
    fn tick(&mut self) {
        self.expire_leases();
        self.forget_absent_agents();
        self.summarise_retries();
        self.archive_ended();
        self.expire_listings();
        self.ticked = true;
    }

    fn reply<T: Send + 'static>(&mut self, reply: Reply<T>, value: Result<T, Error>) {
        self.after_commit.push(Box::new(move || {
            let _ = reply.send(value);
        }));
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            Event::Register {
                capabilities,
                resume_agent_id,
                identity,
                reply,
            } => {
                let id = self.register(*capabilities, resume_agent_id, identity);
                self.reply(reply, id);
            }
            Event::SessionOpen {
                agent_id,
                hello,
                identity,
                session,
                tx,
                reply,
            } => {
                let r = self.session_open(agent_id, hello, identity.as_ref(), session, tx);
                self.reply(reply, r);
            }
            Event::FromAgent {
                agent_id,
                msg,
                permit,
            } => {
                self.on_agent_message(&agent_id, *msg);
                drop(permit);
            }
            Event::SessionClosed { agent_id, session } => self.session_closed(&agent_id, session),
            Event::Submit {
                matrix,
                file_name,
                source,
                traceparent,
                reply,
            } => {
                let r = self
                    .fits_store(&matrix, &file_name, &source)
                    .map(|()| self.submit(*matrix, file_name, source, &traceparent));
                self.reply(reply, r);
            }
            Event::Status { matrix_id, reply } => {
                let r = self
                    .status(&matrix_id)
                    .ok_or_else(|| self.unknown_matrix(&matrix_id));
                self.reply(reply, r);
            }
            Event::Watch { matrix_id, reply } => {
                let r = self.watch(&matrix_id);
                let r = r.map_err(|e| self.unreadable_or(&matrix_id, e));
                self.reply(reply, r);
            }
            Event::ListAgents { reply } => {
                let r = self.list_agents();
                self.reply(reply, Ok(r));
            }
            Event::Cancel { matrix_id, reply } => {
                let r = self.cancel(&matrix_id);
                let r = r.map_err(|e| self.unreadable_or(&matrix_id, e));
                self.reply(reply, r);
            }
            Event::Results(ev) => self.on_results(ev),
            Event::Archive(ev) => self.on_archive(ev),
            Event::Schedule(ev) => self.on_schedule(ev),
            Event::Bisection(ev) => self.on_bisection(ev),
            Event::Tick => self.tick(),
            Event::StepDown => self.stepping_down = true,
        }
    }
}

mod activity;
mod agents;
mod archive;
mod bisection;
mod clock;
mod dispatch;
mod event;
mod histories;
mod ingest;
mod leases;
mod matrices;
mod observe;
mod outbox;
mod provenance;
mod ranges;
mod recovery;
mod reply;
mod reruns;
mod results;
mod schedule;
mod state;
mod worker;
pub(crate) use clock::now_ms;
pub use event::Event;
use reply::Reply;
pub use reply::{AGENT_OUTBOX_CAPACITY, AgentTx, Error};
pub use state::archive::{ARCHIVE_IN_FLIGHT, ArchiveEvent};
pub use state::bisection::{BisectionEvent, MAX_RUNNING_BISECTIONS};
use state::ranges::Starter;
pub(crate) use state::ranges::range_refusal;
pub use state::ranges::{LISTING_TIMEOUT, MAX_PENDING_LISTINGS};
pub use state::results::{Results, ResultsEvent};
pub use state::schedule::{CronEntry, MAX_TRIGGERED_EXECUTIONS_PER_HOUR, ScheduleEvent};
#[cfg(test)]
mod tests;
