//! A build's progress as it goes, for the run's session to report (a cold
//! build is minutes of a run that otherwise says nothing): its step, how
//! long it has been going, and what it is expected to take.
//!
//! The [`Tracker`] sends a report at each step and every
//! [`PROGRESS_EVERY`] between, and one without a build when it is over; the
//! build polls it wherever it polls for cancellation (every 20 ms of a
//! command, every 100 ms of a wait), so no thread of its own is needed. The
//! estimate is the duration of the agent's last build of the same
//! temperature — cold, or warm when ccache already held objects — kept in
//! `<cache>/builds/times`, else the documented defaults
//! (`farm_spec::progress::DEFAULT_COLD_BUILD`, `DEFAULT_WARM_BUILD`).

use std::cell::Cell;
use std::fs;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use farm_spec::progress::{BuildProgress, BuildStep, Estimate, MAX_BUILD_SECONDS};

use crate::kernel::command::Marker;

/// How often a build that stays at one step reports anyway: its elapsed
/// time moves in every client's progress line, and one message per 10 s
/// per building agent is nothing to the coordinator.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// What kbuild prints when it links `vmlinux.o` (and later `vmlinux`):
/// compiling is over.
const LINK_MARKER: &[u8] = b" LD      vmlinux";

/// The file of the last build times under the builds directory.
const TIMES_FILE: &str = "times";
/// The most of it read: two short lines.
const MAX_TIMES_BYTES: u64 = 256;

/// Where reports go: the run's session (latest wins), or nowhere.
pub type Sink<'a> = &'a dyn Fn(Option<BuildProgress>);

/// One build's progress.
pub struct Tracker<'a> {
    sink: Sink<'a>,
    started: Instant,
    estimate: Estimate,
    step: Cell<Option<BuildStep>>,
    /// When the last report went; `None` before the first.
    sent: Cell<Option<Instant>>,
    linking: Arc<AtomicBool>,
}

