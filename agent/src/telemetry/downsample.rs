//! A run's result within [`RESULT_BUDGET_BYTES`]: its placement series
//! thinned when they make it larger. Pure.
//!
//! The series grow with a run's length and its instances: a tick per sweep
//! (every 100 ms) in `Telemetry.series`, in each of the first 64 instances'
//! `series` and in each instance's `numa_nodes` line. A 10-minute `stream`
//! run of 64 instances has 6,000 ticks in each, several MiB in all, more
//! than a message to the coordinator may carry. [`to_budget`] then keeps an
//! even selection of each series' ticks, the first and the last included,
//! as few fewer as it takes, and says so in `Telemetry.downsampled_from`.
//!
//! Why ticks are picked rather than adjacent ones merged: a tick kept is a
//! sample as it was taken, whole threads per node and a node per thread in
//! `numa_nodes`, where a merged one would be a mean that no sweep saw (and
//! `numa_nodes` has no mean). What is averaged over the run (the averages
//! per node and per instance, the peaks, wasted cores) was computed from
//! every tick before and is not touched. Each tick keeps its `t_ms`, so the
//! spacing shows; the report averages ticks into at most 160 columns per
//! heat map, which an even selection of hundreds of ticks fills alike. What
//! is lost is a spike shorter than the new spacing in the heat maps.

use farm_proto::{RunResult, Telemetry};
use prost::Message;

/// The size a result is thinned to. A quarter of
/// `farm_proto::MAX_AGENT_MESSAGE_BYTES` (4 MiB), the most one message may
/// carry: the rest is room for what else the result holds and its
/// envelope. More would buy nothing: the coordinator keeps every result, in
/// memory and in SQLite, and the report draws at most 160 columns of a
/// series, while 1 MiB keeps 803 ticks (one per 750 ms) of a 10-minute
/// run's series of 64 instances on 4 nodes.
pub const RESULT_BUDGET_BYTES: usize = 1 << 20;

/// Fewer than this many ticks per series are never kept: the first and the
/// last.
const MIN_TICKS: usize = 2;

/// Thins the telemetry's series until `result` encodes in at most
/// `budget` bytes, keeping as many ticks as fit; a result within it is left
/// alone. A result that does not fit even with [`MIN_TICKS`] per series is
/// left with them (the session fails it if it is over the message limit).
pub fn to_budget(result: &mut RunResult, budget: usize) {
    let mut size = result.encoded_len();
    if size <= budget {
        return;
    }
    let Some(whole) = result.telemetry.take() else {
        return;
    };
    let ticks = longest(&whole);
    let mut keep = ticks;
    while keep > MIN_TICKS {
        // The series are most of an oversized result: their ticks shrink
        // in proportion, and by one at least, so that this ends.
        let scaled = (keep as u128 * budget as u128 / size as u128) as usize;
        keep = scaled.clamp(MIN_TICKS, keep - 1);
        let mut thinned = whole.clone();
        thin_telemetry(&mut thinned, keep);
        result.telemetry = Some(thinned);
        size = result.encoded_len();
        if size <= budget {
            return;
        }
    }
    if result.telemetry.is_none() {
        // No series of more than MIN_TICKS ticks: nothing to thin.
        result.telemetry = Some(whole);
    }
}

/// The ticks of the longest series: `Telemetry.series` or `runqueue`, an instance's
/// `series`, or the ticks of its `numa_nodes` line.
pub fn longest(t: &Telemetry) -> usize {
    t.instances
        .iter()
        .flat_map(|i| [i.series.len(), line_ticks(&i.numa_nodes).count()])
        .chain([t.series.len(), t.runqueue.len()])
        .max()
        .unwrap_or(0)
}

/// Thins every series of `t` to at most `keep` ticks (see [`thin`]) and
/// records in `downsampled_from` how many the longest had, when that was
/// more.
pub fn thin_telemetry(t: &mut Telemetry, keep: usize) {
    let ticks = longest(t);
    if ticks <= keep {
        return;
    }
    t.series = thin(&t.series, keep);
    t.runqueue = thin(&t.runqueue, keep);
    for i in &mut t.instances {
        i.series = thin(&i.series, keep);
        let kept = thin(&line_ticks(&i.numa_nodes).collect::<Vec<_>>(), keep);
        i.numa_nodes = kept.join(" ");
    }
    // A series over u32::MAX ticks would be 13 years at 100 ms.
    t.downsampled_from = u32::try_from(ticks).unwrap_or(u32::MAX);
}

/// An even selection of at most `keep` of `points` (at least two), in
/// order, the first and the last always among them: point
/// `⌊j·(n−1)/(keep−1)⌋` for each `j < keep`, distinct because the step is
/// at least 1.
pub fn thin<T: Clone>(points: &[T], keep: usize) -> Vec<T> {
    let n = points.len();
    let keep = keep.max(MIN_TICKS);
    if n <= keep {
        return points.to_vec();
    }
    (0..keep)
        .map(|j| points[j * (n - 1) / (keep - 1)].clone())
        .collect()
}

/// The ticks of a `numa_nodes` line: separated by single spaces, as
/// `placement::InstanceSummary::numa_nodes_line` renders them.
fn line_ticks(line: &str) -> impl Iterator<Item = &str> {
    line.split(' ').filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests;
