//! `oltp`: a sysbench-like request loop, shaped like a database under
//! `sysbench oltp_read_write`.
//!
//! Seed 004 lost 13-40% of sysbench's throughput to a wake-affine change: a
//! database's threads hand work to each other all the time, and where the
//! scheduler wakes a thread decides whether its data is still in cache and
//! whether it waits for a CPU. This workload has the same hand-offs without a
//! database. Each of `threads` workers runs transactions until the deadline;
//! a transaction
//!
//! 1. locks one of `tables` tables (a `Mutex` over [`TABLE_ROWS`] rows) picked
//!    at random, and there reads ten random rows, sums a range of
//!    [`RANGE_ROWS`] rows and updates two rows, hashing what it touched, as
//!    sysbench's ten point selects, range query and two updates do;
//! 2. queues the hash for the committer thread (the database's log writer),
//!    wakes it, and sleeps until its transaction is committed.
//!
//! The committer takes everything queued at once (a group commit), folds it
//! into the log's checksum and wakes the workers it committed. So every
//! transaction is at least two wake-ups, and a worker's latency is mostly
//! how soon the scheduler runs the committer and then the worker again.
//!
//! Latencies go into a log-linear histogram per worker ([`Histogram`]): its
//! memory is fixed whatever the run's length, and its percentiles are within
//! 1.6% of the exact ones.

use std::hint::black_box;
use std::io;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::catalogue::Direction;
use crate::gate::{self, Gate};
use crate::output::Metric;

#[cfg(test)]
mod tests;

/// Rows per table: sysbench's default `--table-size`.
pub const TABLE_ROWS: usize = 10_000;

/// Rows summed by a transaction's range query: sysbench's `--range-size`.
pub const RANGE_ROWS: usize = 100;

/// Point reads per transaction: sysbench's `--point-selects`.
const POINT_SELECTS: usize = 10;

/// A row: an id, sysbench's integer column `k`, and six words standing in
/// for its `c` and `pad` strings; one cache line.
type Row = [u64; 8];

/// Where the FNV-1a hash starts, and its prime.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// Transactions committed by all workers.
    pub transactions: u64,
    /// From the start until the last worker finished.
    pub elapsed: Duration,
    /// Every transaction's latency, in nanoseconds.
    pub latency: Histogram,
}

impl Outcome {
    /// The metrics the catalogue declares for `oltp`.
    pub fn metrics(&self) -> Vec<Metric> {
        let mut metrics = vec![Metric {
            name: "tps".to_string(),
            value: self.transactions as f64 / self.elapsed.as_secs_f64(),
            unit: "txn/s".to_string(),
            direction: Direction::HigherIsBetter,
        }];
        for (name, percent) in [
            ("latency_p50_ms", 50.0),
            ("latency_p95_ms", 95.0),
            ("latency_p99_ms", 99.0),
        ] {
            metrics.push(Metric {
                name: name.to_string(),
                value: self.latency.percentile(percent).unwrap_or(f64::NAN) / 1e6,
                unit: "ms".to_string(),
                direction: Direction::LowerIsBetter,
            });
        }
        metrics
    }
}

/// Runs `threads` workers over `tables` tables for `seconds`.
///
/// Fails with `InvalidInput` for zero threads or tables or a duration that is
/// not a finite, non-negative number of seconds, with the OS's error if a
/// thread cannot be created, and with `TimedOut` if no transaction was
/// committed at all (so that no percentile is made up).
pub fn run(threads: usize, seconds: f64, tables: usize) -> io::Result<Outcome> {
    if threads == 0 || tables == 0 {
        return Err(invalid_input(format!(
            "oltp needs at least one thread and one table, got {threads} and {tables}"
        )));
    }
    let duration = Duration::try_from_secs_f64(seconds)
        .map_err(|e| invalid_input(format!("oltp cannot run for {seconds} s: {e}")))?;
    let database = Database::new(tables);
    let gate = Gate::new();
    let work = |index: usize, deadline: Instant| database.worker(index, deadline);
    let (workers, elapsed) = thread::scope(|scope| {
        let committer = thread::Builder::new()
            .name("oltp-commit".to_string())
            .spawn_scoped(scope, || database.log.committer())?;
        // Stops the committer when this closure ends, by return or by
        // unwinding, so that the scope's final join cannot wait forever.
        let stop = StopOnDrop(&database.log);
        let handles = gate::spawn_workers(scope, &gate, "oltp", threads, &work)?;
        let start = Instant::now();
        let Some(deadline) = start.checked_add(duration) else {
            gate.cancel();
            return Err(invalid_input(format!("oltp cannot run for {seconds} s")));
        };
        gate.open(deadline);
        let workers = gate::join_workers(handles);
        let elapsed = start.elapsed();
        drop(stop);
        let checksum = committer
            .join()
            .unwrap_or_else(|payload| std::panic::resume_unwind(payload));
        // The checksum is the committer's work; nobody reads it, but the
        // optimiser must not know that.
        black_box(checksum);
        Ok((workers, elapsed))
    })?;
    let mut transactions = 0;
    let mut latency = Histogram::new();
    for worker in workers.into_iter().flatten() {
        transactions += worker.transactions;
        latency.merge(&worker.latency);
    }
    if transactions == 0 {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("oltp committed no transaction in {seconds} s"),
        ));
    }
    Ok(Outcome {
        transactions,
        elapsed,
        latency,
    })
}

