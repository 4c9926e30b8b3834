//! `/proc/schedstat` (kernel.sched_schedstats=1): per CPU, per sched-domain
//! level, the load balancer's counters. Read before and after a run, their
//! deltas summed over the CPUs of each level say how often each level
//! balanced, by whom (a busy CPU at the tick, an idle one, one about to go
//! idle), and for each of those how often it failed, how much imbalance it
//! found and how many tasks it pulled; then the tasks active balancing
//! pushed and the wakeups pulled affine — seed 002's newidle balancing
//! beside its IPIs.
//!
//! Versions (Documentation/scheduler/sched-stats.rst):
//! - 15 (Linux 5.x–6.8): `domain<N> <cpumask>` and 36 counters: for each
//!   idle type, in the order idle, busy, newly idle, eight of them (count,
//!   balanced, failed, imbalance, gained, hot gained, no busier queue, no
//!   busier group); then active balancing (count, failed, pushed),
//!   sched_balance_exec and _fork (3 each, unused), and wakeups (remote,
//!   moved affine, moved by balancing).
//! - 16 (6.9–6.13): the same, with the idle types in the order busy, idle,
//!   newly idle.
//! - 17 (6.14 on): the domain's name after `domain<N>`, and four imbalance
//!   counters (load, util, task, misfit) in place of one: 11 per idle type.
//!
//! Each `cpu<N>` line (every version) ends in three counters of the CPU's
//! runqueue since boot: its tasks' time on it, their time waiting on it
//! (`run_delay`, ns) and the timeslices it gave. Their deltas summed over
//! the CPUs are the runqueue wait of everything that ran ([`Runqueue`]):
//! inside a guest, which runs the workload alone, the run's total, exited
//! threads included, where per-thread readings count only the threads a
//! sweep saw and only up to their last sweep.
//!
//! Pure; fixtures captured from Debian's 6.1 (v15) and 6.12 (v16) kernels in
//! 2-node guests.

use std::collections::BTreeMap;

use farm_spec::metric::balancing::{self, Counter, IdleType, Outcome};

use super::error::{Error, Result};
use super::topology::{Source, Topology};

const FILE: &str = "/proc/schedstat";
/// Levels per CPU at most (the kernel has a handful).
const MAX_LEVELS: usize = 16;

/// Balancing by one kind of CPU, at one level.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Balancing {
    pub count: u64,
    pub failed: u64,
    pub imbalance: u64,
    pub gained: u64,
}

/// One level's counters on one CPU (or summed over CPUs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Domain {
    pub busy: Balancing,
    pub idle: Balancing,
    pub newidle: Balancing,
    pub alb_pushed: u64,
    pub ttwu_move_affine: u64,
}

impl Domain {
    fn add(&mut self, o: &Domain) {
        for (a, b) in [
            (&mut self.busy, &o.busy),
            (&mut self.idle, &o.idle),
            (&mut self.newidle, &o.newidle),
        ] {
            a.count += b.count;
            a.failed += b.failed;
            a.imbalance += b.imbalance;
            a.gained += b.gained;
        }
        self.alb_pushed += o.alb_pushed;
        self.ttwu_move_affine += o.ttwu_move_affine;
    }

    fn minus(&self, before: &Domain) -> Domain {
        let d = |a: &Balancing, b: &Balancing| Balancing {
            count: a.count.saturating_sub(b.count),
            failed: a.failed.saturating_sub(b.failed),
            imbalance: a.imbalance.saturating_sub(b.imbalance),
            gained: a.gained.saturating_sub(b.gained),
        };
        Domain {
            busy: d(&self.busy, &before.busy),
            idle: d(&self.idle, &before.idle),
            newidle: d(&self.newidle, &before.newidle),
            alb_pushed: self.alb_pushed.saturating_sub(before.alb_pushed),
            ttwu_move_affine: self
                .ttwu_move_affine
                .saturating_sub(before.ttwu_move_affine),
        }
    }

    /// The value of one metric's counter.
    pub fn get(&self, c: Counter) -> u64 {
        match c {
            Counter::Balance(t, o) => {
                let b = match t {
                    IdleType::Busy => &self.busy,
                    IdleType::Idle => &self.idle,
                    IdleType::Newidle => &self.newidle,
                };
                match o {
                    Outcome::Attempts => b.count,
                    Outcome::Failed => b.failed,
                    Outcome::Imbalance => b.imbalance,
                    Outcome::Gained => b.gained,
                }
            }
            Counter::Pushed => self.alb_pushed,
            Counter::WakeAffine => self.ttwu_move_affine,
        }
    }
}

