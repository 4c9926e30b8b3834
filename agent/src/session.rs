//! The agent's side of the coordinator stream: register, say hello, then
//! heartbeats up, runs down, results up until acknowledged; reconnect with
//! backoff whenever the stream breaks.
//!
//! A run does not belong to a connection: it executes on its own thread and
//! leaves its result in the outbox, which every new stream drains first. So
//! a run in progress when the coordinator goes away still delivers its
//! result once the agent is back.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use farm_proto::{
    AgentMessage, Capabilities, Heartbeat, Hello, RegisterRequest, RunAssignment, RunProgress,
    RunRef, RunResult, agent_message, agent_service_client::AgentServiceClient,
    coordinator_message,
};
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Endpoint;
use tracing::{debug, info, warn};

use crate::executor::Killer;
use crate::kernel::range;
use crate::run;

/// What outlives a connection.
#[derive(Default)]
pub(crate) struct Shared {
    running: Option<(RunRef, Killer)>,
    /// Results not yet acknowledged, by run id and attempt.
    outbox: BTreeMap<(String, u32), RunResult>,
    /// The running attempt's latest progress: one slot, which a newer
    /// report replaces, so that reports never queue behind a slow stream.
    /// Each stream sends it at its next heartbeat when it has not sent it.
    progress: Option<RunProgress>,
}

/// How often an idle connection to the coordinator is pinged, and how long
/// a ping may go unanswered before the connection is given up.
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(3);
pub(crate) const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