/// The tables and the log, shared by all threads.
struct Database {
    tables: Vec<Mutex<Vec<Row>>>,
    log: Log,
}

/// What one worker did.
struct Worker {
    transactions: u64,
    latency: Histogram,
}

impl Database {
    fn new(tables: usize) -> Database {
        let row = |id: usize| {
            let id = id as u64;
            [
                id,
                id % 1000,
                id ^ 0x5555,
                id << 1,
                id << 2,
                id << 3,
                id << 4,
                id << 5,
            ]
        };
        Database {
            tables: (0..tables)
                .map(|_| Mutex::new((0..TABLE_ROWS).map(row).collect()))
                .collect(),
            log: Log::new(),
        }
    }

    /// One worker: transactions until `deadline`, or until the committer is
    /// gone.
    fn worker(&self, index: usize, deadline: Instant) -> Worker {
        let mut random = Random::new(index as u64);
        let mut done = Worker {
            transactions: 0,
            latency: Histogram::new(),
        };
        loop {
            let began = Instant::now();
            if began >= deadline {
                return done;
            }
            let digest = self.transaction(&mut random);
            if !self.log.commit(digest) {
                return done;
            }
            let nanos = u64::try_from(began.elapsed().as_nanos()).unwrap_or(u64::MAX);
            done.latency.record(nanos);
            done.transactions += 1;
        }
    }

    /// The reads and writes of one transaction, under its table's lock;
    /// returns the hash of what it read and wrote.
    fn transaction(&self, random: &mut Random) -> u64 {
        let table = &self.tables[random.below(self.tables.len())];
        // A worker that panicked inside a transaction left at worst one row
        // half-updated, which the next transaction simply overwrites.
        let mut rows = table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut hash = FNV_OFFSET;
        for _ in 0..POINT_SELECTS {
            hash = fnv1a(hash, &rows[random.below(TABLE_ROWS)]);
        }
        let first = random.below(TABLE_ROWS - RANGE_ROWS + 1);
        let sum = rows[first..first + RANGE_ROWS]
            .iter()
            .fold(0_u64, |sum, row| sum.wrapping_add(row[1]));
        hash = fnv1a(hash, &[sum]);
        // The index update: `k = k + 1`.
        let row = &mut rows[random.below(TABLE_ROWS)];
        row[1] = row[1].wrapping_add(1);
        hash = fnv1a(hash, row);
        // The non-index update: a new `c`.
        let row = &mut rows[random.below(TABLE_ROWS)];
        for word in &mut row[2..] {
            *word = random.next();
        }
        fnv1a(hash, row)
    }
}

/// The database's log: workers queue their transactions' hashes, the
/// committer commits them in batches.
struct Log {
    state: Mutex<LogState>,
    /// The committer waits here for work or for the stop.
    queued: Condvar,
    /// Workers wait here for their transaction to be committed.
    committed: Condvar,
}

struct LogState {
    /// The last ticket handed out; tickets start at 1.
    last_ticket: u64,
    /// Every ticket up to this one is committed.
    committed: u64,
    /// Hashes of the transactions queued since the last commit, in ticket
    /// order.
    queue: Vec<u64>,
    /// Set once no worker will queue anything more: the committer commits
    /// what is queued and returns.
    stopping: bool,
    /// Set when the committer has returned or panicked, so that no worker
    /// waits for a commit that will never come.
    committer_gone: bool,
}

impl Log {
    fn new() -> Log {
        Log {
            state: Mutex::new(LogState {
                last_ticket: 0,
                committed: 0,
                queue: Vec::new(),
                stopping: false,
                committer_gone: false,
            }),
            queued: Condvar::new(),
            committed: Condvar::new(),
        }
    }

