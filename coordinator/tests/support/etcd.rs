//! A real etcd cluster of Debian's `etcd-server` on loopback, for tests:
//! members are processes that can be killed and started again. Shared by
//! the coordinator's store suite and the farm's failover tests
//! (`#[path]`-included).
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const ETCD: &str = "/usr/bin/etcd";

/// A loopback port free now, never handed out before in this process, and
/// below the kernel's ephemeral range (32768 and up). A port of bind(0),
/// closed and given to etcd, could meanwhile be handed to a parallel test's
/// member or taken by an outgoing connection; one member of the store suite
/// once failed to start so ("bind: address already in use").
fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering::SeqCst};
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // A range per process, so that test binaries run one after another
    // do not meet ports a previous one left in TIME_WAIT.
    let base = 20_000 + (std::process::id() % 400) as u16 * 30;
    let _ = NEXT.compare_exchange(0, base, SeqCst, SeqCst);
    loop {
        let port = NEXT.fetch_add(1, SeqCst);
        assert!(
            port < 32_768,
            "no free loopback port below the ephemeral range"
        );
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

pub struct Member {
    pub name: String,
    pub client_port: u16,
    peer_port: u16,
    /// Plain HTTP /health and /metrics, whatever the client URLs speak.
    metrics_port: u16,
    child: Option<Child>,
}

pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub members: Vec<Member>,
    initial: String,
    tls: Option<Tls>,
}

/// Client URLs over TLS that demand a client certificate of `ca`; the
/// members serve `cert` and `key` (PEM files).
#[derive(Clone)]
pub struct Tls {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Cluster {
    /// `n` members on free loopback ports, healthy when this returns.
    pub fn start(n: usize) -> Cluster {
        Cluster::start_with(n, None)
    }

    /// [`Cluster::start`], its client URLs over `tls` if given.
    pub fn start_with(n: usize, tls: Option<Tls>) -> Cluster {
        assert!(
            Path::new(ETCD).is_file(),
            "{ETCD} is missing: this test needs Debian's etcd-server (scripts/test.sh installs it)"
        );
        let dir = tempfile::tempdir().unwrap();
        let members: Vec<Member> = (0..n)
            .map(|i| Member {
                name: format!("n{i}"),
                client_port: free_port(),
                peer_port: free_port(),
                metrics_port: free_port(),
                child: None,
            })
            .collect();
        let initial = members
            .iter()
            .map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port))
            .collect::<Vec<_>>()
            .join(",");
        let mut c = Cluster {
            dir,
            members,
            initial,
            tls,
        };
        for i in 0..n {
            c.spawn(i);
        }
        for i in 0..n {
            c.wait_healthy(i);
        }
        c
    }

    fn log(&self, i: usize) -> PathBuf {
        self.dir
            .path()
            .join(format!("{}.log", self.members[i].name))
    }

    fn spawn(&mut self, i: usize) {
        let m = &self.members[i];
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", m.client_port);
        let metrics = format!("http://127.0.0.1:{}", m.metrics_port);
        let peer = format!("http://127.0.0.1:{}", m.peer_port);
        let data = self.dir.path().join(&m.name);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log(i))
            .unwrap();
        let child = Command::new(ETCD)
            .args(["--name", &m.name, "--data-dir"])
            .arg(&data)
            .args([
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
                "--initial-cluster",
                &self.initial,
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                "farm-test",
                "--logger",
                "zap",
                "--log-outputs",
                "stderr",
                "--listen-metrics-urls",
                &metrics,
            ])
            .args(self.tls.iter().flat_map(|t| {
                [
                    "--client-cert-auth".into(),
                    "--trusted-ca-file".into(),
                    t.ca.clone().into_os_string(),
                    "--cert-file".into(),
                    t.cert.clone().into_os_string(),
                    "--key-file".into(),
                    t.key.clone().into_os_string(),
                ]
            }))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {ETCD}: {e}"));
        self.members[i].child = Some(child);
    }

    /// Waits until member `i` answers /health with true.
    pub fn wait_healthy(&self, i: usize) {
        let port = self.members[i].metrics_port;
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if health(port) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "etcd member {} not healthy in 30 s; its log:\n{}",
            self.members[i].name,
            std::fs::read_to_string(self.log(i)).unwrap_or_default()
        );
    }

    /// `127.0.0.1:P,…`: every member's client endpoint.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.client_port))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn urls(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        self.members
            .iter()
            .map(|m| format!("{scheme}://127.0.0.1:{}", m.client_port))
            .collect()
    }

    /// SIGKILLs member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts `members` again on their data (after [`Cluster::kill`]),
    /// healthy when this returns (a quorum of them, with the others).
    pub fn restart(&mut self, members: &[usize]) {
        for &i in members {
            self.spawn(i);
        }
        for &i in members {
            self.wait_healthy(i);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        if std::thread::panicking() {
            for i in 0..self.members.len() {
                let log = std::fs::read_to_string(self.log(i)).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(20).collect();
                eprintln!(
                    "---- last lines of etcd {} ----\n{}",
                    self.members[i].name,
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
    }
}

impl Cluster {
    /// The member that is raft's leader now, by its own status (plaintext
    /// clusters only: it asks the gRPC gateway).
    pub fn leader(&self) -> usize {
        assert!(self.tls.is_none(), "leader() speaks plain HTTP");
        for (i, m) in self.members.iter().enumerate() {
            if m.child.is_none() {
                continue;
            }
            let status = post(m.client_port, "/v3/maintenance/status", "{}");
            let field = |k: &str| {
                status
                    .split(&format!("\"{k}\":\""))
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .map(str::to_owned)
            };
            if field("member_id").is_some() && field("member_id") == field("leader") {
                return i;
            }
        }
        panic!("no etcd member says it leads");
    }
}

/// POST `body` to `path` of a member's gRPC gateway; the response's body.
fn post(port: u16, path: &str, body: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!(
        "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).is_err() {
        return String::new();
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// GET /health on a member: `{"health":"true"}` once it has a leader.
fn health(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut body = String::new();
    let _ = s.read_to_string(&mut body);
    body.contains("\"health\":\"true\"")
}
