//! A farm of real processes on 127.0.0.1 for end-to-end tests: coordinators,
//! agents and farmctl are the built binaries, started and killed like a user
//! (or a power cut) would.
#![allow(dead_code)]

pub mod browser;
pub mod prometheus;

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The farm tests share two CPUs: one at a time keeps their timing sane.
static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn farmctl_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_farmctl"))
}

/// A binary of another package of the workspace, built by `cargo test --workspace`.
pub fn sibling_bin(name: &str) -> PathBuf {
    let p = farmctl_bin().with_file_name(name);
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The (first) result of cell `c` in `farmctl results --json`'s output.
pub fn result_of_cell(v: &serde_json::Value, c: u64) -> serde_json::Value {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["cell"] == c)
        .unwrap_or_else(|| panic!("no result of cell {c}: {v}"))
        .clone()
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
    pub name: String,
}

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("---- log of {} ----\n{}", self.name, self.log_text());
        }
    }
}

pub fn spawn(
    name: &str,
    bin: &Path,
    args: &[String],
    log: PathBuf,
    envs: &[(&str, String)],
) -> Proc {
    let file = std::fs::File::create(&log).unwrap();
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(file.try_clone().unwrap())
        .stderr(file)
        .env("RUST_LOG", "info,farm_agent=debug");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
    Proc {
        child,
        log,
        name: name.to_string(),
    }
}

pub struct Farm {
    pub port: u16,
    pub coordinator: Option<Proc>,
    pub agents: Vec<Proc>,
    coordinator_args: Vec<String>,
    restarts: usize,
    /// Last, so that it outlives the processes and their logs (fields drop in order).
    pub dir: tempfile::TempDir,
}

impl Farm {
    /// Starts a coordinator with extra flags (e.g. a short lease) on a fixed free port.
    pub fn start(extra: &[&str]) -> Farm {
        Farm::start_in(tempfile::tempdir().unwrap(), extra)
    }

    /// [`Farm::start`] in `dir`: its coordinator's store is `dir/data`,
    /// which may be one `farmctl run --data-dir` left.
    pub fn start_in(dir: tempfile::TempDir, extra: &[&str]) -> Farm {
        let mut farm = Farm {
            port: free_port(),
            dir,
            coordinator: None,
            agents: Vec::new(),
            coordinator_args: extra.iter().map(|s| s.to_string()).collect(),
            restarts: 0,
        };
        farm.start_coordinator();
        farm
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn start_coordinator(&mut self) {
        let mut args = vec![
            "--listen".to_string(),
            format!("127.0.0.1:{}", self.port),
            "--data-dir".to_string(),
            self.data_dir().display().to_string(),
        ];
        args.extend(self.coordinator_args.iter().cloned());
        self.restarts += 1;
        let log = self
            .dir
            .path()
            .join(format!("coordinator-{}.log", self.restarts));
        let p = spawn(
            "coordinator",
            &sibling_bin("farm-coordinator"),
            &args,
            log,
            &[],
        );
        self.coordinator = Some(p);
        wait_for(Duration::from_secs(30), "the coordinator to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && self.data_dir().join("submit.token").is_file()
        });
    }

    pub fn kill_coordinator(&mut self) {
        if let Some(mut c) = self.coordinator.take() {
            c.kill();
            // Keep its log for the post-mortem of a failing test.
            self.agents.push(Proc {
                child: Command::new("true").spawn().unwrap(),
                log: c.log.clone(),
                name: "killed coordinator".into(),
            });
        }
    }

    pub fn start_agent(&mut self) -> usize {
        let state = self
            .dir
            .path()
            .join(format!("agent-{}-state", self.agents.len()));
        self.start_agent_with(&state, &[])
    }

