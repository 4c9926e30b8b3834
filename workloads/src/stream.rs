//! `stream`: John McCalpin's STREAM memory-bandwidth kernels, run as N
//! independent instances.
//!
//! Seed 001 ran four single-threaded STREAM processes on a four-node machine
//! and plotted the sum over instances of 1/runtime: when the scheduler put two
//! instances on one NUMA node they shared its memory bandwidth and both took
//! almost twice as long. Here each instance is one thread with its own three
//! arrays, allocated and first touched by that thread (so that their pages
//! land on its node), and each runs the four kernels `ntimes` times:
//!
//! | kernel | operation          | bytes moved per element |
//! |--------|--------------------|-------------------------|
//! | copy   | `c = a`            | 16                      |
//! | scale  | `b = q c`          | 16                      |
//! | add    | `c = a + b`        | 24                      |
//! | triad  | `a = b + q c`      | 24                      |
//!
//! As in STREAM, a kernel's rate is its bytes over its best (shortest) time,
//! the first repetition is left out of the best when there is more than one,
//! a megabyte is 10^6 bytes, and at the end every array element is checked
//! against the same recurrence computed on scalars, so that a run which
//! computed something else (or nothing) is refused rather than reported.
//!
//! Instance `N` runs on the thread named `stream-N` and reports
//! `instanceN_triad_mbs` and `instanceN_runtime_s`, so that its figures can be
//! matched with the placement samples of the same thread.

use std::hint::black_box;
use std::io;
use std::time::{Duration, Instant};

use crate::catalogue::Direction;
use crate::gate::{self, Gate};
use crate::output::Metric;

#[cfg(test)]
mod tests;

/// STREAM's `scalar`.
const SCALAR: f64 = 3.0;

/// STREAM's initial values of the three arrays.
const INITIAL: Values = Values {
    a: 1.0,
    b: 2.0,
    c: 0.0,
};

const MIB: usize = 1 << 20;

/// Bytes in one STREAM "megabyte".
const MB: f64 = 1e6;

/// The four kernels, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    Copy,
    Scale,
    Add,
    Triad,
}

impl Kernel {
    pub const ALL: [Kernel; 4] = [Kernel::Copy, Kernel::Scale, Kernel::Add, Kernel::Triad];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "copy",
            Kernel::Scale => "scale",
            Kernel::Add => "add",
            Kernel::Triad => "triad",
        }
    }

    /// Arrays read plus arrays written, as STREAM counts them.
    fn arrays_moved(self) -> usize {
        match self {
            Kernel::Copy | Kernel::Scale => 2,
            Kernel::Add | Kernel::Triad => 3,
        }
    }
}

/// What one instance measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// From the common start until this instance finished its last
    /// repetition: allocation, first touch and all kernels, not the check.
    pub runtime: Duration,
    /// Each kernel's best time, indexed by `Kernel as usize` (the order of
    /// [`Kernel::ALL`]).
    pub best: [Duration; 4],
    /// Bytes in one array.
    pub array_bytes: usize,
}

impl Instance {
    /// A kernel's best rate in MB/s.
    pub fn rate_mbs(&self, kernel: Kernel) -> f64 {
        let bytes = (kernel.arrays_moved() * self.array_bytes) as f64;
        bytes / MB / self.best[kernel as usize].as_secs_f64()
    }
}

/// What a run of all instances measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// One entry per instance, in index order.
    pub instances: Vec<Instance>,
}

impl Outcome {
    /// The metrics the catalogue declares for `stream`: the aggregates, then
    /// each instance's triad rate and runtime.
    pub fn metrics(&self) -> Vec<Metric> {
        let metric = |name: String, value: f64, unit: &str, direction| Metric {
            name,
            value,
            unit: unit.to_string(),
            direction,
        };
        let sum_inv_runtime = self
            .instances
            .iter()
            .map(|i| 1.0 / i.runtime.as_secs_f64())
            .sum();
        let best_triad_mbs = self
            .instances
            .iter()
            .map(|i| i.rate_mbs(Kernel::Triad))
            .sum();
        let mut metrics = vec![
            metric(
                "sum_inv_runtime".to_string(),
                sum_inv_runtime,
                "1/s",
                Direction::HigherIsBetter,
            ),
            metric(
                "best_triad_mbs".to_string(),
                best_triad_mbs,
                "MB/s",
                Direction::HigherIsBetter,
            ),
        ];
        for (n, instance) in self.instances.iter().enumerate() {
            metrics.push(metric(
                format!("instance{n}_triad_mbs"),
                instance.rate_mbs(Kernel::Triad),
                "MB/s",
                Direction::HigherIsBetter,
            ));
            metrics.push(metric(
                format!("instance{n}_runtime_s"),
                instance.runtime.as_secs_f64(),
                "s",
                Direction::LowerIsBetter,
            ));
        }
        metrics
    }
}

