//! Matrix files: parsing, validation, and expansion into cells and runs.
//!
//! Pure logic: the caller reads the file and passes its text; [`parse`] gives
//! back a [`Matrix`] whose cells are the cartesian product of its axes, or an
//! [`Error`] naming file, line, column and key. [`runs`] lists the runs of a
//! matrix in the order they should be dispatched.
//!
//! # Format
//!
//! ```toml
//! name = "lu-vs-hog"        # required, not empty
//! repetitions = 3           # runs per cell; default 1, 1..=1000
//! max_cells = 10000         # refuse a matrix with more cells; default 10000, 1..=1000000
//! timeout_s = 600           # per-run timeout in seconds; default 3600, 1..=604800
//! kernels = ["running"]     # default ["running"]: whatever kernel the agent runs;
//!                           # a release (`6.1.0-57-amd64`) must equal the agent's
//!                           # `uname -r`; `debian:<version>` (debian:6.1.0-57-cloud-amd64,
//!                           # debian:6.1.0-50-s390x) is booted in a guest by an agent
//!                           # that advertises guests of its arch; `file:/abs/vmlinuz`:
//!                           # an image of an agent's --kernel-dir, booted by the
//!                           # agents that list it
//!
//! [[workloads]]             # at least one
//! name = "lu"               # a workload of the catalogue (farm_workload::catalogue)
//! # A number fixes a parameter; an array of numbers is an axis. Parameters
//! # left out take the catalogue's defaults. Values are checked against the
//! # catalogue: known parameter, integer or float, within bounds.
//! params = { threads = [1, 2], size = 48 }
//!
//! [[loads]]                 # optional: competing programs beside every cell's workload
//! name = "cpu-hog"          # a workload of the catalogue, checked as for [[workloads]]
//! params = { threads = 1 }  # fixed values only: an array is refused (no axes here);
//!                           # left out: the catalogue's defaults, except `seconds`
//!                           # (see "Loads" below)
//! instances = 2             # copies, each a program of its own; default 1, 1..=64;
//!                           # at most 64 instances per cell in all
//!
//! [[states]]                # default: one state "default" that changes nothing
//! name = "cycled"           # required, unique
//! hotplug = "cycle:1"       # "cycle:CPUS" (offline then online again before the run)
//!                           # or "offline:CPUS" (offline during the run);
//!                           # CPUS like "1", "1-3", "1,3-5"
//! cgroup = "separate"       # "shared" (the workload and its loads in one cgroup) or
//!                           # "separate" (one cgroup each: the workload, every load instance)
//! # Limits set on every cgroup of the run; each needs `cgroup` in the same state.
//! cgroup_cpu_weight = 100   # cgroup2 cpu.weight, 1..=10000 (v1: cpu.shares = weight × 1024 / 100)
//! cgroup_cpu_max = "50000 100000"  # "QUOTA PERIOD" in µs, one space between (cpu.max;
//!                           # v1: cpu.cfs_quota_us and cpu.cfs_period_us):
//!                           # period 1000..=1000000, quota 1000..=2^44-1 (the kernel's bounds)
//! cgroup_cpuset = "0-1"     # cpuset.cpus: a CPU list like CPUS above; it may not lie
//!                           # wholly in the CPUs that `hotplug = "offline:CPUS"` takes away
//! autogroup = 0             # kernel.sched_autogroup_enabled: 0 or 1
//!
//! [[hosts]]                 # default: one selector "any" that every agent satisfies
//! name = "x86"              # required, unique
//! arch = "x86_64"           # `uname -m`
//! min_cpus = 2              # 1..=100000
//! min_numa_nodes = 1        # 1..=1024
//! executor = "host"         # "host" (the agent's own kernel), or for guest kernels
//!                           # "tcg" or "kvm" (default: kvm where it works, else tcg)
//!
//! [baseline]                # optional: what each cell is compared with
//! state = "default"         # keys: kernel, state, host, workload (a workload name),
//!                           # or a workload parameter (e.g. threads = 1)
//!
//! [verdict]                 # optional: how cells are judged against their baselines
//! min_effect_pct = 2        # the smallest change called a regression; default 2, 0..=100
//! max_runs = 30             # runs per cell at most when inconclusive comparisons add
//!                           # runs; default 3 × repetitions (at most 1000), and
//!                           # repetitions..=1000 (= repetitions: never add runs)
//! min_effect_pct_by_metric = { cpu_migrations = 10 }  # per metric, 0..=100
//! mix_executors = false     # compare TCG-emulated runs with KVM or bare-metal ones
//!
//! [guest]                   # optional: the machine guest kernels boot in; a key left
//!                           # out takes the arch's default (x86_64: 4 vCPUs on 2 NUMA
//!                           # nodes, 512 MiB; s390x: 2 vCPUs, 512 MiB)
//! cpus = 8                  # vCPUs, 1..=64
//! numa_nodes = 4            # 1..=16, dividing cpus; >1 only for x86_64 kernels
//! memory_mib = 1024         # 256..=65536, at least 128 a node
//!
//! [schedule]                # optional: a continuous matrix (see crate::schedule);
//!                           # submitting it makes a schedule, whose executions are
//!                           # matrices; at least one of:
//! cron = "0 3 * * *"        # five fields, UTC: minute hour day-of-month month day-of-week
//! on_new_kernel = "file:/srv/kernels/*"  # a glob: run again for each kernel matching it
//!                           # that appears in an agent's catalogue (a host release,
//!                           # `debian:…`, `file:…`); it joins the `kernels` axis
//!                           # (or is the axis, when the file gives none)
//! ```
//!
//! Unknown keys are refused everywhere, as are empty axes (`kernels = []`,
//! `threads = []`, ...), repeated values on an axis, and two workload entries
//! that resolve to the same parameters: each would make two identical cells.
//! `loads = []` is refused too: a matrix without competing load leaves the key out.
//!
//! An example, shaped like seed 003 (lu beside two `stress --cpu 1`, all in one
//! cgroup or each in its own; `examples/group-imbalance.toml` is the full one):
//!
//! ```toml
//! name = "group-imbalance"
//! repetitions = 5
//!
//! [[workloads]]
//! name = "lu"
//! params = { threads = [2, 3] }
//!
//! [[loads]]
//! name = "cpu-hog"
//! params = { threads = 1 }
//! instances = 2
//!
//! [[states]]
//! name = "shared"
//! cgroup = "shared"
//! autogroup = 0
//!
//! [[states]]
//! name = "separate"
//! cgroup = "separate"
//! autogroup = 0
//!
//! [baseline]
//! state = "shared"
//! ```
//!
//! # Cells
//!
//! Cells are the product kernels × workloads × states × hosts, in that order
//! (the last axis varies fastest). A workload entry expands over its parameter
//! axes in declaration order, the last declared varying fastest. On the wire a
//! cell's parameters are complete (defaults filled in) and sorted by name.
//!
//! A cell's name is the workload with the parameters the file gives, in file
//! order, then `kernel=`, `state=`, `host=` for each of those axes that has
//! more than one value: `lu threads=2 size=48 | state=cycled`. Names are
//! unique because workload entries may not resolve to the same parameters.
//!
//! A cell's baseline is the cell with the `[baseline]` values substituted into
//! its coordinates; see the `baseline` submodule for the exact rule.
//!
//! # Loads
//!
//! Every cell gets the same loads, so they are not an axis and do not appear
//! in cell names. On the wire (`Cell.loads`) each `[[loads]]` entry becomes
//! `instances` copies of one `Workload`, entries in file order, parameters
//! complete and sorted by name as for the measured workload. The agent starts
//! them before the measured workload and kills them after it, in the cgroup
//! layout of the cell's state (with `separate`, every instance in a cgroup of
//! its own, as seed 003 gave each `stress` process its own group).
//!
//! A load therefore ends when the agent stops it, not when its own clock
//! runs out, and its duration must only outlast the measured run: a load's
//! `seconds` parameter (cpu-hog's, and that of any other catalogued workload
//! with one), when not given, is [`LOAD_SECONDS`] = 86400, the catalogue's
//! largest, rather than the catalogue default of a few seconds, which would
//! leave the workload alone after the first seconds of its run. Give `seconds`
//! explicitly only for a load meant to stop early. Workloads without a
//! duration (lu, stream, ...) end when their work is done, possibly before
//! the measured workload does.
//!
//! # Limits
//!
//! The number of cells is counted before any is built, so a matrix of 10^30
//! cells fails as fast as one of 10^4 + 1. Runs (cells × repetitions) are
//! limited to [`MAX_RUNS`], so that [`runs`] always fits in memory, and load
//! copies (cells × load instances per cell) to [`MAX_LOAD_COPIES`], since
//! every cell carries its own.

