//! `udp-stream`: a UDP sender and receiver on the loopback interface, in the
//! style of netperf's `UDP_STREAM`.
//!
//! Seed 002 ran `netperf -t UDP_STREAM -H 127.0.0.1 -- -m 1024` with the
//! client and server pinned to CPUs in different sockets, and lost half its
//! throughput to rescheduling IPIs: every datagram woke the receiver, whose
//! CPU had gone idle. Here the sender thread sends `message_size`-byte
//! datagrams as fast as it can for `seconds`, and the receiver thread counts
//! what arrives; the figures of merit are the receiver's, as netperf's are.
//!
//! # Pinning
//!
//! Setting a thread's affinity needs `sched_setaffinity`, which std does not
//! wrap and this crate may not call (`#![forbid(unsafe_code)]`). So the
//! pinning is left to whoever started the workload: each thread's kernel id
//! is printed on stderr before the measurement starts, as
//!
//! ```text
//! tid receiver 12345
//! tid sender 12346
//! ```
//!
//! and for each role given a CPU the workload then waits up to
//! [`PIN_WAIT`] for that thread's allowed CPUs (`Cpus_allowed_list` in
//! `/proc/self/task/<tid>/status`) to be exactly that CPU. Then it says on
//! stderr whether each role is pinned, as
//!
//! ```text
//! udp-stream: sender pinned=true cpu=0
//! udp-stream: receiver pinned=false cpu=1 allowed=0-1
//! ```
//!
//! and starts measuring either way: a run that was meant to be pinned and was
//! not is marked on stderr, not refused. The agent pins them, finding the
//! threads by their names ([`SENDER_THREAD`], [`RECEIVER_THREAD`]) since it
//! does not read stderr while the workload runs; run by hand, a CPU costs
//! [`PIN_WAIT`] and gets `pinned=false`.

use std::io::{self, Write};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use crate::catalogue::Direction;
use crate::gate::Gate;
use crate::output::Metric;

#[cfg(test)]
mod tests;

/// The largest UDP payload over IPv4: 65535 less the IP and UDP headers.
pub const MAX_MESSAGE_SIZE: usize = 65_507;

/// How long the workload waits for the threads it was asked to pin to be
/// pinned by someone else, before it measures without.
pub const PIN_WAIT: Duration = Duration::from_secs(1);

/// The sender thread's name, which `/proc/<pid>/task/<tid>/comm` shows
/// whole (it is under the kernel's 16 bytes): whoever pins it finds it so.
pub const SENDER_THREAD: &str = "udp-sender";

/// The receiver thread's name, as [`SENDER_THREAD`].
pub const RECEIVER_THREAD: &str = "udp-receiver";

/// How often the allowed CPUs are looked at while waiting for pinning.
const PIN_POLL: Duration = Duration::from_millis(10);

/// How long a blocked `send` or `recv` waits before its thread looks at the
/// clock and the stop flag again. Short enough that a run ends promptly.
const SOCKET_POLL: Duration = Duration::from_millis(20);

/// How long after the deadline the receiver keeps draining at most: it stops
/// earlier, as soon as the sender has stopped and nothing arrived for one
/// [`SOCKET_POLL`].
const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// Bytes in one megabyte, as netperf and STREAM count them.
const MB: f64 = 1e6;

/// The two threads of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Sender,
    Receiver,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Sender => "sender",
            Role::Receiver => "receiver",
        }
    }

    fn thread_name(self) -> &'static str {
        match self {
            Role::Sender => SENDER_THREAD,
            Role::Receiver => RECEIVER_THREAD,
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Datagrams the sender handed to the kernel.
    pub sent: u64,
    /// Datagrams the receiver got.
    pub received: u64,
    pub message_size: usize,
    /// From the start until the sender stopped.
    pub elapsed: Duration,
}

impl Outcome {
    /// The metrics the catalogue declares for `udp-stream`.
    pub fn metrics(&self) -> Vec<Metric> {
        let seconds = self.elapsed.as_secs_f64();
        let received = self.received as f64;
        // A datagram cannot arrive twice, but say 0 rather than a negative
        // loss if the counts ever disagree.
        let lost = self.sent.saturating_sub(self.received) as f64;
        let metric = |name: &str, value: f64, unit: &str, direction| Metric {
            name: name.to_string(),
            value,
            unit: unit.to_string(),
            direction,
        };
        vec![
            metric(
                "messages_per_s",
                received / seconds,
                "msg/s",
                Direction::HigherIsBetter,
            ),
            metric(
                "mb_per_s",
                received * self.message_size as f64 / MB / seconds,
                "MB/s",
                Direction::HigherIsBetter,
            ),
            metric(
                "loss_pct",
                100.0 * lost / self.sent as f64,
                "%",
                Direction::LowerIsBetter,
            ),
        ]
    }
}

