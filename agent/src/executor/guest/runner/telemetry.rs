//! Telemetry of a workload run inside a guest, from the raw `/proc` text the
//! guest runner reports: the guest has neither perf nor Rust, so the host
//! turns the text into the same [`report::build`] output as the host
//! executor's sampler.
//!
//! The runner's telemetry lines, each `<kind> <rest>` (see [`Observed::line`]):
//!
//! | line | from |
//! |---|---|
//! | `node <id> <cpulist>` | `/sys/devices/system/node/node<id>/cpulist`; none on s390x (no NUMA in sysfs) |
//! | `times <before\|after> <user> <sys>` | ash's `times` builtin, its children line (`0m1.230s 0m0.100s`) |
//! | `ctxt <before\|after> <n>` | `/proc/stat`'s `ctxt`: context switches, guest-wide |
//! | `irq <before\|after> <line>` | every line of `/proc/interrupts`, header first, in order |
//! | `session <sid>` | the workload's session: it runs under `setsid`, its pid is its sid |
//! | `sample <uptime>` | starts a sweep at `/proc/uptime`'s first field (`12.34`) |
//! | `task <line>` | a `/proc/PID/task/TID/stat` line (cut after field 39), a thread of the workload's session |
//! | `counts <task clock ns> <ctxt> <migrations> <faults>` | the sampler's perf counters on the workload and all it started, when it stops |
//! | `sampler <u> <s> <cu> <cs>` | the sampler's own CPU time when it stops, in `times`' form (itself, then its children: none) |
//! | `mig <path>:se.nr_migrations : N` | that thread's `sched`, every tenth sweep: a task's migrations so far |
//! | `rq <path>:<run> <wait> <slices>` | a task's `/proc/PID/task/TID/schedstat`: time on a CPU and waiting for one (ns), timeslices |
//! | `cpu <line>` | a `cpu` or `cpu<N>` line of `/proc/stat` |
//! | `schedstat <before\|after> <line>` | every line of `/proc/schedstat`, with kernel.sched_schedstats=1 ([`balancing`]) |
//! | `calibrate <iterations> <ns>...` | `farm-sample --calibrate` before the workload: a fixed loop's CPU time, per repetition ([`slowdown`]) |
//!
//! `task`, `mig`, `rq` and `cpu` lines belong to the last `sample` line
//! before them. The runner sweeps with `farm-sample`, a static C program
//! built for the guest's arch ([`crate::executor::guest::image::sampler`]:
//! no fork), which reads the workload's session only.
//!
//! All of it comes from the guest, whose kernel is the one under test:
//! every line is checked when it arrives and a malformed one is an error
//! naming it, cut to a readable length. One exception: a `task` line that is
//! empty, or a prefix of a stat line (cut in the comm or before field 39),
//! is what reading the stat of a thread that exits meanwhile gives, as is
//! a line whose session is -1 (a thread whose pids are already unlinked).
//! Such a line is skipped and counted ([`Observed::skipped_tasks`]): the thread
//! was gone, the host sampler skips it alike. Anything else that does not
//! parse is an error.
//!
//! What the host sampler measures and the guest measures otherwise:
//! - the sampling cost: the sampler's own CPU time is `Collected::cost`,
//!   and `telemetry_overhead_pct` is that against the workload's CPU time;
//! - perf's counts come from the sampler's counters (`counts`), as on
//!   hosts. Without them (a kernel without perf events) `context_switches`
//!   is the guest-wide `ctxt` delta, CPU time is `times`' and
//!   `cpu_migrations` the sum over the workload's threads of the last
//!   `se.nr_migrations` each showed in a sweep: a lower bound;
//! - `runqueue_wait_s` is the runqueues' (`schedstat`'s cpu lines), every
//!   task in the guest; the sweeps give its percentiles;
//! - processes: a task stat line has no tgid, so the threads of a workload
//!   of several processes cannot be told apart by process. Instances are
//!   numbered as the sampler numbers those of a single-process workload:
//!   threads named as instances ([`crate::telemetry::sampler::instance_of`], `stream-<N>`)
//!   are their instance (the others are then left out, as the sampler
//!   does), every other thread is instance 0.

use std::collections::BTreeMap;
use std::time::Duration;

use farm_proto::{Metric, NumaNode, Telemetry};

