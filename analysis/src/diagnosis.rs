//! Why a cell regressed, in the words the seeds' authors used.
//!
//! A verdict says *that* a cell got slower; the engineers who wrote the seeds
//! then spent days finding *why*: "cpu-migrations ×13.9", "CPUs utilised 12.5
//! → 7.2", "nodes 2 and 3 hold 27.6 and 25.8 threads on 24 CPUs each", "the
//! NUMA level is missing after the hotplug cycle". [`diagnose`] turns the
//! telemetry of a candidate and its baseline into such lines, strongest
//! first, and never prints one for something that did not move: a metric
//! appears only when its own comparison called a change beyond its minimum
//! effect.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use farm_spec::metric::{CPUS_UTILISED, LOADS_CPUS, WASTED_CORE_PCT};

use crate::compare::{Finding, Verdict};

/// One telemetry metric of both sides, already compared.
#[derive(Debug, Clone, PartialEq)]
pub struct Moved<'a> {
    /// The metric's name as the agent reports it (`cpu_migrations`).
    pub metric: &'a str,
    pub baseline_median: f64,
    pub candidate_median: f64,
    /// The metric's own verdict against the baseline.
    pub verdict: Verdict,
}

/// The load of one NUMA node over a run.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeLoad {
    pub node: u32,
    pub cpus: u32,
    pub avg_threads: f64,
    pub avg_runnable: f64,
}

/// Where a run's threads were: per node, and per instance its average
/// threads on each node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    pub nodes: Vec<NodeLoad>,
    pub instances: Vec<(u32, BTreeMap<u32, f64>)>,
}

/// What the two sides' telemetry says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence<'a> {
    pub metrics: Vec<Moved<'a>>,
    pub baseline: Option<Placement>,
    pub candidate: Option<Placement>,
    /// Topology changes across the state's application, each side's
    /// representative run (`cpu3: sched domain level NUMA missing after ...`).
    pub baseline_topology: Vec<String>,
    pub candidate_topology: Vec<String>,
}

/// A diagnosis line and how strongly its evidence moved (|ln ratio| for a
/// metric; see [`diagnose`] for the others).
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub text: String,
    pub strength: f64,
}

/// A topology change is a change of kind, not of degree: it ranks above any
/// ratio a counter could show.
const TOPOLOGY_STRENGTH: f64 = 100.0;
/// Instances crowding one node while another idles: as strong as a ×2.
const CROWDING_STRENGTH: f64 = std::f64::consts::LN_2;

/// The lines, strongest first.
pub fn diagnose(e: &Evidence<'_>) -> Vec<Line> {
    let mut lines = Vec::new();
    // The machine's CPUs, where the placement knows its nodes.
    let cpus: u32 = e
        .candidate
        .as_ref()
        .map_or(0, |p| p.nodes.iter().map(|n| n.cpus).sum());
    for m in &e.metrics {
        if !matches!(m.verdict, Verdict::Regression | Verdict::Improvement) {
            continue;
        }
        if let Some(line) = metric_line(m, cpus) {
            lines.push(line);
        }
    }
    lines.extend(topology_lines(&e.baseline_topology, &e.candidate_topology));
    if let Some(c) = &e.candidate {
        lines.extend(overcommit_line(e.baseline.as_ref(), c));
        lines.extend(crowding_line(e.baseline.as_ref(), c));
    }
    lines.sort_by(|a, b| b.strength.total_cmp(&a.strength));
    lines
}

/// How a metric is named in a diagnosis: perf's names for perf's
/// counters, "NUMA-level newidle balancing" for a balancing counter.
fn display_name(metric: &str) -> String {
    farm_spec::metric::display(metric)
}

/// A moved metric's line; `cpus` is the machine's (0: unknown).
fn metric_line(m: &Moved<'_>, cpus: u32) -> Option<Line> {
    let (b, c) = (m.baseline_median, m.candidate_median);
    if !(b.is_finite() && c.is_finite()) {
        return None;
    }
    let text = match m.metric {
        // Seed 003's cause in its own terms: what the competing loads took.
        name if name == LOADS_CPUS.name => {
            let of = if cpus > 0 {
                format!(" of {cpus}")
            } else {
                String::new()
            };
            format!(
                "the competing loads took {}{of} CPUs ({} in the baseline)",
                level(c),
                level(b)
            )
        }
        // Seed 004 quotes these as levels, not factors.
        name if name == CPUS_UTILISED.name => {
            format!("CPUs utilised {} → {}", level(b), level(c))
        }
        name if name == WASTED_CORE_PCT.name => {
            format!(
                "wasted cores {} → {} of the CPU time there was",
                pct(b),
                pct(c)
            )
        }
        _ if b > 0.0 => format!(
            "{} {} ({} → {})",
            display_name(m.metric),
            factor(c / b),
            amount(b),
            amount(c)
        ),
        // From nothing: no factor to give.
        _ => format!("{} {} → {}", display_name(m.metric), amount(b), amount(c)),
    };
    let strength = if b > 0.0 && c > 0.0 {
        (c / b).ln().abs()
    } else {
        // Something from nothing (IPIs that never happened before).
        TOPOLOGY_STRENGTH / 2.0
    };
    Some(Line { text, strength })
}