mod baseline;
mod location;
mod raw;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};
use std::ops::RangeInclusive;

use farm_proto::{
    Cell, GuestShape, HostSelector, MachineState, Param, VerdictPolicy, Workload,
    param::Value as ParamValue,
};
use farm_workload::catalogue::{self, ParamError, ParamSpec, Value, WorkloadSpec};
use toml::Spanned;

use self::location::{Issue, join};
use self::raw::{
    Int, Number, RawHost, RawLoad, RawMatrix, RawSchedule, RawState, RawVerdict, RawWorkload,
    Setting,
};

/// The default limit on the number of cells of one matrix (`max_cells`).
pub const DEFAULT_MAX_CELLS: usize = 10_000;

/// The most runs (cells × repetitions) a matrix may have. A run costs the
/// coordinator a few hundred bytes in memory and a row in the store, written
/// in the submission's one transaction; a million is hours of a large fleet.
pub const MAX_RUNS: u64 = 1_000_000;

/// The most load instances one cell may have (`instances` summed over `[[loads]]`).
pub const MAX_LOADS_PER_CELL: u32 = 64;

/// The most load copies a matrix may hold: cells × load instances per cell.
/// Each copy is a complete `Workload` (a few hundred bytes) in every cell, so
/// this keeps a matrix with loads within the memory of one without.
pub const MAX_LOAD_COPIES: u64 = 1_000_000;

/// A load's `seconds` when the file leaves it out: the agent stops a load
/// after the measured workload, so its own duration only has to outlast the
/// run. A day, the catalogue's largest duration.
pub const LOAD_SECONDS: f64 = 86_400.0;

const MAX_CELLS: RangeInclusive<i64> = 1..=1_000_000;
const REPETITIONS: RangeInclusive<i64> = 1..=1000;
const TIMEOUT_S: RangeInclusive<i64> = 1..=604_800;
const MIN_CPUS: RangeInclusive<i64> = 1..=100_000;
const MIN_NUMA_NODES: RangeInclusive<i64> = 1..=1024;
const AUTOGROUP: RangeInclusive<i64> = 0..=1;
const LOAD_INSTANCES: RangeInclusive<i64> = 1..=MAX_LOADS_PER_CELL as i64;
/// cgroup2 `cpu.weight`.
const CPU_WEIGHT: RangeInclusive<i64> = 1..=10_000;
/// `cpu.max` / `cpu.cfs_period_us` in µs: the kernel refuses a period under
/// 1 ms or over 1 s.
const CPU_MAX_PERIOD_US: RangeInclusive<u64> = 1_000..=1_000_000;
/// `cpu.max` / `cpu.cfs_quota_us` in µs: at least 1 ms, at most the kernel's
/// `max_cfs_runtime` (2^44 - 1 µs).
const CPU_MAX_QUOTA_US: RangeInclusive<u64> = 1_000..=(1 << 44) - 1;
/// The parameter that bounds a workload's duration, long for loads.
const DURATION_PARAM: &str = "seconds";
const DEFAULT_REPETITIONS: u32 = 1;
const DEFAULT_TIMEOUT_S: u32 = 3600;
const RUNNING_KERNEL: &str = "running";
const DEFAULT_STATE: &str = "default";
const ANY_HOST: &str = "any";
/// `host` runs on the agent's own kernel; `tcg` and `kvm` boot a guest
/// kernel under that accelerator.
const EXECUTORS: &[&str] = &["host", "tcg", "kvm"];
const CGROUP_LAYOUTS: &[&str] = &["shared", "separate"];
const HOTPLUG_MODES: &[&str] = &["cycle", "offline"];
/// CPU numbers in hotplug lists stay below this (the largest `min_cpus`).
const CPU_LIMIT: u32 = 100_000;

/// A validated, expanded matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub name: String,
    pub repetitions: u32,
    pub timeout_s: u32,
    /// Every cell, `cells[i].index == i`.
    pub cells: Vec<Cell>,
    /// The file's `[schedule]`: submitting it makes a schedule, not a run.
    pub schedule: Option<Schedule>,
}

/// A validated `[schedule]`; an empty field is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub cron: String,
    pub on_new_kernel: String,
}

/// One run of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub cell_index: u32,
    pub repetition: u32,
    /// Dispatch order, from 0.
    pub seq: u64,
}

/// A matrix file that cannot be run, and where.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{file}:{line}:{column}: {}{message}", key_prefix(.key))]
pub struct Error {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// The dotted path of the offending key, e.g. `workloads[1].params.threads`;
    /// empty when the error is not about one key (e.g. a TOML syntax error).
    pub key: String,
    pub message: String,
}

fn key_prefix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

type Checked<T> = std::result::Result<T, Issue>;

/// Parses, validates and expands a matrix file. `file_name` is only used in errors.
pub fn parse(file_name: &str, text: &str) -> Result<Matrix> {
    let raw: RawMatrix =
        toml::from_str(text).map_err(|e| location::from_toml(file_name, text, &e))?;
    build(&raw, None).map_err(|issue| issue.locate(file_name, text))
}

/// The matrix one execution of a schedule runs: the file's, without its
/// `[schedule]`, with `new_kernel` (a trigger's) on the kernel axis — after
/// the file's kernels, or alone when the file gives none.
pub fn parse_execution(file_name: &str, text: &str, new_kernel: Option<&str>) -> Result<Matrix> {
    let raw: RawMatrix =
        toml::from_str(text).map_err(|e| location::from_toml(file_name, text, &e))?;
    let mut m = build(&raw, new_kernel).map_err(|issue| issue.locate(file_name, text))?;
    m.schedule = None;
    Ok(m)
}

