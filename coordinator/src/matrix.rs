//! Matrix files: parsing, validation, and expansion into cells and runs.
//!
//! Pure logic: the caller reads the file and passes its text; [`parse`] gives
//! back a [`Matrix`] whose cells are the cartesian product of its axes, or an
//! [`Error`] naming file, line, column and key. [`runs`] lists the runs of a
//! matrix in the order they should be dispatched.
//!
//! The file format, how cells are named and expanded, what loads do and the
//! limits are documented in `docs/MATRIX.md`. Here the submodules follow the
//! file: `raw` is its shape as serde reads it, one module checks each axis
//! or table (`kernels`, `workloads`, `loads`, `states`, `hosts`, `guest`,
//! `verdict`, `schedule`, `baseline`, `build` with `builds`), `checks` holds
//! the checks they share, `cells` builds the product, and `location` defines
//! [`Error`] and turns a byte span into its line, column and key. Each limit
//! lives in the module that checks it; this one re-exports them. Submodules
//! import one another, never this module: it sits above them all.

mod baseline;
mod build;
mod cells;
mod checks;
mod guest;
mod hosts;
mod kernels;
mod loads;
mod location;
mod raw;
mod schedule;
mod states;
#[cfg(test)]
mod tests;
mod verdict;
mod workloads;

use std::ops::RangeInclusive;

use crate::cell::Cell;

pub use self::cells::{MAX_EXPANDED_MATRIX_BYTES, MAX_LOAD_COPIES, MAX_RUNS};
pub use self::checks::MAX_NAME_BYTES;
pub use self::loads::{LOAD_SECONDS, MAX_LOADS_PER_CELL};
pub use self::location::{Error, MAX_KEY_BYTES, MAX_MESSAGE_BYTES, Result};
pub use self::schedule::Schedule;

use self::cells::{Common, Product, cells, check_size};
use self::checks::{bounded, non_empty_axis};
use self::guest::{guest_limits, guest_shape};
use self::hosts::{executors_fit, hosts};
use self::kernels::kernels;
use self::loads::loads;
use self::location::{Checked, Issue};
use self::raw::RawMatrix;
use self::schedule::schedule;
use self::states::states;
use self::verdict::verdict_policy;
use self::workloads::{variants, workload_axes};

/// The default limit on the number of cells of one matrix (`max_cells`).
pub const DEFAULT_MAX_CELLS: usize = 10_000;

const MAX_CELLS: RangeInclusive<i64> = 1..=1_000_000;
const REPETITIONS: RangeInclusive<i64> = 1..=1000;
const TIMEOUT_S: RangeInclusive<i64> = 1..=604_800;
const DEFAULT_REPETITIONS: u32 = 1;
const DEFAULT_TIMEOUT_S: u32 = 3600;

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

/// One run of one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    pub cell_index: crate::ids::CellIndex,
    pub repetition: u32,
    /// Dispatch order, from 0.
    pub seq: u64,
}

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

fn build(raw: &RawMatrix, new_kernel: Option<&str>) -> Checked<Matrix> {
    let name = checks::name(&raw.name, "name")?;
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
    let added = kernels::add_new_kernel(raw, &mut kernels, new_kernel)?;
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
    states::cmdline_fits(raw, &kernels, &states)?;

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
            let names: Vec<String> = kernels.iter().map(ToString::to_string).collect();
            let axes = baseline::Axes {
                kernels: &names,
                states: &states,
                hosts: &hosts,
                variants: &variants,
            };
            Some(baseline::resolve(b, &axes)?)
        }
    };
    let policy = verdict_policy(raw.verdict.as_ref(), repetitions)?;
    let guest = guest_shape(raw, &kernels)?;
    schedule::bisectable(raw, schedule.as_ref(), &kernels)?;
    let builds: Vec<Option<farm_proto::KernelBuild>> = build::builds(raw, &kernels)?
        .iter()
        .map(|b| b.as_ref().map(farm_proto::KernelBuild::from))
        .collect();
    let product = Product {
        kernels: &kernels,
        variants: &variants,
        states: &states,
        hosts: &hosts,
    };
    let common = Common {
        loads: &loads,
        guest,
        builds: &builds,
        verdict: &policy,
        new_kernel: added,
    };
    let wire = cells(&product, &common, baseline.as_ref())?;
    // The one conversion of a submitted cell into the coordinator's types:
    // the values were checked above, so a failure is a bug of this module,
    // refused like any other issue rather than stored.
    let cells = crate::cell::all(&wire).map_err(|e| Issue::new(0..0, "", e.to_string()))?;
    Ok(Matrix {
        name,
        repetitions,
        timeout_s,
        cells,
        schedule,
    })
}
