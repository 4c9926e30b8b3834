//! Processes that run beside the measured workload and are stopped after it:
//! competing loads (seed 003's `stress --cpu 1` beside lu) and the server of
//! a client/server tool (iperf3, netserver).
//!
//! They run from a thread of their own that lives as long as they do: their
//! `PR_SET_PDEATHSIG` is tied to it, and perf counters inherited by the
//! workload's thread stay theirs. Each is journalled (`process <pid>
//! <start time>`) as soon as it starts, so that an agent that dies before
//! stopping them kills them when it starts again.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::process;
use crate::executor::contract::lock;
use crate::executor::killer::Killer;
use crate::state::journal::{self, Entry, Journal};

/// Why background processes did not start, or a server never listened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("starting {}: {source}", program.display())]
    Start {
        program: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Journal(#[from] journal::Error),
    #[error("starting a background thread: {0}")]
    Thread(std::io::Error),
    #[error("the background thread died")]
    ThreadDied,
    #[error("exited before listening on port {0}")]
    Exited(u16),
    #[error("not listening on port {port} after {secs} s")]
    NotListening { port: u16, secs: f64 },
}

/// Started background processes, until [`Background::stop`].
pub(super) struct Background {
    stop: mpsc::Sender<()>,
    thread: std::thread::JoinHandle<()>,
    /// Their pids, in the order of the specs.
    pids: Vec<i32>,
}

impl Background {
    /// Starts every spec, in order, and journals each. If one fails, those
    /// already started are stopped and the error returned.
    pub fn start(specs: Vec<process::Spec>, journal: Arc<Mutex<Journal>>) -> Result<Self, Error> {
        let (ready_tx, ready_rx) = mpsc::channel::<Result<Vec<i32>, (Vec<i32>, Error)>>();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("background".into())
            .spawn(move || {
                let mut running = Vec::new();
                let mut failed = None;
                for spec in &specs {
                    let killer = Killer::default();
                    match process::start(spec, &killer) {
                        Ok(r) => {
                            let pid = r.pid();
                            let mut j = lock(&journal);
                            let start_time =
                                journal::process_start_time(j.root(), pid).unwrap_or(0);
                            if let Err(e) = j.record(&Entry::Process { pid, start_time }) {
                                failed = Some(Error::Journal(e));
                            }
                            drop(j);
                            running.push((r, killer));
                        }
                        Err(e) => {
                            failed = Some(Error::Start {
                                program: spec.program.clone(),
                                source: e,
                            });
                        }
                    }
                    if failed.is_some() {
                        break;
                    }
                }
                let pids: Vec<i32> = running.iter().map(|(r, _)| r.pid()).collect();
                let _ = ready_tx.send(match failed {
                    None => Ok(pids),
                    Some(e) => Err((pids, e)),
                });
                // Until told to stop, or until the run's thread is gone.
                let _ = stop_rx.recv();
                for (r, killer) in running {
                    killer.cancel();
                    let _ = r.wait();
                }
            })
            .map_err(Error::Thread)?;
        let started = |pids| Background { stop, thread, pids };
        match ready_rx.recv() {
            Ok(Ok(pids)) => Ok(started(pids)),
            Ok(Err((pids, e))) => {
                started(pids).stop();
                Err(e)
            }
            Err(_) => Err(Error::ThreadDied),
        }
    }

    pub fn pids(&self) -> &[i32] {
        &self.pids
    }

    /// Kills them all (their whole process groups) and reaps them.
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// How often a server's port and process are looked at while waiting.
const POLL: Duration = Duration::from_millis(10);

/// Waits until TCP `port` is in LISTEN state, for at most `timeout`, and
/// fails early if process `pid` exits first (a server that could not bind).
/// The socket tables are read rather than the port connected to: iperf3
/// takes a probe for a client that failed.
pub(super) fn wait_listening(
    root: &Path,
    port: u16,
    pid: i32,
    timeout: Duration,
) -> Result<(), Error> {
    let give_up = Instant::now() + timeout;
    loop {
        if listening(root, port) {
            return Ok(());
        }
        if !alive(root, pid) {
            return Err(Error::Exited(port));
        }
        if Instant::now() >= give_up {
            return Err(Error::NotListening {
                port,
                secs: timeout.as_secs_f64(),
            });
        }
        std::thread::sleep(POLL);
    }
}

/// Whether something listens on TCP `port`, IPv4 or IPv6, any address.
pub(super) fn listening(root: &Path, port: u16) -> bool {
    ["proc/net/tcp", "proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(root.join(table))
            .is_ok_and(|text| listening_ports(&text).any(|p| p == port))
    })
}

/// `st` of a socket in LISTEN state, in `/proc/net/tcp`.
const TCP_LISTEN: &str = "0A";

/// The local ports of the sockets in LISTEN state in the text of
/// `/proc/net/tcp` or `/proc/net/tcp6`:
///
/// ```text
///   sl  local_address rem_address   st tx_queue rx_queue ...
///    0: 0100007F:1451 00000000:0000 0A 00000000:00000000 ...
/// ```
///
/// (`1451` is port 5201 in hex). Lines that do not parse are skipped.
pub(super) fn listening_ports(table: &str) -> impl Iterator<Item = u16> + '_ {
    table.lines().skip(1).filter_map(|line| {
        let mut fields = line.split_whitespace();
        let local = fields.nth(1)?;
        let state = fields.nth(1)?;
        let (_, port) = local.rsplit_once(':')?;
        (state == TCP_LISTEN)
            .then(|| u16::from_str_radix(port, 16).ok())
            .flatten()
    })
}

/// Whether process `pid` exists and has not exited (a zombie has).
fn alive(root: &Path, pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(root.join(format!("proc/{pid}/stat"))) else {
        return false;
    };
    // comm may hold spaces and parentheses: the state follows the last ')'.
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}
