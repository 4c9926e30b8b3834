//! Metrics: their names, units and directions, and which of them judge a
//! cell.
//!
//! A workload's own figures (its catalogue entry's metrics) and `wall_s` are
//! *primary*: they make a cell's verdict. The rest is telemetry — how the run
//! ran — which explains a verdict rather than makes it. Both the
//! coordinator (verdicts) and farmctl (how a report orders metrics) read the
//! one list here.

/// Whether a smaller or a larger value of a metric is the better one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Times, counts of migrations: larger is worse.
    LowerIsBetter,
    /// Throughputs.
    HigherIsBetter,
}

impl Direction {
    /// The word of the workloads' metric line protocol (`lower`, `higher`).
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::LowerIsBetter => "lower",
            Direction::HigherIsBetter => "higher",
        }
    }
}

impl std::str::FromStr for Direction {
    type Err = crate::cgroup::UnknownName;

    fn from_str(s: &str) -> Result<Direction, Self::Err> {
        match s {
            "lower" => Ok(Direction::LowerIsBetter),
            "higher" => Ok(Direction::HigherIsBetter),
            _ => Err(crate::cgroup::UnknownName {
                what: "direction",
                value: crate::excerpt(s),
                known: &["lower", "higher"],
            }),
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A metric every run (or every guest run) reports, whatever its workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub direction: Direction,
    /// How a diagnosis names it: perf's names for perf's counters, the
    /// seeds' words for the rest.
    pub display: &'static str,
}

const fn m(name: &'static str, unit: &'static str, direction: Direction) -> Metric {
    Metric {
        name,
        unit,
        direction,
        display: name,
    }
}

const fn shown(metric: Metric, display: &'static str) -> Metric {
    Metric { display, ..metric }
}

use Direction::{HigherIsBetter as Up, LowerIsBetter as Down};

/// Elapsed time of the workload: the one primary metric every run has.
pub const WALL_S: Metric = m("wall_s", "s", Down);
pub const USER_S: Metric = shown(m("user_s", "s", Down), "user time");
pub const SYS_S: Metric = shown(m("sys_s", "s", Down), "system time");
pub const TASK_CLOCK_S: Metric = shown(m("task_clock_s", "s", Down), "task-clock");
pub const CPUS_UTILISED: Metric = m("cpus_utilised", "CPUs", Up);
pub const CONTEXT_SWITCHES: Metric =
    shown(m("context_switches", "switches", Down), "context-switches");
pub const CPU_MIGRATIONS: Metric = shown(m("cpu_migrations", "migrations", Down), "cpu-migrations");
pub const PAGE_FAULTS: Metric = shown(m("page_faults", "faults", Down), "page-faults");
/// What sampling cost, against the CPU time of what it watched.
pub const TELEMETRY_OVERHEAD_PCT: Metric = m("telemetry_overhead_pct", "%", Down);
pub const RESCHEDULING_IPIS: Metric =
    shown(m("rescheduling_ipis", "IPIs", Down), "rescheduling IPIs");
pub const FUNCTION_CALL_IPIS: Metric =
    shown(m("function_call_ipis", "IPIs", Down), "function-call IPIs");
pub const TLB_SHOOTDOWNS: Metric = shown(m("tlb_shootdowns", "IPIs", Down), "TLB shootdowns");
/// s390x counts every IPI on one line.
pub const MIXED_IPIS: Metric = shown(m("mixed_ipis", "IPIs", Down), "IPIs");
pub const WASTED_CORE_S: Metric = shown(m("wasted_core_s", "CPU-s", Down), "wasted-core time");
pub const WASTED_CORE_PCT: Metric = m("wasted_core_pct", "%", Down);
/// Time the workload's threads spent runnable but waiting for a CPU,
/// summed over its threads (`/proc/PID/task/TID/schedstat`'s second field).
pub const RUNQUEUE_WAIT_S: Metric = shown(m("runqueue_wait_s", "s", Down), "runqueue wait");
/// The 99th percentile of the wait before a timeslice, over the workload's
/// timeslices (each thread's mean wait per timeslice between two sweeps).
pub const RUNQUEUE_WAIT_P99_US: Metric = shown(
    m("runqueue_wait_p99_us", "µs", Down),
    "runqueue wait per timeslice (p99)",
);
/// The CPUs the competing loads used on average while the workload ran:
/// their process trees' CPU time over the workload's wall time.
pub const LOADS_CPUS: Metric = shown(m("loads_cpus", "CPUs", Down), "competing loads' CPUs");
/// From the agent's start of a guest run to the workload's start.
pub const GUEST_START_S: Metric = m("guest_start_s", "s", Down);
/// The host's 1-minute load average (`/proc/loadavg`) as the run ended: a
/// mean of its runnable threads weighted over about the last minute, so
/// the run itself for runs shorter than that, its own threads (or its
/// guest's vCPU threads) included. The kernel updates it every 5 s, so runs
/// shorter than that may share one reading. What a verdict's spread is read
/// against.
pub const HOST_LOAD: Metric = shown(m("host_load", "threads", Down), "the host's load average");
/// The host's CPUs: those online when the agent looked at the machine,
/// before any run's state (a hotplug state takes some offline while its
/// run runs, and its own metrics say so).
pub const HOST_CPUS: Metric = shown(m("host_cpus", "CPUs", Up), "the host's CPUs");
/// A guest's online vCPUs during the workload: under TCG each busy one
/// wants a host CPU of its own.
pub const GUEST_CPUS: Metric = shown(m("guest_cpus", "vCPUs", Up), "the guest's vCPUs");
/// The share of a guest's CPU time its hypervisor stole (its `/proc/stat`
/// steal column over the workload), in percent: 0 under TCG, which does
/// not account it.
pub const STEAL_PCT: Metric = shown(m("steal_pct", "%", Down), "steal time");
/// How many times slower a guest ran a fixed loop of plain CPU work than
/// its host runs it natively (each side's CPU time, the median of a few
/// repetitions, timed before the workload): under TCG, which accounts no
/// steal, the emulation and the host's preemption of the vCPU together
/// (plain code's: a workload's system calls and interrupts cost TCG
/// more); about 1 under KVM.
pub const GUEST_SLOWDOWN: Metric = shown(m("guest_slowdown", "×", Down), "the guest's slowdown");

/// What the machine was like while a run ran, not what its kernel did:
/// read against a verdict's spread (why it could not decide), never a line
/// of a diagnosis — a run that waited behind another's build is no sign of
/// the kernel under test.
pub const CONDITIONS: &[Metric] = &[HOST_LOAD, HOST_CPUS, GUEST_CPUS, STEAL_PCT, GUEST_SLOWDOWN];

/// The telemetry metrics: never part of a cell's verdict, the material of
/// its diagnosis.
pub const TELEMETRY: &[Metric] = &[
    USER_S,
    SYS_S,
    TASK_CLOCK_S,
    CPUS_UTILISED,
    CONTEXT_SWITCHES,
    CPU_MIGRATIONS,
    PAGE_FAULTS,
    TELEMETRY_OVERHEAD_PCT,
    RESCHEDULING_IPIS,
    FUNCTION_CALL_IPIS,
    TLB_SHOOTDOWNS,
    MIXED_IPIS,
    WASTED_CORE_S,
    WASTED_CORE_PCT,
    RUNQUEUE_WAIT_S,
    RUNQUEUE_WAIT_P99_US,
    LOADS_CPUS,
    GUEST_START_S,
    HOST_LOAD,
    HOST_CPUS,
    GUEST_CPUS,
    STEAL_PCT,
    GUEST_SLOWDOWN,
];

/// The telemetry metric of this name.
pub fn telemetry(name: &str) -> Option<&'static Metric> {
    TELEMETRY.iter().find(|m| m.name == name)
}

/// Load balancing per sched-domain level, from `/proc/schedstat`'s deltas
/// over a run: `lb_<level>_<counter>` (`lb_numa_newidle`), the level in
/// lower case as the kernel names it (SMT, CLS, MC, PKG, DIE, NUMA).
pub mod balancing {
    use super::Direction;