    /// Starts an agent with its restore journal in `state_dir` and extra
    /// environment (e.g. `FARM_AGENT_CRASH_AT`).
    pub fn start_agent_with(&mut self, state_dir: &Path, env: &[(&str, String)]) -> usize {
        let i = self.agents.len();
        let log = self.dir.path().join(format!("agent-{i}.log"));
        let args = vec![
            "--coordinator".to_string(),
            self.url(),
            "--token-file".to_string(),
            self.data_dir().join("agent.token").display().to_string(),
            "--workload-bin".to_string(),
            env!("CARGO_BIN_EXE_farm-workload").to_string(),
            "--state-dir".to_string(),
            state_dir.display().to_string(),
        ];
        let p = spawn(
            &format!("agent {i}"),
            &sibling_bin("farm-agent"),
            &args,
            log,
            env,
        );
        self.agents.push(p);
        i
    }

    /// A coordinator and one agent that boots guests, with the default
    /// kernel cache (nothing moves it: README's commands move nothing) and
    /// extra environment (e.g. `FARM_KERNEL_DIRS`).
    /// Fails, never skips, where QEMU and the rest are missing.
    pub fn with_guests(env: &[(&str, String)]) -> Farm {
        Farm::with_guests_in(tempfile::tempdir().unwrap(), env)
    }

    /// [`Farm::with_guests`] over `dir` (see [`Farm::start_in`]).
    pub fn with_guests_in(dir: tempfile::TempDir, env: &[(&str, String)]) -> Farm {
        for arch in farm_agent::executor::guest::arch::GuestArch::ALL {
            if let Err(why) = farm_agent::executor::guest::machine::available(arch) {
                panic!("{arch} guests: run scripts/test.sh, which sets them up: {why}");
            }
        }
        let mut farm = Farm::start_in(dir, &[]);
        let state = farm.dir.path().join("agent-state");
        farm.start_agent_with(&state, env);
        farm.wait_agents(1);
        farm
    }

    /// Runs farmctl against this farm with the submitter token.
    pub fn farmctl(&self, args: &[&str]) -> Output {
        self.farmctl_env(args, &[])
    }

    /// [`Farm::farmctl`] with extra environment.
    pub fn farmctl_env(&self, args: &[&str], env: &[(&str, String)]) -> Output {
        Command::new(farmctl_bin())
            .args(args)
            .env("FARM_COORDINATOR", self.url())
            .env("FARM_TOKEN_FILE", self.data_dir().join("submit.token"))
            .env_remove("FARM_TOKEN")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn submit(&self, file: &Path) -> String {
        let out = self.farmctl(&["submit", file.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "submit failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    pub fn results(&self, id: &str) -> serde_json::Value {
        let out = self.farmctl(&["results", id, "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "results --json: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// `farmctl agents` rows: (agent id, connected, current run).
    pub fn agents(&self) -> Vec<(String, bool, String)> {
        let out = self.farmctl(&["agents"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                Some((
                    f.first()?.to_string(),
                    *f.get(1)? == "connected",
                    f.last()?.to_string(),
                ))
            })
            .collect()
    }

    pub fn wait_agents(&self, n: usize) {
        wait_for(
            Duration::from_secs(30),
            &format!("{n} connected agents"),
            || self.agents().iter().filter(|a| a.1).count() >= n,
        );
    }
}

/// The run ids of `farmctl results --json`'s results.
pub fn result_ids(v: &serde_json::Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect()
}

pub fn assert_exactly_once(v: &serde_json::Value, n: usize) {
    let ids = result_ids(v);
    let unique: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(ids.len(), n, "results: {ids:?}");
    assert_eq!(unique.len(), n, "a run was counted twice: {ids:?}");
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["ok"], true, "{r}");
        assert!(r["metrics"]["wall_s"].as_f64().unwrap() > 0.0, "{r}");
    }
}

/// The agents that delivered the results.
pub fn agents_of(v: &serde_json::Value) -> BTreeSet<&str> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["agent_id"].as_str().unwrap())
        .collect()
}

/// From agents' logs: for every run, the attempts whose result some agent sent.
/// A run executed twice to completion would show two attempts.
pub fn executions(agents: &[Proc]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in agents {
        for line in a
            .log_text()
            .lines()
            .filter(|l| l.contains("sending result"))
        {
            let field = |k: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(k))
                    .map(str::to_string)
                    .unwrap_or_default()
            };
            out.entry(field("run="))
                .or_default()
                .insert(field("attempt="));
        }
    }
    out
}

