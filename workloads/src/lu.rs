//! `lu`: a barrier-synchronised SSOR solver modelled on NPB LU.
//!
//! Seeds 000 and 003 used NPB `lu.C.x` because it is what scheduler changes
//! hurt most: every iteration pipelines two triangular sweeps through all
//! threads, so one thread that waits for a CPU stalls every thread after it,
//! and the waits are spin-then-sleep like libgomp's, so two threads that share
//! a CPU burn their turns spinning for each other before either gives way.
//! This module reproduces that structure on a scalar problem, not NPB's five
//! coupled components: the synchronisation is the point, not the physics.
//!
//! The problem is `(6 + σ) u_p - Σ_q u_q = f_p` on an `n × n × n` grid (a
//! shifted 7-point Laplacian with zero values outside the grid), solved by
//! symmetric successive over-relaxation in correction form. One iteration:
//!
//! 1. **rhs**, parallel over k-planes: `r = f - A u`, with each plane's sum of
//!    squares kept for the residual norm. Barrier; thread 0 combines the sums.
//! 2. **lower sweep**, `(D - ωL) y = r` in place, a wavefront: threads own
//!    contiguous blocks of j-rows, and for each k-plane thread `t` waits until
//!    thread `t - 1` has finished that plane, computes its rows, and publishes
//!    its progress. Barrier.
//! 3. **upper sweep**, `(D - ωU) z = D y`, the same wavefront in the opposite
//!    direction (k and j descending, thread `t` waits for `t + 1`). Barrier.
//! 4. **update**, parallel over k-planes: `u += ω(2 - ω) z`. Barrier.
//!
//! After the last iteration one more rhs gives the final residual norm.
//!
//! # Safety without `unsafe`
//!
//! The sweeps update the grid in place, as NPB does, so a row reads values
//! other threads wrote moments earlier. Every k-plane of `r` is therefore
//! stored as one row block per thread, each behind its own `RwLock`; `u` and
//! `f` are stored one plane per lock. The progress flags only order the work
//! (a thread reads its neighbour's block of plane `k` after the neighbour has
//! released it and published plane `k`), so no thread ever waits for a lock,
//! and the locks cost a few atomic operations per plane. The locks are what
//! make the sharing safe; the flags are what make it correct.
//!
//! # Determinism
//!
//! Every grid value is computed by the same operations in the same order
//! whatever the number of threads: the sweeps honour every dependency of the
//! sequential algorithm, and the residual is summed per plane (in j, i order)
//! and the plane sums are combined in k order, never per thread. So the
//! residual is bit-for-bit the same for any thread count.

use std::io;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::Thread;
use std::time::{Duration, Instant};

use crate::catalogue::Direction;
use crate::gate::{self, Gate};
use crate::output::Metric;

#[cfg(test)]
mod tests;

/// The over-relaxation factor; NPB LU uses 1.2 as well.
const OMEGA: f64 = 1.2;

/// The shift σ of the operator. Any σ > 0 keeps the operator symmetric
/// positive definite, so SSOR converges; 0.5 makes it converge in tens of
/// iterations on any grid size, after which the residual stays at rounding
/// level (it never underflows into slow subnormal arithmetic, because `f` is
/// not zero).
const SIGMA: f64 = 0.5;

/// Floating-point operations per grid point per iteration, counted in the row
/// kernels below: rhs 10 (five adds to sum the six neighbours, one add of `f`,
/// one multiply and one subtract for the diagonal, one multiply and one add
/// for the square), lower sweep 5 (three adds, two multiplies), upper sweep 4
/// (three adds, one multiply), update 2 (one multiply, one add).
const OPS_PER_POINT_ITERATION: f64 = 21.0;

/// Floating-point operations per grid point of the final rhs.
const OPS_PER_POINT_RHS: f64 = 10.0;

/// How many times a thread polls a pipeline flag before it goes to sleep:
/// libgomp's default `GOMP_SPINCOUNT` when `OMP_WAIT_POLICY` is unset. In
/// seed 003 LU had 80 threads on 96 CPUs, so libgomp spun this long, while
/// the scheduler had put 27 of them on a node of 24 CPUs: a waiting thread
/// spinning on the CPU its predecessor needs is how a few overcommitted CPUs
/// can slow a whole run down ten-fold.
const SPIN_LIMIT: u32 = 300_000;