/// The runs of a matrix in dispatch order: repetition-major (every cell's
/// repetition 0, then every cell's repetition 1, ...), so that a slow drift of
/// the machines over the matrix touches every cell alike.
pub fn runs(m: &Matrix) -> Vec<Run> {
    let mut out = Vec::with_capacity(m.cells.len() * m.repetitions as usize);
    for repetition in 0..m.repetitions {
        for cell in &m.cells {
            let seq = out.len() as u64;
            out.push(Run {
                cell_index: cell.index,
                repetition,
                seq,
            });
        }
    }
    out
}

/// One workload with all its parameters resolved: a point of the workload axis.
struct Variant {
    spec: &'static WorkloadSpec,
    /// Complete and sorted by name, as on the wire.
    params: Vec<(&'static str, Value)>,
    /// The workload name and the parameters the file gives, in file order.
    label: String,
}

impl Variant {
    fn param(&self, name: &str) -> Option<Value> {
        self.params.iter().find(|p| p.0 == name).map(|p| p.1)
    }
}

/// A parameter value that can be hashed: floats by their bits (-0.0 never
/// reaches here, NaN is refused by the catalogue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ValueKey {
    Int(i64),
    Float(u64),
}

impl ValueKey {
    fn of(v: Value) -> Self {
        match v {
            Value::Int(i) => ValueKey::Int(i),
            Value::Float(f) => ValueKey::Float(f.to_bits()),
        }
    }
}

/// Checks a number given for a parameter.
fn typed(spec: &ParamSpec, n: Number) -> std::result::Result<Value, ParamError> {
    match n {
        Number::Int(v) => spec.check_int(v),
        Number::Float(v) => spec.check_float(v),
    }
}

fn build(raw: &RawMatrix, new_kernel: Option<&str>) -> Checked<Matrix> {
    let name = non_empty(&raw.name, "name")?;
    let repetitions: u32 = bounded(
        raw.repetitions.as_ref(),
        "repetitions",
        REPETITIONS,
        DEFAULT_REPETITIONS,
    )?;
    let max_cells: usize = bounded(
        raw.max_cells.as_ref(),
        "max_cells",
        MAX_CELLS,
        DEFAULT_MAX_CELLS,
    )?;
    let timeout_s: u32 = bounded(
        raw.timeout_s.as_ref(),
        "timeout_s",
        TIMEOUT_S,
        DEFAULT_TIMEOUT_S,
    )?;
    let schedule = schedule(raw.schedule.as_ref())?;
    let mut kernels = kernels(raw.kernels.as_ref())?;
    // The trigger's kernel, when the file does not run it anyway.
    let mut added = None;
    if let Some(k) = new_kernel {
        let span = raw
            .schedule
            .as_ref()
            .and_then(|s| s.get_ref().on_new_kernel.as_ref())
            .map_or(raw.name.span(), |g| g.span());
        // As the file's kernels: the store keeps seen kernels one a line.
        let checked = if k.is_empty() || k.chars().any(char::is_whitespace) {
            Err(format!(
                "`{k}`: a kernel name is not empty and has no whitespace"
            ))
        } else {
            check_kernel_name(k)
        };
        if let Err(why) = checked {
            return Err(Issue::new(
                span,
                "schedule.on_new_kernel",
                format!("new kernel: {why}"),
            ));
        }
        if raw.kernels.is_none() {
            kernels = vec![k.to_owned()];
            added = Some(k);
        } else if !kernels.iter().any(|x| x == k) {
            kernels.push(k.to_owned());
            added = Some(k);
        }
    }
    let workloads = non_empty_axis(&raw.workloads, "workloads")?
        .iter()
        .enumerate()
        .map(|(i, w)| workload_axes(i, w))
        .collect::<Checked<Vec<_>>>()?;
    let loads = loads(raw.loads.as_ref())?;
    let states = states(raw.states.as_ref())?;
    let hosts = hosts(raw.hosts.as_ref())?;
    guest_limits(raw, &kernels, &workloads, &loads)?;
    executors_fit(raw, &kernels, &hosts)?;

    check_size(
        raw,
        &workloads,
        [kernels.len(), states.len(), hosts.len()],
        max_cells,
        repetitions,
        loads.len(),
    )?;
    let variants = variants(raw, &workloads)?;
    let baseline = match &raw.baseline {
        None => None,
        Some(b) => {
            let axes = baseline::Axes {
                kernels: &kernels,
                states: &states,
                hosts: &hosts,
                variants: &variants,
            };
            Some(baseline::resolve(b, &axes)?)
        }
    };
    let policy = verdict_policy(raw.verdict.as_ref(), repetitions)?;
    let guest = guest_shape(raw, &kernels)?;
    let mut cells = cells(
        &kernels,
        &variants,
        &states,
        &hosts,
        &loads,
        baseline.as_ref(),
    );
    for cell in &mut cells {
        cell.verdict = Some(policy.clone());
        cell.new_kernel = added == Some(cell.kernel.as_str());
        if !matches!(
            kernel_kind(&cell.kernel),
            KernelKind::Running | KernelKind::Release
        ) {
            cell.guest = guest;
        }
    }
    Ok(Matrix {
        name,
        repetitions,
        timeout_s,
        cells,
        schedule,
    })
}

/// The `[schedule]` table: a valid cron, a valid glob, at least one.
fn schedule(raw: Option<&Spanned<RawSchedule>>) -> Checked<Option<Schedule>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let s = raw.get_ref();
    let mut out = Schedule {
        cron: String::new(),
        on_new_kernel: String::new(),
    };
    if let Some(c) = &s.cron {
        crate::schedule::cron(c.get_ref()).map_err(|e| Issue::new(c.span(), "schedule.cron", e))?;
        out.cron = c.get_ref().trim().to_owned();
    }
    if let Some(g) = &s.on_new_kernel {
        let text = non_empty(g, "schedule.on_new_kernel")?;
        crate::schedule::kernel_glob(&text)
            .map_err(|e| Issue::new(g.span(), "schedule.on_new_kernel", e))?;
        out.on_new_kernel = text;
    }
    if out.cron.is_empty() && out.on_new_kernel.is_empty() {
        return Err(Issue::new(
            raw.span(),
            "schedule",
            "a schedule needs `cron` (e.g. \"0 3 * * *\") or `on_new_kernel` (a kernel glob)",
        ));
    }
    Ok(Some(out))
}

/// Every kernel meets every host selector (cells are their product), so a
/// selector's executor must suit every kernel: `host` none that boots in a
/// guest, `tcg` and `kvm` only those.
fn executors_fit(raw: &RawMatrix, kernels: &[String], hosts: &[HostSelector]) -> Checked<()> {
    for (h, host) in hosts.iter().enumerate() {
        let guest_executor = match host.executor.as_str() {
            "" => continue,
            "host" => false,
            _ => true,
        };
        let Some(kernel) = kernels.iter().find(|k| {
            let guest = !matches!(kernel_kind(k), KernelKind::Running | KernelKind::Release);
            guest != guest_executor
        }) else {
            continue;
        };
        let span = raw
            .hosts
            .as_ref()
            .and_then(|v| v.get_ref().get(h))
            .and_then(|e| e.get_ref().executor.as_ref())
            .map_or(0..0, Spanned::span);
        let why = if guest_executor {
            format!("`{kernel}` runs on the agent's own kernel, not in a guest")
        } else {
            format!("`{kernel}` boots in a guest (executor tcg or kvm, or leave it out)")
        };
        return Err(Issue::new(
            span,
            format!("hosts[{h}].executor"),
            format!(
                "executor `{}` cannot run every kernel: {why}",
                host.executor
            ),
        ));
    }
    Ok(())
}

