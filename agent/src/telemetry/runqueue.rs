//! Runqueue wait: how long a workload's runnable threads waited for a CPU.
//!
//! `/proc/<pid>/task/<tid>/schedstat` (CONFIG_SCHED_INFO, which every
//! kernel with SCHEDSTATS or TASK_DELAY_ACCT has, and which needs no
//! `kernel.sched_schedstats`) is one line of three counters since the
//! thread was born: nanoseconds on a CPU, nanoseconds runnable but waiting
//! on a runqueue, and timeslices (times it was given a CPU). The sweeps read
//! it beside each thread's `stat`; [`Waits`] turns the readings into:
//! - the total wait, each thread's last reading summed (a lower bound by
//!   what a thread waited after its last sweep);
//! - percentiles of the wait per timeslice: between two readings of a
//!   thread, its mean wait per timeslice, counted once per timeslice, in a
//!   log-spaced histogram (bounded memory whatever the run's length);
//! - a series: at each sweep, how many threads were waiting on average
//!   since their previous reading (Σ Δwait / Δt), scaled like the placement
//!   samples when the sweep read a subset.
//!
//! Pure: the sampler reads the files and hands the text here.

use std::collections::HashMap;

use super::error::{Error, Result};

const FILE: &str = "/proc/<pid>/task/<tid>/schedstat";

/// One thread's counters since it was born.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedInfo {
    pub run_ns: u64,
    pub wait_ns: u64,
    pub timeslices: u64,
}

/// Parses the text of a task `schedstat` file (`72598 57425 2`).
pub fn parse(text: &str) -> Result<SchedInfo> {
    let line = text.trim_end_matches('\n');
    let bad = |reason: &'static str| Error::parse(FILE, 1, reason, line);
    let mut f = line.split(' ');
    let mut next = || -> Result<u64> {
        f.next()
            .ok_or_else(|| bad("expected 3 numbers"))?
            .parse()
            .map_err(|_| bad("not a number"))
    };
    let info = SchedInfo {
        run_ns: next()?,
        wait_ns: next()?,
        timeslices: next()?,
    };
    if f.next().is_some() {
        return Err(bad("expected 3 numbers"));
    }
    Ok(info)
}

/// Histogram buckets per factor of 2 of wait per timeslice: ~9% wide.
const PER_OCTAVE: f64 = 8.0;
/// Waits per timeslice below 1 µs go to the first bucket.
const FLOOR_US: f64 = 1.0;
/// Buckets: 1 µs × 2^(BUCKETS / PER_OCTAVE) ≈ 17 minutes at the top.
const BUCKETS: usize = 240;

/// A thread's last reading and when it was taken.
#[derive(Debug, Clone, Copy)]
struct Last {
    info: SchedInfo,
    t_ms: u64,
}

/// One sweep's point of the series: threads waiting for a CPU, on average
/// over the time since the threads' previous readings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tick {
    pub t_ms: u64,
    pub waiting: f64,
}

/// The readings of a run, accumulated.
#[derive(Debug, Clone)]
pub struct Waits {
    last: HashMap<(u32, u32), Last>,
    /// Timeslices per bucket of mean wait per timeslice.
    histogram: Vec<u64>,
    /// This sweep's Σ weight × Δwait / Δt, in threads.
    open: Option<Tick>,
    pub series: Vec<Tick>,
}

impl Default for Waits {
    fn default() -> Self {
        Waits {
            last: HashMap::new(),
            histogram: vec![0; BUCKETS],
            open: None,
            series: Vec::new(),
        }
    }
}

fn bucket(us: f64) -> usize {
    if us <= FLOOR_US {
        return 0;
    }
    ((us / FLOOR_US).log2() * PER_OCTAVE)
        .ceil()
        .min((BUCKETS - 1) as f64) as usize
}

/// The upper edge of bucket `i`, in µs.
fn edge(i: usize) -> f64 {
    FLOOR_US * (i as f64 / PER_OCTAVE).exp2()
}

impl Waits {
    /// Starts the sweep at `t_ms`; the readings that follow belong to it.
    pub fn sweep(&mut self, t_ms: u64) {
        self.close();
        self.open = Some(Tick { t_ms, waiting: 0.0 });
    }

    fn close(&mut self) {
        if let Some(t) = self.open.take() {
            self.series.push(t);
        }
    }

