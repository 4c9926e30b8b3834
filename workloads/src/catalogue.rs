//! The catalogue: every workload the farm can run, with typed, bounded parameters.
//!
//! Nothing received over the network is ever run as a shell command: a matrix
//! names a workload from this table and gives values for its parameters, which
//! are checked here both by the coordinator (when a matrix is submitted) and by
//! the agent (when a run arrives).
//!
//! Two tables, one namespace:
//! - [`CATALOGUE`]: the built-in workloads, which this crate implements and
//!   the `farm-workload` binary runs on any machine ([`Origin::BuiltIn`]);
//! - [`EXTERNAL`]: benchmark programs of their own (stress-ng, sysbench,
//!   iperf3, NPB, ...), which an agent runs where it finds the program, and
//!   then lists in its capabilities ([`Origin::External`]). Only their data
//!   lives here, so that the coordinator can check matrices that name them;
//!   their command lines and output parsers are the agent's (`external`).
//!
//! [`find`], [`lookup`] and [`resolve`] search both tables.

mod external;
mod spec;
#[cfg(test)]
mod tests;

pub use external::EXTERNAL;
pub use spec::{Direction, Kind, MetricSpec, Origin, ParamError, ParamSpec, Value, WorkloadSpec};

use spec::THREADS_MAX;

/// Every workload, built-in ones first.
pub fn all() -> impl Iterator<Item = &'static WorkloadSpec> {
    CATALOGUE.iter().chain(EXTERNAL)
}

/// The workload called `name`, built-in or external.
pub fn find(name: &str) -> Option<&'static WorkloadSpec> {
    all().find(|w| w.name == name)
}

/// The external workload called `name`, at compile time: the agent refers to
/// the entries it runs with this, so that a name missing here fails its build.
pub const fn external(name: &str) -> &'static WorkloadSpec {
    let mut i = 0;
    while i < EXTERNAL.len() {
        if eq(EXTERNAL[i].name.as_bytes(), name.as_bytes()) {
            return &EXTERNAL[i];
        }
        i += 1;
    }
    panic!("no such external workload in the catalogue")
}

/// `a == b` for byte strings, in a `const fn`.
const fn eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

pub fn lookup(name: &str) -> Result<&'static WorkloadSpec, ParamError> {
    let names =
        |table: &[WorkloadSpec]| table.iter().map(|w| w.name).collect::<Vec<_>>().join(", ");
    find(name).ok_or_else(|| ParamError::UnknownWorkload {
        workload: name.to_string(),
        built_in: names(CATALOGUE),
        external: names(EXTERNAL),
    })
}