/// The `[guest]` table: the machine guest kernels boot in, a field left
/// out taking the arch's default (`farm_proto::guest::default_for`: x86_64
/// 4 vCPUs on 2 nodes, s390x 2 vCPUs, 512 MiB). `None` without the table.
/// The shape must fit every guest kernel's arch (a `file:` image's is known
/// only to its agent, which checks again: checked here as x86_64).
fn guest_shape(raw: &RawMatrix, kernels: &[String]) -> Checked<Option<GuestShape>> {
    use farm_proto::guest::{CPUS, MEMORY_MIB, NUMA_NODES};
    let Some(table) = &raw.guest else {
        return Ok(None);
    };
    let g = table.get_ref();
    let range = |r: &RangeInclusive<u32>| i64::from(*r.start())..=i64::from(*r.end());
    let shape = GuestShape {
        cpus: bounded(g.cpus.as_ref(), "guest.cpus", range(&CPUS), 0)?,
        numa_nodes: bounded(
            g.numa_nodes.as_ref(),
            "guest.numa_nodes",
            range(&NUMA_NODES),
            0,
        )?,
        memory_mib: bounded(
            g.memory_mib.as_ref(),
            "guest.memory_mib",
            range(&MEMORY_MIB),
            0,
        )?,
    };
    let mut any = false;
    for k in kernels {
        let arch = match kernel_kind(k) {
            KernelKind::Debian { arch } => arch,
            KernelKind::File => "x86_64",
            KernelKind::Running | KernelKind::Release => continue,
        };
        any = true;
        if let Err(why) = farm_proto::guest::resolve(Some(&shape), arch) {
            return Err(Issue::new(
                table.span(),
                "guest",
                format!("for `{k}` ({arch}; fields left out take its default): {why}"),
            ));
        }
    }
    if !any {
        return Err(Issue::new(
            table.span(),
            "guest",
            "no kernel of the matrix boots in a guest (`debian:<version>` or `file:<path>`)",
        ));
    }
    Ok(Some(shape))
}

/// External tools that guests carry (Debian's builds, of the guest's arch).
const GUEST_TOOLS: &[&str] = &[
    "stress-ng",
    "sysbench-cpu",
    "sysbench-threads",
    "rt-hackbench",
];

/// What guests cannot do yet, refused up front rather than run by run:
/// competing loads (guests run the workload alone), external tools other
/// than [`GUEST_TOOLS`], and on any arch but x86_64 the farm's built-in
/// workloads (its binaries exist for x86_64 only). Hotplug, autogroup and
/// cgroup states are applied inside guests.
fn guest_limits(
    raw: &RawMatrix,
    kernels: &[String],
    workloads: &[(&'static WorkloadSpec, Vec<Axis>)],
    loads: &[Workload],
) -> Checked<()> {
    for (i, kernel) in kernels.iter().enumerate() {
        // A `file:` image's arch is known only to the agent that has it,
        // which refuses a built-in workload for a non-x86_64 image itself.
        let arch = match kernel_kind(kernel) {
            KernelKind::Debian { arch } => arch,
            KernelKind::File => "x86_64",
            KernelKind::Running | KernelKind::Release => continue,
        };
        let why = if !loads.is_empty() {
            Some("competing loads cannot run there yet: guests run the workload alone".to_owned())
        } else {
            workloads.iter().find_map(|(spec, _)| match spec.origin {
                catalogue::Origin::BuiltIn if arch != "x86_64" => Some(format!(
                    "`{}` is built into the farm, whose binaries exist for x86_64 only; {arch} \
                     guests run {}",
                    spec.name,
                    GUEST_TOOLS.join(", ")
                )),
                catalogue::Origin::External { .. } if !GUEST_TOOLS.contains(&spec.name) => {
                    Some(format!(
                        "`{}` is not carried into guests; they run the built-in workloads \
                         (x86_64) and {}",
                        spec.name,
                        GUEST_TOOLS.join(", ")
                    ))
                }
                _ => None,
            })
        };
        let Some(why) = why else { continue };
        let span = raw
            .kernels
            .as_ref()
            .and_then(|k| k.get_ref().get(i))
            .map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            format!("kernels[{i}]"),
            format!("`{kernel}` runs in a guest: {why}"),
        ));
    }
    Ok(())
}

/// The smallest effect called a change when the matrix does not say, in
/// percent: below LKP's 5% and Perfherder's 2% thresholds' spirit, at the
/// noise our verdicts resolve with 10 runs a side.
pub const DEFAULT_MIN_EFFECT_PCT: f64 = 2.0;

/// The `[verdict]` table, checked.
fn verdict_policy(raw: Option<&Spanned<RawVerdict>>, repetitions: u32) -> Checked<VerdictPolicy> {
    let pct = |v: &Spanned<Number>, key: String| -> Checked<f64> {
        let x = match *v.get_ref() {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        };
        if !(0.0..=100.0).contains(&x) {
            return Err(Issue::new(
                v.span(),
                key,
                format!("{x} is out of range 0..=100 (percent)"),
            ));
        }
        Ok(x / 100.0)
    };
    let default_max = repetitions.saturating_mul(3).min(MAX_RUNS_PER_CELL);
    let Some(raw) = raw else {
        return Ok(VerdictPolicy {
            min_effect: DEFAULT_MIN_EFFECT_PCT / 100.0,
            min_effect_by_metric: Default::default(),
            max_runs: default_max,
            repetitions,
            mix_executors: false,
        });
    };
    let raw = raw.get_ref();
    let min_effect = match &raw.min_effect_pct {
        Some(v) => pct(v, "verdict.min_effect_pct".into())?,
        None => DEFAULT_MIN_EFFECT_PCT / 100.0,
    };
    let max_runs = bounded(
        raw.max_runs.as_ref(),
        "verdict.max_runs",
        i64::from(repetitions)..=i64::from(MAX_RUNS_PER_CELL.max(repetitions)),
        default_max.max(repetitions),
    )?;
    let mut by_metric = HashMap::new();
    for (name, v) in &raw.min_effect_pct_by_metric {
        let key = format!("verdict.min_effect_pct_by_metric.{}", name.get_ref());
        by_metric.insert(name.get_ref().clone(), pct(v, key)?);
    }
    Ok(VerdictPolicy {
        min_effect,
        min_effect_by_metric: by_metric,
        max_runs,
        repetitions,
        mix_executors: raw.mix_executors,
    })
}

/// The most runs one cell may reach with the runs verdicts add.
pub const MAX_RUNS_PER_CELL: u32 = 1000;

