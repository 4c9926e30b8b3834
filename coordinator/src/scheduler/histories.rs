//! Histories: every cell of every matrix by series, and each cell's
//! history over the matrices of its series.
//!
//! Invariant: `series` lists every cell of every matrix in memory under
//! its `series_key` (which each matrix keeps per cell), in submission
//! order; a history is a lookup there, not a scan of every matrix. Ended
//! matrices leave memory for the archive (`crate::archive`), where their
//! points are found by the same key.

use std::collections::HashSet;

use super::state::histories::LivePoint;
use super::{MatrixMem, Scheduler};
use crate::results;

impl Scheduler {
    /// Each cell's series in memory: the same cell (workload, state,
    /// loads, host class; any kernel, any name) in every live matrix,
    /// oldest first, and by cell order within a matrix (kernel-major, so a
    /// kernel axis reads in the order the file gave), with the series' key:
    /// its archived points are read by the results worker
    /// (`results::merge`). A series shared by several cells of `m` (they
    /// differ only in their kernel) is given to the first of them; the
    /// others get `None`.
    pub(super) fn series_of<'a>(
        &'a self,
        m: &'a MatrixMem,
    ) -> Vec<Option<(&'a [u8], Vec<LivePoint<'a>>)>> {
        let mut given: HashSet<&[u8]> = HashSet::new();
        m.series_keys
            .iter()
            .map(|key| {
                if !given.insert(key.as_slice()) {
                    return None;
                }
                let mut cells: Vec<(u64, &MatrixMem, crate::ids::CellIndex)> = self
                    .series
                    .cells(key)
                    .filter_map(|(seq, index)| {
                        let mm = self.by_seq.get(&seq).and_then(|id| self.matrices.get(id))?;
                        Some((seq, mm, index))
                    })
                    .collect();
                cells.sort_by_key(|(seq, _, index)| (*seq, *index));
                let points = cells
                    .iter()
                    .map(|&(seq, mm, index)| LivePoint {
                        matrix_id: mm.rec.id,
                        matrix_seq: seq,
                        cell: index,
                        submitted_ms: mm.rec.submitted_ms,
                        kernel: &mm.rec.cells[index.at()].kernel,
                        runs: mm.by_cell[index.at()]
                            .iter()
                            .filter_map(|id| self.runs.get(id))
                            .map(|r| &r.rec)
                            .collect(),
                    })
                    .collect();
                Some((key.as_slice(), points))
            })
            .collect()
    }
}

impl LivePoint<'_> {
    /// The point as a history reads it: its medians.
    pub(super) fn point(&self) -> results::Point {
        results::Point {
            matrix_id: self.matrix_id,
            matrix_seq: self.matrix_seq,
            cell: self.cell,
            submitted_ms: self.submitted_ms,
            kernel: self.kernel.to_string(),
            medians: results::medians(&self.runs),
        }
    }
}

/// What makes two cells of different matrices points of one series: the
/// workload and its parameters, the machine state, the competing loads and
/// the host selector, without the names a file gives states and hosts.
pub(super) fn series_key(cell: &crate::cell::Cell) -> Vec<u8> {
    use prost::Message;
    // In the wire form the store and the archive have always keyed
    // series by: a key must not change when the coordinator's types do.
    let mut state = cell
        .state
        .as_ref()
        .map(farm_proto::MachineState::from)
        .unwrap_or_default();
    state.name.clear();
    let mut host = farm_proto::Cell::from(cell).host.unwrap_or_default();
    host.name.clear();
    // A guest kernel's arch and machine are part of what a point measures:
    // an s390x figure does not continue an x86_64 trend.
    // A `file:` image's arch is the image's: a series of its own.
    let guest_arch = cell.kernel.history_class().as_bytes().to_vec();
    let mut key = Vec::new();
    for part in [
        cell.workload.clone().unwrap_or_default().encode_to_vec(),
        state.encode_to_vec(),
        host.encode_to_vec(),
        guest_arch,
        farm_proto::GuestShape::from(&cell.guest.unwrap_or_default()).encode_to_vec(),
        // New kernels of a trigger trend apart from a file's fixed kernels,
        // which run again beside each of them.
        vec![u8::from(cell.new_kernel)],
        cell.loads
            .iter()
            .flat_map(|l| l.encode_length_delimited_to_vec())
            .collect(),
    ] {
        key.extend((part.len() as u32).to_le_bytes());
        key.extend(part);
    }
    // Another configuration or patch is another kernel. Added only when
    // set, so that the series of matrices without a [build] keep their keys.
    if let Some(b) = &cell.build {
        let part = farm_proto::KernelBuild::from(b).encode_to_vec();
        key.extend((part.len() as u32).to_le_bytes());
        key.extend(part);
    }
    key
}