/// Resolves a full parameter set: given values are checked, missing ones take
/// their defaults, and the result is sorted by name (the order on the wire).
pub fn resolve(
    workload: &str,
    given: &[(String, Value)],
) -> Result<Vec<(&'static str, Value)>, ParamError> {
    let spec = lookup(workload)?;
    let mut out: Vec<(&'static str, Value)> = Vec::with_capacity(spec.params.len());
    for p in spec.params {
        let value = match given.iter().find(|(n, _)| n == p.name) {
            None => p.default,
            Some((_, Value::Int(v))) => p.check_int(*v)?,
            Some((_, Value::Float(v))) => p.check_float(*v)?,
        };
        out.push((p.name, value));
    }
    if let Some((name, _)) = given.iter().find(|(n, _)| spec.param(n).is_err()) {
        return Err(ParamError::UnknownParam {
            workload: spec.name,
            param: name.clone(),
            known: spec.params,
        });
    }
    out.sort_by(|a, b| a.0.cmp(b.0));
    Ok(out)
}

/// The built-in workloads, which `farm-workload` runs.
pub const CATALOGUE: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "cpu-hog",
        doc: "N threads spinning on arithmetic for a fixed time, like `stress --cpu N`",
        params: &[
            ParamSpec {
                name: "threads",
                kind: Kind::Int {
                    min: 1,
                    max: THREADS_MAX,
                },
                default: Value::Int(1),
                doc: "spinning threads",
            },
            ParamSpec {
                name: "seconds",
                kind: Kind::Float {
                    min: 0.01,
                    max: 86_400.0,
                },
                default: Value::Float(2.0),
                doc: "how long each thread spins",
            },
        ],
        metrics: &[MetricSpec {
            name: "hog_ops_per_s",
            unit: "ops/s",
            direction: Direction::HigherIsBetter,
        }],
        origin: Origin::BuiltIn,
    },
    WorkloadSpec {
        name: "lu",
        doc: "barrier-synchronised SSOR solver modelled on NPB LU: pipelined lower and upper \
              sweeps over an n^3 grid, threads split along one axis",
        params: &[
            ParamSpec {
                name: "threads",
                kind: Kind::Int {
                    min: 1,
                    max: THREADS_MAX,
                },
                default: Value::Int(2),
                doc: "worker threads (NPB's OMP_NUM_THREADS)",
            },
            // The defaults are NPB class C's grid (the class of the seeds'
            // `lu.C.x`, so that threads get as many j-rows each as there)
            // and half its iterations, so that one run is a few seconds:
            // threads=2 took 2.85-2.92 s (Mop/s 3830-3840) on the 2-CPU
            // development VM, release build, idle machine; threads=1 5.36 s.
            ParamSpec {
                name: "size",
                kind: Kind::Int { min: 8, max: 512 },
                default: Value::Int(162),
                doc: "grid points per dimension; memory is 24 bytes per point (100 MB at 162)",
            },
            ParamSpec {
                name: "iterations",
                kind: Kind::Int {
                    min: 1,
                    max: 100_000,
                },
                default: Value::Int(125),
                doc: "SSOR iterations",
            },
        ],
        metrics: &[MetricSpec {
            name: "lu_mops",
            unit: "Mop/s",
            direction: Direction::HigherIsBetter,
        }],
        origin: Origin::BuiltIn,
    },
    WorkloadSpec {
        name: "stream",
        doc: "STREAM copy/scale/add/triad (McCalpin) as N independent single-threaded \
              instances, each with its own three arrays, like seed 001's N stream processes",
        params: &[
            ParamSpec {
                name: "instances",
                kind: Kind::Int {
                    min: 1,
                    max: THREADS_MAX,
                },
                default: Value::Int(1),
                doc: "independent instances, one thread each (`stream-<N>`)",
            },
            // STREAM wants each array at least four times the last-level
            // cache: 128 MiB is four times the 32 MiB L3 of the development
            // VM. There, release build, idle machine, one instance took
            // 1.32-1.35 s (triad 24-27 GB/s) and two took 1.30-1.31 s each
            // (each vCPU has its own bandwidth); up to four times as long
            // while another job kept the load average in the thousands.
            ParamSpec {
                name: "size_mb",
                kind: Kind::Int {
                    min: 1,
                    max: 16_384,
                },
                default: Value::Int(128),
                doc: "MiB per array; an instance has three (refused if /proc/meminfo has \
                      less available than instances x 3 x size_mb)",
            },
            ParamSpec {
                name: "ntimes",
                kind: Kind::Int { min: 1, max: 1000 },
                // Twice STREAM's default of 10, rather than larger arrays:
                // memory is what guests are short of.
                default: Value::Int(20),
                doc: "repetitions of the four kernels (STREAM's NTIMES); the best time \
                      of repetitions 2..ntimes counts",
            },
        ],
        // `<N>` stands for an instance's index, from 0, as in its thread's
        // name `stream-<N>`: these two are reported once per instance.
        metrics: &[
            MetricSpec {
                name: "sum_inv_runtime",
                unit: "1/s",
                direction: Direction::HigherIsBetter,
            },
            MetricSpec {
                name: "best_triad_mbs",
                unit: "MB/s",
                direction: Direction::HigherIsBetter,
            },
            MetricSpec {
                name: "instance<N>_triad_mbs",
                unit: "MB/s",
                direction: Direction::HigherIsBetter,
            },
            MetricSpec {
                name: "instance<N>_runtime_s",
                unit: "s",
                direction: Direction::LowerIsBetter,
            },
        ],
        origin: Origin::BuiltIn,
    },
    WorkloadSpec {
        name: "udp-stream",
        doc: "loopback UDP sender and receiver threads, netperf UDP_STREAM style (seed 002); \
              figures are the receiver's. Pinning is applied from outside: the thread ids \
              are printed on stderr as `tid sender <tid>` and `tid receiver <tid>`, and the \
              workload waits up to 1 s for each CPU asked for, then says `pinned=true|false`",
        params: &[
            ParamSpec {
                name: "seconds",
                kind: Kind::Float {
                    min: 0.01,
                    max: 86_400.0,
                },
                // 2 s. On the 2-CPU development VM, release build, 50-95
                // thousand 1024-byte datagrams per second were received,
                // with 40-68% lost because the sender outruns the receiver
                // (as netperf's UDP_STREAM over loopback typically shows),
                // pinned apart, together or not at all; one run reached 275
                // thousand with 7% lost.
                default: Value::Float(2.0),
                doc: "how long the sender sends",
            },
            ParamSpec {
                name: "message_size",
                kind: Kind::Int {
                    min: 1,
                    max: 65_507,
                },
                default: Value::Int(1024),
                doc: "bytes per datagram (netperf's -m; seed 002 used 1024)",
            },
            ParamSpec {
                name: "sender_cpu",
                kind: Kind::Int { min: -1, max: 8191 },
                default: Value::Int(-1),
                doc: "CPU the sender is to be pinned to, -1 for none",
            },
            ParamSpec {
                name: "receiver_cpu",
                kind: Kind::Int { min: -1, max: 8191 },
                default: Value::Int(-1),
                doc: "CPU the receiver is to be pinned to, -1 for none",
            },
        ],
        metrics: &[
            MetricSpec {
                name: "messages_per_s",
                unit: "msg/s",
                direction: Direction::HigherIsBetter,
            },
            MetricSpec {
                name: "mb_per_s",
                unit: "MB/s",
                direction: Direction::HigherIsBetter,
            },
            MetricSpec {
                name: "loss_pct",
                unit: "%",
                direction: Direction::LowerIsBetter,
            },
        ],
        origin: Origin::BuiltIn,
    },
    WorkloadSpec {
        name: "oltp",
        doc: "sysbench-like request loop (seed 004): workers lock one of several tables, \
              read and update rows, then hand the transaction to a committer thread and \
              sleep until it is committed (mutex and condvar hand-offs, group commit)",
        params: &[
            ParamSpec {
                name: "threads",
                kind: Kind::Int {
                    min: 1,
                    max: THREADS_MAX,
                },
                // Twice the CPUs of the development VM, so that a woken
                // thread often finds its CPU busy, as in seed 004's guest:
                // 100-162 thousand tps there, p50 21-26 us and p99
                // 0.07-0.17 ms, release build; 53-81 thousand tps while
                // another job loaded the machine.
                default: Value::Int(4),
                doc: "worker threads (sysbench's --threads), besides the committer",
            },
            ParamSpec {
                name: "seconds",
                kind: Kind::Float {
                    min: 0.01,
                    max: 86_400.0,
                },
                default: Value::Float(2.0),
                doc: "how long workers start new transactions",
            },
            ParamSpec {
                name: "tables",
                kind: Kind::Int { min: 1, max: 256 },
                default: Value::Int(16),
                doc: "tables of 10000 rows of 64 bytes (sysbench's --tables)",
            },
        ],
        metrics: &[
            MetricSpec {
                name: "tps",
                unit: "txn/s",
                direction: Direction::HigherIsBetter,
            },
            MetricSpec {
                name: "latency_p50_ms",
                unit: "ms",
                direction: Direction::LowerIsBetter,
            },
            MetricSpec {
                name: "latency_p95_ms",
                unit: "ms",
                direction: Direction::LowerIsBetter,
            },
            MetricSpec {
                name: "latency_p99_ms",
                unit: "ms",
                direction: Direction::LowerIsBetter,
            },
        ],
        origin: Origin::BuiltIn,
    },
    WorkloadSpec {
        name: "hackbench",
        doc: "rt-tests hackbench in thread mode (-T): groups of fds senders and fds \
              receivers; each sender writes loops 100-byte messages to each receiver of \
              its group; reports the time until all were delivered",
        // Groups x fds x 2 threads is at most THREADS_MAX, and as many file
        // descriptors: more than the usual soft limit of 1024 fails at the
        // start, with an error that says so. The defaults are hackbench's
        // own (-g 10 -f 20 -l 100: 400 threads, 400,000 messages), so that
        // figures compare with published ones. On the 2-CPU development
        // VM, release build, idle machine: 0.50-0.57 s over sockets and
        // 0.22-0.29 s over pipes (up to 1.4 and 0.8 s under another job's
        // load); raise `loops` for longer runs.
        params: &[
            ParamSpec {
                name: "groups",
                kind: Kind::Int { min: 1, max: 64 },
                default: Value::Int(10),
                doc: "groups (hackbench's -g)",
            },
            ParamSpec {
                name: "fds",
                kind: Kind::Int { min: 1, max: 32 },
                default: Value::Int(20),
                doc: "senders and receivers per group (hackbench's -f)",
            },
            ParamSpec {
                name: "loops",
                kind: Kind::Int {
                    min: 1,
                    max: 1_000_000,
                },
                default: Value::Int(100),
                doc: "messages from each sender to each receiver (hackbench's -l)",
            },
            // The catalogue has no string parameters, so the transport is a
            // number.
            ParamSpec {
                name: "mode",
                kind: Kind::Int { min: 0, max: 1 },
                default: Value::Int(1),
                doc: "0 = pipes (hackbench's -p), 1 = Unix stream sockets (its default)",
            },
        ],
        metrics: &[
            MetricSpec {
                name: "time_s",
                unit: "s",
                direction: Direction::LowerIsBetter,
            },
            MetricSpec {
                name: "messages_per_s",
                unit: "msg/s",
                direction: Direction::HigherIsBetter,
            },
        ],
        origin: Origin::BuiltIn,
    },
];