/// One reading: per CPU, its levels in order (level 0 first), each with
/// the name the line gave (version 17) or none.
/// One CPU's runqueue counters since boot (its `cpu<N>` line's last two).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Runqueue {
    /// Time tasks spent runnable on it, waiting (`run_delay`), in ns.
    pub wait_ns: u64,
    /// Timeslices given (`pcount`).
    pub timeslices: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedStat {
    pub version: u32,
    pub cpus: BTreeMap<u32, Vec<(Option<String>, Domain)>>,
    pub runqueues: BTreeMap<u32, Runqueue>,
}

/// What every task waited on the runqueues between two readings, in
/// seconds, over the CPUs both have (a CPU brought online between them
/// counts from 0; one offline at either end is left out).
pub fn wait_s(before: &SchedStat, after: &SchedStat) -> f64 {
    after
        .runqueues
        .iter()
        .map(|(cpu, a)| {
            let b = before.runqueues.get(cpu).copied().unwrap_or_default();
            a.wait_ns.saturating_sub(b.wait_ns)
        })
        .sum::<u64>() as f64
        / 1e9
}

pub fn parse(text: &str) -> Result<SchedStat> {
    let mut out = SchedStat::default();
    let mut cpu: Option<u32> = None;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let bad = |why: &'static str| Error::parse(FILE, n, why, line);
        let f: Vec<&str> = line.split_ascii_whitespace().collect();
        let Some(&head) = f.first() else {
            continue;
        };
        if head == "version" {
            out.version = f
                .get(1)
                .and_then(|v| v.parse().ok())
                .filter(|v| (15..=17).contains(v))
                .ok_or_else(|| bad("a version this parser does not know (15, 16, 17)"))?;
        } else if head == "timestamp" {
        } else if let Some(c) = head.strip_prefix("cpu") {
            let c: u32 = c.parse().map_err(|_| bad("not cpu<N>"))?;
            if out.cpus.insert(c, Vec::new()).is_some() {
                return Err(bad("a CPU twice"));
            }
            // yld_count, a legacy 0, schedule() calls, of them going idle,
            // try_to_wake_up() calls, of them local, then the three.
            let nums: Vec<u64> = f[1..]
                .iter()
                .map(|v| v.parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| bad("a counter that is not a number"))?;
            if nums.len() != 9 {
                return Err(bad("not the 9 counters of a cpu line"));
            }
            out.runqueues.insert(
                c,
                Runqueue {
                    wait_ns: nums[7],
                    timeslices: nums[8],
                },
            );
            cpu = Some(c);
        } else if let Some(level) = head.strip_prefix("domain") {
            if out.version == 0 {
                return Err(bad("a domain before the version line"));
            }
            let c = cpu.ok_or_else(|| bad("a domain before any cpu line"))?;
            let level: usize = level.parse().map_err(|_| bad("not domain<N>"))?;
            let levels = out.cpus.get_mut(&c).expect("inserted with the cpu line");
            if level != levels.len() || level >= MAX_LEVELS {
                return Err(bad("domain levels out of order"));
            }
            let (name, rest) = if out.version >= 17 {
                (f.get(1).map(|s| s.to_string()), f.get(3..))
            } else {
                (None, f.get(2..))
            };
            let per_type = if out.version >= 17 { 11 } else { 8 };
            let nums: Vec<u64> = rest
                .unwrap_or_default()
                .iter()
                .map(|v| v.parse::<u64>())
                .collect::<Result<_, _>>()
                .map_err(|_| bad("a counter that is not a number"))?;
            if nums.len() != 3 * per_type + 12 {
                return Err(bad("not the counters of its version"));
            }
            // count, then balanced, failed, the imbalance(s), gained.
            let gained_at = if out.version >= 17 { 7 } else { 4 };
            // lb_imbalance, or from version 17 lb_imbalance_load, at 3.
            let kind = |k: usize| Balancing {
                count: nums[k * per_type],
                failed: nums[k * per_type + 2],
                imbalance: nums[k * per_type + 3],
                gained: nums[k * per_type + gained_at],
            };
            let (idle, busy) = if out.version == 15 {
                (kind(0), kind(1))
            } else {
                (kind(1), kind(0))
            };
            let tail = &nums[3 * per_type..];
            levels.push((
                name,
                Domain {
                    busy,
                    idle,
                    newidle: kind(2),
                    alb_pushed: tail[2],
                    ttwu_move_affine: tail[10],
                },
            ));
        } else {
            return Err(bad("unknown line"));
        }
    }
    if out.version == 0 {
        return Err(Error::parse(FILE, 1, "no version line", ""));
    }
    Ok(out)
}