use crate::capabilities::parse_cpu_list;
use crate::executor::guest::slowdown;
use crate::telemetry::interrupts;
use crate::telemetry::perf::Counts;
use crate::telemetry::placement::{NodeMap, Sample};
use crate::telemetry::procstat::ProcStat;
use crate::telemetry::report::{self, known};
use crate::telemetry::runqueue;
use crate::telemetry::sampler::Collected;
use crate::telemetry::waste::Snapshot;
use farm_spec::metric;

mod balancing;
mod error;
mod sweep;
mod values;
mod vcpus;

use error::cut;
pub use error::{BuildError, Reason};
use sweep::{Around, MAX_MIGRATIONS, Phase, Sweep, Task};
use values::{clock_ms, number, parse_cpu, parse_task, reason, uptime_ms};

/// The metrics [`report::build`] derives from `/proc/interrupts`: left out
/// when the guest reported none, rather than claiming zero IPIs.
const IPI_METRICS: &[&str] = &[
    metric::RESCHEDULING_IPIS.name,
    metric::FUNCTION_CALL_IPIS.name,
    metric::TLB_SHOOTDOWNS.name,
    metric::MIXED_IPIS.name,
];

/// A runner line the telemetry could not take: its kind, an excerpt of it,
/// and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {kind} line `{line}`: {reason}")]
pub struct LineError {
    pub kind: String,
    pub line: String,
    pub reason: Reason,
}

/// What the guest runner reported, accumulated line by line.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    nodes: Vec<NumaNode>,
    /// `times`' children line: user and system time in milliseconds.
    times: Around<(u64, u64)>,
    ctxt: Around<u64>,
    /// The raw `/proc/interrupts` lines, header first.
    irq_before: Vec<String>,
    irq_after: Vec<String>,
    balancing: balancing::Readings,
    session: Option<u32>,
    /// The sampler's own CPU time, in ms.
    sampler_ms: Option<u64>,
    counts: Option<Counts>,
    calibration: Option<slowdown::Calibration>,
    sweeps: Vec<Sweep>,
    skipped_tasks: usize,
}

impl Observed {
    pub fn new() -> Observed {
        Observed::default()
    }

    /// Takes one runner line, already split at its first space into `kind`
    /// and `rest`. Ok(true) when it was a telemetry line (consumed),
    /// Ok(false) for a kind this module does not know (the caller's), an
    /// error naming the line when it is malformed.
    pub fn line(&mut self, kind: &str, rest: &str) -> Result<bool, LineError> {
        let result = match kind {
            "node" => self.node(rest),
            "times" => self.times(rest),
            "ctxt" => self.ctxt(rest),
            "irq" => self.irq(rest),
            "schedstat" => self.balancing.line(rest),
            "session" => self.session(rest),
            "sample" => self.sample(rest),
            "task" => self.task(rest),
            "mig" => self.mig(rest),
            "rq" => self.rq(rest),
            "sampler" => self.sampler(rest),
            "counts" => self.counts(rest),
            "cpu" => self.cpu(rest),
            "calibrate" => self.calibrate(rest),
            _ => return Ok(false),
        };
        result.map(|()| true).map_err(|reason| LineError {
            kind: kind.to_string(),
            line: cut(&format!("{kind} {rest}")),
            reason,
        })
    }

    /// The guest's NUMA nodes with their CPUs, as its sysfs listed them.
    pub fn nodes(&self) -> &[NumaNode] {
        &self.nodes
    }

    /// `task` lines skipped as threads that exited while they were read.
    pub fn skipped_tasks(&self) -> usize {
        self.skipped_tasks
    }

    /// The guest's timing of the calibration loop, for
    /// [`slowdown::metric`] against the host's.
    pub fn calibration(&self) -> Option<&slowdown::Calibration> {
        self.calibration.as_ref()
    }

    fn calibrate(&mut self, rest: &str) -> Result<(), Reason> {
        if self.calibration.is_some() {
            return Err(Reason::SecondCalibration);
        }
        self.calibration = Some(slowdown::Calibration::parse(rest)?);
        Ok(())
    }