/// Sends `message_size`-byte datagrams over loopback for `seconds`, with the
/// sender and receiver pinned to `sender_cpu` and `receiver_cpu` if given and
/// if someone pins them (see the module's documentation); the thread ids and
/// the pinning are reported on `log`.
///
/// Fails with `InvalidInput` for a size of 0 or above [`MAX_MESSAGE_SIZE`] or
/// a duration that is not a finite, non-negative number of seconds, with
/// `TimedOut` if nothing at all was sent, and with the OS's error if a socket
/// or a thread cannot be created or a socket fails.
pub fn run(
    seconds: f64,
    message_size: usize,
    sender_cpu: Option<usize>,
    receiver_cpu: Option<usize>,
    log: &mut dyn Write,
) -> io::Result<Outcome> {
    if !(1..=MAX_MESSAGE_SIZE).contains(&message_size) {
        return Err(invalid_input(format!(
            "udp-stream messages must be 1..={MAX_MESSAGE_SIZE} bytes, got {message_size}"
        )));
    }
    let duration = Duration::try_from_secs_f64(seconds)
        .map_err(|e| invalid_input(format!("udp-stream cannot run for {seconds} s: {e}")))?;
    let localhost = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    let receiver = UdpSocket::bind(localhost)?;
    receiver.set_read_timeout(Some(SOCKET_POLL))?;
    let sender = UdpSocket::bind(localhost)?;
    sender.connect(receiver.local_addr()?)?;
    sender.set_write_timeout(Some(SOCKET_POLL))?;
    let sender_done = AtomicBool::new(false);
    let gate = Gate::new();
    let (tids_tx, tids) = mpsc::channel();
    thread::scope(|scope| {
        let spawned = spawn(scope, &gate, Role::Receiver, tids_tx.clone(), |deadline| {
            receive(&receiver, deadline, &sender_done)
        })
        .and_then(|receiver| {
            let sender = spawn(scope, &gate, Role::Sender, tids_tx, |deadline| {
                // Set even if `send` panics, so the receiver stops draining.
                let _done = SetOnDrop(&sender_done);
                send(&sender, message_size, deadline)
            })?;
            Ok((receiver, sender))
        });
        let (receiver, sender) = match spawned {
            Ok(handles) => handles,
            Err(error) => {
                gate.cancel();
                return Err(error);
            }
        };
        // Each thread sends its id once and drops its end, so this ends when
        // both have, even if one of them died first.
        let mut tids: Vec<(Role, Option<u32>)> = tids.iter().collect();
        // Receiver first, whichever thread got here first.
        tids.sort_by_key(|&(role, _)| role == Role::Sender);
        announce(&tids, sender_cpu, receiver_cpu, log);
        let start = Instant::now();
        let Some(deadline) = start.checked_add(duration) else {
            gate.cancel();
            return Err(invalid_input(format!(
                "udp-stream cannot run for {seconds} s"
            )));
        };
        gate.open(deadline);
        let sent = join(sender);
        let elapsed = start.elapsed();
        let received = join(receiver);
        let sent = sent?;
        if sent == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("udp-stream sent nothing in {seconds} s"),
            ));
        }
        Ok(Outcome {
            sent,
            received: received?,
            message_size,
            elapsed,
        })
    })
}

/// Spawns the thread for `role`, which sends its kernel thread id on `tids`
/// at once, then waits at `gate` and runs `work(deadline)`.
fn spawn<'scope, F>(
    scope: &'scope Scope<'scope, '_>,
    gate: &'scope Gate<Instant>,
    role: Role,
    tids: mpsc::Sender<(Role, Option<u32>)>,
    work: F,
) -> io::Result<ScopedJoinHandle<'scope, Option<io::Result<u64>>>>
where
    F: FnOnce(Instant) -> io::Result<u64> + Send + 'scope,
{
    thread::Builder::new()
        .name(role.thread_name().to_string())
        .spawn_scoped(scope, move || {
            // The main thread may be gone (it cancels the gate then).
            let _ = tids.send((role, current_tid()));
            drop(tids);
            gate.wait().map(work)
        })
}

