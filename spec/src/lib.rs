//! The farm's shared vocabulary as types, parsed once where a string enters.
//!
//! A matrix file, an RPC or a file in `/sys` gives strings; the coordinator
//! and the agent each turn them into these types at their edge (the wire
//! keeps its strings) and work on the types inside. One parser per word means
//! the two sides can never disagree about what a kernel flavour, a CPU list
//! or a `cpu.max` is.
//!
//! # Layout
//! - [`cpuset`]: [`CpuSet`], CPU numbers as merged ranges with a size cap.
//! - [`hotplug`]: [`HotplugPlan`] (`cycle:CPUS`, `offline:CPUS`).
//! - [`cgroup`]: [`CgroupShape`], [`CpuWeight`], [`CpuMax`].
//! - [`sched`]: scheduler knobs: [`SchedFeatures`], [`SchedTunables`],
//!   [`NumaBalancing`], a guest's [`KernelCmdline`].
//! - [`state`]: [`MachineState`], [`StateKind`], [`Autogroup`].
//! - [`commit`]: [`CommitId`], a commit as git prints a resolved ref.
//! - [`build`]: [`KernelBuild`], how a `git:` kernel is built (`[build]`).
//! - [`kernel`]: [`Kernel`] (`running`, a release, `debian:`, `file:`) and [`Arch`].
//! - [`executor`]: [`Executor`] (`host`, `tcg`, `kvm`).
//! - [`guest`]: a guest machine's [`GuestShape`], its per-arch defaults and
//!   limits.
//! - [`metric`]: metric names, [`Direction`], which metrics are primary.
//! - [`progress`]: what a run is doing before its workload: a kernel
//!   build's [`progress::BuildStep`], elapsed time and estimate.
//!
//! Every type has `FromStr` and a `Display` that gives back a string the
//! parser takes again (the canonical form), and names its limits as
//! constants. Errors quote at most a short prefix of a bad value
//! ([`excerpt`]), so a 20 KB value never becomes a 20 KB message.
#![forbid(unsafe_code)]

pub mod build;
pub mod cgroup;
pub mod commit;
pub mod cpuset;
pub mod executor;
pub mod guest;
pub mod hotplug;
pub mod kernel;
pub mod metric;
pub mod progress;
pub mod sched;
pub mod state;

pub use build::{BaseConfig, ConfigOption, FileName, KernelBuild};
pub use cgroup::{CgroupShape, CpuMax, CpuWeight};
pub use commit::CommitId;
pub use cpuset::CpuSet;
pub use executor::Executor;
pub use guest::GuestShape;
pub use hotplug::{HotplugMode, HotplugPlan};
pub use kernel::{Arch, DebianKernel, GitKernel, Kernel, KernelPath};
pub use metric::Direction;
pub use sched::{KernelCmdline, NumaBalancing, SchedFeatures, SchedTunables, Tunable};
pub use state::{Autogroup, CgroupSpec, MachineState, StateKind};

/// The most characters of a bad value an error message quotes.
pub const EXCERPT_CHARS: usize = 40;

/// `s`, or its first [`EXCERPT_CHARS`] characters and `…` when it is longer:
/// what an error message may quote of a value it refuses.
pub fn excerpt(s: &str) -> String {
    match s.char_indices().nth(EXCERPT_CHARS) {
        None => s.to_owned(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
}
