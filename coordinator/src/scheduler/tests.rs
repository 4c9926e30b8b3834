//! The scheduler driven through its handle, as the services drive it, with
//! agents played by channels: the races around leases and reconnects.

use super::*;
use crate::matrix;
use crate::store::Sqlite;
use farm_proto::{
    AgentInfo, GetResultsResponse, Heartbeat, Hello, RunCounts, RunRef, RunResult, agent_message,
    coordinator_message,
};

type Rx = mpsc::Receiver<Result<CoordinatorMessage, Error>>;

fn caps() -> Capabilities {
    Capabilities {
        hostname: "h".into(),
        arch: "x86_64".into(),
        kernel_release: "k".into(),
        cpus_online: 2,
        executors: vec!["host".into()],
        workloads: vec!["cpu-hog".into()],
        ..Default::default()
    }
}

/// Messages the agent received, as `assign r@n`, `ack r@n`, `cancel r@n`.
fn drain(rx: &mut Rx) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(Ok(m)) = rx.try_recv() {
        out.push(match m.msg {
            Some(coordinator_message::Msg::Assign(a)) => {
                let r = a.run.unwrap_or_default();
                format!("assign {}@{}", r.run_id, r.attempt)
            }
            Some(coordinator_message::Msg::Ack(r)) => format!("ack {}@{}", r.run_id, r.attempt),
            Some(coordinator_message::Msg::Cancel(r)) => {
                format!("cancel {}@{}", r.run_id, r.attempt)
            }
            Some(coordinator_message::Msg::ListCommits(l)) => {
                format!("list {} {}..{}", l.repo, l.good, l.bad)
            }
            None => "empty".into(),
        });
    }
    out
}

struct Farm {
    h: Handle,
    registry: prometheus::Registry,
    _dir: tempfile::TempDir,
}

impl Farm {
    fn new(lease_ms: u32, max_attempts: u32) -> Farm {
        Farm::with_series_limit(lease_ms, max_attempts, crate::metrics::DEFAULT_SERIES_LIMIT)
    }

    /// With the results gauges limited to `series_limit` samples a family.
    fn with_series_limit(lease_ms: u32, max_attempts: u32, series_limit: usize) -> Farm {
        Farm::on(
            tempfile::tempdir().unwrap(),
            lease_ms,
            max_attempts,
            series_limit,
        )
    }

    /// A scheduler on the store in `dir` (new or kept from another).
    fn on(dir: tempfile::TempDir, lease_ms: u32, max_attempts: u32, series_limit: usize) -> Farm {
        let store = Sqlite::open(&dir.path().join("db")).unwrap();
        let metrics = Metrics::new(series_limit);
        let registry = metrics.registry().clone();
        let (h, _thread) = spawn_with(
            store,
            crate::archive::Location::Sqlite(dir.path().join("db")),
            Config {
                heartbeat_ms: 1000,
                lease_ms,
                max_attempts,
                ..Default::default()
            },
            metrics,
        )
        .unwrap();
        Farm {
            h,
            registry,
            _dir: dir,
        }
    }

    /// The same store under a new scheduler, as after a restart: the old
    /// one's thread ends once its handle is gone.
    async fn reopen(self) -> Farm {
        let Farm { h, _dir: dir, .. } = self;
        drop(h);
        // Let the old thread finish its last batch and let go of the file.
        tokio::time::sleep(Duration::from_millis(200)).await;
        Farm::on(dir, 60_000, 3, crate::metrics::DEFAULT_SERIES_LIMIT)
    }

    async fn register(&self) -> String {
        self.register_as(None, "").await.unwrap()
    }

    /// A new agent with these capabilities.
    async fn register_caps(&self, capabilities: farm_proto::Capabilities) -> String {
        let capabilities = Box::new(capabilities);
        self.h
            .call(|reply| Event::Register {
                capabilities,
                resume_agent_id: None,
                identity: None,
                reply,
            })
            .await
            .unwrap()
            .to_string()
    }

    /// A `Register` with a certificate's name (`identity`) or a token's
    /// none, asking to resume `resume`.
    async fn register_as(&self, identity: Option<&str>, resume: &str) -> Result<String, Error> {
        let capabilities = Box::new(caps());
        let identity = identity.map(|n| Name::parse(n).unwrap());
        // As `service` reads it: an id that is none of ours resumes nothing.
        let resume_agent_id = resume.parse().ok();
        self.h
            .call(|reply| Event::Register {
                capabilities,
                resume_agent_id,
                identity,
                reply,
            })
            .await
            .map(|id| id.to_string())
    }

    async fn submit(&self, reps: u32) -> String {
        let text = format!(
            "name = \"x\"\nrepetitions = {reps}\n[[workloads]]\nname = \"cpu-hog\"\nparams = {{ seconds = 1 }}\n"
        );
        let matrix = Box::new(matrix::parse("m.toml", &text).unwrap());
        let r = self
            .h
            .call(|reply| Event::Submit {
                traceparent: String::new(),
                matrix,
                file_name: "m.toml".into(),
                source: text,
                reply,
            })
            .await
            .unwrap();
        r.matrix_id
    }

    async fn open(
        &self,
        agent_id: &str,
        session: u64,
        running: Option<RunRef>,
        pending: Vec<RunRef>,
    ) -> Rx {
        let (tx, rx) = mpsc::channel(AGENT_OUTBOX_CAPACITY);
        let hello = Hello {
            agent_id: agent_id.into(),
            running,
            pending_results: pending,
        };
        self.h
            .call(|reply| Event::SessionOpen {
                agent_id: agent_id.parse().unwrap(),
                hello,
                identity: None,
                session,
                tx,
                reply,
            })
            .await
            .unwrap();
        rx
    }

    /// Waits until every event sent so far is handled and its batch committed.
    async fn sync(&self) {
        self.h
            .call(|reply| Event::ListAgents { reply })
            .await
            .unwrap();
    }

    fn send(&self, agent_id: &str, msg: agent_message::Msg) {
        self.h
            .try_send(Event::FromAgent {
                agent_id: agent_id.parse().unwrap(),
                msg: Box::new(msg),
                permit: None,
            })
            .unwrap();
    }

    fn result(&self, agent_id: &str, run_id: &str, attempt: u32, ok: bool) {
        let run = Some(RunRef {
            run_id: run_id.into(),
            attempt,
        });
        self.send(
            agent_id,
            agent_message::Msg::Result(RunResult {
                run,
                ok,
                ..Default::default()
            }),
        );
    }