    /// Queues a transaction and waits until it is committed; `false` if the
    /// committer is gone instead.
    fn commit(&self, digest: u64) -> bool {
        let mut state = self.lock();
        state.last_ticket += 1;
        let ticket = state.last_ticket;
        state.queue.push(digest);
        self.queued.notify_one();
        while state.committed < ticket {
            if state.committer_gone {
                return false;
            }
            state = self
                .committed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        true
    }

    /// The committer thread: commits batches until stopped with nothing
    /// queued, and returns the log's checksum.
    fn committer(&self) -> u64 {
        let _gone = GoneOnDrop(self);
        let mut checksum = FNV_OFFSET;
        let mut batch = Vec::new();
        loop {
            let mut state = self.lock();
            while state.queue.is_empty() && !state.stopping {
                state = self
                    .queued
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            if state.queue.is_empty() {
                return checksum;
            }
            std::mem::swap(&mut state.queue, &mut batch);
            // Tickets are handed out and queued under the same lock, so the
            // batch is exactly the tickets up to the last one handed out.
            let upto = state.last_ticket;
            drop(state);
            checksum = fnv1a(checksum, &batch);
            batch.clear();
            self.lock().committed = upto;
            self.committed.notify_all();
        }
    }

    fn lock(&self) -> MutexGuard<'_, LogState> {
        // Every update of the state is a single assignment or push, so a
        // panic elsewhere cannot have left it half-written.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Tells the committer to stop when dropped.
struct StopOnDrop<'a>(&'a Log);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.lock().stopping = true;
        self.0.queued.notify_all();
    }
}

/// Marks the committer gone when dropped, on return and on unwinding alike.
struct GoneOnDrop<'a>(&'a Log);

impl Drop for GoneOnDrop<'_> {
    fn drop(&mut self) {
        self.0.lock().committer_gone = true;
        self.0.committed.notify_all();
    }
}

/// FNV-1a over the little-endian bytes of `words`, continuing from `hash`.
fn fnv1a(mut hash: u64, words: &[u64]) -> u64 {
    for word in words {
        for byte in word.to_le_bytes() {
            hash = (hash ^ u64::from(byte)).wrapping_mul(FNV_PRIME);
        }
    }
    hash
}

/// xorshift64*: a small, fast generator, one per worker.
struct Random(u64);

impl Random {
    fn new(seed: u64) -> Random {
        // Any non-zero state will do; the golden-ratio multiple spreads
        // consecutive seeds apart.
        Random(seed.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `0..n`, for `n > 0`; the bias of the modulo is far below
    /// anything this workload could notice.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bits of the sub-bucket index: each power of two is split into
/// 2^`SUB_BITS` equal buckets.
const SUB_BITS: u32 = 5;
const SUB_BUCKETS: usize = 1 << SUB_BITS;
/// Values below `SUB_BUCKETS` have a bucket each; each power of two from
/// there to 2^64 has `SUB_BUCKETS`.
const BUCKETS: usize = (64 - SUB_BITS as usize + 1) * SUB_BUCKETS;

/// A log-linear histogram of `u64` values, such as nanoseconds.
///
/// A value is counted in a bucket no wider than 1/32 of the bucket's lowest
/// value, and a percentile is reported as its bucket's midpoint, so it is
/// within 1/64 (1.6%) of the exact value. Values below 32 are exact.
#[derive(Clone, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("p50", &self.percentile(50.0))
            .field("p99", &self.percentile(99.0))
            .finish()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::new()
    }
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
        }
    }

    pub fn record(&mut self, value: u64) {
        self.counts[bucket(value)] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.total += other.total;
    }

    /// The nearest-rank `percent` percentile (0 < percent <= 100): the
    /// smallest recorded value that at least `percent`% of the values are
    /// not above, as its bucket's midpoint. `None` if nothing was recorded.
    pub fn percentile(&self, percent: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((percent / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                let (low, width) = bounds(index);
                return Some(low as f64 + (width - 1) as f64 / 2.0);
            }
        }
        None
    }
}

/// The bucket of `value`.
fn bucket(value: u64) -> usize {
    if value < SUB_BUCKETS as u64 {
        return value as usize;
    }
    let exponent = u64::BITS - 1 - value.leading_zeros();
    let shift = exponent - SUB_BITS;
    // In SUB_BUCKETS..2 * SUB_BUCKETS: the value's top SUB_BITS + 1 bits.
    let sub = (value >> shift) as usize;
    shift as usize * SUB_BUCKETS + sub
}

/// The lowest value of bucket `index` and the bucket's width.
fn bounds(index: usize) -> (u64, u64) {
    if index < SUB_BUCKETS {
        return (index as u64, 1);
    }
    let shift = index / SUB_BUCKETS - 1;
    let sub = (index % SUB_BUCKETS + SUB_BUCKETS) as u64;
    (sub << shift, 1 << shift)
}

fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
