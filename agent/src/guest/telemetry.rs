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
//! | `task <line>` | a `/proc/PID/task/TID/stat` line, every task of the guest |
//! | `sampler <u> <s> <cu> <cs>` | the sampler's own `times` (itself, then its children) when it stops |
//! | `mig <line>` | `grep -H '^se.nr_migrations' /proc/PID/task/TID/sched`: a task's migrations so far |
//! | `cpu <line>` | a `cpu` or `cpu<N>` line of `/proc/stat` |
//!
//! `task` and `cpu` lines belong to the last `sample` line before them.
//!
//! All of it comes from the guest, whose kernel is the one under test:
//! every line is checked when it arrives and a malformed one is an error
//! naming it, cut to a readable length. One exception: a `task` line that is
//! empty, or a prefix of a stat line (cut in the comm or before field 39),
//! is what reading the stat of a thread that exits meanwhile gives. Such a
//! line is skipped and counted ([`Observed::skipped_tasks`]): the thread
//! was gone, the host sampler skips it alike. Anything else that does not
//! parse is an error.
//!
//! What the host sampler measures and the guest measures otherwise:
//! - the sampling cost: the runner's sampler is a shell loop; its CPU time
//!   (itself and the programs it forks, by `times`) is `Collected::cost`,
//!   and `telemetry_overhead_pct` is that against the workload's CPU time;
//! - perf's counts (`task_clock_s`, `page_faults`): the workload's
//!   `context_switches` are replaced by the guest-wide `ctxt` delta, its CPU
//!   time by `times` (and `cpus_utilised` by CPU time over wall time), and
//!   `cpu_migrations` by the sum over the workload's threads of the last
//!   `se.nr_migrations` each showed in a sweep (CONFIG_SCHED_DEBUG): a lower
//!   bound, missing what a thread did after its last sweep;
//! - processes: a task stat line has no tgid, so the threads of a workload
//!   of several processes cannot be told apart by process. Instances are
//!   numbered as the sampler numbers those of a single-process workload:
//!   threads named as instances ([`sampler::instance_of`], `stream-<N>`)
//!   are their instance (the others are then left out, as the sampler
//!   does), every other thread is instance 0.

use std::collections::BTreeMap;
use std::time::Duration;

use farm_proto::{Direction, Metric, NumaNode, Telemetry};

use crate::capabilities::parse_cpu_list;
use crate::telemetry::interrupts;
use crate::telemetry::placement::{NodeMap, Sample};
use crate::telemetry::procstat::{CpuTimes, ProcStat};
use crate::telemetry::report;
use crate::telemetry::sampler::{self, Collected};
use crate::telemetry::taskstat;
use crate::telemetry::waste::Snapshot;

/// The metrics [`report::build`] derives from `/proc/interrupts`: left out
/// when the guest reported none, rather than claiming zero IPIs.
const IPI_METRICS: &[&str] = &[
    "rescheduling_ipis",
    "function_call_ipis",
    "tlb_shootdowns",
    "mixed_ipis",
];

/// The longest excerpt of a guest line an error quotes.
const EXCERPT: usize = 160;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Before,
    After,
}

impl Phase {
    fn parse(s: &str) -> Result<Phase, String> {
        match s {
            "before" => Ok(Phase::Before),
            "after" => Ok(Phase::After),
            _ => Err(format!("{:?} is neither `before` nor `after`", cut(s))),
        }
    }
}

/// A reading taken before and after the workload.
#[derive(Debug, Clone, Default)]
struct Around<T> {
    before: Option<T>,
    after: Option<T>,
}

impl<T> Around<T> {
    fn set(&mut self, phase: Phase, value: T) -> Result<(), String> {
        let slot = match phase {
            Phase::Before => &mut self.before,
            Phase::After => &mut self.after,
        };
        if slot.is_some() {
            return Err("a second reading for the same phase".into());
        }
        *slot = Some(value);
        Ok(())
    }

    /// Both readings, none, or an error naming `what` when only one came.
    fn pair(&self, what: &str) -> Result<Option<(&T, &T)>, String> {
        match (&self.before, &self.after) {
            (Some(b), Some(a)) => Ok(Some((b, a))),
            (None, None) => Ok(None),
            (Some(_), None) => Err(format!("`{what} before` without `{what} after`")),
            (None, Some(_)) => Err(format!("`{what} after` without `{what} before`")),
        }
    }
}

/// One task of one sweep, as much of it as telemetry needs.
#[derive(Debug, Clone)]
struct Task {
    tid: u32,
    /// Field 6.
    session: u32,
    state: char,
    cpu: u32,
    /// The instance its name makes it, see [`sampler::instance_of`].
    instance: Option<u32>,
}

/// The most migrations a task can have had: a counter beyond it is garbage.
const MAX_MIGRATIONS: u64 = 1 << 48;

/// One `sample` line and the `task` and `cpu` lines after it.
#[derive(Debug, Clone)]
struct Sweep {
    uptime_ms: u64,
    /// The `sample` line, for errors about the sweep as a whole.
    line: String,
    tasks: Vec<Task>,
    /// The tids of `tasks`, to refuse a repeated one in constant time.
    tids: std::collections::HashSet<u32>,
    /// `se.nr_migrations` by tid.
    migrations: BTreeMap<u32, u64>,
    total: Option<CpuTimes>,
    per_cpu: BTreeMap<u32, CpuTimes>,
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
    session: Option<u32>,
    /// The sampler's own CPU time, in ms.
    sampler_ms: Option<u64>,
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
    pub fn line(&mut self, kind: &str, rest: &str) -> Result<bool, String> {
        let result = match kind {
            "node" => self.node(rest),
            "times" => self.times(rest),
            "ctxt" => self.ctxt(rest),
            "irq" => self.irq(rest),
            "session" => self.session(rest),
            "sample" => self.sample(rest),
            "task" => self.task(rest),
            "mig" => self.mig(rest),
            "sampler" => self.sampler(rest),
            "cpu" => self.cpu(rest),
            _ => return Ok(false),
        };
        result.map(|()| true).map_err(|reason| {
            format!(
                "malformed {kind} line `{}`: {reason}",
                cut(&format!("{kind} {rest}"))
            )
        })
    }

    /// `task` lines skipped as threads that exited while they were read.
    pub fn skipped_tasks(&self) -> usize {
        self.skipped_tasks
    }