    /// Lets `ms` pass and ticks, so leases older than that expire.
    async fn expire(&self, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.h.try_send(Event::Tick).unwrap();
        self.sync().await;
    }

    async fn counts(&self, matrix_id: &str) -> RunCounts {
        let matrix_id = matrix_id.parse().unwrap();
        let st = self
            .h
            .call(|reply| Event::Status { matrix_id, reply })
            .await
            .unwrap();
        st.counts.unwrap_or_default()
    }
}

/// An agent back from an outage longer than its lease delivers the old
/// attempt's result while already running the re-queued attempt: it must
/// stay busy (no run of it refused as "agent busy"), the later attempt is
/// cancelled, and every run still finishes.
mod activity;
mod bisection;
mod builds;
mod undecided;
mod unreadable;

#[tokio::test]
async fn a_late_result_of_an_earlier_attempt_does_not_free_the_busy_agent() {
    let farm = Farm::new(200, 3);
    let a = farm.register().await;
    let m = farm.submit(3).await;
    let r0 = format!("{m}.c0.r0");
    let mut rx = farm.open(&a, 1, None, vec![]).await;
    farm.sync().await;
    assert_eq!(drain(&mut rx), vec![format!("assign {r0}@1")]);
    farm.h
        .try_send(Event::SessionClosed {
            agent_id: a.parse().unwrap(),
            session: 1,
        })
        .unwrap();
    farm.expire(300).await;
    // Back, holding r0@1's result; the re-queued r0 goes to it as attempt 2.
    let mut rx = farm
        .open(
            &a,
            2,
            None,
            vec![RunRef {
                run_id: r0.clone(),
                attempt: 1,
            }],
        )
        .await;
    farm.sync().await;
    let got = drain(&mut rx);
    assert!(
        got.iter().all(|m| !m.starts_with("assign")) || got == vec![format!("assign {r0}@2")],
        "{got:?}"
    );
    let second_attempt = got.contains(&format!("assign {r0}@2"));
    farm.result(&a, &r0, 1, true);
    farm.sync().await;
    let got = drain(&mut rx);
    assert!(got.contains(&format!("ack {r0}@1")), "{got:?}");
    let mut got = got;
    if second_attempt {
        // Still busy with r0@2: it gets a cancel for it, and no new run.
        assert!(got.contains(&format!("cancel {r0}@2")), "{got:?}");
        assert!(!got.iter().any(|m| m.starts_with("assign")), "{got:?}");
        farm.result(&a, &r0, 2, false);
        farm.sync().await;
        got = drain(&mut rx);
    }
    // The other two runs complete normally, one at a time.
    for _ in 0..2 {
        let assign = got
            .iter()
            .find(|s| s.starts_with("assign"))
            .cloned()
            .expect("a next run");
        let (run, attempt) = assign
            .trim_start_matches("assign ")
            .split_once('@')
            .unwrap();
        farm.result(&a, run, attempt.parse().unwrap(), true);
        farm.sync().await;
        got = drain(&mut rx);
    }
    let c = farm.counts(&m).await;
    assert_eq!(
        (c.finished, c.failed, c.queued, c.running),
        (3, 0, 0, 0),
        "{c:?}"
    );
}

/// A run re-queued and re-assigned to B must not be re-queued or failed when
/// A, which had it before and came back still running it, loses its lease
/// again: B's result must count.
#[tokio::test]
async fn losing_an_adopted_run_leaves_the_other_agents_attempt_alone() {
    let farm = Farm::new(200, 2);
    let a = farm.register().await;
    let m = farm.submit(1).await;
    let r0 = format!("{m}.c0.r0");
    let mut ra = farm.open(&a, 1, None, vec![]).await;
    farm.sync().await;
    assert_eq!(drain(&mut ra), vec![format!("assign {r0}@1")]);
    farm.h
        .try_send(Event::SessionClosed {
            agent_id: a.parse().unwrap(),
            session: 1,
        })
        .unwrap();
    farm.expire(300).await;
    let b = farm.register().await;
    let mut rb = farm.open(&b, 2, None, vec![]).await;
    farm.sync().await;
    assert_eq!(drain(&mut rb), vec![format!("assign {r0}@2")]);
    // A returns still running r0@1, then vanishes again; B keeps heartbeating.
    let _ra = farm
        .open(
            &a,
            3,
            Some(RunRef {
                run_id: r0.clone(),
                attempt: 1,
            }),
            vec![],
        )
        .await;
    farm.h
        .try_send(Event::SessionClosed {
            agent_id: a.parse().unwrap(),
            session: 3,
        })
        .unwrap();
    for _ in 0..4 {
        farm.send(&b, agent_message::Msg::Heartbeat(Heartbeat { seq: 1 }));
        farm.expire(100).await;
    }
    let c = farm.counts(&m).await;
    assert_eq!(
        (c.running, c.failed, c.queued),
        (1, 0, 0),
        "B's attempt was disturbed: {c:?}"
    );
    farm.result(&b, &r0, 2, true);
    farm.sync().await;
    assert!(drain(&mut rb).contains(&format!("ack {r0}@2")));
    let c = farm.counts(&m).await;
    assert_eq!((c.finished, c.failed), (1, 0), "{c:?}");
}

/// An agent that reconnects with its result pending and then vanishes before
/// delivering it must not leave the run "running" forever: the lease still
/// guards it.
#[tokio::test]
async fn a_pending_result_that_never_arrives_is_still_guarded_by_the_lease() {
    let farm = Farm::new(200, 3);
    let a = farm.register().await;
    let m = farm.submit(1).await;
    let r0 = format!("{m}.c0.r0");
    let mut rx = farm.open(&a, 1, None, vec![]).await;
    farm.sync().await;
    assert_eq!(drain(&mut rx), vec![format!("assign {r0}@1")]);
    // Reconnect at once (before the lease ends) with the result pending, then vanish.
    farm.h
        .try_send(Event::SessionClosed {
            agent_id: a.parse().unwrap(),
            session: 1,
        })
        .unwrap();
    let _rx = farm
        .open(
            &a,
            2,
            None,
            vec![RunRef {
                run_id: r0.clone(),
                attempt: 1,
            }],
        )
        .await;
    farm.h
        .try_send(Event::SessionClosed {
            agent_id: a.parse().unwrap(),
            session: 2,
        })
        .unwrap();
    farm.expire(300).await;
    let c = farm.counts(&m).await;
    assert_eq!((c.running, c.queued), (0, 1), "{c:?}");
}