impl<'a> Tracker<'a> {
    pub fn new(sink: Sink<'a>, estimate: Estimate) -> Tracker<'a> {
        Tracker {
            sink,
            started: Instant::now(),
            estimate,
            step: Cell::new(None),
            sent: Cell::new(None),
            linking: Arc::new(AtomicBool::new(false)),
        }
    }

    pub fn estimate(&self) -> Estimate {
        self.estimate
    }

    /// The marker that moves a compile on to linking: give it to `make`.
    pub fn marker(&self) -> Marker {
        Marker {
            pattern: LINK_MARKER,
            seen: self.linking.clone(),
        }
    }

    /// The build moved on to `step`: reported at once.
    pub fn step(&self, step: BuildStep) {
        self.step_at(step, Instant::now());
    }

    /// Called wherever the build polls: the step a command's output
    /// showed, and the periodic report.
    pub fn tick(&self) {
        self.tick_at(Instant::now());
    }

    /// The build is over (done, failed or cancelled): a report without a
    /// build, if any was made, so that nobody sees a finished build go on.
    pub fn finish(&self) {
        if self.sent.get().is_some() {
            (self.sink)(None);
        }
    }

    fn step_at(&self, step: BuildStep, now: Instant) {
        if self.step.get() != Some(step) {
            self.step.set(Some(step));
            self.send_at(now);
        }
    }

    fn tick_at(&self, now: Instant) {
        if self.step.get() == Some(BuildStep::Compile) && self.linking.load(Ordering::Relaxed) {
            self.step_at(BuildStep::Link, now);
        } else if self.step.get().is_some()
            && self
                .sent
                .get()
                .is_some_and(|t| now.saturating_duration_since(t) >= PROGRESS_EVERY)
        {
            self.send_at(now);
        }
    }

    fn send_at(&self, now: Instant) {
        let Some(step) = self.step.get() else { return };
        let elapsed = now.saturating_duration_since(self.started).as_secs();
        (self.sink)(Some(BuildProgress {
            step,
            elapsed_s: elapsed.min(u64::from(MAX_BUILD_SECONDS)) as u32,
            estimate: Some(self.estimate),
        }));
        self.sent.set(Some(now));
    }
}

/// What a build beginning now in `cache` is expected to take: warm when
/// ccache holds anything, and the last such build's time, or the default.
pub fn estimate(cache: &Path) -> Estimate {
    let warm = fs::read_dir(cache.join("ccache")).is_ok_and(|mut d| d.next().is_some());
    let kept = read_times(cache);
    let seconds = if warm { kept.warm } else { kept.cold };
    match seconds {
        Some(seconds) => Estimate { seconds, warm },
        None => Estimate::default_for(warm),
    }
}

/// Keeps `took` as the time of a build of `warm`'s temperature, for the
/// next estimate. Whole, then renamed; a failure costs only the estimate.
pub fn record(cache: &Path, warm: bool, took: Duration) {
    let mut times = read_times(cache);
    let seconds = took.as_secs().min(u64::from(MAX_BUILD_SECONDS)) as u32;
    if warm {
        times.warm = Some(seconds);
    } else {
        times.cold = Some(seconds);
    }
    let builds = cache.join("builds");
    let staged = builds.join(format!("{TIMES_FILE}.new"));
    if fs::write(&staged, times.text())
        .and_then(|()| fs::rename(&staged, builds.join(TIMES_FILE)))
        .is_err()
    {
        tracing::warn!(dir = %builds.display(), "could not keep the build's time");
    }
}

/// The last build times kept, by temperature.
#[derive(Debug, Default, PartialEq, Eq)]
struct Times {
    cold: Option<u32>,
    warm: Option<u32>,
}

impl Times {
    /// `cold SECONDS` and `warm SECONDS` lines; anything else, or a time
    /// beyond `MAX_BUILD_SECONDS`, is ignored.
    fn parse(text: &str) -> Times {
        let mut t = Times::default();
        for line in text.lines() {
            let Some((kind, secs)) = line.split_once(' ') else {
                continue;
            };
            let Some(secs) = secs.parse().ok().filter(|s| *s <= MAX_BUILD_SECONDS) else {
                continue;
            };
            match kind {
                "cold" => t.cold = Some(secs),
                "warm" => t.warm = Some(secs),
                _ => {}
            }
        }
        t
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for (kind, secs) in [("cold", self.cold), ("warm", self.warm)] {
            if let Some(s) = secs {
                out.push_str(&format!("{kind} {s}\n"));
            }
        }
        out
    }
}

fn read_times(cache: &Path) -> Times {
    let mut text = String::new();
    match fs::File::open(cache.join("builds").join(TIMES_FILE)) {
        Ok(f) => match f.take(MAX_TIMES_BYTES).read_to_string(&mut text) {
            Ok(_) => Times::parse(&text),
            Err(_) => Times::default(),
        },
        Err(_) => Times::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    fn progress(step: BuildStep, elapsed_s: u32, seconds: u32) -> Option<BuildProgress> {
        Some(BuildProgress {
            step,
            elapsed_s,
            estimate: Some(Estimate {
                seconds,
                warm: false,
            }),
        })
    }

    #[test]
    fn reports_at_each_step_every_ten_seconds_and_once_at_the_end() {
        let sent = RefCell::new(Vec::new());
        let sink = |p| sent.borrow_mut().push(p);
        let t = Tracker::new(&sink, Estimate::default_for(false));
        let at = |s: u64| t.started + Duration::from_secs(s);
        // Nothing before a step: a build found kept says nothing.
        t.tick_at(at(30));
        t.step_at(BuildStep::Source, at(1));
        t.step_at(BuildStep::Source, at(2));
        t.step_at(BuildStep::Configure, at(5));
        t.tick_at(at(14));
        t.tick_at(at(15));
        t.step_at(BuildStep::Compile, at(20));
        t.tick_at(at(29));
        // kbuild printed `LD vmlinux.o`: linking, at once.
        t.linking.store(true, Ordering::Relaxed);
        t.tick_at(at(29));
        t.tick_at(at(38));
        t.tick_at(at(39));
        t.finish();
        assert_eq!(
            *sent.borrow(),
            [
                progress(BuildStep::Source, 1, 420),
                progress(BuildStep::Configure, 5, 420),
                progress(BuildStep::Configure, 15, 420),
                progress(BuildStep::Compile, 20, 420),
                progress(BuildStep::Link, 29, 420),
                progress(BuildStep::Link, 39, 420),
                None,
            ]
        );
        let quiet = RefCell::new(0);
        let sink = |_| *quiet.borrow_mut() += 1;
        Tracker::new(&sink, Estimate::default_for(true)).finish();
        assert_eq!(*quiet.borrow(), 0);
    }

    #[test]
    fn the_estimate_is_the_last_build_of_its_temperature_else_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        assert_eq!(estimate(cache), Estimate::default_for(false));
        fs::create_dir_all(cache.join("builds")).unwrap();
        record(cache, false, Duration::from_millis(1_234_900));
        assert_eq!(
            fs::read_to_string(cache.join("builds/times")).unwrap(),
            "cold 1234\n"
        );
        assert_eq!(
            estimate(cache),
            Estimate {
                seconds: 1234,
                warm: false
            }
        );
        // ccache holds objects: warm, and no warm build timed yet.
        fs::create_dir_all(cache.join("ccache/a")).unwrap();
        assert_eq!(estimate(cache), Estimate::default_for(true));
        record(cache, true, Duration::from_secs(131));
        assert_eq!(
            fs::read_to_string(cache.join("builds/times")).unwrap(),
            "cold 1234\nwarm 131\n"
        );
        assert_eq!(
            estimate(cache),
            Estimate {
                seconds: 131,
                warm: true
            }
        );
    }

    #[test]
    fn kept_times_out_of_bounds_or_garbled_are_ignored() {
        assert_eq!(
            Times::parse("cold 99999999\nwarm x\nhot 3\nwarm 140\n"),
            Times {
                cold: None,
                warm: Some(140)
            }
        );
    }
}