    /// One thread's reading in the current sweep; `key` tells threads apart
    /// (pid, tid), `weight` is how many threads it stands for in the sweep.
    pub fn observe(&mut self, key: (u32, u32), info: SchedInfo, weight: f64) {
        let Some(t_ms) = self.open.map(|t| t.t_ms) else {
            return;
        };
        // A thread's first reading counts from its birth, at 0.
        let prev = self.last.insert(key, Last { info, t_ms });
        let (before, since) = match prev {
            Some(p) => (p.info, Some(p.t_ms)),
            None => (SchedInfo::default(), None),
        };
        let waited = info.wait_ns.saturating_sub(before.wait_ns);
        let slices = info.timeslices.saturating_sub(before.timeslices);
        if slices > 0 {
            let us = waited as f64 / slices as f64 / 1e3;
            self.histogram[bucket(us)] += slices;
        }
        if let (Some(since), Some(open)) = (since, self.open.as_mut())
            && t_ms > since
        {
            open.waiting += weight * waited as f64 / ((t_ms - since) as f64 * 1e6);
        }
    }

    /// Total wait of every thread read, as of its last reading, in seconds.
    pub fn total_s(&self) -> f64 {
        self.last.values().map(|l| l.info.wait_ns).sum::<u64>() as f64 / 1e9
    }

    /// Timeslices counted.
    pub fn timeslices(&self) -> u64 {
        self.histogram.iter().sum()
    }

    /// The `q` quantile (0..=1) of the wait per timeslice in µs: the upper
    /// edge of the bucket it falls in; `None` before any timeslice.
    pub fn quantile_us(&self, q: f64) -> Option<f64> {
        let n = self.timeslices();
        if n == 0 {
            return None;
        }
        let rank = ((q * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        for (i, c) in self.histogram.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(if i == 0 { FLOOR_US } else { edge(i) });
            }
        }
        None
    }

    /// Ends the last sweep; the series is complete afterwards.
    pub fn finish(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_counters() {
        assert_eq!(
            parse("72598 57425 2\n").unwrap(),
            SchedInfo {
                run_ns: 72598,
                wait_ns: 57425,
                timeslices: 2
            }
        );
        for bad in ["", "1 2", "1 2 3 4", "1 x 3", "-1 2 3"] {
            let e = parse(bad).unwrap_err().to_string();
            assert!(
                e.starts_with("/proc/<pid>/task/<tid>/schedstat line 1: "),
                "{e}"
            );
        }
    }

    fn info(wait_ms: u64, slices: u64) -> SchedInfo {
        SchedInfo {
            run_ns: 0,
            wait_ns: wait_ms * 1_000_000,
            timeslices: slices,
        }
    }

    #[test]
    fn totals_percentiles_and_series() {
        let mut w = Waits::default();
        w.sweep(0);
        // Born with 10 ms waited over 10 timeslices: 1 ms each.
        w.observe((1, 1), info(10, 10), 1.0);
        w.observe((1, 2), info(0, 5), 1.0);
        w.sweep(100);
        // Thread 1 waited the whole 100 ms over 1 timeslice; thread 2 not at all.
        w.observe((1, 1), info(110, 11), 1.0);
        w.observe((1, 2), info(0, 95), 1.0);
        w.finish();
        assert!((w.total_s() - 0.110).abs() < 1e-12);
        assert_eq!(w.timeslices(), 10 + 5 + 1 + 90);
        // 95 timeslices waited nothing, 10 waited 1 ms, 1 waited 100 ms.
        assert_eq!(w.quantile_us(0.5), Some(1.0));
        let p99 = w.quantile_us(0.99).unwrap();
        assert!((1000.0..1000.0 * 1.1).contains(&p99), "{p99}");
        let max = w.quantile_us(1.0).unwrap();
        assert!((100_000.0..110_000.0).contains(&max), "{max}");
        // The first sweep has no interval; the second saw one thread waiting.
        assert_eq!(
            w.series,
            vec![
                Tick {
                    t_ms: 0,
                    waiting: 0.0
                },
                Tick {
                    t_ms: 100,
                    waiting: 1.0
                }
            ]
        );
    }

    #[test]
    fn a_subset_is_scaled_by_its_weight_and_empty_has_no_quantile() {
        let mut w = Waits::default();
        assert_eq!(w.quantile_us(0.99), None);
        w.sweep(0);
        w.observe((1, 1), info(0, 1), 2.0);
        w.sweep(200);
        w.observe((1, 1), info(100, 2), 2.0);
        w.finish();
        assert_eq!(w.series[1].waiting, 1.0);
    }
}