/// Plays one agent through a matrix: every assignment gets a result whose
/// `wall_s` is `value(cell, repetition)`, until no more runs come. Returns
/// the runs played, as `(cell, repetition)` in the order they were assigned.
async fn play(farm: &Farm, agent: &str, value: impl Fn(u32, u32) -> f64) -> Vec<(u32, u32)> {
    play_with(farm, agent, |cell, rep| RunResult {
        metrics: vec![farm_proto::Metric {
            name: "wall_s".into(),
            value: value(cell, rep),
            unit: "s".into(),
            direction: farm_proto::Direction::LowerIsBetter as i32,
        }],
        ..Default::default()
    })
    .await
}

/// [`play`] with the whole result of each run: `result(cell, repetition)`,
/// sent as the assignment's successful result.
async fn play_with(
    farm: &Farm,
    agent: &str,
    result: impl Fn(u32, u32) -> RunResult,
) -> Vec<(u32, u32)> {
    let mut rx = farm.open(agent, 1, None, vec![]).await;
    let mut played = Vec::new();
    loop {
        farm.sync().await;
        let got = drain(&mut rx);
        let Some(assign) = got.iter().find(|m| m.starts_with("assign ")) else {
            // Closed, so that the next `play` may open it again.
            farm.h
                .try_send(Event::SessionClosed {
                    agent_id: agent.parse().unwrap(),
                    session: 1,
                })
                .unwrap();
            return played;
        };
        let (run_id, attempt) = assign["assign ".len()..].split_once('@').unwrap();
        // `<matrix>.c<cell>.r<repetition>`
        let mut parts = run_id.rsplit('.');
        let rep: u32 = parts.next().unwrap()[1..].parse().unwrap();
        let cell: u32 = parts.next().unwrap()[1..].parse().unwrap();
        farm.send(
            agent,
            agent_message::Msg::Result(RunResult {
                run: Some(RunRef {
                    run_id: run_id.into(),
                    attempt: attempt.parse().unwrap(),
                }),
                ok: true,
                ..result(cell, rep)
            }),
        );
        played.push((cell, rep));
        assert!(played.len() < 100, "runs never stop coming");
    }
}

async fn submit_text(farm: &Farm, text: &str) -> String {
    let matrix = Box::new(matrix::parse("m.toml", text).unwrap());
    let source = text.to_string();
    farm.h
        .call(|reply| Event::Submit {
            traceparent: String::new(),
            matrix,
            file_name: "m.toml".into(),
            source,
            reply,
        })
        .await
        .unwrap()
        .matrix_id
}

async fn results_of(farm: &Farm, matrix_id: &str) -> GetResultsResponse {
    let matrix_id = matrix_id.parse().unwrap();
    farm.h
        .call(|reply| Event::Results(ResultsEvent::Get { matrix_id, reply }))
        .await
        .unwrap()
        .into_response()
}

const PAIR: &str = "name = \"x\"\nrepetitions = 3\n[[workloads]]\nname = \"cpu-hog\"\n\
    params = { seconds = 1, threads = [1, 2] }\n[baseline]\nthreads = 1\n[verdict]\nmax_runs = 9\n";

/// Three runs a side can never make a Mann-Whitney test significant: the
/// comparison is inconclusive, so both cells get three more runs, after
/// which a doubling is a regression and no more runs are added.
#[tokio::test]
async fn an_inconclusive_comparison_adds_runs_until_it_is_decided() {
    let farm = Farm::new(60_000, 3);
    let a = farm.register().await;
    let m = submit_text(&farm, PAIR).await;
    let played = play(&farm, &a, |cell, rep| {
        f64::from(cell + 1) * (1.0 + 0.01 * f64::from(rep % 3))
    })
    .await;
    // The matrix's own runs, repetition-major; then the added ones, the
    // candidate (cell 1) and its baseline (cell 0) alternating.
    assert_eq!(
        played,
        [
            (0, 0),
            (1, 0),
            (0, 1),
            (1, 1),
            (0, 2),
            (1, 2),
            (1, 3),
            (0, 3),
            (1, 4),
            (0, 4),
            (1, 5),
            (0, 5),
        ]
    );
    let c = farm.counts(&m).await;
    assert_eq!((c.total, c.finished), (12, 12));
    let r = results_of(&farm, &m).await;
    let cand = &r.cells[1];
    assert_eq!(cand.verdict, farm_proto::Verdict::Regression as i32);
    assert_eq!(cand.extra_runs, 3);
    assert_eq!(r.cells[0].extra_runs, 3);
    let wall = cand.metrics.iter().find(|m| m.name == "wall_s").unwrap();
    assert_eq!((wall.n, wall.baseline_n), (6, 6));
}

/// Noise that never settles: runs are added up to `max_runs` a cell, and
/// the verdict stays inconclusive.
#[tokio::test]
async fn reruns_stop_at_the_cap() {
    let farm = Farm::new(60_000, 3);
    let a = farm.register().await;
    let m = submit_text(&farm, PAIR).await;
    // ±40% around 1.0 on both sides, in a different order.
    let noise = [1.0, 1.4, 0.6, 1.2, 0.8, 1.3, 0.7, 1.1, 0.9];
    let played = play(&farm, &a, |cell, rep| {
        noise[((rep + 4 * cell) % 9) as usize]
    })
    .await;
    // Two added rounds of three, each alternating candidate and baseline.
    let added: Vec<(u32, u32)> = (3..9).flat_map(|rep| [(1, rep), (0, rep)]).collect();
    assert_eq!(
        played[..6],
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)]
    );
    assert_eq!(played[6..], added[..]);
    let r = results_of(&farm, &m).await;
    assert_eq!(r.cells[1].extra_runs, 6);
    assert_eq!(r.cells[1].verdict, farm_proto::Verdict::Inconclusive as i32);
}