    fn node(&mut self, rest: &str) -> Result<(), Reason> {
        let (id, cpulist) = rest.split_once(' ').unwrap_or((rest, ""));
        let id = number(id).ok_or_else(|| Reason::NodeId(cut(id)))?;
        let id = u32::try_from(id).map_err(|_| Reason::NodeIdTooLarge(id))?;
        // An empty list is a node without CPUs (memory only), as in sysfs.
        let cpus = parse_cpu_list(cpulist).map_err(|e| Reason::CpuList(Box::new(e)))?;
        if self.nodes.iter().any(|n| n.id == id) {
            return Err(Reason::NodeTwice(id));
        }
        if let Some((cpu, other)) = cpus.iter().find_map(|c| {
            self.nodes
                .iter()
                .find(|n| n.cpus.contains(c))
                .map(|n| (c, n.id))
        }) {
            return Err(Reason::CpuOnTwoNodes {
                cpu: *cpu,
                node: other,
            });
        }
        self.nodes.push(NumaNode { id, cpus });
        Ok(())
    }

    fn times(&mut self, rest: &str) -> Result<(), Reason> {
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        let [phase, user, sys] = f[..] else {
            return Err(Reason::TimesShape);
        };
        let phase = Phase::parse(phase)?;
        let clock = |s: &str| clock_ms(s).ok_or_else(|| Reason::Clock(cut(s)));
        self.times.set(phase, (clock(user)?, clock(sys)?))
    }

    fn ctxt(&mut self, rest: &str) -> Result<(), Reason> {
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        let [phase, n] = f[..] else {
            return Err(Reason::CtxtShape);
        };
        let phase = Phase::parse(phase)?;
        let n = number(n).ok_or_else(|| Reason::Count(cut(n)))?;
        self.ctxt.set(phase, n)
    }

    fn irq(&mut self, rest: &str) -> Result<(), Reason> {
        let (phase, raw) = rest.split_once(' ').unwrap_or((rest, ""));
        let lines = match Phase::parse(phase)? {
            Phase::Before => &mut self.irq_before,
            Phase::After => &mut self.irq_after,
        };
        if raw.trim().is_empty() {
            return Ok(());
        }
        // Checked now, against the phase's header, so that the error names
        // this line; parsed again whole in `build`.
        let text = match lines.first() {
            None => raw.to_owned(),
            Some(header) => format!("{header}\n{raw}"),
        };
        interrupts::parse(&text).map_err(reason)?;
        lines.push(raw.to_owned());
        Ok(())
    }

    fn session(&mut self, rest: &str) -> Result<(), Reason> {
        let sid = number(rest.trim())
            .and_then(|s| u32::try_from(s).ok())
            .ok_or(Reason::SessionNotNumber)?;
        if sid < 2 {
            return Err(Reason::SessionReserved(sid));
        }
        match self.session {
            Some(old) if old != sid => Err(Reason::SecondSession(old)),
            _ => {
                self.session = Some(sid);
                Ok(())
            }
        }
    }

    fn sample(&mut self, rest: &str) -> Result<(), Reason> {
        let uptime_ms = uptime_ms(rest.trim()).ok_or(Reason::Uptime)?;
        if let Some(last) = self.sweeps.last()
            && uptime_ms <= last.uptime_ms
        {
            return Err(Reason::UptimeStalls(last.line.clone()));
        }
        self.sweeps.push(Sweep {
            uptime_ms,
            line: cut(&format!("sample {rest}")),
            tasks: Vec::new(),
            tids: Default::default(),
            migrations: BTreeMap::new(),
            schedstat: BTreeMap::new(),
            total: None,
            per_cpu: BTreeMap::new(),
        });
        Ok(())
    }

    fn sweep(&mut self) -> Result<&mut Sweep, Reason> {
        self.sweeps.last_mut().ok_or(Reason::NoSweep)
    }

    fn task(&mut self, rest: &str) -> Result<(), Reason> {
        let sweep = self.sweep()?;
        let Some(task) = parse_task(rest)? else {
            self.skipped_tasks += 1;
            return Ok(());
        };
        if !sweep.tids.insert(task.tid) {
            return Err(Reason::TaskTwice(task.tid));
        }
        sweep.tasks.push(task);
        Ok(())
    }

