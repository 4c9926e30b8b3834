//! The competing loads' share of the machine: each load's process tree's
//! CPU time over the workload's run, read from `/proc` when the workload
//! starts and when it ends. Seed 003's question — did the two hogs take
//! the CPUs lu lost? — is answered by this figure beside lu's own.
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

/// The CPU time of the process tree at `pid`, in clock ticks; 0 once gone.
pub fn tree_ticks(root: &Path, pid: u32) -> u64 {
    let mut total = 0;
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
            total += t;
        }
        let Ok(tasks) = std::fs::read_dir(proc.join("task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                todo.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    total
}

/// The CPUs the loads used on average over `wall_s`, from their trees' CPU
/// time at the start (`before`) and the end (`after`), in ticks of
/// `user_hz`.
pub fn cpus(before: &[u64], after: &[u64], user_hz: u64, wall_s: f64) -> Option<f64> {
    if before.is_empty() || before.len() != after.len() || wall_s <= 0.0 || user_hz == 0 {
        return None;
    }
    let ticks: u64 = before
        .iter()
        .zip(after)
        .map(|(b, a)| a.saturating_sub(*b))
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

    #[test]
    fn cpus_over_the_run() {
        assert_eq!(cpus(&[100, 50], &[200, 190], 100, 2.0), Some(1.2));
        assert_eq!(cpus(&[], &[], 100, 2.0), None);
        assert_eq!(cpus(&[1], &[2], 100, 0.0), None);
    }
}
