//! `hackbench`: groups of senders and receivers passing small messages, as
//! rt-tests' `hackbench -T` (threads) does.
//!
//! Each of `groups` groups has `fds` receivers, each reading from its own
//! pipe or Unix stream socket, and `fds` senders, each of which writes
//! `loops` rounds of one [`MESSAGE_SIZE`]-byte message to every receiver of
//! its group. Groups share nothing, so the run is many small producer and
//! consumer sets that wake each other all the time: what it measures is how
//! quickly the scheduler gets woken threads running and how it spreads them.
//! The figure of merit is hackbench's: the time until every message was
//! delivered.
//!
//! Every pipe or socket holds two file descriptors, `groups × fds × 2` in
//! all; a run beyond the open-file limit (`ulimit -n`, often 1024) fails
//! before it starts, with an error saying so.

use std::io::{self, PipeReader, PipeWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::thread::{self, Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

use crate::catalogue::Direction;
use crate::gate::Gate;
use crate::output::Metric;

#[cfg(test)]
mod tests;

/// Bytes in one message: hackbench's `DATASIZE`.
pub const MESSAGE_SIZE: usize = 100;

/// What carries the messages, the catalogue's `mode` parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `mode = 0`: pipes, as `hackbench --pipe`.
    Pipe,
    /// `mode = 1`: Unix stream socket pairs, hackbench's default.
    Socket,
}

impl Mode {
    /// The mode for the catalogue's integer parameter (which has no string
    /// kind).
    pub fn from_param(value: i64) -> Option<Mode> {
        match value {
            0 => Some(Mode::Pipe),
            1 => Some(Mode::Socket),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Pipe => "pipe",
            Mode::Socket => "socket",
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Messages delivered: `groups × fds × fds × loops`.
    pub messages: u64,
    /// From the start until the last receiver had all its messages.
    pub elapsed: Duration,
}

impl Outcome {
    /// The metrics the catalogue declares for `hackbench`.
    pub fn metrics(&self) -> Vec<Metric> {
        let seconds = self.elapsed.as_secs_f64();
        vec![
            Metric {
                name: "time_s".to_string(),
                value: seconds,
                unit: "s".to_string(),
                direction: Direction::LowerIsBetter,
            },
            Metric {
                name: "messages_per_s".to_string(),
                value: self.messages as f64 / seconds,
                unit: "msg/s".to_string(),
                direction: Direction::HigherIsBetter,
            },
        ]
    }
}

/// Runs `groups` groups of `fds` senders and `fds` receivers, each sender
/// sending `loops` messages to each receiver of its group over `mode`.
///
/// Fails with `InvalidInput` if any count is zero or the total number of
/// messages does not fit in 64 bits, with the OS's error if a pipe, a socket
/// or a thread cannot be created, and with the first error of a sender or
/// receiver if one fails (a receiver whose senders ended early reports
/// `UnexpectedEof`).
pub fn run(groups: usize, fds: usize, loops: usize, mode: Mode) -> io::Result<Outcome> {
    if groups == 0 || fds == 0 || loops == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "hackbench needs at least one group, one fd and one loop, \
                 got {groups}, {fds} and {loops}"
            ),
        ));
    }
    let per_receiver = (fds as u64).checked_mul(loops as u64);
    let receivers = (groups as u64).checked_mul(fds as u64);
    let messages = per_receiver
        .zip(receivers)
        .and_then(|(m, r)| m.checked_mul(r));
    let (Some(per_receiver), Some(messages)) = (per_receiver, messages) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("hackbench cannot count {groups} × {fds} × {fds} × {loops} messages"),
        ));
    };
    let gate = Gate::new();
    let (results, elapsed) = thread::scope(|scope| {
        let handles = match spawn_all(scope, &gate, groups, fds, loops, per_receiver, mode) {
            Ok(handles) => handles,
            Err(error) => {
                gate.cancel();
                return Err(error);
            }
        };
        let start = Instant::now();
        gate.open(());
        let results: Vec<io::Result<()>> = handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|payload| std::panic::resume_unwind(payload))
                    .unwrap_or_else(|| Err(io::Error::other("hackbench: a thread did not run")))
            })
            .collect();
        Ok((results, start.elapsed()))
    })?;
    first_error(results)?;
    Ok(Outcome { messages, elapsed })
}