/// Runs `instances` instances, each over three arrays of `size_mb` MiB, each
/// repeating the four kernels `ntimes` times.
///
/// Fails with `InvalidInput` for zero instances, size or repetitions, with
/// `OutOfMemory` if the arrays do not fit in the memory `/proc/meminfo` calls
/// available or cannot be allocated, with the OS's error if a thread cannot
/// be created, and with `InvalidData` if an instance's arrays do not hold
/// what the kernels should have computed.
pub fn run(instances: usize, size_mb: usize, ntimes: usize) -> io::Result<Outcome> {
    if instances == 0 || size_mb == 0 || ntimes == 0 {
        return Err(invalid_input(format!(
            "stream needs at least one instance, one MiB and one repetition, \
             got {instances}, {size_mb} and {ntimes}"
        )));
    }
    let array_bytes = size_mb
        .checked_mul(MIB)
        .ok_or_else(|| invalid_input(format!("stream cannot use arrays of {size_mb} MiB")))?;
    let required = array_bytes
        .checked_mul(3)
        .and_then(|bytes| bytes.checked_mul(instances))
        .ok_or_else(|| {
            invalid_input(format!(
                "stream cannot use {instances} instances of 3 × {size_mb} MiB"
            ))
        })?;
    // Overcommitted memory is only found missing when it is touched, and then
    // the OOM killer may pick the agent rather than this process.
    if let Ok(meminfo) = std::fs::read_to_string("/proc/meminfo") {
        check_memory(required, &meminfo)?;
    }
    let elements = array_bytes / size_of::<f64>();
    let gate = Gate::new();
    let work = |_: usize, start: Instant| instance(elements, ntimes, start);
    let outcomes = std::thread::scope(|scope| {
        let handles = gate::spawn_workers(scope, &gate, "stream", instances, &work)?;
        gate.open(Instant::now());
        Ok::<_, io::Error>(gate::join_workers(handles))
    })?;
    let mut measured = Vec::with_capacity(instances);
    for outcome in outcomes {
        // `None` only comes from a cancelled gate, which `spawn_workers`
        // reports as an error itself.
        let outcome = outcome.ok_or_else(|| io::Error::other("stream: an instance did not run"))?;
        measured.push(outcome?);
    }
    Ok(Outcome {
        instances: measured,
    })
}

/// Refuses to allocate `required` bytes if `meminfo` (the text of
/// `/proc/meminfo`) says less is available. Text without `MemAvailable`
/// (kernels before 3.14) is not a reason to refuse.
fn check_memory(required: usize, meminfo: &str) -> io::Result<()> {
    match mem_available(meminfo) {
        Some(available) if (required as u64) > available => Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!(
                "stream needs {} MiB for its arrays but only {} MiB are available",
                required / MIB,
                available / MIB as u64
            ),
        )),
        _ => Ok(()),
    }
}

/// `MemAvailable` from the text of `/proc/meminfo`, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemAvailable:"))?;
    let kib = line.trim().strip_suffix("kB")?.trim().parse::<u64>().ok()?;
    kib.checked_mul(1024)
}

/// One instance: allocates and first-touches its arrays, runs the kernels
/// `ntimes` times, then checks the arrays.
fn instance(elements: usize, ntimes: usize, start: Instant) -> io::Result<Instance> {
    let mut a = filled(elements, INITIAL.a)?;
    let mut b = filled(elements, INITIAL.b)?;
    let mut c = filled(elements, INITIAL.c)?;
    let mut best = [Duration::MAX; 4];
    for repetition in 0..ntimes {
        let mut times = [Duration::ZERO; 4];
        for (kernel, time) in Kernel::ALL.into_iter().zip(&mut times) {
            let began = Instant::now();
            match kernel {
                Kernel::Copy => copy(&mut c, &a),
                Kernel::Scale => scale(&mut b, &c),
                Kernel::Add => add(&mut c, &a, &b),
                Kernel::Triad => triad(&mut a, &b, &c),
            }
            // Makes the kernel's stores observable here, so the optimiser
            // can neither sink them past the clock nor fuse two kernels.
            black_box((&mut a, &mut b, &mut c));
            *time = began.elapsed();
        }
        // STREAM leaves the first repetition out: it pays for cold TLBs.
        if repetition > 0 || ntimes == 1 {
            for (best, time) in best.iter_mut().zip(times) {
                *best = (*best).min(time);
            }
        }
    }
    let runtime = start.elapsed();
    let expected = expected(ntimes);
    for (name, array, value) in [
        ("a", &a, expected.a),
        ("b", &b, expected.b),
        ("c", &c, expected.c),
    ] {
        if let Some(index) = array.iter().position(|v| v.to_bits() != value.to_bits()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "stream: {name}[{index}] is {} after {ntimes} repetitions, expected {value}",
                    array[index]
                ),
            ));
        }
    }
    Ok(Instance {
        runtime,
        // A kernel too fast for the clock would report an infinite rate.
        best: best.map(|time| time.max(Duration::from_nanos(1))),
        array_bytes: elements * size_of::<f64>(),
    })
}

/// A vector of `elements` copies of `value`, or `OutOfMemory` instead of the
/// abort an infallible allocation would end in.
fn filled(elements: usize, value: f64) -> io::Result<Vec<f64>> {
    let mut array = Vec::new();
    array.try_reserve_exact(elements).map_err(|e| {
        io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("stream cannot allocate {} MiB: {e}", elements * 8 / MIB),
        )
    })?;
    array.resize(elements, value);
    Ok(array)
}

fn copy(c: &mut [f64], a: &[f64]) {
    c.copy_from_slice(a);
}

fn scale(b: &mut [f64], c: &[f64]) {
    for (b, c) in b.iter_mut().zip(c) {
        *b = SCALAR * c;
    }
}

fn add(c: &mut [f64], a: &[f64], b: &[f64]) {
    for ((c, a), b) in c.iter_mut().zip(a).zip(b) {
        *c = a + b;
    }
}

fn triad(a: &mut [f64], b: &[f64], c: &[f64]) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = b + SCALAR * c;
    }
}

/// One element of each array.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Values {
    a: f64,
    b: f64,
    c: f64,
}

/// What every element holds after `ntimes` repetitions: STREAM's check, the
/// same operations in the same order on scalars. Rust does not contract
/// `b + q * c` into a fused multiply-add unless asked, so the arrays must
/// match bit for bit.
fn expected(ntimes: usize) -> Values {
    let mut v = INITIAL;
    for _ in 0..ntimes {
        v.c = v.a;
        v.b = SCALAR * v.c;
        v.c = v.a + v.b;
        v.a = v.b + SCALAR * v.c;
    }
    v
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
