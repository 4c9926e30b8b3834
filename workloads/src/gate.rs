//! A start gate for worker threads.
//!
//! Workers are spawned one by one, and spawning can fail part-way (a `pids`
//! cgroup limit, `RLIMIT_NPROC`, memory). Workers that share a barrier must not
//! start until all of them exist, or a failed spawn would leave the others
//! blocked on the barrier forever and the run would hang until its lease
//! expired. So each worker first waits here; the spawning thread then either
//! opens the gate, handing every worker the same start value (a deadline, say),
//! or cancels it, and every worker returns at once.

use std::io;
use std::panic;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, Scope, ScopedJoinHandle};

pub(crate) struct Gate<T> {
    state: Mutex<State<T>>,
    changed: Condvar,
}

enum State<T> {
    Closed,
    Open(T),
    Cancelled,
}

impl<T: Copy> Gate<T> {
    pub(crate) fn new() -> Self {
        Gate {
            state: Mutex::new(State::Closed),
            changed: Condvar::new(),
        }
    }

    /// Blocks until the gate is opened (`Some(value)`) or cancelled (`None`).
    pub(crate) fn wait(&self) -> Option<T> {
        let mut state = self.lock();
        loop {
            match *state {
                State::Closed => {
                    state = self
                        .changed
                        .wait(state)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                State::Open(value) => return Some(value),
                State::Cancelled => return None,
            }
        }
    }

    pub(crate) fn open(&self, value: T) {
        *self.lock() = State::Open(value);
        self.changed.notify_all();
    }

    pub(crate) fn cancel(&self) {
        *self.lock() = State::Cancelled;
        self.changed.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // The state is a plain enum that is never left half-written, so a
        // panic elsewhere while the lock was held cannot have broken it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Spawns `count` workers named `{name}-{index}`, each of which waits at
/// `gate` and then runs `work(index, value)`; a cancelled worker returns
/// `None`. If a spawn fails the gate is cancelled, so the workers already
/// spawned return at once and the scope can end.
///
/// Names show up in `ps -L` and `/proc/<pid>/task/*/comm`, which is how the
/// farm's placement telemetry tells one workload's threads from another's.
pub(crate) fn spawn_workers<'scope, T, R, F>(
    scope: &'scope Scope<'scope, '_>,
    gate: &'scope Gate<T>,
    name: &str,
    count: usize,
    work: &'scope F,
) -> io::Result<Vec<ScopedJoinHandle<'scope, Option<R>>>>
where
    T: Copy + Send,
    R: Send + 'scope,
    F: Fn(usize, T) -> R + Sync,
{
    let mut handles = Vec::with_capacity(count);
    for index in 0..count {
        let spawned = thread::Builder::new()
            .name(format!("{name}-{index}"))
            .spawn_scoped(scope, move || gate.wait().map(|value| work(index, value)));
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(error) => {
                gate.cancel();
                return Err(error);
            }
        }
    }
    Ok(handles)
}

/// Joins workers in order, re-raising a worker's panic on this thread: a
/// panic is a bug in the workload and must not be reported as a result.
pub(crate) fn join_workers<R>(handles: Vec<ScopedJoinHandle<'_, Option<R>>>) -> Vec<Option<R>> {
    handles
        .into_iter()
        .map(|handle| {
            handle
                .join()
                .unwrap_or_else(|payload| panic::resume_unwind(payload))
        })
        .collect()
}