/// Each level's counters over a run, summed over the CPUs that had it at
/// both readings, by level name: the line's own (version 17), else
/// `names` (per CPU, in level order, from debugfs). A level without a name
/// is left out: "domain1" means different levels on different machines.
pub fn delta(
    before: &SchedStat,
    after: &SchedStat,
    names: &BTreeMap<u32, Vec<String>>,
) -> BTreeMap<String, Domain> {
    let mut out: BTreeMap<String, Domain> = BTreeMap::new();
    for (cpu, levels) in &after.cpus {
        let Some(old) = before.cpus.get(cpu) else {
            continue;
        };
        for (i, (name, d)) in levels.iter().enumerate() {
            let Some((_, b)) = old.get(i) else {
                continue;
            };
            let name = name
                .clone()
                .or_else(|| names.get(cpu).and_then(|n| n.get(i)).cloned());
            let Some(name) = name else {
                continue;
            };
            out.entry(name).or_default().add(&d.minus(b));
        }
    }
    out
}

/// A host run's load-balancing metrics, its levels named by index from the
/// kernel's own domains (`topology`, read after the state); a version 17
/// line names its level itself. Levels synthesized from sysfs name none:
/// they may not be the kernel's (a degenerate level is not there).
pub fn host_balancing(
    before: &str,
    after: &str,
    topology: Option<&Topology>,
) -> Result<Vec<(String, &'static str, u64)>> {
    let names = topology
        .filter(|t| t.source != Source::Sysfs)
        .map(|t| t.domains.level_names())
        .unwrap_or_default();
    balancing(before, after, &names)
}

/// The load-balancing metrics of a run from `/proc/schedstat` read before
/// and after it (`names`: each CPU's domain level names, as for
/// [`delta`]).
pub fn balancing(
    before: &str,
    after: &str,
    names: &BTreeMap<u32, Vec<String>>,
) -> Result<Vec<(String, &'static str, u64)>> {
    Ok(metrics(&delta(&parse(before)?, &parse(after)?, names)))
}

