//! The competing loads' share of the machine: each load's process tree's
//! CPU time over the workload's run, and where its threads were, read from
//! `/proc` when the workload starts and when it ends. Seed 003's question —
//! did the two hogs take the CPUs lu lost? — is answered by the first beside
//! lu's own; the second says on which NUMA nodes they competed (seed 001:
//! a load crowding the workload's node while another idles).
//!
//! A tree's CPU time is, over its live processes, `utime + stime` (every
//! thread's) plus `cutime + cstime` (children already reaped): a child that
//! exits between the two readings moves from the first term to its
//! parent's second, and is counted once.

use std::path::Path;

/// Processes walked in one tree at most: a load is one program and its
/// workers, not a fork bomb to follow.
const MAX_TREE: usize = 4096;

/// `utime stime cutime cstime` (fields 14–17) of a `stat` line, summed.
fn stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    // After the comm: state is field 3, so field n is f[n - 3].
    (11..=14)
        .map(|i| f.get(i)?.parse::<u64>().ok())
        .sum::<Option<u64>>()
}

/// One reading of a load's process tree: its CPU time in clock ticks, and
/// the CPU each of its live threads was last on (field 39 of its `stat`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    pub ticks: u64,
    pub cpus: Vec<u32>,
}

/// The field after `stat`'s comm that holds the processor: field 39 is
/// the 37th word after the `)`.
const PROCESSOR_WORD: usize = 36;

fn processor(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace()
        .nth(PROCESSOR_WORD)?
        .parse()
        .ok()
}

/// The process tree at `pid` now; empty once gone.
pub fn tree(root: &Path, pid: u32) -> Tree {
    let mut out = Tree::default();
    let mut todo = vec![pid];
    let mut seen = 0;
    while let Some(p) = todo.pop() {
        seen += 1;
        if seen > MAX_TREE {
            break;
        }
        let proc = root.join(format!("proc/{p}"));
        if let Some(t) = std::fs::read_to_string(proc.join("stat"))
            .ok()
            .and_then(|s| stat_ticks(&s))
        {
            out.ticks += t;
        }
        let Ok(tasks) = std::fs::read_dir(proc.join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Some(cpu) = std::fs::read_to_string(task.path().join("stat"))
                .ok()
                .and_then(|s| processor(&s))
            {
                out.cpus.push(cpu);
            }
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    out
}

/// The loads' threads on each of `nodes`, averaged over the readings at
/// the start and the end (`before`, `after`: one [`Tree`] per load), by
/// `node_of` (a CPU's node). Every node is there, 0 where none was: a
/// baseline with nobody on a node compares with a candidate crowding it.
pub fn threads_per_node(
    before: &[Tree],
    after: &[Tree],
    nodes: impl Iterator<Item = u32>,
    node_of: impl Fn(u32) -> Option<u32>,
) -> std::collections::BTreeMap<u32, f64> {
    let mut per_node: std::collections::BTreeMap<u32, f64> = nodes.map(|n| (n, 0.0)).collect();
    for t in before.iter().chain(after) {
        for &cpu in &t.cpus {
            if let Some(node) = node_of(cpu) {
                *per_node.entry(node).or_insert(0.0) += 0.5;
            }
        }
    }
    per_node
}

/// The CPUs the loads used on average over `wall_s`, from their trees' CPU
/// time at the start (`before`) and the end (`after`), in ticks of
/// `user_hz`.
pub fn cpus(before: &[Tree], after: &[Tree], user_hz: u64, wall_s: f64) -> Option<f64> {
    if before.is_empty() || before.len() != after.len() || wall_s <= 0.0 || user_hz == 0 {
        return None;
    }
    let ticks: u64 = before
        .iter()
        .zip(after)
        .map(|(b, a)| a.ticks.saturating_sub(b.ticks))
        .sum();
    Some(ticks as f64 / user_hz as f64 / wall_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_lines_times_are_summed() {
        // utime 100, stime 20, cutime 7, cstime 3; a comm with a space and a ')'.
        let line = "42 (a) b) S 1 42 42 0 -1 4194560 10 0 0 0 100 20 7 3 20 0 1 0 5 0 0";
        assert_eq!(stat_ticks(line), Some(130));
        assert_eq!(stat_ticks("42 (x) S 1"), None);
    }

    fn t(ticks: u64, cpus: &[u32]) -> Tree {
        Tree {
            ticks,
            cpus: cpus.to_vec(),
        }
    }

    #[test]
    fn cpus_over_the_run() {
        let (b, a) = ([t(100, &[]), t(50, &[])], [t(200, &[]), t(190, &[])]);
        assert_eq!(cpus(&b, &a, 100, 2.0), Some(1.2));
        assert_eq!(cpus(&[], &[], 100, 2.0), None);
        assert_eq!(cpus(&[t(1, &[])], &[t(2, &[])], 100, 0.0), None);
    }

    #[test]
    fn the_processor_is_field_39() {
        let line = "7 (a b) R 1 7 7 0 -1 4194560 0 0 0 0 11 12 0 0 20 0 1 0 5 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
        assert_eq!(processor(line), Some(3));
        assert_eq!(processor("7 (x) S 1"), None);
    }

    #[test]
    fn threads_are_counted_per_node_over_both_readings() {
        // CPUs 0-1 on node 0, 2-3 on node 1; CPU 9 unknown.
        let node_of = |cpu: u32| (cpu < 4).then_some(cpu / 2);
        // Two loads: one of 2 threads moving from node 0 to node 1, one
        // of 1 thread on node 1 throughout.
        let before = [t(0, &[0, 1]), t(0, &[3])];
        let after = [t(0, &[2, 9]), t(0, &[3])];
        let per_node = threads_per_node(&before, &after, 0..3, node_of);
        assert_eq!(
            per_node.into_iter().collect::<Vec<_>>(),
            [(0, 1.0), (1, 1.5), (2, 0.0)]
        );
    }
}