/// Refuses a matrix with more cells than `max_cells`, more runs than
/// [`MAX_RUNS`] or more load copies than [`MAX_LOAD_COPIES`], counting them
/// from the axes' lengths alone.
fn check_size(
    raw: &RawMatrix,
    workloads: &[(&'static WorkloadSpec, Vec<Axis>)],
    other_axes: [usize; 3],
    max_cells: usize,
    repetitions: u32,
    loads_per_cell: usize,
) -> Checked<()> {
    // Saturating: ten axes of a thousand values overflow even a u128.
    let variant_count = workloads.iter().fold(0u128, |sum, (_, axes)| {
        let product = axes
            .iter()
            .fold(1u128, |p, a| p.saturating_mul(a.values.len() as u128));
        sum.saturating_add(product)
    });
    let cell_count = other_axes
        .iter()
        .fold(variant_count, |p, &n| p.saturating_mul(n as u128));
    if cell_count > max_cells as u128 {
        let span = raw.max_cells.as_ref().map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            "max_cells",
            format!(
                "the matrix has {cell_count} cells, more than the limit of {max_cells}: shrink \
                 an axis or raise max_cells"
            ),
        ));
    }
    let run_count = cell_count.saturating_mul(u128::from(repetitions));
    if run_count > u128::from(MAX_RUNS) {
        let span = raw.repetitions.as_ref().map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            "repetitions",
            format!(
                "the matrix has {run_count} runs ({cell_count} cells × {repetitions} repetitions), \
                 more than the limit of {MAX_RUNS}"
            ),
        ));
    }
    let load_copies = cell_count.saturating_mul(loads_per_cell as u128);
    if load_copies > u128::from(MAX_LOAD_COPIES) {
        let span = raw.loads.as_ref().map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            "loads",
            format!(
                "the matrix has {load_copies} load copies ({cell_count} cells × \
                 {loads_per_cell} load instances), more than the limit of {MAX_LOAD_COPIES}: \
                 fewer cells or fewer instances"
            ),
        ));
    }
    Ok(())
}

/// Expands every workload entry over its axes, refusing two entries that
/// make the same parameter set (they would run the same cells twice).
fn variants(
    raw: &RawMatrix,
    workloads: &[(&'static WorkloadSpec, Vec<Axis>)],
) -> Checked<Vec<Variant>> {
    let mut variants = Vec::new();
    let mut made_by: HashMap<(&'static str, Vec<ValueKey>), usize> = HashMap::new();
    for (i, (spec, axes)) in workloads.iter().enumerate() {
        let name = &raw.workloads.get_ref()[i].get_ref().name;
        expand(spec, axes, &mut |v| {
            let key = (
                v.spec.name,
                v.params.iter().map(|p| ValueKey::of(p.1)).collect(),
            );
            if let Some(&j) = made_by.get(&key).filter(|&&j| j != i) {
                return Err(Issue::new(
                    name.span(),
                    format!("workloads[{i}]"),
                    format!(
                        "`{}` is also made by workloads[{j}] (the parameters resolve to the same \
                         values), which would run the same cells twice",
                        v.label
                    ),
                ));
            }
            made_by.insert(key, i);
            variants.push(v);
            Ok(())
        })?;
    }
    Ok(variants)
}

/// The cells, kernel-major and host-minor, with their baselines; every one
/// carries the same `loads`.
fn cells(
    kernels: &[String],
    variants: &[Variant],
    states: &[MachineState],
    hosts: &[HostSelector],
    loads: &[Workload],
    baseline: Option<&baseline::Baseline>,
) -> Vec<Cell> {
    let (n_variants, n_states, n_hosts) = (variants.len(), states.len(), hosts.len());
    let position = |k: usize, w: usize, s: usize, h: usize| {
        ((k * n_variants + w) * n_states + s) * n_hosts + h
    };
    let mut cells = Vec::with_capacity(kernels.len() * n_variants * n_states * n_hosts);
    for (k, kernel) in kernels.iter().enumerate() {
        for (w, variant) in variants.iter().enumerate() {
            let workload = Workload {
                name: variant.spec.name.to_owned(),
                params: variant
                    .params
                    .iter()
                    .map(|&(name, value)| wire_param(name, value))
                    .collect(),
            };
            for (s, state) in states.iter().enumerate() {
                for (h, host) in hosts.iter().enumerate() {
                    let index = position(k, w, s, h);
                    let target = baseline.and_then(|b| {
                        let t = position(
                            b.kernel.unwrap_or(k),
                            b.variant_targets[w]?,
                            b.state.unwrap_or(s),
                            b.host.unwrap_or(h),
                        );
                        (t != index).then_some(t)
                    });
                    // Only the axes that vary name a cell; the workload always does.
                    let mut name = variant.label.clone();
                    if kernels.len() > 1 {
                        name.push_str(&format!(" | kernel={kernel}"));
                    }
                    if n_states > 1 {
                        name.push_str(&format!(" | state={}", state.name));
                    }
                    if n_hosts > 1 {
                        name.push_str(&format!(" | host={}", host.name));
                    }
                    cells.push(Cell {
                        // `max_cells` keeps every index far below 2^32.
                        index: index as u32,
                        name,
                        kernel: kernel.clone(),
                        workload: Some(workload.clone()),
                        state: Some(state.clone()),
                        host: Some(host.clone()),
                        baseline: target.map(|t| t as u32),
                        loads: loads.to_vec(),
                        verdict: None,
                        guest: None,
                        // Set by `build` for a trigger's kernel.
                        new_kernel: false,
                    });
                }
            }
        }
    }
    cells
}

fn wire_param(name: &str, value: Value) -> Param {
    let value = match value {
        Value::Int(v) => ParamValue::Int(v),
        Value::Float(v) => ParamValue::Float(v),
    };
    Param {
        name: name.to_owned(),
        value: Some(value),
    }
}

fn non_empty(value: &Spanned<String>, key: &str) -> Checked<String> {
    if value.get_ref().trim().is_empty() {
        return Err(Issue::new(value.span(), key, "must not be empty"));
    }
    Ok(value.get_ref().clone())
}

fn non_empty_axis<'a, T>(axis: &'a Spanned<Vec<T>>, key: &str) -> Checked<&'a [T]> {
    if axis.get_ref().is_empty() {
        return Err(Issue::new(
            axis.span(),
            key,
            "empty axis: give at least one value",
        ));
    }
    Ok(axis.get_ref())
}

/// An integer within `range`, converted to the type it is stored in.
fn bounded<T: TryFrom<i64>>(
    value: Option<&Spanned<Int>>,
    key: &str,
    range: RangeInclusive<i64>,
    default: T,
) -> Checked<T> {
    let Some(value) = value else {
        return Ok(default);
    };
    let n = value.get_ref().0;
    let out_of_range = || {
        Issue::new(
            value.span(),
            key,
            format!("{n} is out of range {}..={}", range.start(), range.end()),
        )
    };
    if !range.contains(&n) {
        return Err(out_of_range());
    }
    T::try_from(n).map_err(|_| out_of_range())
}

/// One of a few known words.
fn one_of(value: &Spanned<String>, key: &str, what: &str, known: &[&str]) -> Checked<String> {
    let v = value.get_ref();
    if !known.contains(&v.as_str()) {
        return Err(Issue::new(
            value.span(),
            key,
            format!("unknown {what} `{v}` (known: {})", known.join(", ")),
        ));
    }
    Ok(v.clone())
}

/// What a matrix's kernel name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// `running`: whatever the agent runs, on the host.
    Running,
    /// A release (`6.1.0-57-amd64`): an agent running exactly it, on the host.
    Release,
    /// `debian:<version>`: Debian's package of that version, booted in a guest
    /// of the arch its flavour names.
    Debian { arch: &'static str },
    /// `file:<absolute path>`: a kernel image of the user's, booted in a guest.
    File,
}

/// Debian kernel flavours' suffixes and the arch (`uname -m`) they run on.
const DEBIAN_FLAVOURS: &[(&str, &str)] = &[
    ("-amd64", "x86_64"),
    ("-s390x", "s390x"),
    ("-arm64", "aarch64"),
    ("-powerpc64le", "ppc64le"),
];

/// The kind of a kernel name the matrix accepted (see [`kernels`]).
pub fn kernel_kind(name: &str) -> KernelKind {
    if name == RUNNING_KERNEL {
        KernelKind::Running
    } else if let Some(v) = name.strip_prefix("debian:") {
        let arch = DEBIAN_FLAVOURS
            .iter()
            .find(|(suffix, _)| v.ends_with(suffix))
            .map_or("x86_64", |(_, a)| a);
        KernelKind::Debian { arch }
    } else if name.starts_with("file:") {
        KernelKind::File
    } else {
        KernelKind::Release
    }
}

/// Checks a `debian:` or `file:` kernel name; why it is refused.
fn check_kernel_name(name: &str) -> Result<(), String> {
    if let Some(v) = name.strip_prefix("debian:") {
        // It becomes a package name on the agent's command line: the
        // characters of Debian versions only, and a known flavour.
        let ok_chars = v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~-".contains(c));
        if v.is_empty() || !ok_chars || !v.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(format!(
                "`{name}`: a Debian kernel version is letters, digits and . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)"
            ));
        }
        if !DEBIAN_FLAVOURS.iter().any(|(s, _)| v.ends_with(s)) {
            let known: Vec<&str> = DEBIAN_FLAVOURS.iter().map(|(s, _)| &s[1..]).collect();
            return Err(format!(
                "`{name}`: the version must end with a Debian flavour naming its arch ({})",
                known.join(", ")
            ));
        }
    } else if let Some(p) = name.strip_prefix("file:") {
        if !p.starts_with('/') || p.split('/').any(|part| part == "..") {
            return Err(format!(
                "`{name}`: a kernel image is an absolute path without `..`"
            ));
        }
        // It reaches no command line: the agent boots it only if it lies in
        // one of its kernel directories, and placement sends it only to
        // agents that list it.
        let ok_chars = p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-~".contains(c));
        if !ok_chars {
            return Err(format!(
                "`{name}`: a kernel image's path is letters, digits and / . _ + - ~"
            ));
        }
    } else if name.contains(':') {
        return Err(format!(
            "`{name}`: a kernel is `running`, a release, `debian:<version>` or `file:<path>`"
        ));
    }
    Ok(())
}

