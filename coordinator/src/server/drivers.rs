//! The tasks that drive a scheduler besides its callers: ticks and cron.

use std::time::Duration;

use crate::scheduler::{Event, Handle};

/// The tasks that send a scheduler its ticks and its cron instants.
pub(crate) struct Drivers {
    ticker: tokio::task::JoinHandle<()>,
    timer: tokio::task::JoinHandle<()>,
}

impl Drivers {
    pub(crate) fn abort(self) {
        self.ticker.abort();
        self.timer.abort();
    }
}

/// Starts the ticker (every 100 ms: leases, publishing) and the cron
/// driver of the scheduler behind `handle`.
pub(crate) fn drive(handle: &Handle) -> Drivers {
    let ticker = {
        let handle = handle.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(100));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            loop {
                every.tick().await;
                if handle.send(Event::Tick).await.is_err() {
                    break;
                }
            }
        })
    };
    let timer = tokio::spawn(crate::cron::drive(
        handle.clone(),
        crate::cron::Clock::system(),
    ));
    Drivers { ticker, timer }
}