    /// `sampler <user> <sys> <children user> <children sys>`, in `times`'
    /// format.
    fn sampler(&mut self, rest: &str) -> Result<(), Reason> {
        if self.sampler_ms.is_some() {
            return Err(Reason::SecondSampler);
        }
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() != 4 {
            return Err(Reason::SamplerShape);
        }
        let mut total = 0u64;
        for v in f {
            total =
                total.saturating_add(clock_ms(v).ok_or_else(|| Reason::SamplerTime(v.to_owned()))?);
        }
        self.sampler_ms = Some(total);
        Ok(())
    }

    /// `counts <task clock ns> <context switches> <migrations> <faults>`.
    fn counts(&mut self, rest: &str) -> Result<(), Reason> {
        if self.counts.is_some() {
            return Err(Reason::SecondCounts);
        }
        let v: Vec<u64> = rest
            .split(' ')
            .map(number)
            .collect::<Option<_>>()
            .ok_or(Reason::CountsShape)?;
        let [task_clock_ns, context_switches, cpu_migrations, page_faults] = v[..] else {
            return Err(Reason::CountsShape);
        };
        self.counts = Some(Counts {
            task_clock_ns,
            context_switches,
            cpu_migrations,
            page_faults,
        });
        Ok(())
    }

    /// `/proc/<pid>/task/<tid>/sched:se.nr_migrations   :   <n>`.
    fn mig(&mut self, rest: &str) -> Result<(), Reason> {
        let sweep = self.sweep()?;
        let (tid, value) = task_file(rest, "sched").ok_or(Reason::NotSchedFile)??;
        let n = value
            .split_once(':')
            .filter(|(key, _)| key.trim() == "se.nr_migrations")
            .and_then(|(_, n)| n.trim().parse::<u64>().ok())
            .filter(|&n| n <= MAX_MIGRATIONS)
            .ok_or(Reason::NotMigrations)?;
        if sweep.migrations.insert(tid, n).is_some() {
            return Err(Reason::TaskTwice(tid));
        }
        Ok(())
    }

    /// `/proc/<pid>/task/<tid>/schedstat:<run> <wait> <slices>`.
    fn rq(&mut self, rest: &str) -> Result<(), Reason> {
        let sweep = self.sweep()?;
        let (tid, value) = task_file(rest, "schedstat").ok_or(Reason::NotSchedstatFile)??;
        let info = runqueue::parse(value).map_err(|_| Reason::NotSchedstat)?;
        if sweep.schedstat.insert(tid, info).is_some() {
            return Err(Reason::TaskTwice(tid));
        }
        Ok(())
    }

    /// The workload's migrations: per thread the largest count any sweep
    /// saw (the counter only grows), summed; `None` without `mig` lines.
    fn migrations(&self) -> Option<u64> {
        let sid = self.session?;
        if self.sweeps.iter().all(|s| s.migrations.is_empty()) {
            return None;
        }
        let mut last: BTreeMap<u32, u64> = BTreeMap::new();
        for s in &self.sweeps {
            for t in s.tasks.iter().filter(|t| t.session == sid) {
                if let Some(&n) = s.migrations.get(&t.tid) {
                    let e = last.entry(t.tid).or_default();
                    *e = (*e).max(n);
                }
            }
        }
        Some(last.values().sum())
    }

    fn cpu(&mut self, rest: &str) -> Result<(), Reason> {
        let sweep = self.sweep()?;
        let (cpu, times) = parse_cpu(rest)?;
        match cpu {
            None if sweep.total.is_some() => Err(Reason::SecondTotal),
            None => {
                sweep.total = Some(times);
                Ok(())
            }
            Some(c) => match sweep.per_cpu.insert(c, times) {
                Some(_) => Err(Reason::SecondCpu(c)),
                None => Ok(()),
            },
        }
    }

