//! Guest kernels built from trees: `git:<repo>@<ref>` kernels of a matrix,
//! from the operator's repositories to a bootable image in the guest cache.
//!
//! - [`trees`]: the repositories the operator allows (`--kernel-repo`), refs
//!   resolved to commits ([`Commit`]);
//! - [`user`]: the unprivileged user builds run as (`--build-user`);
//! - [`build`]: a commit built into an image with a `[build]`'s base
//!   configuration, fragment and patches, kept in the cache by a key that
//!   hashes all it depends on; [`build::progress`], the step a build is at
//!   and its estimate;
//! - [`files`]: the operator's base configurations and patches
//!   (`--build-configs`, `--build-patches`);
//! - [`range`]: a git range's first-parent commits, for bisection;
//! - [`reach`]: whether the build user can reach the cache at all;
//! - [`command`]: one git or make command, bounded in time and output.
//!
//! Every caller asks the same way: the guest executor for an image to boot
//! ([`Trees::build_reporting`]), the session for a range
//! ([`range::answer`]), the catalogue for what is kept ([`build::kept`]),
//! `farmctl run` and the agent's binary for [`Trees`] from their flags.
//! Nothing here knows about guests or runs: the cache layout it shares with
//! guest images is [`crate::cache`]'s.

pub mod build;
pub mod command;
pub mod files;
pub mod range;
pub mod reach;
pub mod trees;
pub mod user;

pub use trees::{Commit, Repo, Trees};
pub use user::{BuildUser, UserError};
