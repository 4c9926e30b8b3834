//! The cron driver: a task that sleeps until the next instant any schedule
//! is due and tells the scheduler. The scheduler republishes the schedules
//! (with the instant each last ran for) after every commit that changes
//! them, so a restart or a cancel is seen at once; the driver also keeps the
//! last instant it sent for each, so that it goes on to the next without
//! waiting for the scheduler. The scheduler ignores an instant it already
//! ran: none is executed twice.
//!
//! Time is a [`Clock`]: the system's wall clock, read at every wake-up (a
//! sleep is never longer than [`MAX_SLEEP`], so a clock step or a host
//! suspend is noticed within it); or, in tests, a wall clock advanced by
//! tokio's, so that with tokio's paused time a day passes in microseconds,
//! deterministically.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;
use tracing::debug;

use crate::ids::ScheduleId;
use crate::schedule;
use crate::scheduler::{Event, Handle, ScheduleEvent, now_ms};

/// The longest the driver sleeps before it reads the wall clock again.
pub const MAX_SLEEP: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// The system's wall clock.
    System,
    /// A wall clock that read `wall_ms` at `at` and moves with tokio's.
    Virtual { wall_ms: u64, at: Instant },
}

impl Clock {
    pub fn system() -> Clock {
        Clock::System
    }

    /// A clock that reads `wall_ms` now and moves with tokio's clock.
    pub fn starting_at(wall_ms: u64) -> Clock {
        Clock::Virtual {
            wall_ms,
            at: Instant::now(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        match self {
            Clock::System => now_ms(),
            Clock::Virtual { wall_ms, at } => wall_ms + at.elapsed().as_millis() as u64,
        }
    }

    /// When to wake up for the wall clock to read `ms`: at most
    /// [`MAX_SLEEP`] from now.
    fn wake_for(&self, ms: u64) -> Instant {
        let wait = Duration::from_millis(ms.saturating_sub(self.now_ms()));
        Instant::now() + wait.min(MAX_SLEEP)
    }
}

/// Runs until the scheduler is gone.
pub async fn drive(handle: Handle, clock: Clock) {
    let mut crons = handle.crons.clone();
    let mut sent: HashMap<ScheduleId, u64> = HashMap::new();
    loop {
        let entries = crons.borrow_and_update().clone();
        sent.retain(|id, _| entries.iter().any(|e| e.schedule_id == *id));
        let now = clock.now_ms();
        let mut next: Option<u64> = None;
        for e in &entries {
            // Checked at submission; a record that no longer parses never runs.
            let Ok(cron) = schedule::cron(&e.cron) else {
                continue;
            };
            let last = sent.entry(e.schedule_id).or_insert(e.last_ms);
            *last = (*last).max(e.last_ms);
            if let Some(at_ms) = schedule::latest_due(&cron, *last, now) {
                debug!(schedule = %e.schedule_id, at_ms, "cron instant due");
                let due = Event::Schedule(ScheduleEvent::CronDue {
                    schedule_id: e.schedule_id,
                    at_ms,
                });
                if handle.send(due).await.is_err() {
                    return;
                }
                *last = at_ms;
            }
            if let Some(n) = schedule::next_after(&cron, *last) {
                next = Some(next.map_or(n, |m| m.min(n)));
            }
        }
        match next {
            Some(ms) => {
                tokio::select! {
                    changed = crons.changed() => if changed.is_err() { return },
                    () = tokio::time::sleep_until(clock.wake_for(ms)) => {}
                }
            }
            None => {
                if crons.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}
