//! Cgroup layouts (seed 003): `shared` puts the measured workload and its
//! competing load in one group; `separate` gives each program a group of its
//! own. Works on cgroup v1 (the cpu and cpuset hierarchies), v2, and the
//! hybrid layout (v1 controllers beside an empty cgroup2 tree), where the v1
//! controllers are the ones that act.
//!
//! Groups live under `<hierarchy>/farm/<run>/`; every one we create is
//! journalled first and removed on restore, together with whatever is
//! still inside.

use std::fs;
use std::path::{Path, PathBuf};

use farm_proto::{Capabilities, CgroupLayout};
use farm_spec::{CgroupShape, CgroupSpec};

use super::error::Result;
use super::files::write;
use super::journal::{self, Entry, Journal};

/// Where the processes of a run go: one list of `cgroup.procs` files per
/// program (the measured workload first, then each competing load). Empty
/// lists mean "stay where the agent is".
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Placement {
    pub workload: Vec<PathBuf>,
    pub loads: Vec<Vec<PathBuf>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// v1 controllers (also on the hybrid layout).
    V1 {
        cpuset: bool,
    },
    V2,
}

impl Layout {
    pub fn of(caps: &Capabilities) -> Option<Layout> {
        let has = |list: &[String], c: &str| list.iter().any(|x| x == c);
        match CgroupLayout::try_from(caps.cgroup_layout).ok()? {
            CgroupLayout::V1 | CgroupLayout::Hybrid if has(&caps.cgroup_v1_controllers, "cpu") => {
                Some(Layout::V1 {
                    cpuset: has(&caps.cgroup_v1_controllers, "cpuset"),
                })
            }
            CgroupLayout::V2 if has(&caps.cgroup_v2_controllers, "cpu") => Some(Layout::V2),
            _ => None,
        }
    }
}

fn sanitize(tag: &str) -> String {
    tag.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Creates the run's groups, each with the spec's limits, and returns
/// where each program goes.
pub fn create(
    journal: &mut Journal,
    root: &Path,
    layout: Layout,
    spec: &CgroupSpec,
    tag: &str,
    loads: usize,
) -> Result<Placement> {
    let names: Vec<String> = match spec.shape {
        CgroupShape::Shared => vec!["shared".into()],
        CgroupShape::Separate => std::iter::once("workload".to_string())
            .chain((0..loads).map(|i| format!("load{i}")))
            .collect(),
    };
    let base = root.join("sys/fs/cgroup");
    let tag = sanitize(tag);
    let mut procs: Vec<Vec<PathBuf>> = Vec::new();
    for name in &names {
        let mut files = Vec::new();
        match layout {
            Layout::V1 { cpuset } => {
                let dir = base.join("cpu/farm").join(&tag).join(name);
                make_group(journal, &dir, false)?;
                if let Some(w) = spec.weight {
                    write(&dir.join("cpu.shares"), &w.v1_shares().to_string())?;
                }
                if let Some(max) = spec.max {
                    write(&dir.join("cpu.cfs_period_us"), &max.period_us().to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &max.quota_us().to_string())?;
                }
                files.push(dir.join("cgroup.procs"));
                if let Some(cpus) = &spec.cpuset {
                    if !cpuset {
                        return Err(super::error::Error::Refused {
                            state: tag.clone(),
                            why: "no cpuset controller mounted".into(),
                        });
                    }
                    let dir = base.join("cpuset/farm").join(&tag).join(name);
                    make_group(journal, &dir, true)?;
                    write(&dir.join("cpuset.cpus"), &cpus.to_string())?;
                    files.push(dir.join("cgroup.procs"));
                }
            }
            Layout::V2 => {
                let dir = base.join("farm").join(&tag).join(name);
                let controllers: &[&str] = if spec.cpuset.is_some() {
                    &["cpu", "cpuset"]
                } else {
                    &["cpu"]
                };
                enable_v2(journal, &base, controllers)?;
                make_group(journal, &dir, false)?;
                // A v2 controller acts in a group only when its parent
                // enables it for its children: `farm` and `farm/<run>` are
                // ours (removed on restore), so no journal entry is needed.
                for parent in [base.join("farm"), base.join("farm").join(&tag)] {
                    for c in controllers {
                        write(&parent.join("cgroup.subtree_control"), &format!("+{c}"))?;
                    }
                }
                if let Some(w) = spec.weight {
                    write(&dir.join("cpu.weight"), &w.to_string())?;
                }
                if let Some(max) = spec.max {
                    write(&dir.join("cpu.max"), &max.to_string())?;
                }
                if let Some(cpus) = &spec.cpuset {
                    write(&dir.join("cpuset.cpus"), &cpus.to_string())?;
                }
                files.push(dir.join("cgroup.procs"));
            }
        }
        procs.push(files);
    }
    Ok(match spec.shape {
        CgroupShape::Shared => Placement {
            workload: procs[0].clone(),
            loads: vec![procs[0].clone(); loads],
        },
        CgroupShape::Separate => Placement {
            workload: procs[0].clone(),
            loads: procs[1..].to_vec(),
        },
    })
}

/// Journals and creates `dir` and any missing `farm` parents. A v1 cpuset
/// group is unusable until it has cpus and mems, so new ones copy their
/// parent's.
fn make_group(journal: &mut Journal, dir: &Path, v1_cpuset: bool) -> Result<()> {
    // Parents first, top-down, each journalled before it is made.
    let mut chain: Vec<&Path> = dir
        .ancestors()
        .take_while(|d| d.to_string_lossy().contains("/farm"))
        .collect();
    chain.reverse();
    for d in chain {
        if d.exists() {
            continue;
        }
        journal.record(&Entry::Cgroup {
            path: d.to_path_buf(),
        })?;
        fs::create_dir(d).map_err(|source| super::error::Error::Io {
            path: d.into(),
            source,
        })?;
        journal::step("cgroup created");
        if v1_cpuset && let Some(parent) = d.parent() {
            for f in ["cpuset.cpus", "cpuset.mems"] {
                let v = fs::read_to_string(parent.join(f)).map_err(|source| {
                    super::error::Error::Io {
                        path: parent.join(f),
                        source,
                    }
                })?;
                write(&d.join(f), v.trim())?;
            }
        }
    }
    Ok(())
}

/// Enables controllers for children of the cgroup2 root and of our `farm`
/// groups; a change to the root's subtree_control is journalled.
fn enable_v2(journal: &mut Journal, base: &Path, controllers: &[&str]) -> Result<()> {
    let control = base.join("cgroup.subtree_control");
    let enabled = fs::read_to_string(&control).unwrap_or_default();
    for c in controllers {
        if !enabled.split_whitespace().any(|x| x == *c) {
            journal.record(&Entry::SubtreeControl {
                path: base.to_path_buf(),
                controller: c.to_string(),
            })?;
            write(&control, &format!("+{c}"))?;
            journal::step("controller enabled");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
