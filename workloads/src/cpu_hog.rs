//! `cpu-hog`: N threads spinning on arithmetic for a fixed time, like
//! `stress --cpu N`.
//!
//! Seed 003 ran two `stress --cpu 1` beside NPB LU to show what a cgroup
//! layout does to a barrier-synchronised job; this is that hog, made part of
//! the catalogue so that a matrix can place it. It also reports how much work
//! it got done, which shows how much CPU time the scheduler gave it.

use std::hint::black_box;
use std::io;
use std::time::{Duration, Instant};

use crate::catalogue::Direction;
use crate::gate::{self, Gate};
use crate::output::Metric;

#[cfg(test)]
mod tests;

/// Multiplier and increment of Knuth's MMIX linear congruential generator:
/// one step is a dependent multiply-add, cheap and impossible to hoist.
const LCG_MUL: u64 = 6_364_136_223_846_793_005;
const LCG_ADD: u64 = 1_442_695_040_888_963_407;

/// Steps between two looks at the clock: about seven microseconds of work
/// on the development VM (590 million steps per second), so reading the
/// clock costs well under 1% and the deadline is overshot by about that
/// much.
const STEPS_PER_CLOCK_READ: u64 = 4096;

/// Runs `threads` spinning threads for `seconds` and reports `hog_ops_per_s`:
/// generator steps of all threads together per second of wall time.
///
/// Fails with `InvalidInput` for zero threads or a duration that is not a
/// finite, non-negative number of seconds, and with the OS's error if a
/// thread cannot be created.
pub fn run(threads: usize, seconds: f64) -> io::Result<Vec<Metric>> {
    if threads == 0 {
        return Err(invalid_input(
            "cpu-hog needs at least one thread".to_string(),
        ));
    }
    let duration = Duration::try_from_secs_f64(seconds)
        .map_err(|e| invalid_input(format!("cpu-hog cannot spin for {seconds} s: {e}")))?;
    let gate = Gate::new();
    let work = |index: usize, deadline: Instant| spin(index as u64, deadline);
    let (steps, elapsed) = std::thread::scope(|scope| {
        let handles = gate::spawn_workers(scope, &gate, "cpu-hog", threads, &work)?;
        // The clock starts once every thread exists, so the time spent
        // creating thousands of threads is not counted as spinning time.
        let start = Instant::now();
        let Some(deadline) = start.checked_add(duration) else {
            gate.cancel();
            return Err(invalid_input(format!(
                "cpu-hog cannot spin for {seconds} s"
            )));
        };
        gate.open(deadline);
        let steps: u64 = gate::join_workers(handles).into_iter().flatten().sum();
        Ok((steps, start.elapsed()))
    })?;
    Ok(vec![Metric {
        name: "hog_ops_per_s".to_string(),
        value: steps as f64 / elapsed.as_secs_f64(),
        unit: "ops/s".to_string(),
        direction: Direction::HigherIsBetter,
    }])
}

/// Steps a generator until `deadline` and returns the number of steps.
fn spin(seed: u64, deadline: Instant) -> u64 {
    let mut state = seed;
    let mut steps = 0;
    loop {
        for _ in 0..STEPS_PER_CLOCK_READ {
            // `black_box` makes every step observable, so the optimiser can
            // neither drop the loop nor fold the steps into one.
            state = black_box(state.wrapping_mul(LCG_MUL).wrapping_add(LCG_ADD));
        }
        steps += STEPS_PER_CLOCK_READ;
        if Instant::now() >= deadline {
            return steps;
        }
    }
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