pub(crate) struct Session {
    /// The coordinators' URLs and endpoints, in the same order, and the one
    /// dialled now: the leader, once a standby named it.
    pub urls: farm_runtime::coordinators::Urls,
    pub endpoints: Vec<Endpoint>,
    pub current: std::sync::atomic::AtomicUsize,
    /// The bearer token, over plaintext; `None` with mutual TLS, where the
    /// certificate is the credential.
    pub token: Option<String>,
    /// What the coordinator was last told; the catalogue part is redone
    /// every `rescan` and after each run (`crate::catalogue`).
    pub capabilities: Mutex<Capabilities>,
    pub rescan: Duration,
    pub workload: run::WorkloadCommand,
    /// The restore journal; runs apply machine state through it.
    pub journal: Arc<Mutex<crate::state::Journal>>,
    pub shared: Arc<Mutex<Shared>>,
    /// Wakes the connection when a run leaves a result in the outbox.
    pub result_ready: Arc<Notify>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("connecting to the coordinator: {0}")]
    Connect(#[from] tonic::transport::Error),
    #[error("coordinator: {0}")]
    Rpc(#[from] tonic::Status),
    #[error("the coordinator closed the stream")]
    Closed,
    #[error("bad token: {0}")]
    Token(String),
}

enum End {
    Shutdown,
    /// The connection failed or the stream broke (logged where it happened).
    Broken,
}

fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Session {
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Looks at the catalogue again, off the runtime's threads (directory
    /// listings and image headers, maybe on a slow file system); the new
    /// capabilities when they changed.
    async fn rescan_catalogue(&self) -> Option<Capabilities> {
        let (mut fresh, workload) = (self.capabilities(), self.workload.clone());
        let fresh = tokio::task::spawn_blocking(move || {
            crate::catalogue::refresh(&mut fresh, &workload);
            fresh
        })
        .await
        .ok()?;
        let mut caps = self.capabilities.lock().unwrap_or_else(|e| e.into_inner());
        if fresh == *caps {
            return None;
        }
        info!(guest_kernels = ?fresh.guest_kernels, executors = ?fresh.executors, "catalogue changed");
        *caps = fresh.clone();
        Some(fresh)
    }

    /// Sends the capabilities when the catalogue changed.
    async fn send_catalogue(&self, tx: &mpsc::Sender<AgentMessage>) -> Result<(), Error> {
        match self.rescan_catalogue().await {
            Some(caps) => send(tx, agent_message::Msg::Capabilities(caps)).await,
            None => Ok(()),
        }
    }

    /// Keeps a stream to the coordinator open until `shutdown` resolves.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        // With several coordinators an outage is a failover, over in
        // seconds: try again every second rather than every five.
        let max_delay = if self.endpoints.len() > 1 {
            Duration::from_secs(1)
        } else {
            Duration::from_secs(5)
        };
        let policy = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(max_delay)
            .with_jitter()
            .without_max_times();
        let mut backoff = policy.build();
        let mut agent_id = String::new();
        let mut established = false;
        loop {
            let end = tokio::select! {
                _ = &mut shutdown => End::Shutdown,
                r = self.connect_once(&mut agent_id, &mut established) => match r {
                    Ok(e) => e,
                    Err(e) => {
                        if self.follow(&e) {
                            // A standby named the leader: dial it now.
                            continue;
                        }
                        warn!("{e}");
                        End::Broken
                    }
                },
            };
            self.metrics.set_connected(false);
            match end {
                End::Shutdown => break,
                End::Broken => {
                    if std::mem::take(&mut established) {
                        // We had a stream: the next failure is a new outage.
                        backoff = policy.build();
                    }
                }
            }
            let delay = backoff.next().unwrap_or(Duration::from_secs(5));
            debug!(delay_ms = delay.as_millis() as u64, "reconnecting");
            tokio::select! {
                _ = &mut shutdown => break,
                _ = tokio::time::sleep(delay) => {}
            }
        }
        let running = lock(&self.shared)
            .running
            .as_ref()
            .map(|(r, k)| (r.clone(), k.clone()));
        if let Some((r, killer)) = running {
            info!(run = %r.run_id, "stopping the run in progress");
            killer.cancel();
            // The run thread restores the machine state before it lets go of
            // the run: wait for that, so a stopped agent leaves nothing changed.
            let t = std::time::Instant::now();
            while lock(&self.shared).running.is_some() && t.elapsed() < Duration::from_secs(60) {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// After a failed connection: the URL to dial next. A standby's
    /// refusal that names a leader among our URLs switches to it (`true`:
    /// at once, and only if it is another URL than the one that refused);
    /// any other failure moves on to the next URL.
    fn follow(&self, e: &Error) -> bool {
        use std::sync::atomic::Ordering;
        let now = self.current.load(Ordering::Relaxed);
        if let Error::Rpc(status) = e
            && let Some(leader) = self.urls.leader_in(status)
            && leader != now
        {
            info!(leader = %self.urls.as_slice()[leader], "a standby named the leader");
            self.current.store(leader, Ordering::Relaxed);
            return true;
        }
        self.current
            .store((now + 1) % self.endpoints.len(), Ordering::Relaxed);
        false
    }

    async fn connect_once(
        &self,
        agent_id: &mut String,
        established: &mut bool,
    ) -> Result<End, Error> {
        let now = self.current.load(std::sync::atomic::Ordering::Relaxed);
        let channel = self.endpoints[now].connect().await?;
        let header: Option<tonic::metadata::MetadataValue<_>> = match &self.token {
            Some(t) => Some(
                format!("Bearer {t}")
                    .parse()
                    .map_err(|_| Error::Token("not ASCII".into()))?,
            ),
            None => None,
        };
        let mut client =
            AgentServiceClient::with_interceptor(channel, move |mut req: tonic::Request<()>| {
                if let Some(h) = &header {
                    req.metadata_mut()
                        .insert(farm_proto::AUTHORIZATION, h.clone());
                }
                Ok(req)
            })
            .max_encoding_message_size(farm_proto::MAX_AGENT_MESSAGE_BYTES);
        let reg = client
            .register(RegisterRequest {
                capabilities: Some(self.capabilities()),
                resume_agent_id: agent_id.clone(),
            })
            .await?
            .into_inner();
        if *agent_id != reg.agent_id {
            info!(agent = %reg.agent_id, "registered");
        }
        *agent_id = reg.agent_id.clone();
        let (tx, rx) = mpsc::channel::<AgentMessage>(64);
        let hello = {
            let s = lock(&self.shared);
            Hello {
                agent_id: reg.agent_id.clone(),
                running: s.running.as_ref().map(|(r, _)| r.clone()),
                pending_results: s.outbox.values().filter_map(|r| r.run.clone()).collect(),
            }
        };
        send(&tx, agent_message::Msg::Hello(hello)).await?;
        let mut inbound = client.session(ReceiverStream::new(rx)).await?.into_inner();
        *established = true;
        self.metrics.set_connected(true);
        info!(agent = %reg.agent_id, "connected to the coordinator");
        let mut sent: HashSet<(String, u32)> = HashSet::new();
        self.flush(&tx, &mut sent).await?;
        // The progress this stream last sent: a new stream (a new leader,
        // perhaps) hears the latest at its first heartbeat.
        let mut progress_sent: Option<RunProgress> = None;
        let mut heartbeat = tokio::time::interval(Duration::from_millis(u64::from(
            reg.heartbeat_interval_ms.max(50),
        )));
        let mut seq = 0u64;
        let mut rescan = tokio::time::interval(self.rescan.max(Duration::from_millis(100)));
        rescan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                msg = inbound.message() => {
                    let msg = msg?.ok_or(Error::Closed)?;
                    match msg.msg {
                        Some(coordinator_message::Msg::Assign(a)) => self.start(a),
                        Some(coordinator_message::Msg::Ack(r)) => {
                            debug!(run = %r.run_id, attempt = r.attempt, "acknowledged");
                            lock(&self.shared).outbox.remove(&(r.run_id, r.attempt));
                        }
                        Some(coordinator_message::Msg::Cancel(r)) => self.cancel(&r),
                        Some(coordinator_message::Msg::ListCommits(l)) => self.list_commits(l, &tx),
                        None => {}
                    }
                    // A result produced synchronously (a refused assignment) goes out now.
                    self.flush(&tx, &mut sent).await?;
                }
                _ = heartbeat.tick() => {
                    seq += 1;
                    send(&tx, agent_message::Msg::Heartbeat(Heartbeat { seq })).await?;
                    let latest = lock(&self.shared).progress.clone();
                    if let Some(p) = latest
                        && progress_sent.as_ref() != Some(&p)
                    {
                        send(&tx, agent_message::Msg::Progress(p.clone())).await?;
                        progress_sent = Some(p);
                    }
                }
                _ = self.result_ready.notified() => {
                    self.flush(&tx, &mut sent).await?;
                    // A guest run may have cached a kernel or probed KVM.
                    self.send_catalogue(&tx).await?;
                }
                _ = rescan.tick() => self.send_catalogue(&tx).await?,
            }
        }
    }

    /// Lists a git range off the session's task (git may take seconds on a
    /// large repository) and sends the answer, or why not, on `tx`.
    fn list_commits(&self, l: farm_proto::ListCommits, tx: &mpsc::Sender<AgentMessage>) {
        let trees = self.workload.trees.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            let request_id = l.request_id.clone();
            let listed = match tokio::task::spawn_blocking(move || {
                range::answer(trees.as_ref(), &l)
            })
            .await
            {
                Ok(answer) => answer.map_err(|e| e.to_string()),
                Err(e) => Err(format!("listing failed: {e}")),
            };
            let answer = match listed {
                Ok(commits) => farm_proto::Commits {
                    request_id,
                    commits,
                    error: String::new(),
                },
                Err(error) => {
                    warn!("git range refused: {error}");
                    farm_proto::Commits {
                        request_id,
                        commits: Vec::new(),
                        error,
                    }
                }
            };
            let _ = send(&tx, agent_message::Msg::Commits(answer)).await;
        });
    }

    /// Sends every outbox result not yet sent on this stream.
    async fn flush(
        &self,
        tx: &mpsc::Sender<AgentMessage>,
        sent: &mut HashSet<(String, u32)>,
    ) -> Result<(), Error> {
        let fresh: Vec<RunResult> = {
            let s = lock(&self.shared);
            s.outbox
                .iter()
                .filter(|(k, _)| !sent.contains(*k))
                .map(|(_, r)| r.clone())
                .collect()
        };
        for r in fresh {
            if let Some(rr) = &r.run {
                sent.insert((rr.run_id.clone(), rr.attempt));
                info!(run = %rr.run_id, attempt = rr.attempt, ok = r.ok, "sending result");
            }
            send(tx, agent_message::Msg::Result(r)).await?;
        }
        Ok(())
    }

    fn start(&self, a: RunAssignment) {
        let Some(rref) = a.run.clone() else {
            warn!("assignment without a run reference ignored");
            return;
        };
        let mut s = lock(&self.shared);
        if let Some((busy, _)) = &s.running {
            // The coordinator sends one run at a time; refuse rather than
            // disturb the measurement in progress.
            warn!(run = %rref.run_id, busy = %busy.run_id, "assignment while busy refused");
            let result = RunResult {
                run: Some(rref.clone()),
                error: format!("agent busy with {}", busy.run_id),
                ..Default::default()
            };
            s.outbox.insert((rref.run_id, rref.attempt), result);
            return;
        }
        info!(run = %rref.run_id, attempt = rref.attempt, workload = ?a.workload.as_ref().map(|w| &w.name), "run assigned");
        let killer = Killer::default();
        s.running = Some((rref.clone(), killer.clone()));
        let failed = rref.clone();
        drop(s);
        let shared = self.shared.clone();
        let notify = self.result_ready.clone();
        let caps = self.capabilities();
        let workload = self.workload.clone();
        let journal = self.journal.clone();
        let metrics = self.metrics.clone();
        metrics.run_started();
        let started = std::time::Instant::now();
        // The coordinator's span of this attempt is the parent of ours.
        let span = tracing::info_span!(target: farm_runtime::trace::TARGET, "run",
            run = %rref.run_id, attempt = rref.attempt, kernel = %a.kernel,
            workload = a.workload.as_ref().map_or("", |w| w.name.as_str()));
        farm_runtime::trace::set_parent(&span, &a.traceparent);
        let spawned = std::thread::Builder::new()
            .name(format!("run {}", rref.run_id))
            .spawn(move || {
                let _span = span.entered();
                let progress = |build: Option<farm_spec::progress::BuildProgress>| {
                    lock(&shared).progress = Some(RunProgress {
                        run: Some(rref.clone()),
                        build: build.as_ref().map(Into::into),
                    });
                };
                let ctx = run::Context {
                    caps: &caps,
                    workload: &workload,
                    journal: &journal,
                    killer: &killer,
                    progress: &progress,
                };
                // Whatever happens, the coordinator hears of this attempt.
                let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    run::execute(&a, &ctx)
                }))
                .unwrap_or_else(|_| RunResult {
                    run: Some(rref.clone()),
                    error: "the agent's run thread panicked".into(),
                    ..Default::default()
                });
                let result = fit(result);
                metrics.run_finished(&result, started.elapsed());
                let mut s = lock(&shared);
                if s.running.as_ref().is_some_and(|(r, _)| *r == rref) {
                    s.running = None;
                }
                if s.progress
                    .as_ref()
                    .is_some_and(|p| p.run.as_ref() == Some(&rref))
                {
                    s.progress = None;
                }
                s.outbox.insert((rref.run_id.clone(), rref.attempt), result);
                drop(s);
                notify.notify_one();
            });
        if let Err(e) = spawned {
            warn!("cannot start a run thread: {e}");
            let mut s = lock(&self.shared);
            s.running = None;
            let result = RunResult {
                run: Some(failed.clone()),
                error: format!("cannot start a run thread: {e}"),
                ..Default::default()
            };
            self.metrics.run_finished(&result, Duration::ZERO);
            s.outbox
                .insert((failed.run_id.clone(), failed.attempt), result);
            drop(s);
            self.result_ready.notify_one();
        }
    }

    fn cancel(&self, r: &RunRef) {
        let s = lock(&self.shared);
        // By run id: the coordinator may know this attempt by another number
        // (it adopted the run back after a reconnect).
        if let Some((cur, killer)) = &s.running
            && cur.run_id == r.run_id
        {
            info!(run = %r.run_id, attempt = r.attempt, "cancelled by the coordinator");
            killer.cancel();
        }
    }
}

