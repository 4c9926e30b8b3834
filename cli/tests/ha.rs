//! A highly available farm of real processes: a 3-member etcd cluster on
//! loopback (Debian's etcd-server), two coordinators sharing it, two
//! agents and farmctl given both coordinators' URLs. Leaders are killed,
//! paused and cut off from etcd; etcd members are killed; every matrix
//! still ends with each run executed once.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

#[path = "../../coordinator/tests/support/etcd.rs"]
mod cluster;
#[path = "../../coordinator/tests/support/postgres.rs"]
mod postgres;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use cluster::{Cluster, Tls};
use common::{
    Proc, agents_of, assert_exactly_once, executions, farmctl_bin, free_port, scrape, serial,
    sibling_bin, spawn, twelve_runs, wait_for, written_addr,
};

struct HaFarm {
    cluster: Cluster,
    /// The archive every coordinator shares.
    pg: postgres::Postgres,
    /// Flags every coordinator gets besides the common ones.
    extra: Vec<String>,
    ports: [u16; 2],
    coordinators: [Option<Proc>; 2],
    starts: usize,
    agents: Vec<Proc>,
    /// Logs of killed coordinators, kept for a failing test's post-mortem.
    killed: Vec<Proc>,
    dir: tempfile::TempDir,
}

impl HaFarm {
    /// The cluster, coordinator 0 leading, coordinator 1 standing by, and
    /// `agents` agents connected.
    fn start(agents: usize) -> HaFarm {
        HaFarm::start_with(agents, &[])
    }

    fn start_with(agents: usize, extra: &[&str]) -> HaFarm {
        HaFarm::on(Cluster::start(3), agents, extra)
    }