/// The poll count when there are more threads than CPUs this process may run
/// on, as libgomp throttles to 100 in that case. Like libgomp, we only count
/// our own threads, not a neighbour's hogs: that blind spot is part of what
/// the farm measures.
const SPIN_LIMIT_OVERSUBSCRIBED: u32 = 100;

/// What a run of the solver produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Solution {
    pub size: usize,
    pub iterations: usize,
    /// Wall time of the iterations and the final rhs, without setup.
    pub elapsed: Duration,
    /// The residual's root mean square before each iteration, then after
    /// the last: `iterations + 1` values.
    pub residuals: Vec<f64>,
}

impl Solution {
    /// The residual norm before the first iteration.
    pub fn initial_residual(&self) -> f64 {
        self.residuals.first().copied().unwrap_or(f64::NAN)
    }

    /// The residual norm after the last iteration.
    pub fn final_residual(&self) -> f64 {
        self.residuals.last().copied().unwrap_or(f64::NAN)
    }

    /// Floating-point operations performed in the timed part.
    pub fn ops(&self) -> f64 {
        let points = (self.size as f64).powi(3);
        points * (self.iterations as f64 * OPS_PER_POINT_ITERATION + OPS_PER_POINT_RHS)
    }

    /// The metrics the catalogue declares for `lu`.
    pub fn metrics(&self) -> Vec<Metric> {
        vec![Metric {
            name: "lu_mops".to_string(),
            value: self.ops() / self.elapsed.as_secs_f64() / 1e6,
            unit: "Mop/s".to_string(),
            direction: Direction::HigherIsBetter,
        }]
    }
}

/// Solves on a `size`³ grid with `threads` threads for `iterations`
/// iterations.
///
/// Fails with `InvalidInput` for zero threads or a zero size, and with the
/// OS's error if a thread cannot be created.
pub fn run(threads: usize, size: usize, iterations: usize) -> io::Result<Solution> {
    if threads == 0 || size == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("lu needs at least one thread and one grid point, got {threads} and {size}"),
        ));
    }
    let oversubscribed = std::thread::available_parallelism()
        // If the CPU count is unknown, assume the worst, as for one CPU.
        .map_or(threads > 1, |cpus: NonZeroUsize| threads > cpus.get());
    let spin_limit = if oversubscribed {
        SPIN_LIMIT_OVERSUBSCRIBED
    } else {
        SPIN_LIMIT
    };
    solve(threads, size, iterations, spin_limit)
}

/// `run` with a given poll count before a pipeline wait sleeps; the tests
/// use 0 to make every wait take the sleeping path.
fn solve(threads: usize, size: usize, iterations: usize, spin_limit: u32) -> io::Result<Solution> {
    let shared = Shared::new(threads, size, iterations, spin_limit);
    let gate = Gate::new();
    let work = |t: usize, (): ()| shared.work(t);
    let outcomes = std::thread::scope(|scope| {
        let handles = gate::spawn_workers(scope, &gate, "lu", threads, &work)?;
        gate.open(());
        Ok::<_, io::Error>(gate::join_workers(handles))
    })?;
    // Only thread 0 reports; the others return `None` from `work`.
    let (elapsed, residuals) = outcomes
        .into_iter()
        .flatten()
        .flatten()
        .next()
        .ok_or_else(|| io::Error::other("lu: thread 0 returned no result"))?;
    Ok(Solution {
        size,
        iterations,
        elapsed,
        residuals,
    })
}