/// The same cell in twelve matrices, its time doubling from the seventh on:
/// the last matrix's results carry the series, oldest first, and one change
/// point where the doubling began. A cell of another workload is no part of
/// it.
#[tokio::test]
async fn history_spans_matrices_with_its_change_points() {
    let farm = Farm::new(60_000, 3);
    let a = farm.register().await;
    let one = "name = \"h\"\nrepetitions = 3\n[[workloads]]\nname = \"cpu-hog\"\n\
               params = { seconds = 1 }\n";
    let mut last = String::new();
    for k in 0..12u32 {
        last = submit_text(&farm, one).await;
        let level = if k < 6 { 1.0 } else { 2.0 };
        let wobble = [0.0, 0.01, -0.01, 0.02, -0.02, 0.005];
        play(&farm, &a, |_, rep| level + wobble[((k + rep) % 6) as usize]).await;
    }
    // Another workload, run in between, has a history of its own.
    let other = submit_text(
        &farm,
        "name = \"o\"\n[[workloads]]\nname = \"cpu-hog\"\nparams = { seconds = 2 }\n",
    )
    .await;
    play(&farm, &a, |_, _| 9.0).await;
    let r = results_of(&farm, &last).await;
    let h = r.cells[0]
        .history
        .iter()
        .find(|h| h.metric == "wall_s")
        .expect("a wall_s history");
    assert_eq!(h.points.len(), 12);
    assert_eq!(h.points[11].matrix_id, last);
    assert!(h.points.windows(2).all(|w| w[0].t_ms <= w[1].t_ms));
    assert_eq!(h.change_points.len(), 1, "{:?}", h.change_points);
    let c = &h.change_points[0];
    assert_eq!(c.index, 6);
    assert!(
        (c.mean_before - 1.0).abs() < 0.05 && (c.mean_after - 2.0).abs() < 0.05,
        "{c:?}"
    );
    let r = results_of(&farm, &other).await;
    assert_eq!(r.cells[0].history[0].points.len(), 1);
}

/// A finished run of `run_id` whose `wall_s` is `value`.
/// Registers `n` agents with open streams and returns, for each run of the
/// matrix's first cell in repetition order, the agent it was leased to
/// (only a run's holder may post its result), with their streams.
async fn lease_to_many(farm: &Farm, n: usize) -> (Vec<String>, Vec<Rx>) {
    let mut held = Vec::new();
    let mut streams = Vec::new();
    for i in 0..n {
        let a = farm.register().await;
        let mut rx = farm.open(&a, i as u64 + 1, None, vec![]).await;
        farm.sync().await;
        for m in drain(&mut rx) {
            let run = m
                .strip_prefix("assign ")
                .unwrap()
                .split_once('@')
                .unwrap()
                .0;
            let rep: u32 = run.rsplit_once(".r").unwrap().1.parse().unwrap();
            held.push((rep, a.clone()));
        }
        streams.push(rx);
    }
    held.sort();
    assert_eq!(held.len(), n, "one run per agent");
    (held.into_iter().map(|(_, a)| a).collect(), streams)
}

fn wall_n(r: &GetResultsResponse) -> u32 {
    r.cells[0]
        .metrics
        .iter()
        .find(|m| m.name == "wall_s")
        .map_or(0, |m| m.n)
}

/// Results are cached per matrix, and a result that arrives after a
/// `GetResults` is in the next one: the cache never answers for a state
/// that has changed since it was computed.
#[tokio::test]
async fn results_after_a_new_result_reflect_it() {
    let farm = Farm::new(60_000, 3);
    let m = farm.submit(3).await;
    let (a, _streams) = lease_to_many(&farm, 3).await;
    let r = results_of(&farm, &m).await;
    assert!(r.runs.is_empty());
    assert_eq!(wall_n(&r), 0);
    farm.result_of(&a[0], &format!("{m}.c0.r0"), 1, 1.0);
    let r = results_of(&farm, &m).await;
    assert_eq!((r.runs.len(), wall_n(&r)), (1, 1));
    // Asked again with nothing changed: the cached answer, the same.
    assert_eq!(results_of(&farm, &m).await, r);
    farm.result_of(&a[1], &format!("{m}.c0.r1"), 1, 1.1);
    let r = results_of(&farm, &m).await;
    assert_eq!((r.runs.len(), wall_n(&r)), (2, 2));
    let counts = r.status.unwrap().counts.unwrap();
    assert_eq!((counts.finished, counts.running), (2, 1));
}

/// Requests and results interleaved in one batch, none awaited before the
/// next is sent: each answer is the matrix exactly as it was when its
/// request was handled, its runs and summaries agreeing with its status,
/// though the worker computes them later.
#[tokio::test]
async fn every_answer_is_of_the_moment_it_was_asked() {
    let farm = Farm::new(60_000, 3);
    let m = farm.submit(20).await;
    let (a, _streams) = lease_to_many(&farm, 20).await;
    let mut asked = Vec::new();
    for rep in 0..20u32 {
        farm.result_of(
            &a[rep as usize],
            &format!("{m}.c0.r{rep}"),
            1,
            1.0 + f64::from(rep % 3) * 0.01,
        );
        // Twice, so that the second waits for the first's computation.
        for _ in 0..2 {
            let (reply, rx) = oneshot::channel();
            farm.h
                .try_send(Event::Results(ResultsEvent::Get {
                    matrix_id: m.parse().unwrap(),
                    reply,
                }))
                .unwrap();
            asked.push((rep + 1, rx));
        }
    }
    for (n, rx) in asked {
        let r = rx.await.unwrap().unwrap().into_response();
        let counts = r.status.clone().unwrap().counts.unwrap();
        assert_eq!(counts.finished, n);
        assert_eq!((r.runs.len(), wall_n(&r)), (n as usize, n));
    }
}

/// A matrix's history shows the same cell in later matrices: their
/// results change its summaries too, so its cached results are not given
/// once a later matrix of the series has a new point.
#[tokio::test]
async fn a_later_matrix_of_its_series_changes_an_earlier_ones_results() {
    let farm = Farm::new(60_000, 3);
    let a = farm.register().await;
    let one = "name = \"h\"\nrepetitions = 2\n[[workloads]]\nname = \"cpu-hog\"\n\
               params = { seconds = 1 }\n";
    let first = submit_text(&farm, one).await;
    play(&farm, &a, |_, _| 1.0).await;
    let points = |r: &GetResultsResponse| r.cells[0].history[0].points.len();
    assert_eq!(points(&results_of(&farm, &first).await), 1);
    let second = submit_text(&farm, one).await;
    play(&farm, &a, |_, _| 2.0).await;
    let r = results_of(&farm, &first).await;
    assert_eq!(points(&r), 2);
    assert_eq!(r.cells[0].history[0].points[1].matrix_id, second);
}

