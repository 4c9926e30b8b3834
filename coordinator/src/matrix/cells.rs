//! The product of the axes: its size checked before any cell is built, then
//! the cells, their bytes counted as they are built.

use farm_proto::{Cell, GuestShape, HostSelector, MachineState, VerdictPolicy, Workload};
use farm_spec::Kernel;
use farm_workload::catalogue::WorkloadSpec;
use prost::Message;
use toml::Spanned;

use super::baseline;
use super::location::{Checked, Issue};
use super::raw::RawMatrix;
use super::workloads::{Axis, Variant, wire_param};

/// The most runs (cells × repetitions) a matrix may have. A run costs the
/// coordinator a few hundred bytes in memory and a row in the store, written
/// in the submission's one transaction; a million is hours of a large fleet.
pub const MAX_RUNS: u64 = 1_000_000;

/// The most load copies a matrix may hold: cells × load instances per cell.
/// Each copy is a complete `Workload` (a few hundred bytes) in every cell, so
/// this keeps a matrix with loads within the memory of one without.
pub const MAX_LOAD_COPIES: u64 = 1_000_000;

/// The most bytes the cells of one matrix may take, encoded as the store
/// keeps them. Counted as they are built, so a refused matrix costs at most
/// this. Every cell repeats the values of its axes, and the coordinator
/// holds the cells in memory (about as large again as their encoding),
/// writes them in the submission's one transaction and sends them in every
/// status: 32 MiB is 10,000 cells (the default `max_cells`) of 3.3 KiB,
/// thirty times the cell of a one-workload matrix (about 100 bytes), yet
/// 24 KB of CPU lists (two lists of `CpuSet::MAX_ITEMS` items) in 10,000
/// cells would be 240 MB.
pub const MAX_EXPANDED_MATRIX_BYTES: usize = 32 << 20;

/// Refuses a matrix with more cells than `max_cells`, more runs than
/// [`MAX_RUNS`] or more load copies than [`MAX_LOAD_COPIES`], counting them
/// from the axes' lengths alone.
pub(super) fn check_size(
    raw: &RawMatrix,
    workloads: &[(&'static WorkloadSpec, Vec<Axis>)],
    other_axes: [usize; 3],
    max_cells: usize,
    repetitions: u32,
    loads_per_cell: usize,
) -> Checked<()> {
    // Saturating: ten axes of a thousand values overflow even a u128.
    let variant_count = workloads.iter().fold(0u128, |sum, (_, axes)| {
        let product = axes
            .iter()
            .fold(1u128, |p, a| p.saturating_mul(a.values.len() as u128));
        sum.saturating_add(product)
    });
    let cell_count = other_axes
        .iter()
        .fold(variant_count, |p, &n| p.saturating_mul(n as u128));
    if cell_count > max_cells as u128 {
        let span = raw.max_cells.as_ref().map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            "max_cells",
            format!(
                "the matrix has {cell_count} cells, more than the limit of {max_cells}: shrink \
                 an axis or raise max_cells"
            ),
        ));
    }
    let run_count = cell_count.saturating_mul(u128::from(repetitions));
    if run_count > u128::from(MAX_RUNS) {
        let span = raw.repetitions.as_ref().map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            "repetitions",
            format!(
                "the matrix has {run_count} runs ({cell_count} cells × {repetitions} repetitions), \
                 more than the limit of {MAX_RUNS}"
            ),
        ));
    }
    let load_copies = cell_count.saturating_mul(loads_per_cell as u128);
    if load_copies > u128::from(MAX_LOAD_COPIES) {
        let span = raw.loads.as_ref().map_or(0..0, Spanned::span);
        return Err(Issue::new(
            span,
            "loads",
            format!(
                "the matrix has {load_copies} load copies ({cell_count} cells × \
                 {loads_per_cell} load instances), more than the limit of {MAX_LOAD_COPIES}: \
                 fewer cells or fewer instances"
            ),
        ));
    }
    Ok(())
}

/// The axes whose product the cells are.
pub(super) struct Product<'a> {
    pub kernels: &'a [Kernel],
    pub variants: &'a [Variant],
    pub states: &'a [MachineState],
    pub hosts: &'a [HostSelector],
}