    pub const PREFIX: &str = "lb_";

    /// Who balanced: a busy CPU at the tick, an idle one at the tick, or
    /// one about to go idle (`/proc/schedstat`'s three idle types).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum IdleType {
        Busy,
        Idle,
        Newidle,
    }

    impl IdleType {
        pub const ALL: [IdleType; 3] = [IdleType::Busy, IdleType::Idle, IdleType::Newidle];

        fn word(self) -> &'static str {
            match self {
                IdleType::Busy => "busy",
                IdleType::Idle => "idle",
                IdleType::Newidle => "newidle",
            }
        }
    }

    /// What one kind of balancing did, per idle type.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Outcome {
        /// Attempts.
        Attempts,
        /// Attempts that found an imbalance and moved nothing.
        Failed,
        /// The load imbalance the attempts found, summed (the kernel's
        /// `lb_imbalance`; `lb_imbalance_load` from schedstat version 17).
        Imbalance,
        /// Tasks pulled.
        Gained,
    }

    /// What is counted at a level, summed over its CPUs.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub enum Counter {
        /// Balancing by one idle type, and what it did.
        Balance(IdleType, Outcome),
        /// Tasks pushed by active balancing.
        Pushed,
        /// Wakeups moved to the waker's CPU (wake affine).
        WakeAffine,
    }

    impl Counter {
        pub const ALL: [Counter; 14] = {
            use IdleType::*;
            use Outcome::*;
            [
                Counter::Balance(Busy, Attempts),
                Counter::Balance(Idle, Attempts),
                Counter::Balance(Newidle, Attempts),
                Counter::Balance(Busy, Failed),
                Counter::Balance(Idle, Failed),
                Counter::Balance(Newidle, Failed),
                Counter::Balance(Busy, Imbalance),
                Counter::Balance(Idle, Imbalance),
                Counter::Balance(Newidle, Imbalance),
                Counter::Balance(Busy, Gained),
                Counter::Balance(Idle, Gained),
                Counter::Balance(Newidle, Gained),
                Counter::Pushed,
                Counter::WakeAffine,
            ]
        };

        /// `newidle`, `newidle_failed`, `newidle_imbalance`,
        /// `newidle_gained`, `pushed`, `wake_affine`.
        pub fn suffix(self) -> String {
            match self {
                Counter::Balance(t, Outcome::Attempts) => t.word().to_string(),
                Counter::Balance(t, Outcome::Failed) => format!("{}_failed", t.word()),
                Counter::Balance(t, Outcome::Imbalance) => format!("{}_imbalance", t.word()),
                Counter::Balance(t, Outcome::Gained) => format!("{}_gained", t.word()),
                Counter::Pushed => "pushed".into(),
                Counter::WakeAffine => "wake_affine".into(),
            }
        }

        pub fn unit(self) -> &'static str {
            match self {
                Counter::Balance(_, Outcome::Attempts | Outcome::Failed) => "balances",
                Counter::Balance(_, Outcome::Imbalance) => "load",
                Counter::Balance(_, Outcome::Gained) | Counter::Pushed => "tasks",
                Counter::WakeAffine => "wakeups",
            }
        }

        /// More balancing is more cost; none of them is a figure of merit.
        pub fn direction(self) -> Direction {
            Direction::LowerIsBetter
        }

        fn words(self) -> String {
            match self {
                Counter::Balance(t, Outcome::Attempts) => format!("{} balancing", t.word()),
                Counter::Balance(t, Outcome::Failed) => format!("failed {} balancing", t.word()),
                Counter::Balance(t, Outcome::Imbalance) => {
                    format!("imbalance found by {} balancing", t.word())
                }
                Counter::Balance(t, Outcome::Gained) => {
                    format!("tasks pulled by {} balancing", t.word())
                }
                Counter::Pushed => "tasks pushed by active balancing".into(),
                Counter::WakeAffine => "wake-affine moves".into(),
            }
        }
    }

    /// A level name as the kernel writes it: A-Z and 0-9, at most 16.
    fn level_ok(level: &str) -> bool {
        !level.is_empty()
            && level.len() <= 16
            && level
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() && !b.is_ascii_lowercase())
    }

    /// `lb_numa_newidle` for (`NUMA`, Newidle); `None` for a level name
    /// that is not the kernel's kind.
    pub fn name(level: &str, c: Counter) -> Option<String> {
        level_ok(level).then(|| format!("{PREFIX}{}_{}", level.to_ascii_lowercase(), c.suffix()))
    }

    /// The level (upper case) and counter of a balancing metric's name.
    pub fn parse(name: &str) -> Option<(String, Counter)> {
        let rest = name.strip_prefix(PREFIX)?;
        Counter::ALL.iter().find_map(|&c| {
            let level = rest.strip_suffix(c.suffix().as_str())?.strip_suffix('_')?;
            let upper = level.to_ascii_uppercase();
            (level_ok(&upper) && level == upper.to_ascii_lowercase()).then_some((upper, c))
        })
    }

    /// How a diagnosis names it: "NUMA-level newidle balancing".
    pub fn display(name: &str) -> Option<String> {
        parse(name).map(|(level, c)| format!("{level}-level {}", c.words()))
    }
}