fn kernels(raw: Option<&Spanned<Vec<Spanned<String>>>>) -> Checked<Vec<String>> {
    let Some(raw) = raw else {
        return Ok(vec![RUNNING_KERNEL.to_owned()]);
    };
    let mut out: Vec<String> = Vec::new();
    for (i, kernel) in non_empty_axis(raw, "kernels")?.iter().enumerate() {
        let key = format!("kernels[{i}]");
        let name = non_empty(kernel, &key)?;
        if name.chars().any(char::is_whitespace) {
            return Err(Issue::new(
                kernel.span(),
                key,
                "a kernel release has no whitespace",
            ));
        }
        if let Err(why) = check_kernel_name(&name) {
            return Err(Issue::new(kernel.span(), key, why));
        }
        if let Some(j) = out.iter().position(|k| *k == name) {
            return Err(Issue::new(
                kernel.span(),
                key,
                format!("duplicate kernel `{name}` (also kernels[{j}])"),
            ));
        }
        out.push(name);
    }
    Ok(out)
}

/// The values of a parameter axis, in file order.
struct Axis {
    name: &'static str,
    values: Vec<Value>,
}

/// Looks a workload entry up in the catalogue and checks its parameters.
/// The axes come in declaration order.
fn workload_axes(
    i: usize,
    entry: &Spanned<RawWorkload>,
) -> Checked<(&'static WorkloadSpec, Vec<Axis>)> {
    let entry = entry.get_ref();
    let key = format!("workloads[{i}]");
    let spec = catalogue::lookup(entry.name.get_ref())
        .map_err(|e| Issue::new(entry.name.span(), join(&key, "name"), e.to_string()))?;
    let mut params: Vec<_> = entry.params.iter().collect();
    params.sort_by_key(|(name, _)| name.span().start);
    let mut axes = Vec::with_capacity(params.len());
    for (name, setting) in params {
        let key = format!("{key}.params.{}", name.get_ref());
        let param = spec
            .param(name.get_ref())
            .map_err(|e| Issue::new(name.span(), &key, e.to_string()))?;
        let check = |n: &Spanned<Number>| {
            typed(param, *n.get_ref()).map_err(|e| Issue::new(n.span(), &key, e.to_string()))
        };
        let values = match setting.get_ref() {
            Setting::Fixed(n) => vec![check(&Spanned::new(setting.span(), *n))?],
            Setting::Axis(items) => {
                if items.is_empty() {
                    return Err(Issue::new(
                        setting.span(),
                        key,
                        "empty axis: give at least one value",
                    ));
                }
                let mut values: Vec<Value> = Vec::with_capacity(items.len());
                let mut seen = HashSet::with_capacity(items.len());
                for item in items {
                    let value = check(item)?;
                    if !seen.insert(ValueKey::of(value)) {
                        return Err(Issue::new(
                            item.span(),
                            key,
                            format!("duplicate value {value} on the axis"),
                        ));
                    }
                    values.push(value);
                }
                values
            }
        };
        axes.push(Axis {
            name: param.name,
            values,
        });
    }
    Ok((spec, axes))
}

/// Calls `emit` with every combination of the axes' values, the last axis
/// varying fastest.
fn expand(
    spec: &'static WorkloadSpec,
    axes: &[Axis],
    emit: &mut dyn FnMut(Variant) -> Checked<()>,
) -> Checked<()> {
    let mut at = vec![0usize; axes.len()];
    loop {
        let given: Vec<(String, Value)> = axes
            .iter()
            .zip(&at)
            .map(|(a, &j)| (a.name.to_owned(), a.values[j]))
            .collect();
        // Every value was checked already; the catalogue fills in the defaults.
        let params = catalogue::resolve(spec.name, &given)
            .map_err(|e| Issue::new(0..0, "workloads", e.to_string()))?;
        let mut label = spec.name.to_owned();
        for (name, value) in &given {
            label.push_str(&format!(" {name}={value}"));
        }
        emit(Variant {
            spec,
            params,
            label,
        })?;
        // Advance the odometer.
        let mut d = axes.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            at[d] += 1;
            if at[d] < axes[d].values.len() {
                break;
            }
            at[d] = 0;
        }
    }
}