/// The worker's summary of an older snapshot, finishing after a newer one,
/// never replaces it.
#[test]
fn a_stale_summary_never_replaces_a_newer_one() {
    let cache = state::results::Cache::default();
    let newer = std::sync::Arc::new(GetResultsResponse {
        runs: vec![farm_proto::RunRecord::default()],
        ..Default::default()
    });
    let m = &MatrixId::nth(1);
    cache.put(m, 2, newer.clone());
    cache.put(m, 1, std::sync::Arc::new(GetResultsResponse::default()));
    assert_eq!(cache.get(m, 2), Some(newer.clone()));
    // Nor is a summary given for a version it does not reflect.
    assert_eq!(cache.get(m, 3), None);
    cache.put(m, 3, std::sync::Arc::new(GetResultsResponse::default()));
    assert_ne!(cache.get(m, 3), Some(newer));
}

impl Farm {
    /// `farm_rejected_messages_total` by reason, as `/metrics` shows it.
    fn rejected(&self) -> Vec<(String, u64)> {
        self.counter("farm_rejected_messages_total")
    }

    /// `farm_agent_sessions_closed_total` by reason, as `/metrics` shows it.
    fn sessions_closed(&self) -> Vec<(String, u64)> {
        self.counter("farm_agent_sessions_closed_total")
    }

    /// A counter family by its one label, as `/metrics` shows it.
    fn counter(&self, family: &str) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for f in self.registry.gather() {
            if f.name() == family {
                for m in f.get_metric() {
                    let label = m.get_label()[0].value().to_string();
                    out.push((label, m.get_counter().get_value() as u64));
                }
            }
        }
        out.sort();
        out
    }

    fn result_of(&self, agent_id: &str, run_id: &str, attempt: u32, wall_s: f64) {
        self.send(
            agent_id,
            agent_message::Msg::Result(RunResult {
                run: Some(RunRef {
                    run_id: run_id.into(),
                    attempt,
                }),
                ok: true,
                metrics: vec![farm_proto::Metric {
                    name: "wall_s".into(),
                    value: wall_s,
                    unit: "s".into(),
                    direction: farm_proto::Direction::LowerIsBetter as i32,
                }],
                ..Default::default()
            }),
        );
    }

    async fn run_record(&self, matrix_id: &str, run_id: &str) -> farm_proto::RunRecord {
        results_of(self, matrix_id)
            .await
            .runs
            .into_iter()
            .find(|r| r.run_id == run_id)
            .unwrap_or_else(|| panic!("no record of {run_id}"))
    }
}

/// A second agent's result for a run leased to the first, and a result for
/// a queued run nobody was given, are dropped and counted: the holder is
/// not cancelled, and its own result is the one that counts.
#[tokio::test]
async fn a_result_from_an_agent_that_was_not_leased_the_attempt_is_dropped() {
    let farm = Farm::new(60_000, 3);
    let m = farm.submit(2).await;
    let honest = farm.register().await;
    let mut rx = farm.open(&honest, 1, None, vec![]).await;
    farm.sync().await;
    let r0 = format!("{m}.c0.r0");
    let r1 = format!("{m}.c0.r1");
    assert_eq!(drain(&mut rx), vec![format!("assign {r0}@1")]);
    // The forger registers but has no stream, so it is given nothing.
    let forger = farm.register().await;
    farm.result_of(&forger, &r0, 1, 99.0);
    farm.result_of(&forger, &r1, 1, 99.0);
    farm.result_of(&forger, &r1, 0, 99.0);
    farm.result_of(&forger, "m-nope.c0.r0", 1, 99.0);
    // Not run ids at all, one of them another spelling of the held run's:
    // refused where they enter, as unknown runs.
    farm.result_of(&forger, &format!("{m}.c00.r0"), 1, 99.0);
    farm.result_of(&forger, "..", 1, 99.0);
    farm.sync().await;
    assert_eq!(
        drain(&mut rx),
        Vec::<String>::new(),
        "the holder is left alone"
    );
    let c = farm.counts(&m).await;
    assert_eq!((c.finished, c.running, c.queued), (0, 1, 1), "{c:?}");
    assert_eq!(
        farm.rejected(),
        vec![
            ("result_not_leased".to_string(), 3),
            ("unknown_run".to_string(), 3)
        ]
    );
    farm.result_of(&honest, &r0, 1, 1.25);
    farm.sync().await;
    assert_eq!(
        drain(&mut rx),
        vec![format!("ack {r0}@1"), format!("assign {r1}@1")]
    );
    let rec = farm.run_record(&m, &r0).await;
    assert_eq!(rec.agent_id, honest);
    let wall = &rec.result.unwrap().metrics[0];
    assert_eq!((wall.name.as_str(), wall.value), ("wall_s", 1.25));
}

/// A `Hello` that claims a queued run never leased to its agent is told to
/// stop it; the run goes to an agent as usual.
#[tokio::test]
async fn a_hello_claiming_a_run_never_leased_gets_a_cancel() {
    let farm = Farm::new(60_000, 3);
    let m = farm.submit(1).await;
    let r0 = format!("{m}.c0.r0");
    let forger = farm.register().await;
    let claim = RunRef {
        run_id: r0.clone(),
        attempt: 1,
    };
    let mut rx = farm.open(&forger, 1, Some(claim), vec![]).await;
    farm.sync().await;
    // Cancelled, then (idle again) offered the run as attempt 1 for real.
    assert_eq!(
        drain(&mut rx),
        vec![format!("cancel {r0}@1"), format!("assign {r0}@1")]
    );
    assert_eq!(farm.rejected(), vec![("claim_not_leased".to_string(), 1)]);
}

/// A farm with a one-run matrix whose run is leased to its one agent:
/// (farm, matrix id, run id, agent id, the agent's stream).
async fn one_run_leased() -> (Farm, String, String, String, Rx) {
    let farm = Farm::new(60_000, 3);
    let m = farm.submit(1).await;
    let r0 = format!("{m}.c0.r0");
    let agent = farm.register().await;
    let mut rx = farm.open(&agent, 1, None, vec![]).await;
    farm.sync().await;
    assert_eq!(drain(&mut rx), vec![format!("assign {r0}@1")]);
    (farm, m, r0, agent, rx)
}

