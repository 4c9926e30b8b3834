//! The coordinator's own cell: one point of a matrix's product, held as
//! the shared vocabulary's types (`farm_spec`), not as the wire's strings.
//!
//! A cell enters the coordinator twice: from a matrix file at submission
//! (`crate::matrix` expands the file into wire cells and converts each
//! here) and from the store when a leader loads it (`crate::store`). Both
//! convert with [`Cell::try_from`], once; everything inside — eligibility,
//! series keys, bisections, results — works on the types, and a value that
//! cannot be read is an error where it enters (a stored matrix whose cell
//! no longer converts is failed with the reason), never a requirement no
//! agent meets. The wire form is made again with `From` where a cell
//! leaves: to an agent with its run, into the store, in a status.
//!
//! The workload, its loads and the verdict policy keep the wire's messages:
//! they were checked against the catalogue and the limits at submission,
//! and nothing inside parses them.

use farm_proto::{VerdictPolicy, Workload};
use farm_spec::{Executor, GuestShape, Kernel, KernelBuild, MachineState};

/// A cell of a matrix, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub index: crate::ids::CellIndex,
    /// Human-readable coordinates, e.g. `lu(size=48,threads=2) kernel=running
    /// state=default host=any`.
    pub name: String,
    pub kernel: Kernel,
    pub workload: Option<Workload>,
    pub state: Option<MachineState>,
    pub host: Option<HostSelector>,
    /// The index of the cell this one is compared with; `None` for
    /// baselines themselves.
    pub baseline: Option<crate::ids::CellIndex>,
    /// Competing programs started before the workload, one per instance.
    pub loads: Vec<Workload>,
    pub verdict: Option<VerdictPolicy>,
    /// The guest a guest kernel boots in; `None`: the agent's default.
    pub guest: Option<GuestShape>,
    /// A kernel a schedule's trigger added, not one of the file's.
    pub new_kernel: bool,
    /// How a `git:` kernel is built; `None` for other kernels and for the
    /// default build.
    pub build: Option<KernelBuild>,
}

/// What a cell asks of the host it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSelector {
    pub name: String,
    /// `uname -m` of the agent; `None`: any arch.
    pub arch: Option<String>,
    pub min_cpus: u32,
    pub min_numa_nodes: u32,
    /// `None`: any executor.
    pub executor: Option<Executor>,
}

/// A wire cell that does not convert: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cell {index}: {field}: {why}")]
pub struct Error {
    pub index: u32,
    pub field: &'static str,
    pub why: String,
}

impl TryFrom<&farm_proto::Cell> for Cell {
    type Error = Error;

    fn try_from(c: &farm_proto::Cell) -> Result<Cell, Error> {
        let error = |field: &'static str, why: String| Error {
            index: c.index,
            field,
            why,
        };
        let kernel = c
            .kernel
            .parse::<Kernel>()
            .map_err(|e| error("kernel", e.to_string()))?;
        let state = c
            .state
            .as_ref()
            .map(MachineState::try_from)
            .transpose()
            .map_err(|e| error("state", e.to_string()))?;
        let host = match &c.host {
            None => None,
            Some(h) => Some(HostSelector {
                name: h.name.clone(),
                arch: (!h.arch.is_empty()).then(|| h.arch.clone()),
                min_cpus: h.min_cpus,
                min_numa_nodes: h.min_numa_nodes,
                executor: match h.executor.as_str() {
                    "" => None,
                    e => Some(
                        e.parse::<Executor>()
                            .map_err(|e| error("host.executor", e.to_string()))?,
                    ),
                },
            }),
        };
        let build = c
            .build
            .as_ref()
            .map(KernelBuild::try_from)
            .transpose()
            .map_err(|e| error("build", e.to_string()))?;
        Ok(Cell {
            index: crate::ids::CellIndex::new(c.index),
            name: c.name.clone(),
            kernel,
            workload: c.workload.clone(),
            state,
            host,
            baseline: c.baseline.map(crate::ids::CellIndex::new),
            loads: c.loads.clone(),
            verdict: c.verdict.clone(),
            guest: c.guest.as_ref().map(GuestShape::from),
            new_kernel: c.new_kernel,
            build,
        })
    }
}

