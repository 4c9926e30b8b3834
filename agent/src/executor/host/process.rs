//! The host executor: one child process in a session and process group of
//! its own, measured with `wait4` so that user and sys time cover the whole
//! process tree.
//!
//! The child is started from a dedicated thread that also waits for it:
//! `PR_SET_PDEATHSIG` fires when the *thread* that forked exits, so a pool
//! thread (which the runtime may retire) would kill workloads at random.
//! With the thread living exactly as long as the child, the child dies with
//! the agent, and an agent killed by SIGKILL leaves no workload behind.

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use tracing::{debug, warn};

use crate::executor::killer::Killer;
use crate::telemetry::perf::{Counters, Counts};

/// What to start: a program from a fixed path with an argument vector. There
/// is no shell anywhere on this path.
#[derive(Debug, Clone)]
pub struct Spec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables added to the inherited environment: an external tool's
    /// `OMP_NUM_THREADS`, say.
    pub env: Vec<(String, String)>,
    pub timeout: Duration,
    /// `cgroup.procs` files the child joins before it executes, so that
    /// every thread it ever has is in its groups from the start.
    pub cgroups: Vec<PathBuf>,
    /// Count software perf events over the whole process tree.
    pub perf: bool,
}

impl Spec {
    pub fn new(program: impl Into<PathBuf>, args: Vec<String>, timeout: Duration) -> Spec {
        Spec {
            program: program.into(),
            args,
            env: Vec::new(),
            timeout,
            cgroups: Vec::new(),
            perf: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub exit: Exit,
    pub wall: Duration,
    /// User and system CPU time of the child and every descendant it reaped.
    pub user: Duration,
    pub sys: Duration,
    pub stdout: String,
    /// The last few KiB of stderr, kept for failed runs.
    pub stderr_tail: String,
    /// Killed because it outlived its timeout.
    pub timed_out: bool,
    /// Killed on request (the coordinator cancelled the run).
    pub cancelled: bool,
    /// Scheduler counts over the process tree, when asked for.
    pub counts: Option<Counts>,
}

/// Output kept per stream; a workload's report is a few lines.
const STDOUT_LIMIT: usize = 1 << 20;
const STDERR_TAIL: usize = 8 << 10;

/// Runs `spec` to completion (or timeout, or cancel) on the calling thread.
pub fn run(spec: &Spec, killer: &Killer) -> io::Result<Outcome> {
    start(spec, killer)?.wait()
}

/// A started child, not yet reaped.
pub struct Running {
    pid: Pid,
    child: std::process::Child,
    start: Instant,
    killer: Killer,
    stdout: Option<std::thread::JoinHandle<String>>,
    stderr: Option<std::thread::JoinHandle<String>>,
    timed_out: Arc<std::sync::atomic::AtomicBool>,
    done_tx: std::sync::mpsc::Sender<()>,
    watchdog: std::thread::JoinHandle<()>,
    counters: Option<Counters>,
}

/// Starts `spec` in a new session (so autogroup, when enabled, gives it an
/// autogroup of its own) and process group, inside its cgroups.
///
/// The child dies with the thread that calls this (PR_SET_PDEATHSIG), so
/// call it from a thread that outlives the child.
pub fn start(spec: &Spec, killer: &Killer) -> io::Result<Running> {
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let groups: Vec<std::fs::File> = spec
        .cgroups
        .iter()
        .map(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", p.display())))
        })
        .collect::<io::Result<_>>()?;
    let fds: Vec<i32> = groups.iter().map(std::os::fd::AsRawFd::as_raw_fd).collect();
    let parent = std::process::id() as libc::pid_t;
    // Unsafe allowed here only: `pre_exec`, whose closure runs between fork
    // and exec, is unsafe, and is the one way to start the child in its own
    // session, dying with this thread, inside its cgroups from its first
    // instruction.
    // SAFETY: between fork and exec the closure only makes async-signal-safe
    // system calls (setsid, prctl, write) on memory allocated before the fork.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            // The agent may have died between fork and prctl: then nothing
            // would kill us, so do not start at all.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            for &fd in &fds {
                // "0" moves the writing process: the child itself.
                if libc::write(fd, b"0".as_ptr().cast(), 1) != 1 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    if killer.is_cancelled() {
        return Err(io::Error::other("cancelled before start"));
    }
    // The helper threads exist before the perf counters are opened on this
    // thread, so that they do not inherit them: only the workload is counted.
    let (out_tx, out_rx) = std::sync::mpsc::channel::<std::process::ChildStdout>();
    let (err_tx, err_rx) = std::sync::mpsc::channel::<std::process::ChildStderr>();
    let stdout = Some(std::thread::spawn(move || {
        out_rx
            .recv()
            .map(|s| read_capped(s, STDOUT_LIMIT, false))
            .unwrap_or_default()
    }));
    let stderr = Some(std::thread::spawn(move || {
        err_rx
            .recv()
            .map(|s| read_capped(s, STDERR_TAIL, true))
            .unwrap_or_default()
    }));
    // A watchdog enforces the timeout; it only signals while the leader is
    // unreaped, so the group id cannot have been reused.
    let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = {
        let killer = killer.clone();
        let timed_out = timed_out.clone();
        let timeout = spec.timeout;
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = done_rx.recv_timeout(timeout) {
                killer.time_out(&timed_out);
            }
        })
    };
    let counters = if spec.perf {
        Some(Counters::open_inherited()?)
    } else {
        None
    };
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    drop(groups);
    let pid = Pid::from_raw(child.id() as i32);
    killer.started(pid);
    if let Some(s) = child.stdout.take() {
        let _ = out_tx.send(s);
    }
    if let Some(s) = child.stderr.take() {
        let _ = err_tx.send(s);
    }
    Ok(Running {
        pid,
        child,
        start,
        killer: killer.clone(),
        stdout,
        stderr,
        timed_out,
        done_tx,
        watchdog,
        counters,
    })
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.pid.as_raw()
    }

    /// Waits for the child to end, kills what it left in its group, reaps it.
    pub fn wait(self) -> io::Result<Outcome> {
        let Running {
            pid,
            child,
            start,
            killer,
            stdout,
            stderr,
            timed_out,
            done_tx,
            watchdog,
            counters,
        } = self;
        // Wait for the leader to exit without reaping it (WNOWAIT): while it is a
        // zombie its pid and group id stay ours, so stragglers can be killed and
        // the killer above can never hit a recycled pid.
        loop {
            match waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
                Ok(_) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let wall = start.elapsed();
        // Descendants left behind by the workload die with it.
        let cancelled = killer.ended(pid);
        let _ = done_tx.send(());
        let (status, rusage) = wait4(pid)?;
        // Reaped: every task's counts have been folded into ours.
        let counts = match counters {
            Some(mut c) => Some(Counts {
                task_clock_ns: (timeval(rusage.ru_utime) + timeval(rusage.ru_stime)).as_nanos()
                    as u64,
                context_switches: (rusage.ru_nvcsw + rusage.ru_nivcsw).max(0) as u64,
                page_faults: (rusage.ru_minflt + rusage.ru_majflt).max(0) as u64,
                cpu_migrations: c.cpu_migrations()?,
            }),
            None => None,
        };
        let _ = watchdog.join();
        // std's Child is never waited on (we reaped it); dropping it does not wait.
        drop(child);
        let stdout = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
        let stderr_tail = stderr.and_then(|h| h.join().ok()).unwrap_or_default();
        let exit = if libc::WIFEXITED(status) {
            Exit::Code(libc::WEXITSTATUS(status))
        } else {
            Exit::Signal(libc::WTERMSIG(status))
        };
        debug!(?exit, wall_ms = wall.as_millis() as u64, "workload ended");
        Ok(Outcome {
            exit,
            wall,
            user: timeval(rusage.ru_utime),
            sys: timeval(rusage.ru_stime),
            stdout,
            stderr_tail,
            timed_out: timed_out.load(std::sync::atomic::Ordering::SeqCst),
            cancelled,
            counts,
        })
    }
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// Reaps `pid` and returns its status with the resource usage of it and of
/// all its reaped descendants; std and nix offer no `wait4` with rusage.
// Unsafe allowed: the libc call, for that reason.
#[allow(unsafe_code)]
fn wait4(pid: Pid) -> io::Result<(i32, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; zeroed is a valid value for it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: both pointers are to live locals of the right types.
        let r = unsafe { libc::wait4(pid.as_raw(), &mut status, 0, &mut usage) };
        if r == pid.as_raw() {
            return Ok((status, usage));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            warn!("wait4({pid}): {err}");
            return Err(err);
        }
    }
}

/// Reads a stream to its end, keeping at most `limit` bytes: the head, or
/// the tail when `tail` is set.
fn read_capped(mut r: impl Read, limit: usize, tail: bool) -> String {
    let mut kept: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tail {
                    kept.extend_from_slice(&buf[..n]);
                    if kept.len() > limit {
                        kept.drain(..kept.len() - limit);
                    }
                } else if kept.len() < limit {
                    let take = n.min(limit - kept.len());
                    kept.extend_from_slice(&buf[..take]);
                }
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

#[cfg(test)]
mod tests;