/// Everything the threads share. Ownership of the data changes between
/// phases (by k-plane for rhs and update, by j-rows for the sweeps), which is
/// why it sits behind locks instead of being split once with `chunks_mut`.
struct Shared {
    n: usize,
    iterations: usize,
    spin_limit: u32,
    coeffs: Coeffs,
    /// The j-rows each thread owns in the sweeps. With more threads than
    /// rows some own none; they still take part in the pipeline, passing
    /// their predecessor's progress on.
    rows: Vec<Range<usize>>,
    /// The k-planes each thread owns in rhs, update and setup.
    planes: Vec<Range<usize>>,
    /// For each j-row, the thread that owns it.
    row_owner: Vec<usize>,
    /// The right-hand side `f`, one `n × n` plane per k. Written once in setup
    /// by the plane's owner (so its pages are first touched on that thread's
    /// NUMA node, as NPB's parallel initialisation does), read-only after.
    f: Vec<RwLock<Vec<f64>>>,
    /// The solution `u`, one plane per k.
    u: Vec<RwLock<Vec<f64>>>,
    /// The residual `r`, then the sweeps' `y` and `z` in its place:
    /// `r[k][t]` is thread `t`'s block of rows of plane `k`.
    r: Vec<Vec<RwLock<Vec<f64>>>>,
    /// Each k-plane's sum of squared residuals, as `f64` bits, written by the
    /// plane's owner in rhs and read by thread 0 after the next barrier.
    plane_squares: Vec<AtomicU64>,
    /// Each thread's progress through the sweeps: the number of the last
    /// plane step it finished. Steps are numbered across all sweeps of the
    /// run, so flags only grow and never need a reset between sweeps.
    progress: Vec<Flag>,
    /// Each thread's handle, set by the thread itself when it starts, so that
    /// a publisher can wake the neighbour sleeping on its flag.
    handles: Vec<OnceLock<Thread>>,
    barrier: Barrier,
    /// A row of zeros, standing in for neighbours outside the grid.
    zeros: Vec<f64>,
}

/// A progress flag alone on its cache line (128 bytes, because adjacent-line
/// prefetchers fetch lines in pairs), so that a thread spinning on its
/// neighbour's flag is not disturbed by writes to other flags.
///
/// At most one thread ever waits on a flag at a time: in the lower sweep
/// thread `t + 1` waits on thread `t`'s flag, in the upper sweep thread
/// `t - 1` does, and a barrier separates the sweeps.
#[repr(align(128))]
struct Flag {
    /// The last plane step the owner finished.
    step: AtomicUsize,
    /// The thread asleep (or about to sleep) on this flag, plus one; 0 when
    /// none is, which is the usual case and costs the publisher one load.
    sleeper: AtomicUsize,
}

impl Flag {
    fn new() -> Flag {
        Flag {
            step: AtomicUsize::new(0),
            sleeper: AtomicUsize::new(NO_SLEEPER),
        }
    }
}

const NO_SLEEPER: usize = 0;

#[derive(Clone, Copy)]
struct Coeffs {
    diag: f64,
    omega: f64,
    inv_diag: f64,
    omega_over_diag: f64,
    /// `ω(2 - ω)`: SSOR's preconditioner is `(D - ωL) D⁻¹ (D - ωU) / (ω(2 - ω))`.
    relax: f64,
}

impl Coeffs {
    fn new() -> Coeffs {
        let diag = 6.0 + SIGMA;
        Coeffs {
            diag,
            omega: OMEGA,
            inv_diag: 1.0 / diag,
            omega_over_diag: OMEGA / diag,
            relax: OMEGA * (2.0 - OMEGA),
        }
    }
}

impl Shared {
    fn new(threads: usize, n: usize, iterations: usize, spin_limit: u32) -> Shared {
        let rows: Vec<_> = (0..threads).map(|t| split(n, threads, t)).collect();
        let mut row_owner = vec![0; n];
        for (t, range) in rows.iter().enumerate() {
            for j in range.clone() {
                row_owner[j] = t;
            }
        }
        Shared {
            n,
            iterations,
            spin_limit,
            coeffs: Coeffs::new(),
            rows,
            planes: (0..threads).map(|t| split(n, threads, t)).collect(),
            row_owner,
            // Empty for now: setup allocates and fills the data on the
            // threads that will use it.
            f: (0..n).map(|_| RwLock::new(Vec::new())).collect(),
            u: (0..n).map(|_| RwLock::new(Vec::new())).collect(),
            r: (0..n)
                .map(|_| (0..threads).map(|_| RwLock::new(Vec::new())).collect())
                .collect(),
            plane_squares: (0..n).map(|_| AtomicU64::new(0)).collect(),
            progress: (0..threads).map(|_| Flag::new()).collect(),
            handles: (0..threads).map(|_| OnceLock::new()).collect(),
            barrier: Barrier::new(threads),
            zeros: vec![0.0; n],
        }
    }