    /// The sweeps as the host sampler would have collected them.
    ///
    /// The sweeps before the workload's first task appears and after its
    /// last are dropped: the host sampler sweeps only while the workload
    /// lives, and idle sweeps around it would dilute the wasted-core share.
    /// Every sweep reads every task, so `threads_read == threads_seen`.
    fn collected(&self) -> Result<Collected, BuildError> {
        if self.sweeps.is_empty() {
            return Ok(Collected::default());
        }
        let sid = self.session.ok_or(BuildError::NoSession)?;
        for s in &self.sweeps {
            if s.total.is_none() && !s.per_cpu.is_empty() {
                return Err(BuildError::NoTotal(s.line.clone()));
            }
        }
        let has_workload = |s: &&Sweep| s.tasks.iter().any(|t| t.session == sid);
        let first = self.sweeps.iter().position(|s| has_workload(&s));
        let last = self.sweeps.iter().rposition(|s| has_workload(&s));
        let (Some(first), Some(last)) = (first, last) else {
            return Ok(Collected::default());
        };
        let sweeps = &self.sweeps[first..=last];
        let t0 = sweeps[0].uptime_ms;
        let mut out = Collected::default();
        for s in sweeps {
            let t_ms = s.uptime_ms - t0;
            let kept: Vec<&Task> = s.tasks.iter().filter(|t| t.session == sid).collect();
            // Every task is read at every sweep: each stands for itself.
            out.waits.sweep(t_ms);
            for t in &kept {
                if let Some(info) = s.schedstat.get(&t.tid) {
                    out.waits.observe((0, t.tid), *info, 1.0);
                }
            }
            out.threads_seen += kept.len() as u64;
            // As the sampler: zombies and dead tasks are not placed, and
            // when some threads are instances the others are left out.
            let live: Vec<&Task> = kept
                .into_iter()
                .filter(|t| t.state != 'Z' && t.state != 'X')
                .collect();
            let by_thread = live.iter().any(|t| t.instance.is_some());
            out.samples.extend(
                live.iter()
                    .filter(|t| !by_thread || t.instance.is_some())
                    .map(|t| {
                        Sample::whole(t_ms, t.instance.unwrap_or(0), t.tid, t.cpu, t.state == 'R')
                    }),
            );
            if let Some(total) = s.total {
                out.snapshots.push(Snapshot {
                    t_ms,
                    stat: ProcStat {
                        total,
                        per_cpu: s.per_cpu.clone(),
                    },
                });
            }
        }
        out.waits.finish();
        out.threads_read = out.threads_seen;
        out.interval = Duration::from_millis(median_spacing(sweeps));
        Ok(out)
    }
}

/// `/proc/<pid>/task/<tid>/<file>:<value>` (grep -H's form): the tid and
/// the value; `None` when the path is not such a file, an error without
/// the colon.
fn task_file<'a>(rest: &'a str, file: &str) -> Option<Result<(u32, &'a str), Reason>> {
    let Some((path, value)) = rest.split_once(':') else {
        return Some(Err(Reason::NoColon));
    };
    let tid = path
        .strip_prefix("/proc/")?
        .strip_suffix(file)?
        .strip_suffix('/')?
        .split_once("/task/")?
        .1
        .parse::<u32>()
        .ok()?;
    Some(Ok((tid, value)))
}

/// The median of the spacings between consecutive sweeps, in ms; 0 for
/// fewer than two sweeps.
fn median_spacing(sweeps: &[Sweep]) -> u64 {
    let mut gaps: Vec<u64> = sweeps
        .windows(2)
        .map(|w| w[1].uptime_ms - w[0].uptime_ms)
        .collect();
    gaps.sort_unstable();
    match gaps.len() {
        0 => 0,
        n if !n.is_multiple_of(2) => gaps[n / 2],
        n => (gaps[n / 2 - 1] + gaps[n / 2]) / 2,
    }
}