/// The metrics of the levels' deltas: `lb_<level>_<counter>` each.
pub fn metrics(levels: &BTreeMap<String, Domain>) -> Vec<(String, &'static str, u64)> {
    let mut out = Vec::new();
    for (level, d) in levels {
        for c in Counter::ALL {
            if let Some(name) = balancing::name(level, c) {
                out.push((name, c.unit(), d.get(c)));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const V15: &str = include_str!("schedstat/v15-6.1-2node.txt");
    const V16: &str = include_str!("schedstat/v16-6.12-2node.txt");

    fn names() -> BTreeMap<u32, Vec<String>> {
        (0..4)
            .map(|c| (c, vec!["MC".into(), "NUMA".into()]))
            .collect()
    }

    #[test]
    fn version_15_and_16_put_the_idle_types_in_their_order() {
        let a = parse(V15).unwrap();
        assert_eq!(a.version, 15);
        assert_eq!(a.cpus.len(), 4);
        // cpu0's MC level: 14 idle balances (the first eight), 1 busy.
        let mc = &a.cpus[&0][0].1;
        assert_eq!((mc.idle.count, mc.busy.count, mc.newidle.count), (14, 1, 0));
        let b = parse(V16).unwrap();
        assert_eq!(b.version, 16);
        // 6.12: busy first, then idle (cpu0's MC: 1 busy, 13 idle).
        let mc = &b.cpus[&0][0].1;
        assert_eq!((mc.busy.count, mc.idle.count), (1, 13));
        // cpu0's NUMA level: 8 idle balances, 1 newly idle.
        let numa = &b.cpus[&0][1].1;
        assert_eq!((numa.idle.count, numa.newidle.count), (8, 1));
        // cpu3's MC level: 4 idle balances, one failed.
        let mc3 = &b.cpus[&3][0].1;
        assert_eq!((mc3.idle.count, mc3.idle.failed), (4, 1));
    }

    #[test]
    fn deltas_by_level_name() {
        let before = parse(V15).unwrap();
        // The same machine later: cpu0's MC level balanced newly idle 5 times.
        let later = V15.replacen(
            "domain0 3 14 14 0 0 0 0 0 14 1 1 0 0 0 0 0 1 0 0 0 0 0",
            "domain0 3 14 14 0 0 0 0 0 14 1 1 0 0 0 0 0 1 5 3 1 7 2",
            1,
        );
        let after = parse(&later).unwrap();
        let d = delta(&before, &after, &names());
        assert_eq!(d.len(), 2);
        assert_eq!(
            d["MC"].newidle,
            Balancing {
                count: 5,
                failed: 1,
                imbalance: 7,
                gained: 2
            }
        );
        assert_eq!(d["NUMA"], Domain::default());
        let m = metrics(&d);
        assert_eq!(m.len(), 28);
        for (name, unit, v) in [
            ("lb_mc_newidle", "balances", 5),
            ("lb_mc_newidle_failed", "balances", 1),
            ("lb_mc_newidle_imbalance", "load", 7),
            ("lb_mc_newidle_gained", "tasks", 2),
            ("lb_mc_idle_gained", "tasks", 0),
        ] {
            assert!(m.contains(&(name.into(), unit, v)), "{name}: {m:?}");
        }
        // Without names nothing can be said of a level.
        assert!(delta(&before, &after, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn version_17_names_its_levels() {
        let line = |name: &str| format!("domain0 {name} 3 {}", vec!["1"; 3 * 11 + 12].join(" "));
        let text = format!(
            "version 17\ntimestamp 1\ncpu0 0 0 0 0 0 0 0 0 0\n{}\n",
            line("SMT")
        );
        let s = parse(&text).unwrap();
        assert_eq!(s.cpus[&0][0].0.as_deref(), Some("SMT"));
        let d = delta(&s, &s, &BTreeMap::new());
        assert_eq!(d["SMT"], Domain::default());
        // Eleven per idle type (busy, idle, newly idle): count, balanced,
        // failed, imbalance by load, util, task and misfit, gained, ...
        let newidle: Vec<String> = (0..11).map(|i| (10 + i).to_string()).collect();
        let counters = format!(
            "{} {} {}",
            ["0"; 22].join(" "),
            newidle.join(" "),
            ["0"; 12].join(" ")
        );
        let text = format!("version 17\ncpu0 0 0 0 0 0 0 0 0 0\ndomain0 MC 3 {counters}\n");
        let s = parse(&text).unwrap();
        assert_eq!(
            s.cpus[&0][0].1.newidle,
            Balancing {
                count: 10,
                failed: 12,
                imbalance: 13,
                gained: 17
            }
        );
    }

    #[test]
    fn malformed_readings_name_their_line() {
        for (text, why) in [
            (
                "version 14\n",
                "line 1: a version this parser does not know",
            ),
            (
                "version 15\ncpu0 0 0 5 2 3 2 1 2 3\ndomain0 3 1 2\n",
                "line 3: not the counters of its version",
            ),
            (
                "version 15\ncpu0 1\n",
                "line 2: not the 9 counters of a cpu line: \"cpu0 1\"",
            ),
            (
                "version 15\ncpu0 0 0 5 2 3 2 1 -2 3\n",
                "line 2: a counter that is not a number",
            ),
            (
                "version 15\ndomain0 3\n",
                "line 2: a domain before any cpu line",
            ),
            (
                "version 15\ncpu0 0 0 5 2 3 2 1 2 3\ndomain1 3\n",
                "line 3: domain levels out of order",
            ),
            ("version 15\nbogus\n", "line 2: unknown line"),
            ("timestamp 3\n", "no version line"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(why), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_runqueues_wait_is_the_cpus_run_delay_summed() {
        let a = parse(V15).unwrap();
        assert_eq!(
            a.runqueues[&0],
            Runqueue {
                wait_ns: 250_261_476,
                timeslices: 471
            }
        );
        assert_eq!(a.runqueues.len(), 4);
        // cpu0 waited 1.5 s more, cpu3 went offline, cpu4 came online
        // having waited 0.25 s.
        let later = V15.replacen(
            "cpu0 0 0 5 2 3 2 1486550248 250261476 471",
            "cpu0 0 0 9 2 3 2 1486550248 1750261476 480",
            1,
        );
        let mut after = parse(&later).unwrap();
        after.runqueues.remove(&3);
        after.runqueues.insert(
            4,
            Runqueue {
                wait_ns: 250_000_000,
                timeslices: 2,
            },
        );
        assert_eq!(wait_s(&a, &after), 1.75);
        assert_eq!(wait_s(&a, &a), 0.0);
    }

    #[test]
    fn a_runs_balancing_comes_from_two_readings() {
        // The same reading twice: every counter of both levels, all zero.
        let lb = balancing(V16, V16, &names()).unwrap();
        assert_eq!(lb.len(), 28, "{lb:?}");
        assert!(lb.iter().all(|(_, _, v)| *v == 0), "{lb:?}");
        assert_eq!((lb[0].0.as_str(), lb[0].1), ("lb_mc_busy", "balances"));
        assert!(balancing("not a schedstat", V16, &names()).is_err());
    }
}