    /// One thread's whole run. Thread 0 times it and keeps the residual
    /// history, and returns them; the others return `None`.
    fn work(&self, t: usize) -> Option<(Duration, Vec<f64>)> {
        // Before the first barrier, so before anyone can wait on anything.
        // Each slot is set once, by its own thread, so this cannot fail.
        let _ = self.handles[t].set(std::thread::current());
        self.setup(t);
        self.barrier.wait();
        let start = Instant::now();
        let mut residuals = Vec::with_capacity(if t == 0 { self.iterations + 1 } else { 0 });
        for iteration in 0..self.iterations {
            self.rhs(t);
            self.barrier.wait();
            if t == 0 {
                residuals.push(self.residual_norm());
            }
            self.lower_sweep(t, iteration);
            self.barrier.wait();
            self.upper_sweep(t, iteration);
            self.barrier.wait();
            self.update(t);
            self.barrier.wait();
        }
        self.rhs(t);
        self.barrier.wait();
        (t == 0).then(|| {
            residuals.push(self.residual_norm());
            (start.elapsed(), residuals)
        })
    }

    fn setup(&self, t: usize) {
        let n = self.n;
        for k in self.planes[t].clone() {
            *write(&self.f[k]) = (0..n * n).map(|p| forcing(p % n, p / n, k)).collect();
            *write(&self.u[k]) = touched_zeros(n * n);
        }
        for plane in &self.r {
            *write(&plane[t]) = touched_zeros(self.rows[t].len() * n);
        }
    }

    /// `r = f - A u` on this thread's planes, keeping each plane's sum of
    /// squares.
    fn rhs(&self, t: usize) {
        let n = self.n;
        for k in self.planes[t].clone() {
            let f = read(&self.f[k]);
            let centre = read(&self.u[k]);
            let down = k.checked_sub(1).map(|k| read(&self.u[k]));
            let up = (k + 1 < n).then(|| read(&self.u[k + 1]));
            let mut squares = 0.0;
            for (block, rows) in self.r[k].iter().zip(&self.rows) {
                let mut block = write(block);
                for (out, j) in block.chunks_exact_mut(n).zip(rows.clone()) {
                    let stencil = Stencil {
                        centre: row(&centre, n, j),
                        south: if j > 0 {
                            row(&centre, n, j - 1)
                        } else {
                            &self.zeros
                        },
                        north: if j + 1 < n {
                            row(&centre, n, j + 1)
                        } else {
                            &self.zeros
                        },
                        down: row_or_zeros(down.as_deref(), &self.zeros, j),
                        up: row_or_zeros(up.as_deref(), &self.zeros, j),
                    };
                    squares += rhs_row(out, row(&f, n, j), &stencil, self.coeffs.diag);
                }
            }
            self.plane_squares[k].store(squares.to_bits(), Ordering::Relaxed);
        }
    }

    /// The residual's root mean square, from the plane sums of the last rhs.
    /// Only valid after a barrier that follows the rhs.
    fn residual_norm(&self) -> f64 {
        // Relaxed loads suffice: the barrier orders them after the stores.
        let sum: f64 = self
            .plane_squares
            .iter()
            .map(|bits| f64::from_bits(bits.load(Ordering::Relaxed)))
            .sum();
        (sum / (self.n as f64).powi(3)).sqrt()
    }

    /// `(D - ωL) y = r`, in place, k ascending, j ascending, i ascending.
    fn lower_sweep(&self, t: usize, iteration: usize) {
        let n = self.n;
        let rows = self.rows[t].clone();
        // The row just below this thread's block, owned by an earlier thread.
        let south_owner = rows.start.checked_sub(1).map(|j| self.row_owner[j]);
        for k in 0..n {
            let step = self.step(iteration, 0, k);
            if t > 0 {
                self.wait_for(t, t - 1, step);
            }
            if !rows.is_empty() {
                let mut block = write(&self.r[k][t]);
                let below = k.checked_sub(1).map(|k| read(&self.r[k][t]));
                // Its owner has finished plane k (waited for above), so this
                // read lock is free.
                let south = south_owner.map(|s| read(&self.r[k][s]));
                for idx in 0..rows.len() {
                    let (done, rest) = block.split_at_mut(idx * n);
                    let south_row = match (idx, &south) {
                        (0, Some(south)) => last_row(south, n),
                        (0, None) => &self.zeros[..],
                        (_, _) => row(done, n, idx - 1),
                    };
                    let down_row = row_or_zeros(below.as_deref(), &self.zeros, idx);
                    lower_row(&mut rest[..n], south_row, down_row, &self.coeffs);
                }
                // The guards drop here, before the progress is published, so
                // the next thread never finds this block locked.
            }
            self.publish(t, step);
        }
    }

