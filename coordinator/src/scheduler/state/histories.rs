//! Every cell of every live matrix by series ([`Series`]), and a cell's
//! live history point; driven by `scheduler::histories`.

use std::collections::HashMap;

use crate::ids::MatrixId;
use crate::store::RunRecord;

/// A cell of a live matrix on a series, borrowed from memory.
pub(in crate::scheduler) struct LivePoint<'a> {
    pub matrix_id: MatrixId,
    pub matrix_seq: u64,
    pub cell: crate::ids::CellIndex,
    pub submitted_ms: u64,
    pub kernel: &'a farm_spec::Kernel,
    pub runs: Vec<&'a RunRecord>,
}

/// Every cell of every matrix by series (`series_key`), as (matrix seq,
/// cell index) in submission order: a history is a lookup, not a scan of
/// every matrix, now that every ended matrix computes its own. The
/// matrices' part of the scheduler tells it of cells that come and go.
#[derive(Default)]
pub(in crate::scheduler) struct Series(
    pub(in crate::scheduler) HashMap<Vec<u8>, Vec<(u64, crate::ids::CellIndex)>>,
);

impl Series {
    /// Cell `cell` of the matrix with `seq` belongs to the series `key`.
    pub(in crate::scheduler) fn add(&mut self, key: &[u8], seq: u64, cell: crate::ids::CellIndex) {
        self.0.entry(key.to_vec()).or_default().push((seq, cell));
    }

    /// The cells of the series `key`, as (matrix seq, cell index).
    pub(in crate::scheduler) fn cells(
        &self,
        key: &[u8],
    ) -> impl Iterator<Item = (u64, crate::ids::CellIndex)> + '_ {
        self.0.get(key).into_iter().flatten().copied()
    }

    /// The matrix with `seq`, whose cells' series are `keys`, is gone (archived).
    pub(in crate::scheduler) fn forget(&mut self, keys: &[Vec<u8>], seq: u64) {
        for key in keys {
            if let Some(cells) = self.0.get_mut(key) {
                cells.retain(|&(s, _)| s != seq);
                if cells.is_empty() {
                    self.0.remove(key);
                }
            }
        }
    }
}