/// `Register` with the id of an agent whose session is live is refused,
/// and so is a second `Hello` for it: the victim keeps its run.
#[tokio::test]
async fn a_live_session_cannot_be_taken_over() {
    let (farm, m, r0, victim, mut rx) = one_run_leased().await;
    let capabilities = Box::new(caps());
    let resume = victim.parse().ok();
    let got = farm
        .h
        .call(|reply| Event::Register {
            capabilities,
            resume_agent_id: resume,
            identity: None,
            reply,
        })
        .await;
    assert!(
        matches!(&got, Err(Error::AgentInUse(id)) if *id == victim),
        "{got:?}"
    );
    let got = farm.try_open(&victim, 2).await;
    assert!(matches!(got, Err(Error::AgentInUse(_))), "{got:?}");
    assert_eq!(farm.rejected(), vec![("session_takeover".to_string(), 2)]);
    // The victim's stream and run are untouched: its result counts.
    farm.result_of(&victim, &r0, 1, 2.0);
    farm.sync().await;
    assert_eq!(drain(&mut rx), vec![format!("ack {r0}@1")]);
    assert_eq!(farm.counts(&m).await.finished, 1);
}

/// A result with a value no run can have fails its run, saying which.
#[tokio::test]
async fn a_result_with_a_nan_fails_its_run() {
    let (farm, m, r0, a, mut rx) = one_run_leased().await;
    farm.result_of(&a, &r0, 1, f64::NAN);
    farm.sync().await;
    assert_eq!(drain(&mut rx), vec![format!("ack {r0}@1")]);
    let c = farm.counts(&m).await;
    assert_eq!((c.finished, c.failed), (0, 1));
    let res = farm.run_record(&m, &r0).await.result.unwrap();
    assert!(!res.ok);
    assert_eq!(
        res.error,
        "result refused: metric wall_s = NaN: values must be finite and within 0..=1e15"
    );
    assert_eq!(res.metrics.len(), 0);
}

/// An agent gone (no stream, no run) past `agent_expiry_ms` is forgotten,
/// in memory and in the store; one with a stream is kept however long.
#[tokio::test]
async fn absent_agents_are_forgotten_after_their_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config {
        agent_expiry_ms: 200,
        ..Default::default()
    };
    let (h, _thread) = spawn(
        Sqlite::open(&dir.path().join("db")).unwrap(),
        crate::archive::Location::Sqlite(dir.path().join("db")),
        config,
    )
    .unwrap();
    let farm = Farm {
        h,
        registry: prometheus::Registry::new(),
        _dir: dir,
    };
    let gone = farm.register().await;
    let here = farm.register().await;
    let _rx = farm.open(&here, 1, None, vec![]).await;
    farm.expire(400).await;
    let ids = |agents: Vec<AgentInfo>| agents.into_iter().map(|a| a.agent_id).collect::<Vec<_>>();
    let listed = farm
        .h
        .call(|reply| Event::ListAgents { reply })
        .await
        .unwrap();
    assert_eq!(ids(listed), vec![here.clone()]);
    let got = farm.try_open(&gone, 2).await;
    assert!(matches!(got, Err(Error::UnknownAgent(id)) if id == gone));
    let stored = Sqlite::open(&farm._dir.path().join("db"))
        .unwrap()
        .load()
        .unwrap();
    let stored: Vec<String> = stored
        .agents
        .into_iter()
        .map(|a| a.agent_id.to_string())
        .collect();
    assert_eq!(stored, vec![here]);
}

/// One random agent message: (sender index, kind, run index, attempt, value).
type RandomMsg = (usize, u8, usize, u32, f64);

fn any_value() -> impl proptest::strategy::Strategy<Value = f64> {
    use proptest::prelude::*;
    prop_oneof![
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-1.98),
        Just(1e308),
        0.0..10.0f64,
    ]
}

/// Random messages from three agents (two holding runs, one holding none)
/// about real and made-up runs and attempts, with values of every kind:
/// the scheduler keeps answering, and a run ends only by a result of an
/// attempt leased to its sender, with values in their domain.
fn random_messages(msgs: Vec<RandomMsg>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let farm = Farm::new(60_000, 3);
        let m = farm.submit(4).await;
        let agents = [
            farm.register().await,
            farm.register().await,
            farm.register().await,
        ];
        let mut leased: std::collections::BTreeSet<(String, String, u32)> = Default::default();
        let mut streams = Vec::new();
        for (i, a) in agents.iter().take(2).enumerate() {
            let mut rx = farm.open(a, i as u64 + 1, None, vec![]).await;
            farm.sync().await;
            for s in drain(&mut rx) {
                let (run, attempt) = s.strip_prefix("assign ").unwrap().split_once('@').unwrap();
                leased.insert((a.clone(), run.to_string(), attempt.parse().unwrap()));
            }
            streams.push(rx);
        }
        let runs: Vec<String> = (0..5).map(|r| format!("{m}.c0.r{r}")).collect();
        for (sender, kind, run, attempt, value) in msgs {
            let agent = &agents[sender % 3];
            let run_id = runs[run % runs.len()].clone();
            let r = Some(RunRef { run_id, attempt });
            let msg = match kind % 3 {
                0 => agent_message::Msg::Result(RunResult {
                    run: r,
                    ok: true,
                    metrics: vec![farm_proto::Metric {
                        name: "wall_s".into(),
                        value,
                        unit: "s".into(),
                        direction: 1,
                    }],
                    ..Default::default()
                }),
                1 => agent_message::Msg::Progress(farm_proto::RunProgress {
                    run: r,
                    build: Some(farm_proto::BuildProgress {
                        step: farm_proto::BuildStep::Compile as i32,
                        elapsed_s: value.abs().min(1e6) as u32,
                        ..Default::default()
                    }),
                }),
                _ => agent_message::Msg::Heartbeat(Heartbeat { seq: 1 }),
            };
            farm.send(agent, msg);
        }
        tokio::time::timeout(Duration::from_secs(10), farm.sync())
            .await
            .expect("the scheduler answers after any messages");
        // Later assignments (a freed agent got the next run) are leases too.
        for (i, rx) in streams.iter_mut().enumerate() {
            for s in drain(rx) {
                if let Some((run, attempt)) =
                    s.strip_prefix("assign ").and_then(|s| s.split_once('@'))
                {
                    leased.insert((agents[i].clone(), run.to_string(), attempt.parse().unwrap()));
                }
            }
        }
        for rec in results_of(&farm, &m).await.runs {
            let Some(res) = rec.result else { continue };
            let attempt = res.run.as_ref().map_or(0, |r| r.attempt);
            assert!(
                leased.contains(&(rec.agent_id.clone(), rec.run_id.clone(), attempt)),
                "{} ended by {}@{attempt}, which was not leased it",
                rec.run_id,
                rec.agent_id
            );
            for metric in &res.metrics {
                assert!(
                    metric.value.is_finite() && (0.0..=1e15).contains(&metric.value),
                    "{metric:?}"
                );
            }
        }
    });
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 32, ..Default::default() })]
    #[test]
    fn random_agent_messages_never_end_a_run_they_do_not_hold(
        msgs in proptest::collection::vec(
            (0..3usize, 0..3u8, 0..5usize, 0..4u32, any_value()),
            0..200,
        )
    ) {
        random_messages(msgs);
    }
}