/// What every cell carries whatever its position.
pub(super) struct Common<'a> {
    pub loads: &'a [Workload],
    /// The `[guest]` shape, for the cells of guest kernels.
    pub guest: Option<GuestShape>,
    /// Each kernel's build (`[build]` or its `[builds.<name>]`), `None`
    /// for kernels that are not built and for the default build.
    pub builds: &'a [Option<farm_proto::KernelBuild>],
    pub verdict: &'a VerdictPolicy,
    /// A trigger's kernel, whose cells are marked `new_kernel`.
    pub new_kernel: Option<&'a str>,
}

/// The cells, kernel-major and host-minor, with their baselines; every one
/// carries the same loads and verdict policy, and those of guest kernels
/// the `[guest]` shape. Their encoded size is counted as they are built,
/// and the expansion stops as soon as it passes
/// [`MAX_EXPANDED_MATRIX_BYTES`]: long values multiplied by many cells are
/// refused having taken at most that much memory.
pub(super) fn cells(
    axes: &Product<'_>,
    common: &Common<'_>,
    baseline: Option<&baseline::Baseline>,
) -> Checked<Vec<Cell>> {
    let Product {
        kernels,
        variants,
        states,
        hosts,
    } = *axes;
    let (n_variants, n_states, n_hosts) = (variants.len(), states.len(), hosts.len());
    let total = kernels.len() * n_variants * n_states * n_hosts;
    let position = |k: usize, w: usize, s: usize, h: usize| {
        ((k * n_variants + w) * n_states + s) * n_hosts + h
    };
    let mut cells = Vec::with_capacity(total);
    let mut bytes = 0usize;
    for (k, kernel) in kernels.iter().enumerate() {
        let guest = if kernel.is_guest() {
            common.guest
        } else {
            None
        };
        let build = common.builds.get(k).cloned().flatten();
        let kernel = kernel.to_string();
        let new_kernel = common.new_kernel == Some(kernel.as_str());
        for (w, variant) in variants.iter().enumerate() {
            let workload = Workload {
                name: variant.spec.name.to_owned(),
                params: variant
                    .params
                    .iter()
                    .map(|&(name, value)| wire_param(name, value))
                    .collect(),
            };
            for (s, state) in states.iter().enumerate() {
                for (h, host) in hosts.iter().enumerate() {
                    let index = position(k, w, s, h);
                    let target = baseline.and_then(|b| {
                        let t = position(
                            b.kernel.unwrap_or(k),
                            b.variant_targets[w]?,
                            b.state.unwrap_or(s),
                            b.host.unwrap_or(h),
                        );
                        (t != index).then_some(t)
                    });
                    // Only the axes that vary name a cell; the workload always does.
                    let mut name = variant.label.clone();
                    if kernels.len() > 1 {
                        name.push_str(&format!(" | kernel={kernel}"));
                    }
                    if n_states > 1 {
                        name.push_str(&format!(" | state={}", state.name));
                    }
                    if n_hosts > 1 {
                        name.push_str(&format!(" | host={}", host.name));
                    }
                    let cell = Cell {
                        // `max_cells` keeps every index far below 2^32.
                        index: index as u32,
                        name,
                        kernel: kernel.clone(),
                        workload: Some(workload.clone()),
                        state: Some(state.clone()),
                        host: Some(host.clone()),
                        baseline: target.map(|t| t as u32),
                        loads: common.loads.to_vec(),
                        verdict: Some(common.verdict.clone()),
                        guest,
                        new_kernel,
                        build: build.clone(),
                    };
                    bytes += cell.encoded_len();
                    if bytes > MAX_EXPANDED_MATRIX_BYTES {
                        return Err(too_large(bytes, cells.len() + 1, total));
                    }
                    cells.push(cell);
                }
            }
        }
    }
    Ok(cells)
}

/// The refusal of a matrix whose first `built` of `total` cells take
/// `bytes`. It is about no one key: the product of them all is too large.
fn too_large(bytes: usize, built: usize, total: usize) -> Issue {
    Issue::new(
        0..0,
        "",
        format!(
            "the matrix expands to more than {MAX_EXPANDED_MATRIX_BYTES} bytes \
             (MAX_EXPANDED_MATRIX_BYTES): its first {built} of {total} cells take {bytes} \
             bytes; shorten the values repeated in every cell (states, hosts, parameters, \
             loads) or split the matrix"
        ),
    )
}