/// The run's metrics and telemetry from what the guest reported.
///
/// `wall_s` is the workload's wall time, `online` the guest's online CPUs
/// (the CPUs the workload could use, and the single node's when the guest
/// reported no `node` lines), `user_hz` the guest's USER_HZ, `domains` its
/// sched-domain level names per CPU after its state. Parts the guest
/// did not report are left out (no IPI metrics without `irq` lines, no
/// placement without sweeps); a `before` reading without its `after` (or the
/// reverse) is an error. Topology is the caller's: the telemetry's topology
/// fields are left empty.
pub fn build(
    obs: &Observed,
    wall_s: f64,
    online: &[u32],
    user_hz: u64,
    domains: &BTreeMap<u32, Vec<String>>,
) -> Result<(Vec<Metric>, Telemetry), BuildError> {
    let wall = Duration::try_from_secs_f64(wall_s).map_err(|_| BuildError::Wall(wall_s))?;
    let times = obs.times.pair("times")?;
    let ctxt = obs.ctxt.pair("ctxt")?;
    let irqs = match (obs.irq_before.is_empty(), obs.irq_after.is_empty()) {
        (true, true) => None,
        (false, true) => return Err(BuildError::IrqBeforeOnly),
        (true, false) => return Err(BuildError::IrqAfterOnly),
        (false, false) => {
            let parse = |lines: &[String]| {
                interrupts::parse(&lines.join("\n")).map_err(|e| BuildError::Irq(Box::new(e)))
            };
            let (before, after) = (parse(&obs.irq_before)?, parse(&obs.irq_after)?);
            Some(interrupts::delta(&before, &after).map_err(|e| BuildError::Irq(Box::new(e)))?)
        }
    };
    let mut collected = obs.collected()?;
    collected.cost = Duration::from_millis(obs.sampler_ms.unwrap_or(0));
    let map = if obs.nodes.is_empty() {
        NodeMap::single(online)
    } else {
        NodeMap::from_nodes(&obs.nodes)
    };
    // Per sched-domain level, named as the guest's domains after its state;
    // and the whole run's wait from the runqueues, where the sweeps' sum
    // counts only the threads they saw, up to their last sweep (0.01 s of a
    // 0.7-s hackbench that waited seconds). The guest runs the workload
    // alone; the sampler's and kernel threads' waits are in it too.
    let (balancing, runqueue_wait_s) = obs.balancing.metrics(domains)?;
    let (mut metrics, telemetry) = report::build(&report::Inputs {
        wall,
        counts: obs.counts,
        runqueue_wait_s,
        irqs: irqs.as_deref().unwrap_or_default(),
        collected: &collected,
        map: &map,
        allowed: online,
        user_hz,
        topology: None,
    });
    if irqs.is_none() {
        metrics.retain(|m| !IPI_METRICS.contains(&m.name.as_str()));
    }
    // Names, units and directions as the host executor's (run.rs).
    let mut cpu_s = None;
    if let Some((&(user0, sys0), &(user1, sys1))) = times {
        let spent = |what: &'static str, b: u64, a: u64| {
            a.checked_sub(b)
                .map(|ms| ms as f64 / 1000.0)
                .ok_or(BuildError::TimeBackwards {
                    what,
                    before: b,
                    after: a,
                })
        };
        let (user, sys) = (spent("user", user0, user1)?, spent("system", sys0, sys1)?);
        metrics.push(known(metric::USER_S, user));
        metrics.push(known(metric::SYS_S, sys));
        cpu_s = Some(user + sys);
    }
    if obs.counts.is_none() {
        metrics.extend(without_counts(obs, cpu_s, wall_s, ctxt)?);
    }
    metrics.extend(balancing);
    metrics.extend(vcpus::metrics(&obs.sweeps));
    Ok((metrics, telemetry))
}

/// Where the sampler could not count (a kernel without perf events), the
/// next best of perf's figures: the overhead and CPUs utilised against
/// `times`' CPU time, migrations sampled from the threads' `sched` (a lower
/// bound), and context switches guest-wide (the guest runs little else: the
/// runner and its sweeps, kernel threads).
fn without_counts(
    obs: &Observed,
    cpu_s: Option<f64>,
    wall_s: f64,
    ctxt: Option<(&u64, &u64)>,
) -> Result<Vec<Metric>, BuildError> {
    let mut metrics = Vec::new();
    if let (Some(cpu_s), Some(ms)) = (cpu_s.filter(|&c| c > 0.0), obs.sampler_ms) {
        let pct = ms as f64 / 1000.0 / cpu_s * 100.0;
        metrics.push(known(metric::TELEMETRY_OVERHEAD_PCT, pct));
    }
    if let Some(cpu_s) = cpu_s.filter(|_| wall_s > 0.0) {
        metrics.push(known(metric::CPUS_UTILISED, cpu_s / wall_s));
    }
    if let Some(n) = obs.migrations() {
        metrics.push(known(metric::CPU_MIGRATIONS, n as f64));
    }
    if let Some((&b, &a)) = ctxt {
        let n = a.checked_sub(b).ok_or(BuildError::CtxtBackwards {
            before: b,
            after: a,
        })?;
        metrics.push(known(metric::CONTEXT_SWITCHES, n as f64));
    }
    Ok(metrics)
}

#[cfg(test)]
mod tests;