/// `×13.9`, `×1.35`, `×0.42`.
pub fn factor(r: f64) -> String {
    if r >= 10.0 {
        format!("×{r:.1}")
    } else {
        format!("×{r:.2}")
    }
}

/// A count or an amount as the seeds write them: thousands separated by
/// commas, fractions to three significant figures.
pub fn amount(v: f64) -> String {
    if v.abs() >= 1000.0 || (v.fract() == 0.0 && v.abs() < 1e15) {
        let n = v.round() as i64;
        let digits = n.unsigned_abs().to_string();
        let mut out = String::new();
        for (i, ch) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(ch);
        }
        if n < 0 {
            out.insert(0, '-');
        }
        out
    } else {
        let digits = if v.abs() >= 100.0 {
            0
        } else if v.abs() >= 10.0 {
            1
        } else if v.abs() >= 1.0 {
            2
        } else {
            3
        };
        format!("{v:.digits$}")
    }
}

fn level(v: f64) -> String {
    format!("{v:.1}")
}

fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// Topology changes the candidate's state made that the baseline's did not,
/// one line per change, with the CPUs it happened on.
fn topology_lines(baseline: &[String], candidate: &[String]) -> Vec<Line> {
    // `cpu3: sched domain level NUMA missing after (...)` → ("sched domain
    // level NUMA missing after (...)", 3).
    let split = |s: &String| -> (String, Option<u32>) {
        match s.split_once(": ") {
            Some((cpu, rest)) if cpu.starts_with("cpu") => (rest.to_owned(), cpu[3..].parse().ok()),
            _ => (s.clone(), None),
        }
    };
    let known: std::collections::BTreeSet<String> = baseline.iter().map(|s| split(s).0).collect();
    let mut by_change: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for c in candidate {
        let (change, cpu) = split(c);
        if known.contains(&change) {
            continue;
        }
        let cpus = by_change.entry(change).or_default();
        cpus.extend(cpu);
    }
    by_change
        .into_iter()
        .map(|(change, cpus)| {
            let text = match cpus.len() {
                0 => change,
                1 => format!("{change} on cpu{}", cpus[0]),
                _ => format!("{change} on cpus {}", cpu_list(&cpus)),
            };
            Line {
                text: text.replacen(" after", " after the state was applied", 1),
                strength: TOPOLOGY_STRENGTH,
            }
        })
        .collect()
}

/// `0-3,6`: the kernel's CPU list form, as `farm_spec::CpuSet` prints it.
fn cpu_list(cpus: &[u32]) -> String {
    farm_spec::CpuSet::from_cpus(cpus.iter().copied()).to_string()
}

/// More runnable threads than CPUs on a node, on average.
fn overcommitted(n: &NodeLoad) -> bool {
    n.cpus > 0 && n.avg_runnable > f64::from(n.cpus)
}

/// Seed 003: "NUMA nodes #2 and #3 are overcommitted", on nodes that were
/// not in the baseline.
fn overcommit_line(baseline: Option<&Placement>, candidate: &Placement) -> Option<Line> {
    let was = |node: u32| {
        baseline
            .and_then(|b| b.nodes.iter().find(|n| n.node == node))
            .is_some_and(overcommitted)
    };
    let over: Vec<&NodeLoad> = candidate
        .nodes
        .iter()
        .filter(|n| overcommitted(n) && !was(n.node))
        .collect();
    if over.is_empty() {
        return None;
    }
    let nodes: Vec<String> = over.iter().map(|n| n.node.to_string()).collect();
    let threads: Vec<String> = over
        .iter()
        .map(|n| format!("{:.1}", n.avg_threads))
        .collect();
    let same_cpus = over.iter().all(|n| n.cpus == over[0].cpus);
    let text = if over.len() == 1 {
        format!(
            "node {} holds {} threads ({:.1} runnable) on {} CPUs",
            nodes[0], threads[0], over[0].avg_runnable, over[0].cpus
        )
    } else if same_cpus {
        format!(
            "nodes {} hold {} threads on {} CPUs each",
            and_list(&nodes),
            and_list(&threads),
            over[0].cpus
        )
    } else {
        let cpus: Vec<String> = over.iter().map(|n| n.cpus.to_string()).collect();
        format!(
            "nodes {} hold {} threads on {} CPUs",
            and_list(&nodes),
            and_list(&threads),
            and_list(&cpus)
        )
    };
    // As strong as the load per CPU grew on the worst node.
    let strength = over
        .iter()
        .map(|n| {
            let now = n.avg_runnable / f64::from(n.cpus);
            let before = baseline
                .and_then(|b| b.nodes.iter().find(|m| m.node == n.node))
                .map_or(1.0, |m| {
                    (m.avg_runnable / f64::from(m.cpus.max(1))).max(1e-3)
                });
            (now / before).ln().abs()
        })
        .fold(0.0, f64::max);
    Some(Line { text, strength })
}

