//! Continuous matrices: when a schedule's executions are due. Pure, but
//! for [`timer`], the task that wakes the scheduler when one is due.
//!
//! A matrix file with a `[schedule]` table becomes a schedule. It is executed
//! at its cron instants (five fields, UTC, as crontab(5)), and — with
//! `on_new_kernel` — once for every kernel matching a glob that appears in
//! an agent's catalogue after the schedule was made: a host that booted a
//! new release, a Debian kernel an agent cached, an image dropped in a
//! `--kernel-dir`. Each execution is an ordinary matrix; its cells extend
//! their series' histories, where change-point detection looks at every new
//! point.
//!
//! A coordinator that was down over cron instants executes the schedule
//! once when it comes back, for the latest instant it missed, the way
//! systemd's `Persistent=` timers do: a week of missed nightly runs is one
//! run, not seven at once on the same kernel.

use chrono::{DateTime, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use farm_proto::Capabilities;

/// A cron expression or a kernel glob that does not parse, quoted.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "`{text}` has {fields} fields; a cron schedule has five: minute hour \
         day-of-month month day-of-week (UTC), e.g. \"0 3 * * *\""
    )]
    Fields { text: String, fields: usize },
    #[error("`{text}`: {why}")]
    Cron {
        text: String,
        why: croner::errors::CronError,
    },
    #[error("`{text}`: {why}")]
    Glob {
        text: String,
        why: glob::PatternError,
    },
}

/// Parses a five-field cron expression (minute hour day-of-month month
/// day-of-week), read in UTC.
pub fn cron(text: &str) -> Result<Cron, ScheduleError> {
    let fields = text.split_whitespace().count();
    if fields != 5 {
        return Err(ScheduleError::Fields {
            text: text.to_owned(),
            fields,
        });
    }
    CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|why| ScheduleError::Cron {
            text: text.to_owned(),
            why,
        })
}

fn at(ms: u64) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp_millis(i64::try_from(ms).ok()?)
}

fn ms(t: DateTime<Utc>) -> Option<u64> {
    u64::try_from(t.timestamp_millis()).ok()
}

/// The first instant strictly after `after_ms` (unix ms); `None` when the
/// expression never matches again (e.g. February 30th).
pub fn next_after(cron: &Cron, after_ms: u64) -> Option<u64> {
    cron.find_next_occurrence(&at(after_ms)?, false)
        .ok()
        .and_then(ms)
}

/// The latest instant in `(after_ms, now_ms]`: what is due now, when the
/// schedule last ran for `after_ms`. `None` when nothing is. One search,
/// however long the coordinator was down.
pub fn latest_due(cron: &Cron, after_ms: u64, now_ms: u64) -> Option<u64> {
    if now_ms <= after_ms {
        return None;
    }
    cron.find_previous_occurrence(&at(now_ms)?, true)
        .ok()
        .and_then(ms)
        .filter(|&p| p > after_ms)
}

/// Checks an `on_new_kernel` glob (`*`, `?`, `[...]`, as a shell's).
pub fn kernel_glob(text: &str) -> Result<glob::Pattern, ScheduleError> {
    glob::Pattern::new(text).map_err(|why| ScheduleError::Glob {
        text: text.to_owned(),
        why,
    })
}

/// The kernels an agent's catalogue offers by name, as a matrix would spell
/// them: the release its host runs, and the guest kernels it boots
/// (`debian:…`, `file:…`).
pub fn catalogue(caps: &Capabilities) -> Vec<String> {
    let mut out = Vec::with_capacity(1 + caps.guest_kernels.len());
    if !caps.kernel_release.is_empty() {
        out.push(caps.kernel_release.clone());
    }
    out.extend(caps.guest_kernels.iter().cloned());
    out
}

/// The kernels of `catalogue` that match `pattern` and are not in `seen`,
/// in catalogue order, each once.
pub fn new_kernels(pattern: &glob::Pattern, catalogue: &[String], seen: &[String]) -> Vec<String> {
    // Sets: a catalogue (from an agent) may list thousands of kernels, and
    // scanning `seen` and `out` for each was quadratic on the scheduler thread.
    let mut skip: std::collections::HashSet<&str> = seen.iter().map(String::as_str).collect();
    let mut out: Vec<String> = Vec::new();
    for k in catalogue {
        if pattern.matches(k) && skip.insert(k.as_str()) {
            out.push(k.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;
