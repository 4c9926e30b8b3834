//! One command of a build, bounded in time and in what it may print.

use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
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

/// [`run`], and the group is killed as soon as `cancelled` says so (a
/// cancelled run's build stops within 20 ms, not at its end): the error's
/// kind is then `Interrupted`.
pub fn run_unless(
    cmd: &mut Command,
    timeout: Duration,
    cancelled: &dyn Fn() -> bool,
) -> io::Result<Output> {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    crate::executor::host::die_with_parent(cmd);
    let mut child = cmd.spawn()?;
    let group = Pid::from_raw(child.id() as i32);
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stdout).take(MAX_STDOUT).read_to_end(&mut buf);
        // Drained past the bound, so that the command never blocks on a pipe.
        let _ = io::copy(&mut stdout, &mut io::sink());
        buf
    });
    let err = std::thread::spawn(move || {
        let mut tail: Vec<u8> = Vec::new();
        let mut chunk = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut chunk) {
            if n == 0 {
                break;
            }
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