impl From<&Cell> for farm_proto::Cell {
    fn from(c: &Cell) -> farm_proto::Cell {
        farm_proto::Cell {
            index: c.index.get(),
            name: c.name.clone(),
            kernel: c.kernel.to_string(),
            workload: c.workload.clone(),
            state: c.state.as_ref().map(farm_proto::MachineState::from),
            host: c.host.as_ref().map(|h| farm_proto::HostSelector {
                name: h.name.clone(),
                arch: h.arch.clone().unwrap_or_default(),
                min_cpus: h.min_cpus,
                min_numa_nodes: h.min_numa_nodes,
                executor: h.executor.map(|e| e.to_string()).unwrap_or_default(),
            }),
            baseline: c.baseline.map(crate::ids::CellIndex::get),
            loads: c.loads.clone(),
            verdict: c.verdict.clone(),
            guest: c.guest.as_ref().map(farm_proto::GuestShape::from),
            new_kernel: c.new_kernel,
            build: c.build.as_ref().map(farm_proto::KernelBuild::from),
        }
    }
}

/// A matrix's cells converted, or the first that does not convert.
pub fn all(cells: &[farm_proto::Cell]) -> Result<Vec<Cell>, Error> {
    cells.iter().map(Cell::try_from).collect()
}

/// A matrix's cells as the wire and the store keep them.
pub fn wire(cells: &[Cell]) -> Vec<farm_proto::Cell> {
    cells.iter().map(farm_proto::Cell::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_cell() -> farm_proto::Cell {
        farm_proto::Cell {
            index: 3,
            name: "hackbench kernel=git:linux@v6.1".into(),
            kernel: "git:linux@v6.1".into(),
            state: Some(farm_proto::MachineState {
                name: "half".into(),
                hotplug: "offline:1".into(),
                sched_features: vec!["NO_PLACE_LAG".into()],
                ..Default::default()
            }),
            host: Some(farm_proto::HostSelector {
                name: "big".into(),
                arch: "x86_64".into(),
                min_cpus: 2,
                min_numa_nodes: 1,
                executor: "tcg".into(),
            }),
            baseline: Some(0),
            build: Some(farm_proto::KernelBuild {
                config: "defconfig".into(),
                fragments: vec!["CONFIG_SCHED_DEBUG=y".into()],
                patches: vec![],
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_cell_converts_once_and_goes_back_to_the_same_wire_form() {
        let w = wire_cell();
        let c = Cell::try_from(&w).unwrap();
        assert_eq!(c.kernel.to_string(), "git:linux@v6.1");
        assert_eq!(c.host.as_ref().unwrap().executor, Some(Executor::Tcg));
        assert_eq!(
            c.state
                .as_ref()
                .unwrap()
                .hotplug
                .as_ref()
                .unwrap()
                .to_string(),
            "offline:1"
        );
        assert_eq!(farm_proto::Cell::from(&c), w);
    }

    #[test]
    fn a_cell_that_does_not_convert_names_its_index_and_field() {
        let mut w = wire_cell();
        w.state.as_mut().unwrap().hotplug = "sideways:1".into();
        let e = Cell::try_from(&w).unwrap_err();
        assert_eq!((e.index, e.field), (3, "state"));
        assert!(e.to_string().starts_with("cell 3: state: "), "{e}");
        let mut w = wire_cell();
        w.host.as_mut().unwrap().executor = "warp".into();
        assert_eq!(Cell::try_from(&w).unwrap_err().field, "host.executor");
        let mut w = wire_cell();
        w.kernel = String::new();
        assert_eq!(all(&[wire_cell(), w]).unwrap_err().field, "kernel");
    }
}