/// Where the competing loads' threads were: `loads_node<N>_threads`, the
/// mean of their counts on NUMA node N at the workload's start and end.
/// Neither more nor fewer is better in itself: which node they crowd is
/// what explains a workload's placement.
pub mod loads_node {
    const PREFIX: &str = "loads_node";
    const SUFFIX: &str = "_threads";

    pub fn name(node: u32) -> String {
        format!("{PREFIX}{node}{SUFFIX}")
    }

    /// The node of such a metric's name (digits as `name` writes them).
    pub fn parse(name: &str) -> Option<u32> {
        let n = name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
        let ok = !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && (n == "0" || !n.starts_with('0'));
        ok.then(|| n.parse().ok()).flatten()
    }

    /// How a diagnosis names it: "competing loads' threads on node 1".
    pub fn display(name: &str) -> Option<String> {
        parse(name).map(|n| format!("competing loads' threads on node {n}"))
    }
}

/// How a diagnosis names a metric: the table's display name, a balancing
/// counter's or a node's words, else the name itself.
pub fn display(name: &str) -> String {
    match telemetry(name) {
        Some(m) => m.display.to_owned(),
        None => balancing::display(name)
            .or_else(|| loads_node::display(name))
            .unwrap_or_else(|| name.to_owned()),
    }
}