/// The competing loads of every cell: each `[[loads]]` entry checked against
/// the catalogue with fixed parameters only, completed, and repeated
/// `instances` times, in file order.
fn loads(raw: Option<&Spanned<Vec<Spanned<RawLoad>>>>) -> Checked<Vec<Workload>> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    if raw.get_ref().is_empty() {
        return Err(Issue::new(
            raw.span(),
            "loads",
            "no loads given: leave `loads` out for runs without competing load",
        ));
    }
    let mut out: Vec<Workload> = Vec::new();
    for (i, entry) in raw.get_ref().iter().enumerate() {
        let entry = entry.get_ref();
        let key = format!("loads[{i}]");
        let (load, instances) = load(entry, &key)?;
        let total = out.len() as u32 + instances;
        if total > MAX_LOADS_PER_CELL {
            let (span, key) = match &entry.instances {
                Some(n) => (n.span(), join(&key, "instances")),
                None => (entry.name.span(), join(&key, "name")),
            };
            return Err(Issue::new(
                span,
                key,
                format!(
                    "the loads have {total} instances so far, more than the limit of \
                     {MAX_LOADS_PER_CELL} per cell"
                ),
            ));
        }
        out.extend(std::iter::repeat_n(load, instances as usize));
    }
    Ok(out)
}

/// One `[[loads]]` entry as it goes on the wire, and its number of instances.
fn load(entry: &RawLoad, key: &str) -> Checked<(Workload, u32)> {
    let spec = catalogue::lookup(entry.name.get_ref())
        .map_err(|e| Issue::new(entry.name.span(), join(key, "name"), e.to_string()))?;
    let mut params: Vec<_> = entry.params.iter().collect();
    params.sort_by_key(|(name, _)| name.span().start);
    let mut given: Vec<(String, Value)> = Vec::with_capacity(params.len() + 1);
    for (name, setting) in params {
        let key = format!("{key}.params.{}", name.get_ref());
        let param = spec
            .param(name.get_ref())
            .map_err(|e| Issue::new(name.span(), &key, e.to_string()))?;
        let value = match setting.get_ref() {
            Setting::Fixed(n) => {
                typed(param, *n).map_err(|e| Issue::new(setting.span(), &key, e.to_string()))?
            }
            Setting::Axis(_) => {
                return Err(Issue::new(
                    setting.span(),
                    key,
                    format!(
                        "loads take fixed parameters: give `{}` one value (every cell runs \
                         the same loads; an axis belongs in [[workloads]])",
                        param.name
                    ),
                ));
            }
        };
        given.push((param.name.to_owned(), value));
    }
    // Stopped by the agent after the run, not by its own clock: see "Loads".
    if let Ok(duration) = spec.param(DURATION_PARAM)
        && !given.iter().any(|(name, _)| name == DURATION_PARAM)
    {
        // Integer for external tools (stress-ng's `seconds`), float for ours.
        let value = match duration.kind {
            farm_workload::catalogue::Kind::Int { .. } => duration.check_int(LOAD_SECONDS as i64),
            farm_workload::catalogue::Kind::Float { .. } => duration.check_float(LOAD_SECONDS),
        }
        .map_err(|e| {
            Issue::new(
                entry.name.span(),
                join(key, "name"),
                format!("the long default duration of a load: {e}"),
            )
        })?;
        given.push((DURATION_PARAM.to_owned(), value));
    }
    let params = catalogue::resolve(spec.name, &given)
        .map_err(|e| Issue::new(entry.name.span(), join(key, "name"), e.to_string()))?;
    let instances = bounded(
        entry.instances.as_ref(),
        &join(key, "instances"),
        LOAD_INSTANCES,
        1u32,
    )?;
    let workload = Workload {
        name: spec.name.to_owned(),
        params: params
            .iter()
            .map(|&(name, value)| wire_param(name, value))
            .collect(),
    };
    Ok((workload, instances))
}

fn states(raw: Option<&Spanned<Vec<Spanned<RawState>>>>) -> Checked<Vec<MachineState>> {
    let Some(raw) = raw else {
        return Ok(vec![MachineState {
            name: DEFAULT_STATE.to_owned(),
            ..Default::default()
        }]);
    };
    let mut out: Vec<MachineState> = Vec::new();
    for (i, state) in non_empty_axis(raw, "states")?.iter().enumerate() {
        let state = state.get_ref();
        let key = format!("states[{i}]");
        let name = unique_name(
            &state.name,
            &key,
            "state",
            out.iter().map(|s| s.name.as_str()),
        )?;
        let (hotplug, offline) = match &state.hotplug {
            None => (String::new(), Vec::new()),
            Some(h) => {
                let (mode, cpus) = check_hotplug(h.get_ref())
                    .map_err(|m| Issue::new(h.span(), join(&key, "hotplug"), m))?;
                let offline = if mode == "offline" { cpus } else { Vec::new() };
                (h.get_ref().clone(), offline)
            }
        };
        let cgroup = match &state.cgroup {
            None => String::new(),
            Some(c) => one_of(c, &join(&key, "cgroup"), "cgroup layout", CGROUP_LAYOUTS)?,
        };
        // The limits are set on the run's cgroups: there must be some.
        let needs_cgroup = |field: &str, span: std::ops::Range<usize>| -> Checked<()> {
            if cgroup.is_empty() {
                return Err(Issue::new(
                    span,
                    join(&key, field),
                    format!(
                        "{field} needs cgroup = \"shared\" or \"separate\" in the same state \
                         (the limit is set on the run's cgroups)"
                    ),
                ));
            }
            Ok(())
        };
        let cgroup_cpu_weight = match &state.cgroup_cpu_weight {
            None => 0,
            Some(w) => {
                needs_cgroup("cgroup_cpu_weight", w.span())?;
                bounded(Some(w), &join(&key, "cgroup_cpu_weight"), CPU_WEIGHT, 0u32)?
            }
        };
        let cgroup_cpu_max = match &state.cgroup_cpu_max {
            None => String::new(),
            Some(m) => {
                needs_cgroup("cgroup_cpu_max", m.span())?;
                check_cpu_max(m.get_ref())
                    .map_err(|e| Issue::new(m.span(), join(&key, "cgroup_cpu_max"), e))?;
                m.get_ref().clone()
            }
        };
        let cgroup_cpuset = match &state.cgroup_cpuset {
            None => String::new(),
            Some(c) => {
                needs_cgroup("cgroup_cpuset", c.span())?;
                check_cpuset(c.get_ref(), &offline)
                    .map_err(|e| Issue::new(c.span(), join(&key, "cgroup_cpuset"), e))?;
                c.get_ref().clone()
            }
        };
        let autogroup = match &state.autogroup {
            None => None,
            Some(a) => Some(bounded(Some(a), &join(&key, "autogroup"), AUTOGROUP, 0u32)?),
        };
        out.push(MachineState {
            name,
            hotplug,
            cgroup,
            autogroup,
            cgroup_cpu_weight,
            cgroup_cpu_max,
            cgroup_cpuset,
        });
    }
    Ok(out)
}