    fn node(&mut self, rest: &str) -> Result<(), String> {
        let (id, cpulist) = rest.split_once(' ').unwrap_or((rest, ""));
        let id = number(id).ok_or_else(|| format!("node id {:?} is not a number", cut(id)))?;
        let id = u32::try_from(id).map_err(|_| format!("node id {id} is too large"))?;
        // An empty list is a node without CPUs (memory only), as in sysfs.
        let cpus = parse_cpu_list(cpulist).map_err(|e| e.to_string())?;
        if self.nodes.iter().any(|n| n.id == id) {
            return Err(format!("node {id} appears twice"));
        }
        if let Some((cpu, other)) = cpus.iter().find_map(|c| {
            self.nodes
                .iter()
                .find(|n| n.cpus.contains(c))
                .map(|n| (c, n.id))
        }) {
            return Err(format!("cpu{cpu} is already on node {other}"));
        }
        self.nodes.push(NumaNode { id, cpus });
        Ok(())
    }

    fn times(&mut self, rest: &str) -> Result<(), String> {
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        let [phase, user, sys] = f[..] else {
            return Err("expected `times <before|after> <user> <sys>`".into());
        };
        let phase = Phase::parse(phase)?;
        let clock = |s: &str| {
            clock_ms(s).ok_or_else(|| format!("{:?} is not a time like 0m1.230s", cut(s)))
        };
        self.times.set(phase, (clock(user)?, clock(sys)?))
    }

    fn ctxt(&mut self, rest: &str) -> Result<(), String> {
        let f: Vec<&str> = rest.split_ascii_whitespace().collect();
        let [phase, n] = f[..] else {
            return Err("expected `ctxt <before|after> <n>`".into());
        };
        let phase = Phase::parse(phase)?;
        let n = number(n).ok_or_else(|| format!("{:?} is not a count", cut(n)))?;
        self.ctxt.set(phase, n)
    }