/// Whether `name` may make a cell's verdict: not telemetry, and not a
/// per-instance figure (`instance3_triad_mbs`): a workload of hundreds of
/// instances would otherwise have hundreds of verdicts, and the workload's
/// total (seed 001's sum of 1/runtime) is the figure that matters.
pub fn is_primary(name: &str) -> bool {
    let per_instance = name
        .strip_prefix("instance")
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()));
    telemetry(name).is_none()
        && !per_instance
        && balancing::parse(name).is_none()
        && loads_node::parse(name).is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary() {
        for (name, primary) in [
            ("wall_s", true),
            ("mops", true),
            ("instances_total", true),
            ("instance3_triad_mbs", false),
            ("cpu_migrations", false),
            ("guest_start_s", false),
            ("host_load", false),
            ("steal_pct", false),
            ("guest_slowdown", false),
            ("user_s", false),
            ("lb_numa_newidle", false),
            ("lb_mc_wake_affine", false),
            ("lb_", true),
            ("lb_numa_sideways", true),
            ("loads_node1_threads", false),
            ("loads_node01_threads", true),
        ] {
            assert_eq!(is_primary(name), primary, "{name}");
        }
        assert_eq!(telemetry("cpus_utilised").unwrap().direction, Up);
        use balancing::{Counter, IdleType, Outcome};
        let newidle = Counter::Balance(IdleType::Newidle, Outcome::Attempts);
        assert_eq!(
            balancing::name("NUMA", newidle).as_deref(),
            Some("lb_numa_newidle")
        );
        assert_eq!(balancing::name("numa; rm", newidle), None);
        for c in Counter::ALL {
            let n = balancing::name("MC", c).unwrap();
            assert_eq!(balancing::parse(&n), Some(("MC".to_string(), c)));
        }
        assert_eq!(display("lb_numa_newidle"), "NUMA-level newidle balancing");
        assert_eq!(
            display("lb_mc_newidle_failed"),
            "MC-level failed newidle balancing"
        );
        assert_eq!(
            display("lb_numa_idle_imbalance"),
            "NUMA-level imbalance found by idle balancing"
        );
        // `idle` is a suffix of `newidle`: each name parses as its own.
        assert_eq!(
            balancing::parse("lb_mc_newidle_gained"),
            Some((
                "MC".to_string(),
                Counter::Balance(IdleType::Newidle, Outcome::Gained)
            ))
        );
        assert_eq!(display("cpu_migrations"), "cpu-migrations");
        assert_eq!(display("mops"), "mops");
        assert_eq!(loads_node::name(12), "loads_node12_threads");
        assert_eq!(loads_node::parse("loads_node12_threads"), Some(12));
        assert_eq!(loads_node::parse("loads_node_threads"), None);
        assert_eq!(
            display("loads_node1_threads"),
            "competing loads' threads on node 1"
        );
        assert_eq!(TELEMETRY.len(), 23);
        for d in [Up, Down] {
            assert_eq!(d.to_string().parse::<Direction>(), Ok(d));
        }
        assert_eq!(
            "down".parse::<Direction>().unwrap_err().to_string(),
            "unknown direction `down` (known: lower, higher)"
        );
    }
}