impl Farm {
    /// A `Hello` for `agent_id` on a new stream, which may be refused.
    async fn try_open(&self, agent_id: &str, session: u64) -> Result<(), Error> {
        self.try_open_as(agent_id, session, None).await
    }

    /// A `Hello` for `agent_id` from a caller with certificate `identity`.
    async fn try_open_as(
        &self,
        agent_id: &str,
        session: u64,
        identity: Option<&str>,
    ) -> Result<(), Error> {
        let identity = identity.map(|n| Name::parse(n).unwrap());
        let (tx, _rx) = mpsc::channel(AGENT_OUTBOX_CAPACITY);
        // As `service` reads it: an id that is none of ours is unknown.
        let Ok(id) = agent_id.parse() else {
            return Err(Error::UnknownAgent(agent_id.into()));
        };
        let hello = Hello {
            agent_id: agent_id.into(),
            running: None,
            pending_results: vec![],
        };
        self.h
            .call(|reply| Event::SessionOpen {
                agent_id: id,
                hello,
                identity,
                session,
                tx,
                reply,
            })
            .await
    }
}

#[tokio::test]
async fn an_agent_id_is_bound_to_its_certificate() {
    let farm = Farm::new(60_000, 3);
    let n1 = farm.register_as(Some("n1"), "").await.unwrap();
    // A token-registered agent, for the cases across the two kinds.
    let plain = farm.register().await;
    // Another certificate gets an id of its own, whatever it asks to resume.
    let n2 = farm.register_as(Some("n2"), &n1).await.unwrap();
    assert_ne!(n2, n1);
    assert_ne!(n2, plain);
    fn refused<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
        match r {
            Err(Error::NotYourAgent {
                agent,
                bound,
                caller,
            }) => format!("{agent}|{bound}|{caller}"),
            other => format!("not refused: {other:?}"),
        }
    }
    // Only n1's certificate opens n1's stream.
    assert_eq!(
        refused(farm.try_open_as(&n1, 1, Some("n2")).await),
        format!("{n1}|certificate n1|certificate n2")
    );
    assert_eq!(
        refused(farm.try_open_as(&n1, 2, None).await),
        format!("{n1}|certificate n1|a caller without a certificate")
    );
    // A token cannot resume a certificate's agent, nor a certificate a
    // token's: the certificate gets a new id instead.
    assert_eq!(
        refused(farm.register_as(None, &n1).await),
        format!("{n1}|certificate n1|a caller without a certificate")
    );
    assert_eq!(
        refused(farm.try_open_as(&plain, 3, Some("n1")).await),
        format!("{plain}|no certificate (it registered with a token)|certificate n1")
    );
    farm.try_open_as(&n1, 4, Some("n1")).await.unwrap();
    // Its certificate again, while its session is live: a takeover.
    assert!(matches!(
        farm.register_as(Some("n1"), "").await,
        Err(Error::AgentInUse(id)) if id == n1
    ));
    farm.h
        .send(Event::SessionClosed {
            agent_id: n1.parse().unwrap(),
            session: 4,
        })
        .await
        .unwrap();
    // Once it is gone, its certificate gets its id back, even without
    // asking for it (an agent that lost its state directory).
    assert_eq!(farm.register_as(Some("n1"), "").await.unwrap(), n1);
    assert_eq!(
        farm.rejected(),
        vec![
            ("identity_mismatch".to_string(), 4),
            ("session_takeover".to_string(), 1)
        ]
    );
    let listed: Vec<(String, String)> = farm
        .h
        .call(|reply| Event::ListAgents { reply })
        .await
        .unwrap()
        .into_iter()
        .map(|a| (a.agent_id, a.identity))
        .collect();
    let mut want = vec![
        (n1.clone(), "n1".to_string()),
        (n2.clone(), "n2".to_string()),
        (plain.clone(), String::new()),
    ];
    want.sort();
    assert_eq!(listed, want);
}

/// An agent that never reads its stream fills it; the batch that would
/// take its last slot closes its session instead (the slot carries the
/// reason), its run goes to another agent, and the scheduler never waits.
#[tokio::test]
async fn an_agent_that_does_not_read_its_stream_is_closed_and_slows_nobody() {
    let farm = Farm::new(60_000, 3);
    let slow = farm.register().await;
    let m = farm.submit(1).await;
    let r0 = format!("{m}.c0.r0");
    let mut rx = farm.open(&slow, 1, None, vec![]).await;
    farm.sync().await;
    // One ack per batch: the assignment and 62 acks fill 63 slots; the
    // 63rd ack finds one slot left, which is the reason's.
    for i in 0..AGENT_OUTBOX_CAPACITY - 1 {
        farm.result(&slow, &format!("nope-{i}"), 1, true);
        tokio::time::timeout(Duration::from_secs(5), farm.sync())
            .await
            .expect("the scheduler never waits for an agent");
    }
    let agents = farm
        .h
        .call(|reply| Event::ListAgents { reply })
        .await
        .unwrap();
    assert_eq!(
        agents.iter().map(|a| a.connected).collect::<Vec<_>>(),
        vec![false]
    );
    let fast = farm.register().await;
    let mut fast_rx = farm.open(&fast, 2, None, vec![]).await;
    farm.sync().await;
    assert_eq!(drain(&mut fast_rx), vec![format!("assign {r0}@2")]);
    let mut got = Vec::new();
    while let Ok(m) = rx.try_recv() {
        got.push(m);
    }
    assert_eq!(got.len(), AGENT_OUTBOX_CAPACITY);
    let last = got.pop().unwrap().unwrap_err().to_string();
    assert_eq!(
        last,
        "agent stream closed: 63 messages unread; the limit (AGENT_OUTBOX_CAPACITY) is 64"
    );
    assert!(got.iter().all(|m| m.is_ok()));
    assert_eq!(
        farm.sessions_closed(),
        vec![
            ("lease_expired".to_string(), 0),
            ("too_slow".to_string(), 1)
        ]
    );
}

