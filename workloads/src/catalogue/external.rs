//! The external workloads: benchmark programs that are not part of the farm
//! but may be on an agent's machine. Each entry names the program an agent
//! needs; how its command line is built and its output read is the agent's
//! business (`farm_agent::external`, one module per tool), keyed by the name
//! here.
//!
//! Their metric names carry the tool's name (`stress_ng_bogo_ops_per_s`),
//! so that they never collide with a built-in workload's. Durations are
//! whole seconds, as the tools take them.

use super::spec::{
    Direction, Kind, MetricSpec, Origin, ParamSpec, THREADS_MAX, Value, WorkloadSpec,
};

/// Every external workload, in the order agents look for them.
pub const EXTERNAL: &[WorkloadSpec] = &[
    STRESS_NG,
    SYSBENCH_CPU,
    SYSBENCH_THREADS,
    RT_HACKBENCH,
    IPERF3,
    IPERF3_UDP,
    npb_lu(
        "npb-lu.S",
        "lu.S.x",
        "NPB LU (OpenMP), class S (12^3 grid, a smoke test), a user-built lu.S.x: \
         Mop/s and the benchmark's own time",
    ),
    npb_lu(
        "npb-lu.W",
        "lu.W.x",
        "NPB LU (OpenMP), class W (33^3 grid), a user-built lu.W.x: Mop/s and the \
         benchmark's own time",
    ),
    npb_lu(
        "npb-lu.A",
        "lu.A.x",
        "NPB LU (OpenMP), class A (64^3 grid), a user-built lu.A.x: Mop/s and the \
         benchmark's own time",
    ),
    npb_lu(
        "npb-lu.B",
        "lu.B.x",
        "NPB LU (OpenMP), class B (102^3 grid), a user-built lu.B.x: Mop/s and the \
         benchmark's own time",
    ),
    npb_lu(
        "npb-lu.C",
        "lu.C.x",
        "NPB LU (OpenMP), class C (162^3 grid, the seeds' lu.C.x), a user-built \
         lu.C.x: Mop/s and the benchmark's own time",
    ),
    npb_lu(
        "npb-lu.D",
        "lu.D.x",
        "NPB LU (OpenMP), class D (408^3 grid), a user-built lu.D.x: Mop/s and the \
         benchmark's own time",
    ),
    npb_lu(
        "npb-lu.E",
        "lu.E.x",
        "NPB LU (OpenMP), class E (1020^3 grid), a user-built lu.E.x: Mop/s and the \
         benchmark's own time",
    ),
    npb_lu(
        "npb-lu.F",
        "lu.F.x",
        "NPB LU (OpenMP), class F (2560^3 grid), a user-built lu.F.x: Mop/s and the \
         benchmark's own time",
    ),
    STREAM_BIN,
    NETPERF_UDP_STREAM,
];

/// Largest UDP payload over IPv4.
const UDP_PAYLOAD_MAX: i64 = 65_507;
/// A day, in whole seconds.
const SECONDS_MAX: i64 = 86_400;

/// An integer parameter.
const fn int(name: &'static str, min: i64, max: i64, default: i64, doc: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind: Kind::Int { min, max },
        default: Value::Int(default),
        doc,
    }
}

/// The loopback port a server listens on; below the ephemeral range
/// (32768-60999 on Linux) by default, so that it does not collide with a
/// client's port.
const fn port(default: i64) -> ParamSpec {
    int(
        "port",
        1024,
        65535,
        default,
        "loopback TCP port of the server's control connection",
    )
}

const fn metric(name: &'static str, unit: &'static str, direction: Direction) -> MetricSpec {
    MetricSpec {
        name,
        unit,
        direction,
    }
}

const HIGHER: Direction = Direction::HigherIsBetter;
const LOWER: Direction = Direction::LowerIsBetter;