    fn on(cluster: Cluster, agents: usize, extra: &[&str]) -> HaFarm {
        let mut f = HaFarm {
            cluster,
            pg: postgres::Postgres::start(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            ports: [free_port(), free_port()],
            coordinators: [None, None],
            starts: 0,
            agents: Vec::new(),
            killed: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
        };
        f.start_coordinator(0);
        wait_for(Duration::from_secs(30), "coordinator 0 to lead", || {
            f.standing(0) == "leading"
        });
        f.start_coordinator(1);
        wait_for(Duration::from_secs(30), "coordinator 1 to stand by", || {
            f.standing(1) == "following"
        });
        for i in 0..agents {
            f.start_agent(i);
        }
        wait_for(Duration::from_secs(30), "the agents to connect", || {
            f.connected_agents() == agents
        });
        f
    }

    fn data_dir(&self, i: usize) -> PathBuf {
        self.dir.path().join(format!("coordinator-{i}"))
    }

    fn url(&self, i: usize) -> String {
        format!("http://127.0.0.1:{}", self.ports[i])
    }

    fn urls(&self) -> String {
        format!("{},{}", self.url(0), self.url(1))
    }

    fn start_coordinator(&mut self, i: usize) {
        let data = self.data_dir(i);
        std::fs::create_dir_all(&data).unwrap();
        // Plaintext on loopback: every coordinator takes the same tokens.
        if i == 1 {
            for t in ["agent.token", "submit.token"] {
                let to = data.join(t);
                if !to.exists() {
                    std::fs::copy(self.data_dir(0).join(t), &to).unwrap();
                }
            }
        }
        let _ = std::fs::remove_file(data.join("metrics.addr"));
        let args: Vec<String> = [
            "--listen",
            &format!("127.0.0.1:{}", self.ports[i]),
            "--data-dir",
            &data.display().to_string(),
            "--store",
            &format!("etcd://{}", self.cluster.endpoints()),
            "--store-prefix",
            "/farm-test",
            "--archive",
            &self.pg.url(),
            "--leader-ttl-s",
            "3",
            "--metrics-listen",
            "127.0.0.1:0",
            // Runs outlive a failover's seconds without their lease lapsing.
            "--heartbeat-ms",
            "200",
            "--lease-ms",
            "15000",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(self.extra.iter().cloned())
        .collect();
        self.starts += 1;
        let log = self
            .dir
            .path()
            .join(format!("coordinator-{i}-{}.log", self.starts));
        self.coordinators[i] = Some(spawn(
            &format!("coordinator {i}"),
            &sibling_bin("farm-coordinator"),
            &args,
            log,
            &[],
        ));
        wait_for(Duration::from_secs(30), "the coordinator's tokens", || {
            data.join("submit.token").is_file()
        });
    }

    fn coordinator(&self, i: usize) -> &Proc {
        self.coordinators[i]
            .as_ref()
            .expect("a running coordinator")
    }

    fn kill_coordinator(&mut self, i: usize) {
        let mut c = self.coordinators[i].take().unwrap();
        c.kill();
        self.killed.push(c);
    }

    fn signal(&self, i: usize, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.coordinator(i).child.id() as i32);
        nix::sys::signal::kill(pid, sig).unwrap();
    }

    fn start_agent(&mut self, i: usize) {
        let args: Vec<String> = vec![
            "--coordinator".into(),
            self.urls(),
            "--token-file".into(),
            self.data_dir(0).join("agent.token").display().to_string(),
            "--workload-bin".into(),
            env!("CARGO_BIN_EXE_farm-workload").into(),
            "--state-dir".into(),
            self.dir
                .path()
                .join(format!("agent-{i}-state"))
                .display()
                .to_string(),
            "--no-guests".into(),
        ];
        let log = self.dir.path().join(format!("agent-{i}.log"));
        self.agents.push(spawn(
            &format!("agent {i}"),
            &sibling_bin("farm-agent"),
            &args,
            log,
            &[],
        ));
    }

    /// farmctl with `coordinators` as its --coordinator.
    fn farmctl_at(&self, coordinators: &str, args: &[&str]) -> Output {
        Command::new(farmctl_bin())
            .args(args)
            .env("FARM_COORDINATOR", coordinators)
            .env("FARM_TOKEN_FILE", self.data_dir(0).join("submit.token"))
            .env_remove("FARM_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// SubmitMatrix straight to coordinator `i`, as one gRPC call (no
    /// farmctl: nothing asked first, nobody followed): the matrix id or
    /// the refusal, and how long the answer took.
    fn submit_to(&self, i: usize, toml: &str) -> (Result<String, tonic::Status>, Duration) {
        let token = std::fs::read_to_string(self.data_dir(0).join("submit.token")).unwrap();
        let header: tonic::metadata::MetadataValue<_> =
            format!("Bearer {}", token.trim()).parse().unwrap();
        let (url, toml) = (self.url(i), toml.to_owned());
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async move {
            let channel = tonic::transport::Endpoint::from_shared(url)
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut c = farm_proto::farm_service_client::FarmServiceClient::with_interceptor(
                channel,
                move |mut req: tonic::Request<()>| {
                    req.metadata_mut().insert("authorization", header.clone());
                    Ok(req)
                },
            );
            let t = Instant::now();
            let r = c
                .submit_matrix(farm_proto::SubmitMatrixRequest {
                    file_name: b"m.toml".to_vec(),
                    toml: toml.into_bytes(),
                })
                .await;
            (r.map(|r| r.into_inner().matrix_id), t.elapsed())
        })
    }

    /// farmctl given both coordinators, as a user of the farm runs it.
    fn farmctl(&self, args: &[&str]) -> Output {
        self.farmctl_at(&self.urls(), args)
    }

    fn connected_agents(&self) -> usize {
        let out = self.farmctl(&["agents"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .filter(|l| l.split_whitespace().nth(1) == Some("connected"))
            .count()
    }

    fn submit(&self, toml: &str) -> String {
        let file = self.dir.path().join("m.toml");
        std::fs::write(&file, toml).unwrap();
        let out = self.farmctl(&["submit", file.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "submit: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    fn results(&self, id: &str) -> serde_json::Value {
        let out = self.farmctl(&["results", id, "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "results --json: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// Waits for `id` to end (farmctl watch, through any failover) and
    /// checks each of its `n` runs ran exactly once, on both agents.
    fn finishes_exactly_once(&self, id: &str, n: usize) {
        let out = self.farmctl(&["watch", id]);
        assert!(
            out.status.success(),
            "watch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = self.results(id);
        assert_exactly_once(&v, n);
        assert_eq!(agents_of(&v).len(), 2, "{v}");
        let execs = executions(&self.agents);
        assert_eq!(execs.len(), n, "{execs:?}");
        for (run, attempts) in &execs {
            assert_eq!(attempts.len(), 1, "run {run} executed again: {attempts:?}");
        }
    }

    /// Waits until some runs are done and both agents are running one.
    fn wait_mid_matrix(&self, id: &str) {
        wait_for(Duration::from_secs(60), "3 runs done and 2 running", || {
            let v = self.results(id);
            v["counts"]["finished"].as_u64().unwrap() >= 3
                && v["counts"]["running"].as_u64().unwrap() == 2
        });
    }

    /// `leading`, `following` or `unknown`, from coordinator `i`'s /metrics.
    fn standing(&self, i: usize) -> String {
        if self.coordinators[i].is_none() {
            return "dead".into();
        }
        let file = self.data_dir(i).join("metrics.addr");
        if !file.is_file() {
            return "starting".into();
        }
        let (_, body) = scrape(written_addr(&file), "/metrics");
        let on: Vec<&str> = body
            .lines()
            .filter_map(|l| l.strip_prefix("farm_coordinator_standing{standing=\""))
            .filter_map(|l| l.strip_suffix("\"} 1"))
            .collect();
        assert!(on.len() <= 1, "{on:?}");
        on.first().map_or("starting".into(), |s| s.to_string())
    }

    fn log(&self, i: usize) -> String {
        self.coordinator(i).log_text()
    }

    /// A metric without labels from coordinator `i`'s /metrics.
    fn metric(&self, i: usize, name: &str) -> f64 {
        let (_, body) = scrape(
            written_addr(&self.data_dir(i).join("metrics.addr")),
            "/metrics",
        );
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing from:\n{body}"))
    }
}

#[test]
fn a_killed_leader_is_replaced_and_the_matrix_finishes_with_no_run_repeated() {
    let _g = serial();
    let mut f = HaFarm::start(2);
    let id = f.submit(&twelve_runs(1.0));
    f.wait_mid_matrix(&id);
    f.kill_coordinator(0);
    wait_for(Duration::from_secs(30), "coordinator 1 to lead", || {
        f.standing(1) == "leading"
    });
    assert!(
        f.log(1)
            .contains("recovered state from the store matrices=1 agents=2"),
        "{}",
        f.log(1)
    );
    f.finishes_exactly_once(&id, 12);
    // The killed one comes back as a standby, and says who leads: farmctl
    // given it alone follows its word to the leader.
    f.start_coordinator(0);
    wait_for(Duration::from_secs(30), "coordinator 0 to stand by", || {
        f.standing(0) == "following"
    });
    let out = f.farmctl_at(&f.url(0), &["agents"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.matches(" connected").count(), 2, "{table}");
    assert!(
        f.log(0)
            .contains(&format!("standing by leader={}", f.url(1))),
        "{}",
        f.log(0)
    );
}

#[test]
fn farmctl_given_only_a_standbys_url_follows_the_leader_it_names() {
    let _g = serial();
    let f = HaFarm::start(2);
    let standby = f.url(1);
    let run = |args: &[&str]| {
        let out = f.farmctl_at(&standby, args);
        assert!(
            out.status.success(),
            "farmctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let file = f.dir.path().join("m.toml");
    std::fs::write(&file, twelve_runs(0.2)).unwrap();
    let id = run(&["submit", file.to_str().unwrap()]).trim().to_owned();
    assert!(id.starts_with("m-"), "{id}");
    let agents = run(&["agents"]);
    assert_eq!(agents.matches(" connected").count(), 2, "{agents}");
    run(&["watch", &id]);
    let v: serde_json::Value = serde_json::from_str(&run(&["results", &id, "--json"])).unwrap();
    assert_exactly_once(&v, 12);
    assert_eq!(v["state"], "done", "{v}");
    assert!(run(&["schedules"]).lines().count() <= 1);
    // It asked the standby, which named the leader: nothing was served
    // by the standby, and it still stands by.
    assert_eq!(f.standing(1), "following");
    assert_eq!(f.standing(0), "leading");
}

/// The leader's lease TTL the farm runs with (`--leader-ttl-s`), and the
/// grace past it (`leader::LOSS_GRACE`) before a leader cut off from etcd
/// gives up.
const TTL_AND_GRACE: Duration = Duration::from_secs(3 + 2);

#[test]
fn a_leader_that_loses_etcd_says_so_and_farmctl_says_promptly_that_no_leader_is_known() {
    let _g = serial();
    let mut f = HaFarm::start(0);
    for m in 0..3 {
        f.cluster.kill(m);
    }
    let lost_at = Instant::now();
    // A submission in flight when etcd went: its commit cannot be known
    // to hold, and the term ends.
    let (in_flight, took) = f.submit_to(0, &twelve_runs(0.1));
    let in_flight = in_flight.expect_err("a submission committed without etcd");
    eprintln!(
        "in flight: {:?} {:?} after {took:?}",
        in_flight.code(),
        in_flight.message()
    );
    assert_eq!(in_flight.code(), tonic::Code::Unavailable, "{in_flight:?}");
    let lost = in_flight.message().to_owned();
    assert!(
        lost.starts_with("leadership lost: etcd unreachable ("),
        "{lost}"
    );
    // Told as the term ended: at the lease's end, not after the store's
    // retries (8 s) and the scheduler's stop.
    assert!(
        lost_at.elapsed() < TTL_AND_GRACE + Duration::from_secs(2),
        "{:?}",
        lost_at.elapsed()
    );
    // Every later call hears the same, at once.
    let (after, took) = f.submit_to(0, &twelve_runs(0.1));
    let after = after.expect_err("a submission committed without etcd");
    eprintln!(
        "after: {:?} {:?} after {took:?}",
        after.code(),
        after.message()
    );
    assert_eq!(after.code(), tonic::Code::Unavailable);
    assert_eq!(after.message(), lost);
    assert!(took < Duration::from_secs(1), "{took:?}");
    // No leader anywhere: farmctl given every URL says so within seconds,
    // with what each said, rather than waiting for a failover.
    wait_for(
        Duration::from_secs(30),
        "both coordinators to know no leader",
        || f.standing(0) == "unknown" && f.standing(1) == "unknown",
    );
    let t = Instant::now();
    let out = f.farmctl(&["agents"]);
    let took = t.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!("farmctl with every URL: {err:?} after {took:?}");
    assert!(!out.status.success());
    let expected = format!(
        "error: no leader is known: no coordinator asked for 3 s leads or names one: \
         {}: {lost}; {}: this coordinator stands by and no leader is known: etcd: ",
        f.url(0),
        f.url(1)
    );
    assert!(err.starts_with(&expected), "{err}\nexpected: {expected}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(6),
        "{took:?}"
    );
}

/// Six runs of cpu-hog for 0.5 s. Every run is swept often enough to
/// report the same telemetry; a run of lu for a few milliseconds may be
/// missed by the 100-ms sweeps and lack runqueue wait. So matrices of this
/// one shape have the same series, and the newest alone stays shown in
/// the results gauges: an older matrix that still held a series' newest
/// point would stay live, as the gauges need it.
fn six_hog_runs() -> String {
    r#"
name = "e2e"
repetitions = 3
timeout_s = 120

[[workloads]]
name = "cpu-hog"
params = { threads = [1, 2], seconds = 0.5 }

[baseline]
threads = 1

[verdict]
max_runs = 3
"#
    .to_string()
}

#[test]
fn ended_matrices_wait_while_postgres_is_down_and_are_archived_when_it_returns() {
    let _g = serial();
    let mut f = HaFarm::start(2);
    f.pg.stop();
    // Three of one series: the latest stays live once PostgreSQL is back
    // (the results gauges show it after a restart), the two before it
    // leave for the archive.
    let ids = [
        f.submit(&six_hog_runs()),
        f.submit(&six_hog_runs()),
        f.submit(&six_hog_runs()),
    ];
    for id in &ids {
        let out = f.farmctl(&["watch", id]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // They ended, and all three wait in live state, still answered from
    // there: their summaries need the histories' archived past, and until
    // the gauges have had them nobody knows which one they show.
    wait_for(
        Duration::from_secs(30),
        "a failed archiving and a backlog of 3",
        || {
            f.metric(0, "farm_archive_failures_total") >= 1.0
                && f.metric(0, "farm_archive_backlog_matrices") == 3.0
        },
    );
    assert_eq!(f.metric(0, "farm_archived_matrices_total"), 0.0);
    for id in &ids {
        assert_exactly_once(&f.results(id), 6);
    }
    assert!(
        f.log(0)
            .contains("ended matrices wait in live state: archive (PostgreSQL at 127.0.0.1:"),
        "{}",
        f.log(0)
    );
    f.pg.resume();
    wait_for(Duration::from_secs(30), "two matrices archived", || {
        f.metric(0, "farm_archived_matrices_total") == 2.0
            && f.metric(0, "farm_archive_backlog_matrices") == 0.0
    });
    assert!(
        f.log(0).contains("the archive takes ended matrices again"),
        "{}",
        f.log(0)
    );
    // Nothing lost: every run once, the first two from the archive now.
    for id in &ids {
        let v = f.results(id);
        assert_exactly_once(&v, 6);
        assert_eq!(v["state"], "done", "{v}");
    }
    let execs = executions(&f.agents);
    assert_eq!(execs.len(), 18, "{execs:?}");
    // The two left etcd: the next leader recovers the latest alone, and
    // finds the others in the archive.
    f.kill_coordinator(0);
    wait_for(Duration::from_secs(30), "coordinator 1 to lead", || {
        f.standing(1) == "leading"
    });
    assert!(
        f.log(1)
            .contains("recovered state from the store matrices=1 agents=2"),
        "{}",
        f.log(1)
    );
    for id in &ids {
        assert_exactly_once(&f.results(id), 6);
    }
}

#[test]
fn losing_an_etcd_member_interrupts_nothing() {
    let _g = serial();
    let mut f = HaFarm::start(2);
    let id = f.submit(&twelve_runs(1.0));
    f.wait_mid_matrix(&id);
    // The member raft's leader is: the harder loss.
    let victim = f.cluster.leader();
    f.cluster.kill(victim);
    f.finishes_exactly_once(&id, 12);
    assert_eq!(f.standing(0), "leading");
    for i in 0..2 {
        let log = f.log(i);
        assert!(!log.contains("the term ends"), "{log}");
        assert!(!log.contains("the leadership is lost"), "{log}");
    }
    assert!(!f.log(0).contains("standing by"), "{}", f.log(0));
}

#[test]
fn a_paused_leader_commits_nothing_once_replaced_and_steps_down() {
    use nix::sys::signal::Signal;
    let _g = serial();
    let f = HaFarm::start(2);
    let id = f.submit(&twelve_runs(1.0));
    f.wait_mid_matrix(&id);
    f.signal(0, Signal::SIGSTOP);
    wait_for(Duration::from_secs(30), "coordinator 1 to lead", || {
        f.standing(1) == "leading"
    });
    let before = f.log(0);
    f.signal(0, Signal::SIGCONT);
    wait_for(
        Duration::from_secs(30),
        "coordinator 0 to step down",
        || f.standing(0) == "following",
    );
    let after = f.log(0)[before.len()..].to_owned();
    // What it had not committed before the pause it never commits: its
    // first write after it (or its keep-alive) finds the lease gone.
    assert!(
        after.contains("store: this coordinator is no longer the leader; nothing was written")
            || after.contains("the leadership is lost"),
        "{after}"
    );
    assert!(
        after.contains(&format!("standing by leader={}", f.url(1))),
        "{after}"
    );
    f.finishes_exactly_once(&id, 12);
}

#[test]
fn a_leader_cut_off_from_etcd_stops_dispatching_says_so_and_resumes() {
    let _g = serial();
    let mut f = HaFarm::start(2);
    let id = f.submit(&twelve_runs(1.0));
    f.wait_mid_matrix(&id);
    for m in 0..3 {
        f.cluster.kill(m);
    }
    wait_for(
        Duration::from_secs(30),
        "coordinator 0 to stop leading",
        || f.standing(0) == "unknown",
    );
    let out = f.farmctl_at(&f.url(0), &["agents"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.starts_with(&format!(
            "error: no leader is known: no coordinator asked for 3 s leads or names one: {}: \
             leadership lost: etcd unreachable (",
            f.url(0)
        )),
        "{err}"
    );
    // Nothing is dispatched while etcd is gone: the runs in progress end
    // on their agents, and no new one starts.
    let assigned = |f: &HaFarm| {
        f.agents
            .iter()
            .map(|a| a.log_text().matches("run assigned").count())
            .sum::<usize>()
    };
    let during = assigned(&f);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(assigned(&f), during, "runs were dispatched without etcd");
    f.cluster.restart(&[0, 1, 2]);
    // farmctl says at once that no leader is known until one is elected
    // on the etcd that is back: wait for one first.
    wait_for(
        Duration::from_secs(30),
        "a coordinator to lead again",
        || f.standing(0) == "leading" || f.standing(1) == "leading",
    );
    f.finishes_exactly_once(&id, 12);
}

#[test]
fn a_matrix_larger_than_an_etcd_request_is_refused_whole() {
    let _g = serial();
    let f = HaFarm::start_with(0, &["--etcd-max-request-bytes", "65536"]);
    // A file of 60 KiB: under farmctl's 1 MiB, over what one 64 KiB etcd
    // request holds.
    let toml = format!("{}\n# {}\n", twelve_runs(0.1), "x".repeat(60 << 10));
    let file = f.dir.path().join("big.toml");
    std::fs::write(&file, &toml).unwrap();
    let out = f.farmctl(&["submit", file.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    // The file, its name and the matrix's name, and 512 bytes for the rest.
    let bytes = toml.len() + file.to_str().unwrap().len() + "e2e".len() + 512;
    let expected = format!(
        "error: matrix file {} is {bytes} bytes; the store keeps at most ",
        file.display()
    );
    assert!(err.starts_with(&expected), "{err}");
    let limit: usize = err[expected.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(limit < 64 << 10 && bytes > limit, "{err}");
    // Nothing of it was stored: no matrix, and the farm goes on.
    let ok = f.submit(&twelve_runs(0.1));
    assert!(ok.starts_with("m-"), "{ok}");
}

#[test]
fn coordinators_reach_etcd_over_tls_with_a_client_certificate() {
    let _g = serial();
    let pki = tempfile::tempdir().unwrap();
    let dir = pki.path().to_str().unwrap();
    for args in [
        vec!["pki", "init", "--dir", dir],
        vec!["pki", "issue-client", "etcd-user", "--dir", dir],
    ] {
        let out = Command::new(sibling_bin("farm-coordinator"))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let file = |f: &str| pki.path().join(f);
    // The members serve the farm authority's server certificate (it names
    // 127.0.0.1) and take only clients of that authority.
    let cluster = Cluster::start_with(
        3,
        Some(Tls {
            ca: file("ca.crt"),
            cert: file("coordinator.crt"),
            key: file("coordinator.key"),
        }),
    );
    let (ca, cert, key) = (
        file("ca.crt").display().to_string(),
        file("submitters/etcd-user.crt").display().to_string(),
        file("submitters/etcd-user.key").display().to_string(),
    );
    let f = HaFarm::on(
        cluster,
        2,
        &[
            "--store-tls-ca",
            &ca,
            "--store-tls-cert",
            &cert,
            "--store-tls-key",
            &key,
        ],
    );
    let id = f.submit(&twelve_runs(0.2));
    f.finishes_exactly_once(&id, 12);
}