/// `result` if it fits in one message to the coordinator; else the failed
/// result that says how large it was. Sent, it would end the stream (the
/// coordinator refuses it), and be sent again after every reconnect.
fn fit(result: RunResult) -> RunResult {
    use prost::Message;
    // The envelope (`AgentMessage`'s oneof tag and length) takes a few bytes.
    let size = result.encoded_len() + 16;
    if size <= farm_proto::MAX_AGENT_MESSAGE_BYTES {
        return result;
    }
    warn!(run = ?result.run, size, "result too large to send; failing the run");
    RunResult {
        ok: false,
        error: format!(
            "the result is {size} bytes with its telemetry; the limit of a message to the \
             coordinator (MAX_AGENT_MESSAGE_BYTES) is {}",
            farm_proto::MAX_AGENT_MESSAGE_BYTES
        ),
        metrics: Vec::new(),
        telemetry: None,
        log_tail: String::new(),
        ..result
    }
}

async fn send(tx: &mpsc::Sender<AgentMessage>, msg: agent_message::Msg) -> Result<(), Error> {
    tx.send(AgentMessage { msg: Some(msg) })
        .await
        .map_err(|_| Error::Closed)
}

#[cfg(test)]
mod fit_tests {
    use super::*;
    use farm_proto::{InstancePlacement, Telemetry};

    #[test]
    fn a_result_over_the_message_limit_fails_with_its_size() {
        let small = RunResult {
            ok: true,
            ..Default::default()
        };
        assert_eq!(fit(small.clone()), small);
        let big = RunResult {
            run: Some(RunRef {
                run_id: "m.c0.r0".into(),
                attempt: 1,
            }),
            ok: true,
            telemetry: Some(Telemetry {
                instances: vec![InstancePlacement {
                    numa_nodes: "0".repeat(5 << 20),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let got = fit(big);
        assert!(!got.ok);
        assert_eq!(got.run.unwrap().run_id, "m.c0.r0");
        assert_eq!(got.telemetry, None);
        assert_eq!(
            got.error,
            "the result is 5242926 bytes with its telemetry; the limit of a message to the \
             coordinator (MAX_AGENT_MESSAGE_BYTES) is 4194304"
        );
    }
}