    fn irq(&mut self, rest: &str) -> Result<(), String> {
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

    fn session(&mut self, rest: &str) -> Result<(), String> {
        let sid = number(rest.trim())
            .and_then(|s| u32::try_from(s).ok())
            .ok_or("the session is not a number")?;
        if sid < 2 {
            return Err(format!(
                "session {sid} is not a workload's (0 is the kernel threads', 1 init's)"
            ));
        }
        match self.session {
            Some(old) if old != sid => Err(format!("a second session, after {old}")),
            _ => {
                self.session = Some(sid);
                Ok(())
            }
        }
    }

    fn sample(&mut self, rest: &str) -> Result<(), String> {
        let uptime_ms = uptime_ms(rest.trim()).ok_or("the uptime is not like 12.34")?;
        if let Some(last) = self.sweeps.last()
            && uptime_ms <= last.uptime_ms
        {
            return Err(format!(
                "the uptime does not advance from the sweep before (`{}`)",
                last.line
            ));
        }
        self.sweeps.push(Sweep {
            uptime_ms,
            line: cut(&format!("sample {rest}")),
            tasks: Vec::new(),
            tids: Default::default(),
            migrations: BTreeMap::new(),
            total: None,
            per_cpu: BTreeMap::new(),
        });
        Ok(())
    }

    fn sweep(&mut self) -> Result<&mut Sweep, String> {
        self.sweeps
            .last_mut()
            .ok_or_else(|| "before any `sample` line".to_owned())
    }

    fn task(&mut self, rest: &str) -> Result<(), String> {
        let sweep = self.sweep()?;
        let Some(task) = parse_task(rest)? else {
            self.skipped_tasks += 1;
            return Ok(());
        };
        if !sweep.tids.insert(task.tid) {
            return Err(format!("task {} twice in one sweep", task.tid));
        }
        sweep.tasks.push(task);
        Ok(())
    }

    /// `sampler <user> <sys> <children user> <children sys>`, in `times`'
    /// format.
    fn sampler(&mut self, rest: &str) -> Result<(), String> {
        if self.sampler_ms.is_some() {
            return Err("a second `sampler` line".into());
        }
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() != 4 {
            return Err("expected four `times` values".into());
        }
        let mut total = 0u64;
        for v in f {
            total = total.saturating_add(clock_ms(v).ok_or_else(|| format!("bad time `{v}`"))?);
        }
        self.sampler_ms = Some(total);
        Ok(())
    }

    /// `/proc/<pid>/task/<tid>/sched:se.nr_migrations   :   <n>`.
    fn mig(&mut self, rest: &str) -> Result<(), String> {
        let sweep = self.sweep()?;
        let (path, value) = rest.split_once(':').ok_or("no `:` after the file name")?;
        let tid = path
            .strip_prefix("/proc/")
            .and_then(|p| p.strip_suffix("/sched"))
            .and_then(|p| p.split_once("/task/"))
            .and_then(|(_, tid)| tid.parse::<u32>().ok())
            .ok_or("not a /proc/<pid>/task/<tid>/sched file")?;
        let n = value
            .split_once(':')
            .filter(|(key, _)| key.trim() == "se.nr_migrations")
            .and_then(|(_, n)| n.trim().parse::<u64>().ok())
            .filter(|&n| n <= MAX_MIGRATIONS)
            .ok_or("not `se.nr_migrations : <count>`")?;
        if sweep.migrations.insert(tid, n).is_some() {
            return Err(format!("task {tid} twice in one sweep"));
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

    fn cpu(&mut self, rest: &str) -> Result<(), String> {
        let sweep = self.sweep()?;
        let (cpu, times) = parse_cpu(rest)?;
        match cpu {
            None if sweep.total.is_some() => Err("a second `cpu` line in one sweep".into()),
            None => {
                sweep.total = Some(times);
                Ok(())
            }
            Some(c) => match sweep.per_cpu.insert(c, times) {
                Some(_) => Err(format!("a second cpu{c} line in one sweep")),
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
    fn collected(&self) -> Result<Collected, String> {
        if self.sweeps.is_empty() {
            return Ok(Collected::default());
        }
        let sid = self
            .session
            .ok_or("`sample` lines but no `session` line: the workload's tasks are unknown")?;
        for s in &self.sweeps {
            if s.total.is_none() && !s.per_cpu.is_empty() {
                return Err(format!(
                    "sweep `{}` has cpu<N> lines but no `cpu` line",
                    s.line
                ));
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
        out.threads_read = out.threads_seen;
        out.cost = Duration::from_millis(self.sampler_ms.unwrap_or(0));
        out.interval = Duration::from_millis(median_spacing(sweeps));
        Ok(out)
    }
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
/// reported no `node` lines), `user_hz` the guest's USER_HZ. Parts the guest
/// did not report are left out (no IPI metrics without `irq` lines, no
/// placement without sweeps); a `before` reading without its `after` (or the
/// reverse) is an error. Topology is the caller's: the telemetry's topology
/// fields are left empty.
pub fn build(
    obs: &Observed,
    wall_s: f64,
    online: &[u32],
    user_hz: u64,
) -> Result<(Vec<Metric>, Telemetry), String> {
    let wall = Duration::try_from_secs_f64(wall_s)
        .map_err(|_| format!("the wall time {wall_s} s is not a duration"))?;
    let times = obs.times.pair("times")?;
    let ctxt = obs.ctxt.pair("ctxt")?;
    let irqs = match (obs.irq_before.is_empty(), obs.irq_after.is_empty()) {
        (true, true) => None,
        (false, true) => return Err("`irq before` lines without `irq after` lines".into()),
        (true, false) => return Err("`irq after` lines without `irq before` lines".into()),
        (false, false) => {
            let parse = |lines: &[String]| {
                interrupts::parse(&lines.join("\n")).map_err(|e| format!("irq: {e}"))
            };
            let (before, after) = (parse(&obs.irq_before)?, parse(&obs.irq_after)?);
            Some(interrupts::delta(&before, &after).map_err(|e| format!("irq: {e}"))?)
        }
    };
    let collected = obs.collected()?;
    let map = if obs.nodes.is_empty() {
        NodeMap::single(online)
    } else {
        NodeMap::from_nodes(&obs.nodes)
    };
    let (mut metrics, telemetry) = report::build(&report::Inputs {
        wall,
        counts: None,
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
    if let Some((&(user0, sys0), &(user1, sys1))) = times {
        let spent = |what: &str, b: u64, a: u64| {
            a.checked_sub(b)
                .map(|ms| ms as f64 / 1000.0)
                .ok_or_else(|| format!("times: {what} time went backwards from {b} ms to {a} ms"))
        };
        let (user, sys) = (spent("user", user0, user1)?, spent("system", sys0, sys1)?);
        metrics.push(metric("user_s", user, "s"));
        metrics.push(metric("sys_s", sys, "s"));
        // As the host: what sampling cost against the CPU time it watched.
        if let Some(ms) = obs.sampler_ms
            && user + sys > 0.0
        {
            let pct = ms as f64 / 1000.0 / (user + sys) * 100.0;
            metrics.push(metric("telemetry_overhead_pct", pct, "%"));
        }
        if wall_s > 0.0 {
            metrics.push(Metric {
                direction: Direction::HigherIsBetter as i32,
                ..metric("cpus_utilised", (user + sys) / wall_s, "CPUs")
            });
        }
    }
    // Sampled (see the module's doc): a lower bound on perf's count.
    if let Some(n) = obs.migrations() {
        metrics.push(metric("cpu_migrations", n as f64, "migrations"));
    }
    // Guest-wide, where perf counts the workload's own: the guest runs little
    // else (the runner and its sweeps, kernel threads).
    if let Some((&b, &a)) = ctxt {
        let n = a
            .checked_sub(b)
            .ok_or_else(|| format!("ctxt went backwards from {b} to {a}"))?;
        metrics.push(metric("context_switches", n as f64, "switches"));
    }
    Ok((metrics, telemetry))
}

fn metric(name: &str, value: f64, unit: &str) -> Metric {
    Metric {
        name: name.into(),
        value,
        unit: unit.into(),
        direction: Direction::LowerIsBetter as i32,
    }
}

/// `s` cut to [`EXCERPT`] characters.
fn cut(s: &str) -> String {
    match s.char_indices().nth(EXCERPT) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}...", &s[..at]),
    }
}

/// The reason of a telemetry parse error: the line is named by the caller.
fn reason(e: crate::telemetry::Error) -> String {
    match e {
        crate::telemetry::Error::Parse { reason, .. } => reason,
        e => e.to_string(),
    }
}

/// Decimal digits only (no sign, unlike `str::parse`), at most 19 of them.
fn number(s: &str) -> Option<u64> {
    (!s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `/proc/uptime`'s `12.34` (any number of fraction digits, or none) in ms.
fn uptime_ms(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.len() > 12 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.contains('.') && frac.is_empty() {
        return None;
    }
    let ms: String = frac.chars().chain("000".chars()).take(3).collect();
    Some(number(int)? * 1000 + ms.parse::<u64>().ok()?)
}

/// A time of ash's `times`, `<m>m<s>.<fff>s` (2 or 3 fraction digits), in ms.
fn clock_ms(s: &str) -> Option<u64> {
    let (min, rest) = s.strip_suffix('s')?.split_once('m')?;
    let (sec, frac) = rest.split_once('.')?;
    if sec.len() > 2 {
        return None;
    }
    let (min, sec) = (number(min)?, number(sec)?);
    if min > 1 << 32 || sec >= 60 {
        return None;
    }
    let frac_ms = match frac.len() {
        2 => number(frac)? * 10,
        3 => number(frac)?,
        _ => return None,
    };
    Some(min * 60_000 + sec * 1000 + frac_ms)
}

/// A `cpu` or `cpu<N>` line of `/proc/stat`: `None` for the total. At least
/// the four columns every kernel prints, later ones beyond the ten known
/// ignored, as [`crate::telemetry::procstat::parse`] reads them.
fn parse_cpu(raw: &str) -> Result<(Option<u32>, CpuTimes), String> {
    let mut fields = raw.split_ascii_whitespace();
    let label = fields.next().unwrap_or("");
    let cpu = match label.strip_prefix("cpu") {
        Some("") => None,
        Some(n) => Some(
            number(n)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n < crate::capabilities::parse::MAX_CPUS)
                .ok_or_else(|| format!("{:?} is not cpu<N>", cut(label)))?,
        ),
        None => return Err(format!("{:?} is not a cpu line", cut(label))),
    };
    let mut t = [0u64; 10];
    let mut n = 0;
    for field in fields {
        let v = number(field).ok_or_else(|| format!("{:?} is not a tick count", cut(field)))?;
        if let Some(slot) = t.get_mut(n) {
            *slot = v;
        }
        n += 1;
    }
    if n < 4 {
        return Err(format!("expected at least 4 time columns, found {n}"));
    }
    Ok((cpu, CpuTimes::from(t)))
}

/// A task stat line; `None` for one cut short by a thread that exited while
/// it was read (empty, or a prefix of a stat line: see the module doc).
fn parse_task(raw: &str) -> Result<Option<Task>, String> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    let t = match taskstat::parse(raw) {
        Ok(t) => t,
        Err(_) if truncated(raw) => return Ok(None),
        Err(e) => return Err(reason(e)),
    };
    // Field 6, counted from after the comm like `taskstat` does: rest[i] is
    // field i + 3.
    let close = raw.rfind(')').expect("parsed: the comm is closed");
    let session = raw[close + 1..]
        .split_ascii_whitespace()
        .nth(3)
        .and_then(number)
        .and_then(|s| u32::try_from(s).ok())
        .ok_or("field 6 (session) is not a number")?;
    Ok(Some(Task {
        tid: t.tid,
        session,
        state: t.state,
        cpu: t.cpu,
        instance: sampler::instance_of(&t.comm),
    }))
}

/// Whether `raw`, which does not parse, is the start of a stat line: a tid
/// and `(`, then a comm left open, or a single-letter state followed by
/// fewer than the 37 fields up to field 39, all of them integers.
fn truncated(raw: &str) -> bool {
    let raw = raw.trim_end();
    let Some(open) = raw.find('(') else {
        return false;
    };
    if number(raw[..open].trim()).is_none() {
        return false;
    }
    let Some(close) = raw.rfind(')').filter(|&c| c > open) else {
        // Cut inside the comm, which is at most 64 bytes.
        return raw.len() - open <= 65;
    };
    let fields: Vec<&str> = raw[close + 1..].split_ascii_whitespace().collect();
    let state_ok = fields
        .first()
        .is_none_or(|s| s.len() == 1 && s.bytes().all(|b| b.is_ascii_alphabetic()));
    let int = |f: &&str| number(f.strip_prefix('-').unwrap_or(f)).is_some();
    fields.len() < 37 && state_ok && fields.iter().skip(1).all(int)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an x86_64 guest's runner reported around a `cpu-hog` of 4
    /// threads (2 NUMA nodes: cpus 0-1 and 2-3): three sweeps, the kernel
    /// threads (session 0) and the runner (session 1) among the tasks, and
    /// lines of the job runner this module leaves to its caller.
    const X86: &str = r#"farm-job 1
release 6.1.0-31-amd64
node 0 0-1
node 1 2-3
online 0-3
irq before            CPU0       CPU1       CPU2       CPU3       
irq before   0:        141          0          0          0   IO-APIC   2-edge      timer
irq before   1:          0          9          0          0   IO-APIC   1-edge      i8042
irq before   4:          0          4          0          0   IO-APIC   4-edge      ttyS0
irq before   8:          1          0          0          0   IO-APIC   8-edge      rtc0
irq before   9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
irq before  12:          5          0          0          0   IO-APIC  12-edge      i8042
irq before NMI:          0          0          0          0   Non-maskable interrupts
irq before LOC:        595        494        511        553   Local timer interrupts
irq before SPU:          0          0          0          0   Spurious interrupts
irq before PMI:          0          0          0          0   Performance monitoring interrupts
irq before IWI:          0          0          0          0   IRQ work interrupts
irq before RTR:          0          0          0          0   APIC ICR read retries
irq before RES:         28         24         16         15   Rescheduling interrupts
irq before CAL:        236        236        157        215   Function call interrupts
irq before TLB:          0          0          0          0   TLB shootdowns
irq before TRM:          0          0          0          0   Thermal event interrupts
irq before ERR:          0
irq before MIS:          0
irq before PIN:          0          0          0          0   Posted-interrupt notification event
irq before NPI:          0          0          0          0   Nested posted-interrupt event
irq before PIW:          0          0          0          0   Posted-interrupt wakeup event
ctxt before 10432
times before 0m0.010s 0m0.020s
session 230
begin
sample 5.10
task 2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 1 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0
task 27 (kworker/2:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 12 0 0 20 0 1 0 30 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 2 0 0 0 0 0 0 0 0 0 0 0 0 0
task 1 (init) S 0 1 1 0 -1 4194560 181 0 0 0 1 4 0 0 20 0 1 0 1 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 229 (sh) S 1 1 1 0 -1 4194560 181 0 0 0 0 0 0 0 20 0 1 0 500 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 230 (farm-workload) S 229 230 230 0 -1 4194560 181 0 0 0 2 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 232 (cpu-hog-1) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 233 (cpu-hog-2) R 229 230 230 0 -1 4194368 181 0 0 0 9 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 234 (cpu-hog-3) R 229 230 230 0 -1 4194368 181 0 0 0 9 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  1026 0 456 11801 6 0 17 0 0 0
cpu cpu0 310 0 120 2890 3 0 5 0 0 0
cpu cpu1 295 0 131 2902 1 0 2 0 0 0
cpu cpu2 301 0 117 2899 0 0 9 0 0 0
cpu cpu3 120 0 88 3110 2 0 1 0 0 0
out cpu_hog_ops 123456 ops higher
sample 5.21
task 2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 2 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0
task 27 (kworker/2:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 13 0 0 20 0 1 0 30 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 2 0 0 0 0 0 0 0 0 0 0 0 0 0
task 1 (init) S 0 1 1 0 -1 4194560 181 0 0 0 1 5 0 0 20 0 1 0 1 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 229 (sh) S 1 1 1 0 -1 4194560 181 0 0 0 0 1 0 0 20 0 1 0 500 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 230 (farm-workload) S 229 230 230 0 -1 4194560 181 0 0 0 2 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 21 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 232 (cpu-hog-1) R 229 230 230 0 -1 4194368 181 0 0 0 19 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 233 (cpu-hog-2) R 229 230 230 0 -1 4194368 181 0 0 0 20 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 234 (cpu-hog-3) R 229 230 230 0 -1 4194368 181 0 0 0 17 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  1065 0 460 11802 6 0 17 0 0 0
cpu cpu0 320 0 121 2890 3 0 5 0 0 0
cpu cpu1 305 0 132 2902 1 0 2 0 0 0
cpu cpu2 311 0 118 2899 0 0 9 0 0 0
cpu cpu3 129 0 89 3111 2 0 1 0 0 0
sample 5.30
task 2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 20 0 1 0 2 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0
task 27 (kworker/2:1-events) I 2 0 0 0 -1 69238880 0 0 0 0 0 14 0 0 20 0 1 0 30 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 2 0 0 0 0 0 0 0 0 0 0 0 0 0
task 1 (init) S 0 1 1 0 -1 4194560 181 0 0 0 1 6 0 0 20 0 1 0 1 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 229 (sh) S 1 1 1 0 -1 4194560 181 0 0 0 0 2 0 0 20 0 1 0 500 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 230 (farm-workload) S 229 230 230 0 -1 4194560 181 0 0 0 2 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 26 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 232 (cpu-hog-1) R 229 230 230 0 -1 4194368 181 0 0 0 24 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 233 (cpu-hog-2) R 229 230 230 0 -1 4194368 181 0 0 0 29 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 2 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
task 
task 235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 6 0 512 138407936 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 -1 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  1094 0 462 11807 6 0 17 0 0 0
cpu cpu0 329 0 121 2890 3 0 5 0 0 0
cpu cpu1 313 0 133 2902 1 0 2 0 0 0
cpu cpu2 320 0 118 2899 0 0 9 0 0 0
cpu cpu3 132 0 90 3116 2 0 1 0 0 0
end
exit 0
wall_s 0.25
times after 1m2.340s 0m0.100s
ctxt after 15877
irq after            CPU0       CPU1       CPU2       CPU3       
irq after   0:        141          0          0          0   IO-APIC   2-edge      timer
irq after   1:          0          9          0          0   IO-APIC   1-edge      i8042
irq after   4:          0          4          0          0   IO-APIC   4-edge      ttyS0
irq after   8:          1          0          0          0   IO-APIC   8-edge      rtc0
irq after   9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
irq after  12:          5          0          0          0   IO-APIC  12-edge      i8042
irq after NMI:          0          0          0          0   Non-maskable interrupts
irq after LOC:        622        519        540        561   Local timer interrupts
irq after SPU:          0          0          0          0   Spurious interrupts
irq after PMI:          0          0          0          0   Performance monitoring interrupts
irq after IWI:          0          0          0          0   IRQ work interrupts
irq after RTR:          0          0          0          0   APIC ICR read retries
irq after RES:         40         31         20         15   Rescheduling interrupts
irq after CAL:        240        236        160        215   Function call interrupts
irq after TLB:          0          0          1          0   TLB shootdowns
irq after TRM:          0          0          0          0   Thermal event interrupts
irq after ERR:          0
irq after MIS:          0
irq after PIN:          0          0          0          0   Posted-interrupt notification event
irq after NPI:          0          0          0          0   Nested posted-interrupt event
irq after PIW:          0          0          0          0   Posted-interrupt wakeup event
done"#;

    /// An s390x guest of 2 CPUs: no NUMA nodes, `/proc/interrupts` in the
    /// s390x format, `times` with 2 fraction digits, no `ctxt` lines.
    const S390X: &str = r#"irq before            CPU0       CPU1       
irq before EXT:        525        482 
irq before I/O:          2          4 
irq before AIO:          0          0 
irq before CLK:        426        383   [EXT] Clock Comparator
irq before EXC:         29         18   [EXT] External Call
irq before EMS:         65         75   [EXT] Emergency Signal
irq before TMR:          0          0   [EXT] CPU Timer
irq before TAL:          0          0   [EXT] Timing Alert
irq before PFL:          0          0   [EXT] Pseudo Page Fault
irq before DSD:          0          0   [EXT] DASD Diag
irq before VRT:          0          0   [EXT] Virtio
irq before SCP:          5          6   [EXT] Service Call
irq before IUC:          0          0   [EXT] IUCV
irq before CMS:          0          0   [EXT] CPU-Measurement: Sampling
irq before CMC:          0          0   [EXT] CPU-Measurement: Counter
irq before FTP:          0          0   [EXT] HMC FTP Service
irq before CIO:          0          2   [I/O] Common I/O Layer Interrupt
irq before DAS:          0          0   [I/O] DASD
irq before C15:          0          0   [I/O] 3215
irq before C70:          0          0   [I/O] 3270
irq before TAP:          0          0   [I/O] Tape
irq before VMR:          0          0   [I/O] Unit Record Devices
irq before LCS:          0          0   [I/O] LCS
irq before CTC:          0          0   [I/O] CTC
irq before ADM:          0          0   [I/O] EADM Subchannel
irq before CSC:          0          0   [I/O] CHSC Subchannel
irq before VIR:          2          2   [I/O] Virtual I/O Devices
irq before QAI:          0          0   [AIO] QDIO Adapter Interrupt
irq before APB:          0          0   [AIO] AP Bus
irq before PCF:          0          0   [AIO] PCI Floating Interrupt
irq before PCD:          0          0   [AIO] PCI Directed Interrupt
irq before MSI:          0          0   [AIO] MSI Interrupt
irq before VAI:          0          0   [AIO] Virtual I/O Devices AI
irq before GAL:          0          0   [AIO] GIB Alert
irq before NMI:          0          0   [NMI] Machine Check
irq before RST:          0          1   [CPU] CPU Restart
times before 0m0.00s 0m0.01s
session 301
sample 31.40
task 12 (rcu_sched) I 2 0 0 0 -1 69238880 0 0 0 0 0 6 0 0 20 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0
cpu cpu  800 0 300 1528 4 12 9 0 0 0
cpu cpu0 394 0 150 769 2 6 5 0 0 0
cpu cpu1 406 0 150 759 2 6 4 0 0 0
sample 31.50
task 12 (rcu_sched) I 2 0 0 0 -1 69238880 0 0 0 0 0 7 0 0 20 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0
task 301 (farm-workload) R 300 301 301 0 -1 4194560 181 0 0 0 10 1 0 0 20 0 1 0 700 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  812 0 301 1530 4 12 9 0 0 0
cpu cpu0 400 0 150 770 2 6 5 0 0 0
cpu cpu1 412 0 151 760 2 6 4 0 0 0
sample 31.62
task 12 (rcu_sched) I 2 0 0 0 -1 69238880 0 0 0 0 0 8 0 0 20 0 1 0 3 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0
task 301 (farm-workload) R 300 301 301 0 -1 4194560 181 0 0 0 22 1 0 0 20 0 1 0 700 2846720 310 18446744073709551615 94299315011584 94299315922993 140724586514688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94299316051952 94299316100672 94299335380992 140724586518322 140724586518360 140724586518360 140724586520543 0
cpu cpu  834 0 303 1530 4 12 9 0 0 0
cpu cpu0 411 0 151 770 2 6 5 0 0 0
cpu cpu1 423 0 152 760 2 6 4 0 0 0
begin
out stream_copy_mb_s 812.5 MB/s higher
end
times after 0m0.45s 0m0.04s
irq after            CPU0       CPU1       
irq after EXT:        601        530 
irq after I/O:          2          4 
irq after AIO:          0          0 
irq after CLK:        465        402   [EXT] Clock Comparator
irq after EXC:         41         25   [EXT] External Call
irq after EMS:         70         90   [EXT] Emergency Signal
irq after TMR:          0          0   [EXT] CPU Timer
irq after TAL:          0          0   [EXT] Timing Alert
irq after PFL:          0          0   [EXT] Pseudo Page Fault
irq after DSD:          0          0   [EXT] DASD Diag
irq after VRT:          0          0   [EXT] Virtio
irq after SCP:          5          6   [EXT] Service Call
irq after IUC:          0          0   [EXT] IUCV
irq after CMS:          0          0   [EXT] CPU-Measurement: Sampling
irq after CMC:          0          0   [EXT] CPU-Measurement: Counter
irq after FTP:          0          0   [EXT] HMC FTP Service
irq after CIO:          0          2   [I/O] Common I/O Layer Interrupt
irq after DAS:          0          0   [I/O] DASD
irq after C15:          0          0   [I/O] 3215
irq after C70:          0          0   [I/O] 3270
irq after TAP:          0          0   [I/O] Tape
irq after VMR:          0          0   [I/O] Unit Record Devices
irq after LCS:          0          0   [I/O] LCS
irq after CTC:          0          0   [I/O] CTC
irq after ADM:          0          0   [I/O] EADM Subchannel
irq after CSC:          0          0   [I/O] CHSC Subchannel
irq after VIR:          2          2   [I/O] Virtual I/O Devices
irq after QAI:          0          0   [AIO] QDIO Adapter Interrupt
irq after APB:          0          0   [AIO] AP Bus
irq after PCF:          0          0   [AIO] PCI Floating Interrupt
irq after PCD:          0          0   [AIO] PCI Directed Interrupt
irq after MSI:          0          0   [AIO] MSI Interrupt
irq after VAI:          0          0   [AIO] Virtual I/O Devices AI
irq after GAL:          0          0   [AIO] GIB Alert
irq after NMI:          0          0   [NMI] Machine Check
irq after RST:          0          1   [CPU] CPU Restart"#;

    /// Kinds of the job runner's own lines, which are the caller's.
    const CALLERS: &[&str] = &[
        "farm-job", "release", "online", "begin", "out", "end", "exit", "wall_s", "done",
    ];

    /// Feeds `text` as `parse_run` splits it.
    fn feed(text: &str) -> Observed {
        let mut obs = Observed::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
            let known = obs.line(kind, rest).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(known, !CALLERS.contains(&kind), "{line}");
        }
        obs
    }

    fn value(metrics: &[Metric], name: &str) -> Option<f64> {
        metrics.iter().find(|m| m.name == name).map(|m| m.value)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn an_x86_guest_with_two_nodes() {
        let obs = feed(X86);
        assert_eq!(obs.skipped_tasks(), 1, "the empty task line of sweep 3");
        let (metrics, t) = build(&obs, 0.25, &[0, 1, 2, 3], 100).unwrap();
        // RES 12 + 7 + 4 + 0, CAL 4 + 0 + 3 + 0, TLB 1 on cpu2.
        assert_eq!(value(&metrics, "rescheduling_ipis"), Some(23.0));
        assert_eq!(value(&metrics, "function_call_ipis"), Some(7.0));
        assert_eq!(value(&metrics, "tlb_shootdowns"), Some(1.0));
        assert_eq!(value(&metrics, "mixed_ipis"), None);
        let res = t.irqs.iter().find(|d| d.name == "RES").unwrap();
        assert_eq!(res.ipi, "rescheduling");
        assert_eq!(
            res.per_cpu,
            [(0, 12), (1, 7), (2, 4), (3, 0)].into_iter().collect()
        );
        // 1m2.340s - 0m0.010s and 0m0.100s - 0m0.020s.
        assert!(
            close(value(&metrics, "user_s").unwrap(), 62.33),
            "{metrics:?}"
        );
        assert!(
            close(value(&metrics, "sys_s").unwrap(), 0.08),
            "{metrics:?}"
        );
        assert_eq!(value(&metrics, "context_switches"), Some(5445.0));
        for name in ["user_s", "sys_s", "context_switches"] {
            let m = metrics.iter().find(|m| m.name == name).unwrap();
            assert_eq!(m.direction, Direction::LowerIsBetter as i32, "{name}");
        }
        assert_eq!(
            metrics
                .iter()
                .find(|m| m.name == "context_switches")
                .unwrap()
                .unit,
            "switches"
        );
        assert_eq!(value(&metrics, "task_clock_s"), None, "no perf in a guest");

        // The 6 threads of session 230 only; the kernel's and the runner's
        // tasks are in no count.
        assert_eq!(t.nodes.len(), 2);
        let (n0, n1) = (&t.nodes[0], &t.nodes[1]);
        assert_eq!((n0.node, n0.cpus, n1.node, n1.cpus), (0, 2, 1, 2));
        assert!(close(n0.avg_threads, 3.0), "{n0:?}");
        assert!(close(n0.avg_runnable, 2.0), "{n0:?}");
        assert!(close(n1.avg_threads, 8.0 / 3.0), "{n1:?}");
        assert!(close(n1.avg_runnable, 5.0 / 3.0), "{n1:?}");
        assert_eq!(n1.peak_threads, 3);
        let ticks: Vec<(u64, Vec<u32>)> = t
            .series
            .iter()
            .map(|s| (s.t_ms, s.threads.clone()))
            .collect();
        assert_eq!(
            ticks,
            [(0, vec![3, 3]), (110, vec![3, 3]), (200, vec![3, 2])]
        );
        // One instance: cpu-hog's threads are workers, not instances. In tid
        // order, the thread `x) R 1 0 0 (y` (235) last.
        assert_eq!(t.instances.len(), 1);
        assert_eq!(t.instances[0].instance, 0);
        assert_eq!(
            t.instances[0].numa_nodes,
            "1/0/0/1/1/0 1/0/0/1/1/0 1/0/0/1/0"
        );
        // Sweeps 110 and 90 ms apart.
        assert_eq!(t.sample_interval_ms, 100);
        assert_eq!(t.threads_read_fraction, 1.0);
        // Between sweeps 2 and 3 a thread waited on cpu0 while cpu3 idled 5
        // ticks: 0.05 CPU-s of 0.2 s × 4 CPUs, on node 1.
        assert!(close(value(&metrics, "wasted_core_s").unwrap(), 0.05));
        assert!(close(value(&metrics, "wasted_core_pct").unwrap(), 6.25));
        assert!(close(t.wasted_cpu_s_per_node[&1], 0.05));
        assert!(close(t.wasted_cpu_s_per_node[&0], 0.0));
        // The caller's.
        assert!(t.topology_source.is_empty() && t.topology_before.is_empty());
        assert!(t.topology_after.is_empty() && t.topology_changes.is_empty());
    }

    #[test]
    fn an_s390x_guest_without_nodes() {
        let obs = feed(S390X);
        let (metrics, t) = build(&obs, 0.2, &[0, 1], 100).unwrap();
        // EXC 12 + 7, EMS 5 + 15: reschedules and function calls together.
        assert_eq!(value(&metrics, "mixed_ipis"), Some(39.0));
        // Not counted apart on s390x: not reported, rather than zero.
        assert_eq!(value(&metrics, "rescheduling_ipis"), None);
        let exc = t.irqs.iter().find(|d| d.name == "EXC").unwrap();
        assert_eq!(exc.ipi, "mixed");
        assert_eq!(exc.per_cpu, [(0, 12), (1, 7)].into_iter().collect());
        // 2 fraction digits.
        assert!(close(value(&metrics, "user_s").unwrap(), 0.45));
        assert!(close(value(&metrics, "sys_s").unwrap(), 0.03));
        assert_eq!(value(&metrics, "context_switches"), None, "no ctxt lines");
        // One node of the online CPUs.
        assert_eq!(t.nodes.len(), 1);
        assert_eq!((t.nodes[0].node, t.nodes[0].cpus), (0, 2));
        assert!(close(t.nodes[0].avg_threads, 1.0));
        assert!(close(t.nodes[0].avg_runnable, 1.0));
        // The first sweep, before the workload's thread appeared, is dropped.
        let ticks: Vec<u64> = t.series.iter().map(|s| s.t_ms).collect();
        assert_eq!(ticks, [0, 120]);
        assert_eq!(t.sample_interval_ms, 120);
        assert_eq!(t.instances[0].numa_nodes, "0 0");
        assert_eq!(value(&metrics, "wasted_core_s"), Some(0.0));
    }

    #[test]
    fn thread_instances_as_the_sampler_numbers_them() {
        let task = |tid: u32, comm: &str, cpu: u32| {
            format!(
                "task {tid} ({comm}) R 400 401 401 0 -1 4194368 0 0 0 0 5 0 0 0 20 0 3 0 \
                 900 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 -1 {cpu} 0 0 0 0 0 \
                 0 0 0 0 0 0 0 0"
            )
        };
        let text = [
            "session 401".to_owned(),
            "sample 2.00".to_owned(),
            task(401, "farm-workload", 0),
            task(402, "stream-0", 0),
            task(403, "stream-1", 1),
        ]
        .join("\n");
        let (_, t) = build(&feed(&text), 1.0, &[0, 1], 100).unwrap();
        let instances: Vec<(u32, &str)> = t
            .instances
            .iter()
            .map(|i| (i.instance, i.numa_nodes.as_str()))
            .collect();
        // The main thread, waiting for them, is no instance and left out.
        assert_eq!(instances, [(0, "0"), (1, "0")]);
        assert!(close(t.nodes[0].avg_threads, 2.0));
    }

    #[test]
    fn comm_with_spaces_and_parentheses() {
        // A naive split at the first `)` reads state R and session 0.
        let line = "235 (x) R 1 0 0 (y) S 229 230 230 0 -1 4194368 181 0 0 0 0 1 0 0 20 0 \
                    6 0 512 138407936 310 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 -1 \
                    3 0 0 0 0 0 1 1 1 1 1 1 1 0";
        let t = parse_task(line).unwrap().unwrap();
        assert_eq!((t.tid, t.state, t.session, t.cpu), (235, 'S', 230, 3));
        let line = line.replacen("(x) R 1 0 0 (y)", "((a)) (b))", 1);
        let t = parse_task(&line).unwrap().unwrap();
        assert_eq!((t.tid, t.state, t.session), (235, 'S', 230));
    }

    #[test]
    fn tasks_cut_short_by_an_exiting_thread_are_skipped() {
        let mut obs = Observed::new();
        obs.line("sample", "1.00").unwrap();
        for rest in [
            "",
            "  ",
            "231 (cpu-ho",
            "231 (cpu-hog-0)",
            "231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6",
            "231 (cpu-hog-0) R 229 230 230 0 -1 4194368 181 0 0 0 10 1 0 0 20 0 6 0 512 13840",
        ] {
            assert_eq!(obs.line("task", rest), Ok(true), "{rest:?}");
        }
        assert_eq!(obs.skipped_tasks(), 6);
        assert!(obs.sweeps[0].tasks.is_empty());
    }

    /// A task line of session 230 on cpu `cpu`.
    #[test]
    fn migrations_are_each_threads_last_count_summed() {
        let mig = |tid: u32, n: u64| {
            format!(
                "mig /proc/230/task/{tid}/sched:se.nr_migrations                      :                   {n}"
            )
        };
        let text = [
            "session 230".to_string(),
            "times before 0m0.00s 0m0.00s".into(),
            "sample 1.00".into(),
            format!("task {}", full_task(231, "R", "230")),
            format!("task {}", full_task(232, "R", "230")),
            format!("task {}", full_task(300, "S", "1")),
            mig(231, 3),
            mig(232, 1),
            mig(300, 50),
            "sample 1.50".into(),
            format!("task {}", full_task(231, "R", "230")),
            mig(231, 7),
            // 232 exited before this sweep: its last count stands.
            "times after 0m1.00s 0m0.50s".into(),
            "sampler 0m0.01s 0m0.02s 0m0.004s 0m0.011s".into(),
        ]
        .join("\n");
        let obs = feed(&text);
        let (metrics, t) = build(&obs, 1.0, &[0, 1], 100).unwrap();
        // 45 ms of sampling against 1.5 s of the workload's CPU.
        assert!(close(
            value(&metrics, "telemetry_overhead_pct").unwrap(),
            3.0
        ));
        assert_eq!(t.sample_interval_ms, 500);
        let mut twice = feed(&text);
        assert!(
            twice
                .line("sampler", "0m0.01s 0m0.02s 0m0.00s 0m0.00s")
                .unwrap_err()
                .contains("second")
        );
        assert!(Observed::new().line("sampler", "0m0.01s 0m0.02s").is_err());
        // 7 + 1; the runner's task (session 1) is in no count.
        assert_eq!(value(&metrics, "cpu_migrations"), Some(8.0));
        assert!(close(value(&metrics, "cpus_utilised").unwrap(), 1.5));
        let m = metrics.iter().find(|m| m.name == "cpus_utilised").unwrap();
        assert_eq!(m.direction, Direction::HigherIsBetter as i32);

        let mut obs = Observed::new();
        obs.line("sample", "1.00").unwrap();
        for bad in [
            "/proc/230/task/231/sched se.nr_migrations 3",
            "/proc/230/task/x/sched:se.nr_migrations : 3",
            "/etc/passwd:se.nr_migrations : 3",
            "/proc/230/task/231/sched:se.nr_wakeups : 3",
            "/proc/230/task/231/sched:se.nr_migrations : -1",
            "/proc/230/task/231/sched:se.nr_migrations : 999999999999999999",
        ] {
            let e = obs.line("mig", bad).unwrap_err();
            assert!(e.starts_with("malformed mig line"), "{bad}: {e}");
        }
        let mut obs = Observed::new();
        assert!(
            obs.line("mig", &mig(1, 1)[4..])
                .unwrap_err()
                .contains("before any")
        );
    }

    fn full_task(tid: u32, state: &str, session: &str) -> String {
        format!(
            "{tid} (cpu-hog-0) {state} 229 230 {session} 0 -1 4194368 181 0 0 0 10 1 0 0 20 \
             0 6 0 512 138407936 310 18446744073709551615 1 1 1 0 0 0 0 0 0 0 0 0 -1 2 0 0 \
             0 0 0 1 1 1 1 1 1 1 0"
        )
    }

    #[test]
    fn malformed_lines_are_errors_naming_them() {
        let header = "           CPU0       CPU1       ";
        let base = || {
            let mut obs = Observed::new();
            for (kind, rest) in [
                ("node", "0 0-1"),
                ("times", "before 0m0.010s 0m0.020s"),
                ("ctxt", "before 7"),
                ("irq", format!("before {header}").as_str()),
                ("session", "230"),
                ("sample", "1.00"),
                ("task", full_task(231, "R", "230").as_str()),
                ("cpu", "cpu0 1 2 3 4"),
                ("cpu", "cpu  1 2 3 4"),
            ] {
                assert_eq!(obs.line(kind, rest), Ok(true), "{kind} {rest}");
            }
            obs
        };
        let bad: &[(&str, &str)] = &[
            ("node", "x 0-1"),
            ("node", "-1 0-1"),
            ("node", "1 0-"),
            ("node", "1 3-2"),
            ("node", "0 2-3"),
            ("node", "1 1-2"),
            ("times", "before 0m1.230s"),
            ("times", "during 0m1.230s 0m0.100s"),
            ("times", "after 1.230s 0m0.100s"),
            ("times", "after 0m1.2s 0m0.100s"),
            ("times", "after 0m1.2300s 0m0.100s"),
            ("times", "after 0m61.000s 0m0.100s"),
            ("times", "after 0m1.230 0m0.100s"),
            ("times", "after +0m1.230s 0m0.100s"),
            ("times", "after 0m1.230s 0m0.100s extra"),
            ("times", "before 0m0.010s 0m0.020s"),
            ("ctxt", "after"),
            ("ctxt", "after x"),
            ("ctxt", "after +5"),
            ("ctxt", "after -5"),
            ("ctxt", "after 1 2"),
            ("ctxt", "after 99999999999999999999"),
            ("ctxt", "before 8"),
            ("irq", "during CPU0"),
            ("irq", "before RES:          1   Rescheduling interrupts"),
            ("irq", "before RES"),
            ("irq", &format!("before {header}")),
            (
                "irq",
                "after RES:          1          2   Rescheduling interrupts",
            ),
            ("session", "x"),
            ("session", "0"),
            ("session", "1"),
            ("session", "-230"),
            ("session", "231"),
            ("sample", "12,34"),
            ("sample", "abc"),
            ("sample", ""),
            ("sample", "1."),
            ("sample", "0.50"),
            ("sample", "1.00"),
            (
                "task",
                &full_task(231, "R", "230").replacen("231", "abc", 1),
            ),
            ("task", &full_task(232, "RR", "230")),
            ("task", &full_task(232, "R", "x")),
            ("task", "232 cpu-hog-0 R 229 230 230"),
            ("task", "232 (cpu-hog-0) R 229 230 abc"),
            ("task", &full_task(231, "R", "230")),
            ("cpu", "cpux 1 2 3 4"),
            ("cpu", "cpu0 1 2 3"),
            ("cpu", "intr 1 2 3 4"),
            ("cpu", "cpu1 1 2 x 4"),
            ("cpu", "cpu1 -1 2 3 4"),
            ("cpu", "cpu0 1 2 3 4"),
            ("cpu", "cpu 1 2 3 4"),
        ];
        for (kind, rest) in bad {
            let Err(err) = base().line(kind, rest) else {
                panic!("`{kind} {rest}` was accepted");
            };
            let quoted = format!("`{}`", cut(&format!("{kind} {rest}")));
            assert!(err.contains(&quoted), "{kind} {rest}: {err}");
            assert!(err.starts_with(&format!("malformed {kind} line")), "{err}");
        }
        // Before any sweep.
        for (kind, rest) in [
            ("task", full_task(231, "R", "230")),
            ("cpu", "cpu0 1 2 3 4".into()),
        ] {
            let err = Observed::new().line(kind, &rest).unwrap_err();
            assert!(err.contains("before any `sample` line"), "{err}");
        }
        // Long lines are cut.
        let long = format!("after {}", "9".repeat(10_000));
        let err = base().line("ctxt", &long).unwrap_err();
        assert!(err.len() < 500, "{}", err.len());
    }

    #[test]
    fn missing_parts_are_left_out() {
        let (metrics, t) = build(&Observed::new(), 1.0, &[0, 1], 100).unwrap();
        assert!(metrics.is_empty(), "{metrics:?}");
        assert!(t.nodes.iter().all(|n| n.avg_threads == 0.0));
        assert!(t.series.is_empty() && t.irqs.is_empty() && t.instances.is_empty());
        let obs = feed("ctxt before 100\nctxt after 250");
        let (metrics, _) = build(&obs, 1.0, &[0, 1], 100).unwrap();
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["context_switches"]);
    }

    #[test]
    fn unpaired_or_inconsistent_readings_are_errors() {
        for (text, want) in [
            (
                "times before 0m0.010s 0m0.020s",
                "`times before` without `times after`",
            ),
            ("ctxt after 5", "`ctxt after` without `ctxt before`"),
            (
                "irq before            CPU0",
                "`irq before` lines without `irq after`",
            ),
            (
                "irq after            CPU0",
                "`irq after` lines without `irq before`",
            ),
            ("sample 1.00\ncpu cpu 1 2 3 4", "no `session` line"),
            ("session 5\nsample 1.00\ncpu cpu0 1 2 3 4", "no `cpu` line"),
            ("ctxt before 9\nctxt after 8", "ctxt went backwards"),
            (
                "times before 0m1.000s 0m0.000s\ntimes after 0m0.500s 0m0.000s",
                "user time went backwards",
            ),
            (
                "irq before CPU0\nirq before RES: 9 Rescheduling interrupts\n\
                 irq after CPU0\nirq after RES: 5 Rescheduling interrupts",
                "RES on cpu0 went backwards",
            ),
        ] {
            let err = build(&feed(text), 1.0, &[0], 100).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
        for wall in [f64::NAN, -1.0, f64::INFINITY] {
            assert!(build(&Observed::new(), wall, &[0], 100).is_err(), "{wall}");
        }
    }
}