/// Senders wait for room in the event channel: a flood is held where it
/// enters, and a waiting event (a tick here) is delivered, not dropped.
#[tokio::test]
async fn an_event_flood_waits_for_room_and_loses_nothing() {
    let (tx, mut rx) = mpsc::channel(EVENT_CAPACITY);
    let h = Handle {
        tx,
        config: Config::default(),
        crons: watch::channel(Vec::new()).1,
        stopped: Default::default(),
    };
    for _ in 0..EVENT_CAPACITY {
        tokio::time::timeout(Duration::ZERO, h.send(Event::Tick))
            .await
            .expect("room for it")
            .unwrap();
    }
    let blocked = tokio::spawn({
        let h = h.clone();
        async move { h.send(Event::Tick).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!blocked.is_finished(), "a full channel makes senders wait");
    assert!(matches!(rx.recv().await, Some(Event::Tick)));
    blocked.await.unwrap().unwrap();
    let mut n = 1;
    while let Ok(Event::Tick) = rx.try_recv() {
        n += 1;
    }
    assert_eq!(n, EVENT_CAPACITY + 1);
}

/// Twenty agents each bring a new kernel that a schedule's trigger
/// matches: eight executions start (the hourly limit), twelve are refused
/// and counted.
#[tokio::test]
async fn kernel_triggers_start_at_most_the_hourly_limit_of_executions() {
    let farm = Farm::new(60_000, 3);
    let text = "name = \"t\"\n[[workloads]]\nname = \"cpu-hog\"\nparams = { seconds = 1 }\n\
                [schedule]\non_new_kernel = \"6.*\"\n";
    let matrix = Box::new(matrix::parse("t.toml", text).unwrap());
    let r = farm
        .h
        .call(|reply| Event::Submit {
            traceparent: String::new(),
            matrix,
            file_name: "t.toml".into(),
            source: text.into(),
            reply,
        })
        .await
        .unwrap();
    assert!(!r.schedule_id.is_empty());
    for i in 0..20 {
        farm.register_caps(Capabilities {
            kernel_release: format!("6.0.{i}"),
            ..caps()
        })
        .await;
    }
    let schedules = farm
        .h
        .call(|reply| Event::Schedule(ScheduleEvent::List { reply }))
        .await
        .unwrap();
    assert_eq!(schedules.len(), 1);
    assert_eq!(
        schedules[0].executions as usize,
        MAX_TRIGGERED_EXECUTIONS_PER_HOUR
    );
    assert_eq!(schedules[0].last.as_ref().unwrap().kernel, "6.0.7");
    assert_eq!(
        farm.counter("farm_schedule_executions_skipped_total"),
        vec![
            ("previous_running".to_string(), 0),
            ("rate_limit".to_string(), 12)
        ]
    );
}

/// Six matrices, each its own series, each the latest of it: the results
/// gauges, limited to two samples a family, show the newest two, which stay
/// live (a restart shows the gauges from them); the four others leave for
/// the archive. Memory is bounded by what the gauges show, not by the
/// number of series.
#[tokio::test]
async fn ended_matrices_the_gauges_do_not_show_leave_for_the_archive() {
    let farm = Farm::with_series_limit(60_000, 3, 2);
    let a = farm.register().await;
    let mut ids = Vec::new();
    for k in 1..=6 {
        let text = format!(
            "name = \"s{k}\"\n[[workloads]]\nname = \"cpu-hog\"\nparams = {{ seconds = {k} }}\n"
        );
        ids.push(submit_text(&farm, &text).await);
        assert_eq!(play(&farm, &a, |_, _| f64::from(k)).await, vec![(0, 0)]);
    }
    let archived = || {
        farm.registry
            .gather()
            .iter()
            .find(|f| f.name() == "farm_archived_matrices_total")
            .map_or(0, |f| f.get_metric()[0].get_counter().get_value() as u64)
    };
    let t = Instant::now();
    while archived() < 4 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "archived {}",
            archived()
        );
        farm.h.try_send(Event::Tick).unwrap();
        farm.sync().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Ticks enough for a fifth to leave, if one could.
    for _ in 0..5 {
        farm.h.try_send(Event::Tick).unwrap();
        farm.sync().await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(archived(), 4);
    let mut live = Vec::new();
    for id in &ids {
        let matrix_id = id.parse().unwrap();
        let known = farm
            .h
            .call(|reply| Event::Status { matrix_id, reply })
            .await
            .is_ok();
        live.push(known);
    }
    assert_eq!(live, [false, false, false, false, true, true]);
    // An archived matrix's results come from the archive, history and all.
    let mut archive = crate::archive::Location::Sqlite(farm._dir.path().join("db"))
        .open()
        .unwrap();
    let first = archive
        .matrix(ids[0].parse().unwrap())
        .unwrap()
        .expect("archived");
    assert_eq!(first.results.cells.len(), 1);
    assert_eq!(first.results.cells[0].history[0].points.len(), 1);
    // Its one point is in the series index, under its cell's series.
    let points = archive
        .series(
            &super::histories::series_key(&crate::cell::Cell::try_from(&first.cells[0]).unwrap()),
            10,
        )
        .unwrap();
    assert_eq!(points.len(), 1);
    assert_eq!(
        (points[0].matrix_id.to_string(), points[0].cell.get()),
        (ids[0].clone(), 0)
    );
    let wall = points[0]
        .medians
        .iter()
        .find(|m| m.name == "wall_s")
        .unwrap();
    assert_eq!(wall.value, 1.0);
}