/// Prints each thread's id, then waits for the roles given a CPU to be
/// pinned to it and says whether they were. Like every diagnostic, the lines
/// are lost if `log` is: then nobody is listening to pin anything either.
fn announce(
    tids: &[(Role, Option<u32>)],
    sender_cpu: Option<usize>,
    receiver_cpu: Option<usize>,
    log: &mut dyn Write,
) {
    for (role, tid) in tids {
        let tid = tid.map_or_else(|| "unknown".to_string(), |tid| tid.to_string());
        let _ = writeln!(log, "tid {} {tid}", role.name());
    }
    let wanted = |role| match role {
        Role::Sender => sender_cpu,
        Role::Receiver => receiver_cpu,
    };
    let pinned: Vec<(Role, usize, Option<u32>)> = tids
        .iter()
        .filter_map(|&(role, tid)| wanted(role).map(|cpu| (role, cpu, tid)))
        .collect();
    let allowed = |tid: Option<u32>| {
        let status = std::fs::read_to_string(format!("/proc/self/task/{}/status", tid?)).ok()?;
        cpus_allowed_list(&status).map(str::to_string)
    };
    let all_pinned = || {
        pinned
            .iter()
            .all(|&(_, cpu, tid)| allowed(tid).is_some_and(|list| is_only(&list, cpu)))
    };
    let give_up = Instant::now() + PIN_WAIT;
    while !all_pinned() && Instant::now() < give_up {
        thread::sleep(PIN_POLL);
    }
    for (role, cpu, tid) in pinned {
        let role = role.name();
        let _ = match allowed(tid) {
            Some(list) if is_only(&list, cpu) => {
                writeln!(log, "udp-stream: {role} pinned=true cpu={cpu}")
            }
            Some(list) => writeln!(
                log,
                "udp-stream: {role} pinned=false cpu={cpu} allowed={list}"
            ),
            None => writeln!(
                log,
                "udp-stream: {role} pinned=false cpu={cpu} allowed=unknown"
            ),
        };
    }
}

/// The calling thread's kernel id, from `/proc/thread-self` (a link to
/// `<pid>/task/<tid>`), or `None` where `/proc` is not mounted.
fn current_tid() -> Option<u32> {
    let link = std::fs::read_link("/proc/thread-self").ok()?;
    link.file_name()?.to_str()?.parse().ok()
}

/// The value of `Cpus_allowed_list` in the text of a `/proc` status file.
fn cpus_allowed_list(status: &str) -> Option<&str> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
}

/// Whether a CPU list such as `0-3,8` is exactly `cpu`.
fn is_only(list: &str, cpu: usize) -> bool {
    let single = match list.split_once('-') {
        Some((first, last)) if first == last => first,
        Some(_) => return false,
        None => list,
    };
    single.parse() == Ok(cpu)
}

/// Sends datagrams until `deadline` and returns how many were sent.
fn send(socket: &UdpSocket, message_size: usize, deadline: Instant) -> io::Result<u64> {
    let message = vec![0x5a_u8; message_size];
    let mut sent = 0;
    while Instant::now() < deadline {
        match socket.send(&message) {
            Ok(_) => sent += 1,
            // The socket's send buffer stayed full for a whole poll, or the
            // device queue was full (`ENOBUFS`): look at the clock, go on.
            Err(e) if is_poll_timeout(&e) || e.raw_os_error() == Some(ENOBUFS) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(sent)
}

/// `ENOBUFS` (no room in a device queue for the datagram) on the Linux
/// architectures the farm runs on: x86-64, AArch64, RISC-V, POWER.
const ENOBUFS: i32 = 105;

/// Receives datagrams until the sender has stopped and the socket is empty,
/// or [`DRAIN_LIMIT`] after `deadline`, and returns how many arrived.
fn receive(socket: &UdpSocket, deadline: Instant, sender_done: &AtomicBool) -> io::Result<u64> {
    let mut buffer = vec![0_u8; MAX_MESSAGE_SIZE + 1];
    let mut received = 0;
    let give_up = deadline.checked_add(DRAIN_LIMIT).unwrap_or(deadline);
    loop {
        match socket.recv(&mut buffer) {
            Ok(_) => received += 1,
            Err(e) if is_poll_timeout(&e) => {
                // Checked only after an empty poll, so that everything the
                // sender sent before it stopped is counted.
                if sender_done.load(Ordering::Acquire) {
                    return Ok(received);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if Instant::now() >= give_up {
            return Ok(received);
        }
    }
}

/// A socket timeout shows up as `WouldBlock` (EAGAIN) on Unix; `TimedOut`
/// is accepted too, as std documents either.
fn is_poll_timeout(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Sets the flag when dropped, on the normal path and on unwinding alike.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Joins a thread, re-raising its panic here; a thread stopped by a
/// cancelled gate yields an error, though the gate is only cancelled on
/// paths that return before joining.
fn join(handle: ScopedJoinHandle<'_, Option<io::Result<u64>>>) -> io::Result<u64> {
    handle
        .join()
        .unwrap_or_else(|payload| std::panic::resume_unwind(payload))
        .unwrap_or_else(|| Err(io::Error::other("udp-stream: a thread did not run")))
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