const STRESS_NG: WorkloadSpec = WorkloadSpec {
    name: "stress-ng",
    doc: "stress-ng's cpu stressor (`stress-ng --cpu N --cpu-load P --timeout S \
          --metrics-brief`), seed 003's `stress --cpu 1` with a figure of merit: bogo \
          operations in total, per second of wall time and per second of user+system \
          CPU time",
    params: &[
        int(
            "workers",
            1,
            THREADS_MAX,
            1,
            "CPU stressor processes (`--cpu`)",
        ),
        int(
            "load",
            1,
            100,
            100,
            "percent of the time each worker is busy (`--cpu-load`)",
        ),
        int("seconds", 1, SECONDS_MAX, 2, "run time (`--timeout`)"),
    ],
    metrics: &[
        metric("stress_ng_bogo_ops", "ops", HIGHER),
        metric("stress_ng_bogo_ops_per_s", "ops/s", HIGHER),
        metric("stress_ng_bogo_ops_per_cpu_s", "ops/s", HIGHER),
    ],
    origin: Origin::External {
        program: "stress-ng",
    },
};

/// What both sysbench tests report.
const SYSBENCH_METRICS: &[MetricSpec] = &[
    metric("sysbench_events", "events", HIGHER),
    metric("sysbench_events_per_s", "events/s", HIGHER),
    metric("sysbench_latency_avg_ms", "ms", LOWER),
    metric("sysbench_latency_p95_ms", "ms", LOWER),
];
const SYSBENCH_THREADS_PARAM: ParamSpec =
    int("threads", 1, THREADS_MAX, 2, "worker threads (`--threads`)");
const SYSBENCH_SECONDS_PARAM: ParamSpec = int("seconds", 1, SECONDS_MAX, 2, "run time (`--time`)");

const SYSBENCH_CPU: WorkloadSpec = WorkloadSpec {
    name: "sysbench-cpu",
    doc: "sysbench's cpu test (seed 004): prime searches by N threads, events per second \
          and latency",
    params: &[
        SYSBENCH_THREADS_PARAM,
        SYSBENCH_SECONDS_PARAM,
        int(
            "max_prime",
            3,
            100_000_000,
            10_000,
            "primes are searched up to this number in each event (`--cpu-max-prime`)",
        ),
    ],
    metrics: SYSBENCH_METRICS,
    origin: Origin::External {
        program: "sysbench",
    },
};

const SYSBENCH_THREADS: WorkloadSpec = WorkloadSpec {
    name: "sysbench-threads",
    doc: "sysbench's threads test: N threads contending for mutexes and yielding, \
          events per second and latency",
    params: &[
        SYSBENCH_THREADS_PARAM,
        SYSBENCH_SECONDS_PARAM,
        int(
            "yields",
            0,
            1_000_000,
            1000,
            "lock/yield/unlock loops per event (`--thread-yields`)",
        ),
        int(
            "locks",
            1,
            1_000_000,
            8,
            "mutexes the threads contend for (`--thread-locks`)",
        ),
    ],
    metrics: SYSBENCH_METRICS,
    origin: Origin::External {
        program: "sysbench",
    },
};

const RT_HACKBENCH: WorkloadSpec = WorkloadSpec {
    // `hackbench` is the built-in one, modelled on this.
    name: "rt-hackbench",
    doc: "hackbench from rt-tests: time for every sender to pass its messages to every \
          receiver of its group",
    // Each group is 2 x fds tasks: the bounds keep a run under 20,000 tasks.
    params: &[
        int(
            "groups",
            1,
            100,
            10,
            "groups of senders and receivers (`-g`)",
        ),
        int(
            "fds",
            1,
            100,
            20,
            "senders, and as many receivers, per group (`-f`)",
        ),
        int(
            "loops",
            1,
            10_000_000,
            100,
            "messages each sender sends to each receiver of its group (`-l`)",
        ),
        int("datasize", 1, 65_536, 100, "bytes per message (`-s`)"),
        int(
            "threads",
            0,
            1,
            0,
            "1: tasks are threads of one process (`-T`); 0: processes",
        ),
        int(
            "pipe",
            0,
            1,
            0,
            "1: messages go through pipes (`-p`); 0: through socket pairs",
        ),
    ],
    metrics: &[metric("hackbench_time_s", "s", LOWER)],
    origin: Origin::External {
        program: "hackbench",
    },
};

const IPERF3_PORT: i64 = 5201;
const IPERF3_SECONDS_PARAM: ParamSpec =
    int("seconds", 1, SECONDS_MAX, 2, "time to transmit for (`-t`)");
const IPERF3_RECEIVED: MetricSpec = metric("iperf3_received_bit_per_s", "bit/s", HIGHER);
const IPERF3_SENT: MetricSpec = metric("iperf3_sent_bit_per_s", "bit/s", HIGHER);