type Handle<'scope> = ScopedJoinHandle<'scope, Option<io::Result<()>>>;

/// Creates every group's channels and threads, receivers before senders as
/// hackbench does. On an error the caller cancels the gate, so the threads
/// already spawned return and close their ends.
fn spawn_all<'scope>(
    scope: &'scope Scope<'scope, '_>,
    gate: &'scope Gate<()>,
    groups: usize,
    fds: usize,
    loops: usize,
    per_receiver: u64,
    mode: Mode,
) -> io::Result<Vec<Handle<'scope>>> {
    let mut handles = Vec::with_capacity(2 * groups * fds);
    for group in 0..groups {
        let mut writers = Vec::with_capacity(fds);
        for i in 0..fds {
            let (reader, writer) = channel(mode).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "hackbench needs {} file descriptors for its {}s: {e}",
                        groups.saturating_mul(fds).saturating_mul(2),
                        mode.name()
                    ),
                )
            })?;
            writers.push(writer);
            let name = format!("hackbench-r{}", group * fds + i);
            handles.push(spawn(scope, gate, name, move || {
                receive(reader, per_receiver)
            })?);
        }
        // The group's senders share the write ends, which close when the
        // last of them is done: a receiver whose senders died sees the end
        // of its stream instead of waiting forever.
        let writers = Arc::new(writers);
        for i in 0..fds {
            let writers = Arc::clone(&writers);
            let name = format!("hackbench-s{}", group * fds + i);
            handles.push(spawn(scope, gate, name, move || send(&writers, loops))?);
        }
    }
    Ok(handles)
}

/// Spawns a thread named `name` (at most 15 bytes show in `comm`) that
/// waits at `gate`, then runs `work`.
fn spawn<'scope, F>(
    scope: &'scope Scope<'scope, '_>,
    gate: &'scope Gate<()>,
    name: String,
    work: F,
) -> io::Result<Handle<'scope>>
where
    F: FnOnce() -> io::Result<()> + Send + 'scope,
{
    thread::Builder::new()
        .name(name)
        .spawn_scoped(scope, move || gate.wait().map(|()| work()))
}

/// The read end of a channel.
enum Reader {
    Pipe(PipeReader),
    Socket(UnixStream),
}

/// The write end of a channel, shared by the senders of a group.
enum Writer {
    Pipe(PipeWriter),
    Socket(UnixStream),
}

fn channel(mode: Mode) -> io::Result<(Reader, Writer)> {
    Ok(match mode {
        Mode::Pipe => {
            let (reader, writer) = io::pipe()?;
            (Reader::Pipe(reader), Writer::Pipe(writer))
        }
        Mode::Socket => {
            let (reader, writer) = UnixStream::pair()?;
            (Reader::Socket(reader), Writer::Socket(writer))
        }
    })
}

/// Writes `loops` rounds of one message to every receiver. A message is
/// written by one `write` call, which pipes (up to `PIPE_BUF`) and Unix
/// stream sockets never interleave with another sender's.
fn send(writers: &[Writer], loops: usize) -> io::Result<()> {
    let message = [0x5a_u8; MESSAGE_SIZE];
    for _ in 0..loops {
        for writer in writers {
            match writer {
                Writer::Pipe(pipe) => (&*pipe).write_all(&message)?,
                Writer::Socket(socket) => (&*socket).write_all(&message)?,
            }
        }
    }
    Ok(())
}

/// Reads until `messages` messages' bytes have arrived, a message's size at
/// a time as hackbench does.
fn receive(mut reader: Reader, messages: u64) -> io::Result<()> {
    let expected = messages * MESSAGE_SIZE as u64;
    let mut buffer = [0_u8; MESSAGE_SIZE];
    let mut received = 0;
    while received < expected {
        let read = match &mut reader {
            Reader::Pipe(pipe) => pipe.read(&mut buffer),
            Reader::Socket(socket) => socket.read(&mut buffer),
        };
        match read {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("hackbench receiver got {received} of {expected} bytes"),
                ));
            }
            Ok(n) => received += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The first error that is a cause rather than a consequence: a sender's
/// broken pipe only says that some receiver failed first.
fn first_error(results: Vec<io::Result<()>>) -> io::Result<()> {
    let mut consequence = None;
    for result in results {
        match result {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                consequence.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    consequence.map_or(Ok(()), Err)
}