    /// `(D - ωU) z = D y`, in place, k descending, j descending, i
    /// descending; the pipeline runs from the last thread to the first.
    fn upper_sweep(&self, t: usize, iteration: usize) {
        let n = self.n;
        let rows = self.rows[t].clone();
        // The row just above this thread's block, owned by a later thread.
        let north_owner = (rows.end < n).then(|| self.row_owner[rows.end]);
        for (position, k) in (0..n).rev().enumerate() {
            let step = self.step(iteration, 1, position);
            if t + 1 < self.rows.len() {
                self.wait_for(t, t + 1, step);
            }
            if !rows.is_empty() {
                let mut block = write(&self.r[k][t]);
                let above = (k + 1 < n).then(|| read(&self.r[k + 1][t]));
                let north = north_owner.map(|s| read(&self.r[k][s]));
                for idx in (0..rows.len()).rev() {
                    let (head, done) = block.split_at_mut((idx + 1) * n);
                    let north_row = if idx + 1 < rows.len() {
                        row(done, n, 0)
                    } else {
                        row_or_zeros(north.as_deref(), &self.zeros, 0)
                    };
                    let up_row = row_or_zeros(above.as_deref(), &self.zeros, idx);
                    upper_row(row_mut(head, n, idx), north_row, up_row, &self.coeffs);
                }
            }
            self.publish(t, step);
        }
    }

    /// `u += ω(2 - ω) z` on this thread's planes.
    fn update(&self, t: usize) {
        let n = self.n;
        for k in self.planes[t].clone() {
            let mut u = write(&self.u[k]);
            for (block, rows) in self.r[k].iter().zip(&self.rows) {
                let z = read(block);
                for (u, z) in u[rows.start * n..rows.end * n].iter_mut().zip(z.iter()) {
                    *u += self.coeffs.relax * z;
                }
            }
        }
    }

    /// The number of a plane step, unique and increasing over the whole run:
    /// sweep 0 is the lower one, 1 the upper one, `position` counts planes in
    /// the sweep's order.
    fn step(&self, iteration: usize, sweep: usize, position: usize) -> usize {
        (iteration * 2 + sweep) * self.n + position + 1
    }

    /// Thread `t` has finished plane step `step`: publishes it, and wakes
    /// the neighbour if it has gone to sleep waiting for it.
    fn publish(&self, t: usize, step: usize) {
        let flag = &self.progress[t];
        // SeqCst store then SeqCst load, against the sleeper's SeqCst store
        // then SeqCst load in `wait_for`: of the two threads, at least one
        // sees the other's store, so either the sleeper sees this step and
        // does not sleep, or this sees the sleeper and wakes it.
        flag.step.store(step, Ordering::SeqCst);
        let sleeper = flag.sleeper.load(Ordering::SeqCst);
        if sleeper != NO_SLEEPER {
            // The sleeper may have been woken by an earlier step already and
            // be on its way out; then this leaves it a token that only makes
            // its next `park` return at once, and it checks again.
            if let Some(handle) = self.handles[sleeper - 1].get() {
                handle.unpark();
            }
        }
    }

    /// Thread `t` waits until thread `other` has finished plane step `step`:
    /// polls a bounded number of times, then sleeps until `other` publishes
    /// a step and wakes it. This is libgomp's policy when `OMP_WAIT_POLICY`
    /// is unset, which is how NPB runs: spin `GOMP_SPINCOUNT` times, then
    /// `futex_wait`, and the thread that changes the word `futex_wake`s the
    /// waiters. `park` and `unpark` are std's futex wait and wake. A waiter
    /// that yielded instead would stay runnable, and with many more threads
    /// than CPUs every waiter would keep taking turns on the CPUs the
    /// pipeline needs. When the awaited thread shares this CPU the spinning
    /// still delays it, which is exactly the cost of a bad placement this
    /// workload exists to show. (NPB LU's own pipeline flags, in `sync_left`
    /// and `sync_right`, are polled without ever sleeping; following
    /// libgomp's waits instead keeps runs with far more threads than CPUs to
    /// seconds rather than minutes.)
    fn wait_for(&self, t: usize, other: usize, step: usize) {
        let flag = &self.progress[other];
        for _ in 0..self.spin_limit {
            if flag.step.load(Ordering::Acquire) >= step {
                return;
            }
            std::hint::spin_loop();
        }
        // Register before the last check, so that a step published after
        // that check sees the registration and wakes this thread.
        let previous = flag.sleeper.swap(t + 1, Ordering::SeqCst);
        debug_assert_eq!(previous, NO_SLEEPER, "two threads wait on one flag");
        // `park` can return without an `unpark`, or for a stale one; only
        // the flag says whether the wait is over.
        while flag.step.load(Ordering::SeqCst) < step {
            std::thread::park();
        }
        // Relaxed is enough: the next registration on this flag comes after
        // a barrier, or from this thread.
        flag.sleeper.store(NO_SLEEPER, Ordering::Relaxed);
    }
}

