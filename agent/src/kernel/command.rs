//! One command of a build, bounded in time and in what it may print.

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// The most of a command's stdout kept: git's answers are short, and a
/// commit list of a range is 41 bytes a commit.
pub const MAX_STDOUT: u64 = 16 << 20;
/// The most of its stderr kept, from its end: what an error quotes.
pub const MAX_STDERR: usize = 64 << 10;

/// What a finished command printed.
#[derive(Debug)]
pub struct Output {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    /// The end of its stderr.
    pub stderr: Vec<u8>,
}

/// Runs `cmd` in a process group of its own and waits at most `timeout`,
/// after which the whole group is killed and the error says so. The
/// command dies with the calling thread (`PR_SET_PDEATHSIG`), so a killed
/// agent leaves no build behind.
pub fn run(cmd: &mut Command, timeout: Duration) -> io::Result<Output> {
    run_unless(cmd, timeout, &|| false)
}

/// Bytes to look for in a command's stdout while it runs: `seen` is set
/// once they appear (kbuild's `LD vmlinux.o`: the build links), for the
/// caller to read while the command goes on.
#[derive(Debug, Clone)]
pub struct Marker {
    pub pattern: &'static [u8],
    pub seen: Arc<AtomicBool>,
}

impl Marker {
    /// Looks for the pattern in `chunk`, after `carry` (the end of the
    /// chunks before, kept as long as the pattern less a byte, since the
    /// pattern may straddle two reads); gives the new carry.
    fn scan(&self, mut carry: Vec<u8>, chunk: &[u8]) -> Vec<u8> {
        carry.extend_from_slice(chunk);
        if carry.windows(self.pattern.len()).any(|w| w == self.pattern) {
            self.seen.store(true, Ordering::Relaxed);
        }
        let keep = self.pattern.len().saturating_sub(1);
        carry.split_off(carry.len().saturating_sub(keep))
    }
}

/// [`run`], and the group is killed as soon as `cancelled` says so (a
/// cancelled run's build stops within 20 ms, not at its end): the error's
/// kind is then `Interrupted`.
pub fn run_unless(
    cmd: &mut Command,
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
) -> io::Result<Output> {
    run_marking(cmd, timeout, cancelled, None)
}

/// [`run_unless`], setting `marker`'s flag when its pattern appears in
/// the command's stdout.
pub fn run_marking(
    cmd: &mut Command,
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
    marker: Option<&Marker>,
) -> io::Result<Output> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    crate::child::die_with_parent(cmd);
    let mut child = cmd.spawn()?;
    let group = Pid::from_raw(child.id() as i32);
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let marker = marker.filter(|m| !m.pattern.is_empty()).cloned();
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut carry = Vec::new();
        let mut chunk = [0u8; 8192];
        // Read to the end, past the bound too, so that the command never
        // blocks on a pipe.
        loop {
            let n = match stdout.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                // A signal is no end of the output: `read_to_end` retried too.
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            if let Some(m) = &marker {
                carry = m.scan(carry, &chunk[..n]);
            }
            let room = (MAX_STDOUT as usize).saturating_sub(buf.len());
            buf.extend_from_slice(&chunk[..n.min(room)]);
        }
        buf
    });
    let err = std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = match stderr.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            tail.extend_from_slice(&chunk[..n]);
            if tail.len() > 2 * MAX_STDERR {
                tail.drain(..tail.len() - MAX_STDERR);
            }
        }
        let from = tail.len().saturating_sub(MAX_STDERR);
        tail.split_off(from)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if cancelled() {
            let _ = killpg(group, Signal::SIGKILL);
            let _ = child.wait();
            return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
        }
        if started.elapsed() >= timeout {
            let _ = killpg(group, Signal::SIGKILL);
            let _ = child.wait();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("killed after {timeout:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // What the group left running would hold the pipes open.
    let _ = killpg(group, Signal::SIGKILL);
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_status_come_back() {
        let out = run(
            Command::new("/bin/sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
    }

    #[test]
    fn a_command_past_its_timeout_is_killed_with_its_group() {
        let t = Instant::now();
        let e = run(
            Command::new("/bin/sh").args(["-c", "sleep 30 & sleep 30"]),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(e.to_string(), "killed after 300ms");
        // Its background child held stdout; it died with the group.
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_cancelled_command_is_killed_with_its_group_at_once() {
        let t = Instant::now();
        let e = run_unless(
            Command::new("/bin/sh").args(["-c", "sleep 30 & sleep 30"]),
            Duration::from_secs(60),
            &|| t.elapsed() > Duration::from_millis(200),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::Interrupted);
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }

    #[test]
    fn a_marker_is_seen_across_reads_and_only_when_printed() {
        let marker = |pattern| Marker {
            pattern,
            seen: Arc::new(AtomicBool::new(false)),
        };
        let m = marker(b" LD      vmlinux");
        let carry = m.scan(Vec::new(), b"  CC      kernel/sched/core.o\n  L");
        assert!(!m.seen.load(Ordering::Relaxed));
        assert_eq!(carry, b"ched/core.o\n  L");
        m.scan(carry, b"D      vmlinux.o\n");
        assert!(m.seen.load(Ordering::Relaxed));
        // Through a real command's pipe.
        let linked = marker(b" LD      vmlinux");
        let out = run_marking(
            Command::new("/bin/sh").args([
                "-c",
                "echo '  CC      init/main.o'; echo '  LD      vmlinux.o'",
            ]),
            Duration::from_secs(10),
            &|| false,
            Some(&linked),
        )
        .unwrap();
        assert!(linked.seen.load(Ordering::Relaxed));
        assert_eq!(out.stdout, b"  CC      init/main.o\n  LD      vmlinux.o\n");
        let compiled = marker(b" LD      vmlinux");
        run_marking(
            Command::new("/bin/sh").args(["-c", "echo '  CC      init/main.o'"]),
            Duration::from_secs(10),
            &|| false,
            Some(&compiled),
        )
        .unwrap();
        assert!(!compiled.seen.load(Ordering::Relaxed));
    }

    #[test]
    fn stderr_keeps_its_end() {
        let out = run(
            Command::new("/bin/sh").args([
                "-c",
                "head -c 300000 /dev/zero | tr '\\0' x >&2; echo END >&2",
            ]),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.stderr.len(), MAX_STDERR);
        assert!(out.stderr.ends_with(b"xEND\n"));
    }
}