/// The guest kernel cache the tests share (downloads and builds are
/// kept): the agent's default, /var/cache/farm/guests as root, so that the
/// tests meet the cache a user of README's commands meets.
pub fn guest_cache() -> PathBuf {
    farm_agent::executor::guest::default_cache().expect("no HOME for the default guest cache")
}

/// scripts/kernel-tree.sh's repository (v6.1 and the bisection's commits),
/// made once in target/kernel-tree.
pub fn kernel_tree() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(root.join("scripts/kernel-tree.sh"))
        .arg(root.join("target/kernel-tree"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/kernel-tree.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// `git -C repo ARGS`'s output, trimmed.
pub fn git(repo: &str, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

pub fn wait_for(timeout: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(
            t.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A matrix of 2 workloads × 2 thread counts × 3 repetitions = 12 runs,
/// each run taking about `seconds`.
pub fn twelve_runs(seconds: f64) -> String {
    format!(
        r#"
name = "e2e"
repetitions = 3
timeout_s = 120

[[workloads]]
name = "cpu-hog"
params = {{ threads = [1, 2], seconds = {seconds} }}

[[workloads]]
name = "lu"
params = {{ threads = [1, 2], size = 24, iterations = {iters} }}

[baseline]
threads = 1

# Exactly twelve: three runs a side never decide a comparison, and these
# tests count runs, so no runs are added.
[verdict]
max_runs = 3
"#,
        iters = ((seconds * 5000.0) as i64).max(1)
    )
}

/// A matrix with a regression beyond doubt: three times the work on one
/// side, five runs a side (`wall_s` and the hog's own figure regress).
pub const CLEAR_REGRESSION: &str = r#"
name = "regression"
repetitions = 5
timeout_s = 60

[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = [0.1, 0.3] }

[baseline]
seconds = 0.1

[verdict]
max_runs = 10
"#;

/// The address a process wrote to `file` once it listens (`metrics.addr`).
pub fn written_addr(file: &Path) -> std::net::SocketAddr {
    wait_for(
        Duration::from_secs(30),
        &format!("{}", file.display()),
        || std::fs::read_to_string(file).is_ok_and(|t| t.ends_with('\n')),
    );
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `GET path` on a metrics endpoint with a plain socket: the status line
/// and headers, and the body.
pub fn scrape(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    s.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (head.to_string(), body.to_string())
}

/// lu at fixed work on both CPUs: its time grows when something else runs.
const LU: &str = r#"
name = "lu-nightly"
repetitions = 3
timeout_s = 60

[[workloads]]
name = "lu"
params = { threads = 2, size = 24, iterations = 150 }
"#;

/// A history with a step: the same lu matrix six times, then six times
/// more with two spinning threads beside it (a machine that got slower
/// from the 7th matrix on). The matrix ids, in order.
pub fn stepped_history(farm: &Farm) -> Vec<String> {
    let file = farm.write("lu.toml", LU);
    let run = || {
        let id = farm.submit(&file);
        let w = farm.farmctl(&["watch", &id]);
        assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
        id
    };
    let mut ids: Vec<String> = (0..6).map(|_| run()).collect();
    let mut hog = Command::new(env!("CARGO_BIN_EXE_farm-workload"))
        .args(["cpu-hog", "--param", "threads=2", "--param", "seconds=600"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    ids.extend((0..6).map(|_| run()));
    let _ = hog.kill();
    let _ = hog.wait();
    ids
}