/// The node holding most of an instance's threads.
fn home(avg: &BTreeMap<u32, f64>) -> Option<u32> {
    avg.iter()
        .filter(|(_, t)| **t > 0.0)
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(n, _)| *n)
}

/// Nodes each holding several instances, with those instances; and the
/// nodes holding none.
struct Crowding {
    shared: Vec<(u32, Vec<u32>)>,
    idle: Vec<u32>,
}

/// Instances sharing nodes while a node runs none of them, each instance at
/// the node holding most of its threads.
fn crowding(p: &Placement) -> Option<Crowding> {
    if p.nodes.len() < 2 || p.instances.len() < 2 {
        return None;
    }
    let mut on: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (instance, avg) in &p.instances {
        if let Some(node) = home(avg) {
            on.entry(node).or_default().push(*instance);
        }
    }
    let shared: Vec<(u32, Vec<u32>)> = on
        .iter()
        .filter(|(_, i)| i.len() > 1)
        .map(|(n, i)| (*n, i.clone()))
        .collect();
    let idle: Vec<u32> = p
        .nodes
        .iter()
        .filter(|n| n.cpus > 0 && !on.contains_key(&n.node))
        .map(|n| n.node)
        .collect();
    (!shared.is_empty() && !idle.is_empty()).then_some(Crowding { shared, idle })
}

/// Seed 001: "instances 3 and 4 both on NUMA node 3; node 1 idle", when the
/// baseline did not crowd its instances so.
fn crowding_line(baseline: Option<&Placement>, candidate: &Placement) -> Option<Line> {
    let Crowding { shared, idle } = crowding(candidate)?;
    if baseline.and_then(crowding).is_some() {
        return None;
    }
    let parts: Vec<String> = shared
        .iter()
        .map(|(node, instances)| {
            let names: Vec<String> = instances.iter().map(u32::to_string).collect();
            let both = if instances.len() == 2 { "both" } else { "all" };
            format!("instances {} {both} on NUMA node {node}", and_list(&names))
        })
        .collect();
    let idle: Vec<String> = idle.iter().map(u32::to_string).collect();
    let idle = if idle.len() == 1 {
        format!("node {} idle", idle[0])
    } else {
        format!("nodes {} idle", and_list(&idle))
    };
    Some(Line {
        text: format!("{}; {idle}", parts.join("; ")),
        strength: CROWDING_STRENGTH,
    })
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// A finding of a comparison in plain words; `unit` is the metric's.
pub fn finding_text(f: &Finding, unit: &str) -> String {
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {unit}")
    };
    match f {
        Finding::Spread { ratio, p_value } if !ratio.is_finite() || *ratio == 0.0 => {
            // One side did not vary at all (counts of 1 migration every run).
            let (still, moving) = if *ratio == 0.0 {
                ("candidate's", "baseline's")
            } else {
                ("baseline's", "candidate's")
            };
            format!(
                "spread: the {still} runs all gave the same value, the {moving} vary \
                 (p = {p_value:.2e})"
            )
        }
        Finding::Spread { ratio, p_value } => {
            let how = if *ratio >= 1.0 { "more" } else { "less" };
            format!(
                "spread {} the baseline's (p = {p_value:.2e}): the runs vary {how} than \
                 before, a change of its own",
                factor(*ratio)
            )
        }
        Finding::Bimodal {
            candidate,
            low,
            high,
            low_share,
        } => format!(
            "two modes in the {}: {}{unit} and {}{unit}, {:.0}% of the runs in the lower",
            if *candidate { "candidate" } else { "baseline" },
            amount(*low),
            amount(*high),
            low_share * 100.0
        ),
    }
}