fn hosts(raw: Option<&Spanned<Vec<Spanned<RawHost>>>>) -> Checked<Vec<HostSelector>> {
    let Some(raw) = raw else {
        return Ok(vec![HostSelector {
            name: ANY_HOST.to_owned(),
            ..Default::default()
        }]);
    };
    let mut out: Vec<HostSelector> = Vec::new();
    for (i, host) in non_empty_axis(raw, "hosts")?.iter().enumerate() {
        let host = host.get_ref();
        let key = format!("hosts[{i}]");
        let name = unique_name(
            &host.name,
            &key,
            "host",
            out.iter().map(|h| h.name.as_str()),
        )?;
        let arch = match &host.arch {
            None => String::new(),
            Some(a) => non_empty(a, &join(&key, "arch"))?,
        };
        let min_cpus = bounded(
            host.min_cpus.as_ref(),
            &join(&key, "min_cpus"),
            MIN_CPUS,
            0u32,
        )?;
        let min_numa_nodes = bounded(
            host.min_numa_nodes.as_ref(),
            &join(&key, "min_numa_nodes"),
            MIN_NUMA_NODES,
            0u32,
        )?;
        let executor = match &host.executor {
            None => String::new(),
            Some(e) => one_of(e, &join(&key, "executor"), "executor", EXECUTORS)?,
        };
        out.push(HostSelector {
            name,
            arch,
            min_cpus,
            min_numa_nodes,
            executor,
        });
    }
    Ok(out)
}

/// The `name` of a state or host: not empty, and not taken by an earlier one.
fn unique_name<'a>(
    name: &Spanned<String>,
    key: &str,
    what: &str,
    earlier: impl Iterator<Item = &'a str>,
) -> Checked<String> {
    let key = join(key, "name");
    let value = non_empty(name, &key)?;
    let plural = if what == "host" { "hosts" } else { "states" };
    if let Some(j) = earlier.into_iter().position(|n| n == value) {
        return Err(Issue::new(
            name.span(),
            key,
            format!("duplicate {what} name `{value}` (also {plural}[{j}])"),
        ));
    }
    Ok(value)
}

/// Inclusive ranges of CPU numbers, as a CPU list gives them.
type CpuRanges = Vec<(u32, u32)>;

/// The CPUs a `cycle:CPUS` / `offline:CPUS` state names, for placement; a
/// malformed spec (never stored: matrices are validated on submission) names none.
pub fn hotplug_cpus(spec: &str) -> Vec<u32> {
    check_hotplug(spec)
        .map(|(_, ranges)| ranges.into_iter().flat_map(|(lo, hi)| lo..=hi).collect())
        .unwrap_or_default()
}

/// Checks `cycle:CPUS` / `offline:CPUS`, CPUS being a list of CPU numbers and
/// ranges such as `1`, `1-3` or `1,3-5`; gives the mode and the CPUs.
fn check_hotplug(spec: &str) -> std::result::Result<(&str, CpuRanges), String> {
    const FORM: &str =
        "expected `cycle:CPUS` or `offline:CPUS` with CPUS like `1`, `1-3` or `1,3-5`";
    let Some((mode, cpus)) = spec.split_once(':') else {
        return Err(format!("`{spec}`: {FORM}"));
    };
    if !HOTPLUG_MODES.contains(&mode) {
        return Err(format!(
            "unknown hotplug mode `{mode}` (known: {})",
            HOTPLUG_MODES.join(", ")
        ));
    }
    Ok((mode, cpu_list(cpus, FORM)?))
}

/// Checks a `cgroup_cpuset` CPU list, and that some CPU of it stays online
/// while `offline` CPUs are taken away.
fn check_cpuset(cpus: &str, offline: &[(u32, u32)]) -> std::result::Result<(), String> {
    const FORM: &str = "expected a CPU list like `1`, `0-3` or `0,2-3`";
    let wanted = merged(cpu_list(cpus, FORM)?);
    let offline = merged(offline.to_vec());
    // Merged, disjoint and apart: a range the offline CPUs cover lies in one of theirs.
    let covered = |&(lo, hi): &(u32, u32)| {
        let i = offline.partition_point(|r| r.1 < lo);
        offline.get(i).is_some_and(|r| r.0 <= lo && hi <= r.1)
    };
    if wanted.iter().all(covered) {
        return Err(format!(
            "every CPU of `{cpus}` is offline during the run (hotplug = \"offline:...\" in the \
             same state): the cgroup would have no CPU to run on"
        ));
    }
    Ok(())
}

/// Checks a `cgroup_cpu_max`: "QUOTA PERIOD" in µs, within the kernel's bounds.
fn check_cpu_max(spec: &str) -> std::result::Result<(), String> {
    const FORM: &str =
        "expected \"QUOTA PERIOD\" in µs, e.g. \"50000 100000\" (half a CPU per 100 ms)";
    let split = spec.split_once(' ');
    if split.map_or(spec, |(quota, _)| quota) == "max" {
        return Err(
            "an unlimited quota (`max`) is what no cgroup_cpu_max gives: leave the key out"
                .to_owned(),
        );
    }
    let Some((quota, period)) = split else {
        return Err(format!("`{spec}`: {FORM}"));
    };
    let micros = |what: &str, s: &str, range: RangeInclusive<u64>| {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{what} `{s}` in `{spec}` is not a number: {FORM}"));
        }
        match s.parse::<u64>() {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(format!(
                "{what} {s} µs is out of range {}..={}",
                range.start(),
                range.end()
            )),
        }
    };
    micros("quota", quota, CPU_MAX_QUOTA_US)?;
    micros("period", period, CPU_MAX_PERIOD_US)?;
    Ok(())
}

/// Parses a list of CPU numbers and ranges such as `1`, `1-3` or `1,3-5`;
/// `form` says what was expected.
fn cpu_list(cpus: &str, form: &str) -> std::result::Result<CpuRanges, String> {
    if cpus.is_empty() {
        return Err(format!("no CPUs given: {form}"));
    }
    let cpu = |s: &str| -> std::result::Result<u32, String> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("`{s}` in `{cpus}` is not a CPU number: {form}"));
        }
        match s.parse::<u32>() {
            Ok(n) if n < CPU_LIMIT => Ok(n),
            _ => Err(format!(
                "CPU {s} is beyond the largest supported CPU number {}",
                CPU_LIMIT - 1
            )),
        }
    };
    let mut out = Vec::new();
    for item in cpus.split(',') {
        if let Some((lo, hi)) = item.split_once('-') {
            let (lo, hi) = (cpu(lo)?, cpu(hi)?);
            if lo > hi {
                return Err(format!("range `{item}` runs backwards"));
            }
            out.push((lo, hi));
        } else {
            let n = cpu(item)?;
            out.push((n, n));
        }
    }
    Ok(out)
}

/// Sorts ranges and joins those that overlap or touch.
fn merged(mut ranges: CpuRanges) -> CpuRanges {
    ranges.sort_unstable();
    let mut out: CpuRanges = Vec::with_capacity(ranges.len());
    for (lo, hi) in ranges {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}
