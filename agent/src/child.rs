//! Children of the agent that are not workloads (a guest's QEMU, a kernel
//! build's git and make) die with it: an agent killed by SIGKILL leaves
//! none behind. Workloads get the same from [`crate::executor::host`],
//! which also measures them.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

use nix::sys::signal::Signal;

/// Makes the child `cmd` starts die with the calling thread (SIGKILL by
/// `PR_SET_PDEATHSIG`), and not start at all if the agent is already gone:
/// for children that are not workloads (a guest's QEMU, a build's
/// commands), whose thread also waits for them.
pub fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // Unsafe allowed here only: `pre_exec`, whose closure runs between fork
    // and exec, is unsafe, and is the one way to set PR_SET_PDEATHSIG.
    // SAFETY: between fork and exec the closure only makes async-signal-safe
    // system calls (prctl, getppid, _exit).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(io::Error::from)?;
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}
