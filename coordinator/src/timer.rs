//! The cron driver: a task that sleeps until the next instant any schedule
//! is due and tells the scheduler. The scheduler republishes the schedules
//! (with the instant each last ran for) after every commit that changes
//! them, so a restart or a cancel is seen at once; the driver also keeps the
//! last instant it sent for each, so that it goes on to the next without
//! waiting for the scheduler. The scheduler ignores an instant it already
//! ran: none is executed twice.
//!
//! Time is a [`Clock`]: the wall clock read once, then advanced by tokio's
//! clock. In tests with tokio's paused time the driver's day passes in
//! microseconds, deterministically.

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;
use tracing::debug;

use crate::schedule;
use crate::scheduler::{Event, Handle};

/// The wall clock as tokio's clock moves it.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    wall_ms: u64,
    at: Instant,
}

impl Clock {
    /// Now, by the system's clock.
    pub fn system() -> Clock {
        let wall_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Clock::starting_at(wall_ms)
    }

    /// A clock that reads `wall_ms` now.
    pub fn starting_at(wall_ms: u64) -> Clock {
        Clock {
            wall_ms,
            at: Instant::now(),
        }
    }

    pub fn now_ms(&self) -> u64 {
        self.wall_ms + self.at.elapsed().as_millis() as u64
    }

    /// The tokio instant at which the wall clock reads `ms`.
    fn instant_of(&self, ms: u64) -> Instant {
        self.at + std::time::Duration::from_millis(ms.saturating_sub(self.wall_ms))
    }
}

/// Runs until the scheduler is gone.
pub async fn drive(handle: Handle, clock: Clock) {
    let mut crons = handle.crons.clone();
    let mut sent: HashMap<String, u64> = HashMap::new();
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
            let last = sent.entry(e.schedule_id.clone()).or_insert(e.last_ms);
            *last = (*last).max(e.last_ms);
            if let Some(at_ms) = schedule::latest_due(&cron, *last, now) {
                debug!(schedule = %e.schedule_id, at_ms, "cron instant due");
                let due = Event::CronDue {
                    schedule_id: e.schedule_id.clone(),
                    at_ms,
                };
                if handle.send(due).is_err() {
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
                    () = tokio::time::sleep_until(clock.instant_of(ms)) => {}
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