/// The neighbours of one row of `u` in the 7-point stencil.
struct Stencil<'a> {
    centre: &'a [f64],
    south: &'a [f64],
    north: &'a [f64],
    down: &'a [f64],
    up: &'a [f64],
}

/// Writes one row of `r = f - A u` and returns its sum of squares.
fn rhs_row(out: &mut [f64], f: &[f64], s: &Stencil<'_>, diag: f64) -> f64 {
    let n = out.len();
    let mut squares = 0.0;
    for i in 0..n {
        let west = if i > 0 { s.centre[i - 1] } else { 0.0 };
        let east = if i + 1 < n { s.centre[i + 1] } else { 0.0 };
        let neighbours = west + east + s.south[i] + s.north[i] + s.down[i] + s.up[i];
        let r = f[i] + neighbours - diag * s.centre[i];
        out[i] = r;
        squares += r * r;
    }
    squares
}

/// One row of the lower sweep: `y = (r + ω (y_west + y_south + y_down)) / d`,
/// west to east, so each point uses the one just computed.
fn lower_row(row: &mut [f64], south: &[f64], down: &[f64], c: &Coeffs) {
    let mut west = 0.0;
    for ((y, south), down) in row.iter_mut().zip(south).zip(down) {
        *y = (*y + c.omega * (west + south + down)) * c.inv_diag;
        west = *y;
    }
}

/// One row of the upper sweep: `z = y + ω/d (z_east + z_north + z_up)`,
/// east to west.
fn upper_row(row: &mut [f64], north: &[f64], up: &[f64], c: &Coeffs) {
    let mut east = 0.0;
    for ((z, north), up) in row.iter_mut().zip(north).zip(up).rev() {
        *z += c.omega_over_diag * (east + north + up);
        east = *z;
    }
}

/// A smooth-enough, nowhere-zero right-hand side from integers only, so that
/// it is the same on every machine.
fn forcing(i: usize, j: usize, k: usize) -> f64 {
    1.0 + ((i + 2 * j + 3 * k) % 11) as f64 / 11.0
}

/// Zeros whose pages are written now, by this thread. `vec![0.0; len]` would
/// get pages from `calloc` that nobody touches until the first real write,
/// possibly by another thread on another NUMA node.
fn touched_zeros(len: usize) -> Vec<f64> {
    let mut v = Vec::with_capacity(len);
    v.resize(len, 0.0);
    v
}

/// Thread `t`'s share of `len` items split into `parts` contiguous ranges
/// whose sizes differ by at most one; empty when `parts > len` for some `t`.
fn split(len: usize, parts: usize, t: usize) -> Range<usize> {
    t * len / parts..(t + 1) * len / parts
}

fn row(data: &[f64], n: usize, j: usize) -> &[f64] {
    &data[j * n..(j + 1) * n]
}

fn row_mut(data: &mut [f64], n: usize, j: usize) -> &mut [f64] {
    &mut data[j * n..(j + 1) * n]
}

fn last_row(data: &[f64], n: usize) -> &[f64] {
    &data[data.len() - n..]
}

/// Row `j` of `data`, or `zeros` (one row long) where the grid has no data:
/// outside the grid, where the problem's boundary values are zero.
fn row_or_zeros<'a>(data: Option<&'a Vec<f64>>, zeros: &'a [f64], j: usize) -> &'a [f64] {
    match data {
        Some(data) => row(data, zeros.len(), j),
        None => zeros,
    }
}

// A poisoned lock means another worker panicked, which is a bug that has
// already doomed the run; the data are plain numbers with no invariant a
// half-done update could break, so the guard is taken regardless.

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