const IPERF3: WorkloadSpec = WorkloadSpec {
    name: "iperf3",
    doc: "iperf3 TCP over loopback, a one-test server and a client: received and sent \
          bit rate, retransmitted segments",
    params: &[
        IPERF3_SECONDS_PARAM,
        int("streams", 1, 128, 1, "parallel TCP streams (`-P`)"),
        port(IPERF3_PORT),
    ],
    metrics: &[
        IPERF3_RECEIVED,
        IPERF3_SENT,
        metric("iperf3_retransmits", "segments", LOWER),
    ],
    origin: Origin::External { program: "iperf3" },
};

const IPERF3_UDP: WorkloadSpec = WorkloadSpec {
    name: "iperf3-udp",
    doc: "iperf3 UDP over loopback, a one-test server and a client: received and sent \
          bit rate, datagrams lost, jitter",
    params: &[
        IPERF3_SECONDS_PARAM,
        int(
            "length",
            1,
            UDP_PAYLOAD_MAX,
            1024,
            "bytes per datagram (`-l`)",
        ),
        int(
            "bitrate",
            0,
            100_000_000_000,
            0,
            "target bit rate (`-b`); 0 sends as fast as it can",
        ),
        port(IPERF3_PORT),
    ],
    metrics: &[
        IPERF3_RECEIVED,
        IPERF3_SENT,
        metric("iperf3_lost_percent", "%", LOWER),
        metric("iperf3_jitter_ms", "ms", LOWER),
    ],
    origin: Origin::External { program: "iperf3" },
};

const NPB_LU_PARAMS: &[ParamSpec] = &[int(
    "threads",
    1,
    THREADS_MAX,
    2,
    "OpenMP threads (`OMP_NUM_THREADS`)",
)];
const NPB_LU_METRICS: &[MetricSpec] = &[
    metric("npb_lu_mops", "Mop/s", HIGHER),
    metric("npb_lu_time_s", "s", LOWER),
];

/// NPB's LU of one problem class: the class is compiled into the binary
/// (hence one workload per class, so that a cell goes only to agents that
/// built its class), the thread count comes from `OMP_NUM_THREADS`.
const fn npb_lu(name: &'static str, program: &'static str, doc: &'static str) -> WorkloadSpec {
    WorkloadSpec {
        name,
        doc,
        params: NPB_LU_PARAMS,
        metrics: NPB_LU_METRICS,
        origin: Origin::External { program },
    }
}

const STREAM_BIN: WorkloadSpec = WorkloadSpec {
    // `stream` is the built-in one.
    name: "stream-bin",
    doc: "McCalpin's STREAM, a user-built `stream` (seed 001): best rate of copy, scale, \
          add and triad",
    params: &[int(
        "threads",
        1,
        THREADS_MAX,
        1,
        "OpenMP threads (`OMP_NUM_THREADS`) of an OpenMP build",
    )],
    metrics: &[
        metric("stream_copy_mb_per_s", "MB/s", HIGHER),
        metric("stream_scale_mb_per_s", "MB/s", HIGHER),
        metric("stream_add_mb_per_s", "MB/s", HIGHER),
        metric("stream_triad_mb_per_s", "MB/s", HIGHER),
    ],
    origin: Origin::External { program: "stream" },
};

const NETPERF_UDP_STREAM: WorkloadSpec = WorkloadSpec {
    name: "netperf-udp-stream",
    doc: "netperf UDP_STREAM over loopback (seed 002), a user-built netperf beside its \
          netserver: received throughput and messages per second, sent throughput",
    params: &[
        int("seconds", 1, SECONDS_MAX, 10, "test length (`-l`)"),
        int(
            "message_size",
            1,
            UDP_PAYLOAD_MAX,
            1024,
            "bytes per datagram (`-m`; seed 002 used 1024)",
        ),
        int(
            "socket_buffer",
            0,
            16 << 20,
            0,
            "send and receive socket buffer bytes (`-s`, `-S`; seed 002 used 32768); \
             0 keeps the system's default",
        ),
        port(12865),
    ],
    metrics: &[
        metric("netperf_received_mbit_per_s", "Mbit/s", HIGHER),
        metric("netperf_received_msgs_per_s", "msgs/s", HIGHER),
        metric("netperf_sent_mbit_per_s", "Mbit/s", HIGHER),
    ],
    origin: Origin::External { program: "netperf" },
};
