//! Stopping a run from another thread: the session cancels, a watchdog
//! times out, and the process that ran the workload says when its group
//! started and ended, so that a signal never reaches a recycled group id.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

#[derive(Default)]
struct KillState {
    /// Process group to signal; `None` before start and once the leader exited.
    pgid: Option<Pid>,
    cancelled: bool,
}

/// Stops a running child from another thread.
#[derive(Clone, Default)]
pub struct Killer(Arc<Mutex<KillState>>);

impl Killer {
    fn state(&self) -> MutexGuard<'_, KillState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether [`Killer::cancel`] was called: a run that is not a process
    /// of ours (a guest's QEMU) polls this.
    pub fn is_cancelled(&self) -> bool {
        self.state().cancelled
    }

    pub fn cancel(&self) {
        let mut st = self.state();
        st.cancelled = true;
        if let Some(pg) = st.pgid {
            let _ = killpg(pg, Signal::SIGKILL);
        }
    }

    /// The group led by `pid` runs: a cancel that came while it was being
    /// spawned found no process to kill, and kills it now.
    pub(crate) fn started(&self, pid: Pid) {
        let mut st = self.state();
        st.pgid = Some(pid);
        if st.cancelled {
            let _ = killpg(pid, Signal::SIGKILL);
        }
    }

    /// The run outlived its timeout: kills its group if it still runs,
    /// saying so in `timed_out` first.
    pub(crate) fn time_out(&self, timed_out: &AtomicBool) {
        let st = self.state();
        if let Some(pg) = st.pgid {
            timed_out.store(true, Ordering::SeqCst);
            let _ = killpg(pg, Signal::SIGKILL);
        }
    }

    /// The leader `pid` exited and is not yet reaped (so its group id is
    /// still ours): kills what it left in its group and forgets the group.
    /// Whether the run was cancelled.
    pub(crate) fn ended(&self, pid: Pid) -> bool {
        let mut st = self.state();
        let _ = killpg(pid, Signal::SIGKILL);
        st.pgid = None;
        st.cancelled
    }
}
