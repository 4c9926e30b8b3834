//! Scheduling-domain topology: the levels the load balancer works at, per CPU, and what
//! changed between two snapshots.
//!
//! The scheduler balances load within nested *sched domains*: per CPU, from its SMT
//! siblings (`SMT`), through the CPUs sharing its last-level cache (`MC`), its NUMA
//! node (`PKG`, called `DIE` before Linux 6.7), up to groups of nodes (`NUMA`, one
//! level per distinct node distance). Seed 000's regression was a level that a hotplug
//! cycle failed to rebuild; seed 002's was a flag (`SD_BALANCE_NEWIDLE`) set on more
//! levels. Two sources, best first:
//!
//! 1. **debugfs**, `sched/domains/cpu<N>/domain<M>/{name,flags}`: the kernel's own
//!    domains, visible when debugfs is mounted and `sched_verbose` is on (in the farm's
//!    guests, not on the hosts). Flags are names separated by spaces
//!    (`SD_BALANCE_NEWIDLE SD_BALANCE_EXEC ...`). Kernels before 5.13 had the same tree
//!    at `/proc/sys/kernel/sched_domain` with flags as a decimal bit mask; that is read
//!    too, the number kept as a single flag, since bit values changed between versions.
//!    An offline CPU has no domains.
//! 2. **sysfs**, `/sys/devices/system/{cpu,node}`: the CPU, cache and node topology the
//!    kernel builds its domains from. [`synthesize`] applies the kernel's default
//!    levels to it (see there). It gives spans but no flags, and cannot show a level the
//!    kernel failed to build, only the topology it should have built from.
//!
//! Pure functions take the files of a tree as a map from relative path to content
//! ([`Files`]); [`read`] collects them below a root directory.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use super::error::{Error, Result};
use crate::capabilities::parse_cpu_list;

/// Files of a tree by path relative to its top (`cpu0/domain1/flags`), with contents.
pub type Files = BTreeMap<String, String>;

/// One level of one CPU's domains, innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Level {
    /// `SMT`, `CLS`, `MC`, `PKG` or `DIE`, `NUMA`; s390x adds `BOOK` and `DRAWER`.
    pub name: String,
    /// As the kernel lists them; empty for a level synthesized from sysfs.
    pub flags: Vec<String>,
    /// The CPUs the level spans; empty where the source does not say (debugfs).
    pub span: Vec<u32>,
}

/// Domain levels per CPU. A CPU with no levels (offline, or alone in every level) may
/// be absent or have an empty list; both mean the same.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Domains {
    pub per_cpu: BTreeMap<u32, Vec<Level>>,
}

impl Domains {
    /// Each CPU's level names, innermost first (what `/proc/schedstat`'s
    /// unnamed `domain<N>` lines are named by).
    pub fn level_names(&self) -> BTreeMap<u32, Vec<String>> {
        self.per_cpu
            .iter()
            .map(|(cpu, levels)| (*cpu, levels.iter().map(|l| l.name.clone()).collect()))
            .collect()
    }
}

/// Where a snapshot came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `/sys/kernel/debug/sched/domains`.
    Debugfs,
    /// `/proc/sys/kernel/sched_domain` (kernels before 5.13).
    Sysctl,
    /// Synthesized from `/sys/devices/system`.
    Sysfs,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Source::Debugfs => "debugfs sched domains",
            Source::Sysctl => "sysctl sched domains",
            Source::Sysfs => "sysfs topology",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pub source: Source,
    pub domains: Domains,
}

/// Parses a sched domains tree (debugfs or sysctl layout): files
/// `cpu<N>/domain<M>/name` and `cpu<N>/domain<M>/flags`; other files are ignored.
/// Levels are ordered by M. Errors name the file relative to the tree.
pub fn parse_domains(files: &Files) -> Result<Domains> {
    // cpu -> domain index -> (name, flags)
    type Partial<'a> = (Option<&'a str>, Option<&'a str>);
    let mut tree: BTreeMap<u32, BTreeMap<u32, Partial<'_>>> = BTreeMap::new();
    for (path, content) in files {
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        let [cpu, domain, file] = parts[..] else {
            continue;
        };
        let (Some(cpu), Some(domain)) = (number_after(cpu, "cpu"), number_after(domain, "domain"))
        else {
            continue;
        };
        let entry = tree.entry(cpu).or_default().entry(domain).or_default();
        match file {
            "name" => entry.0 = Some(content),
            "flags" => entry.1 = Some(content),
            _ => {}
        }
    }
    let mut per_cpu = BTreeMap::new();
    for (cpu, domains) in tree {
        let mut levels = Vec::new();
        for (m, (name, flags)) in domains {
            let file = format!("cpu{cpu}/domain{m}/name");
            let name = match name.map(str::trim) {
                Some(name) if !name.is_empty() && !name.contains(char::is_whitespace) => name,
                Some(name) => return Err(Error::parse(&file, 1, "not a domain name", name)),
                None if flags.is_none() => continue,
                None => return Err(Error::parse(&file, 1, "missing beside flags", "")),
            };
            levels.push(Level {
                name: name.to_owned(),
                flags: flags
                    .unwrap_or("")
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect(),
                span: Vec::new(),
            });
        }
        per_cpu.insert(cpu, levels);
    }
    Ok(Domains { per_cpu })
}

/// Synthesizes domain levels from the sysfs topology. `files` are paths relative to
/// `/sys/devices/system`:
///
/// - `cpu/online` (required);
/// - per online CPU N, `cpu/cpuN/topology/thread_siblings_list` and
///   `core_siblings_list`, and `cpu/cpuN/cache/index<K>/{level,type,shared_cpu_list}`;
/// - per node N, `node/nodeN/cpulist` and `node/nodeN/distance`.
///
/// The levels are the kernel's default topology (x86 and most others), each clipped to
/// the online CPUs and made to contain the level below it:
///
/// | level | span |
/// |---|---|
/// | SMT | `thread_siblings_list` |
/// | MC | the CPUs sharing the highest-level data or unified cache, within the node (`core_siblings_list` where sysfs has no caches) |
/// | PKG | the CPUs of the node (the kernel's `cpu_cpu_mask`; all CPUs without nodes) |
/// | NUMA | per distinct distance between nodes, ascending: the CPUs of the nodes within that distance (one level over all CPUs where `distance` is missing) |
///
/// As the kernel does, a level spanning one CPU, or no more than the level below it, is
/// dropped as degenerate. `physical_package_id` and `die_id` are not needed: the top
/// non-NUMA level spans the node, whatever the packages (a QEMU guest's single socket
/// spans two nodes). s390x's `BOOK` and `DRAWER` levels are not synthesized.
pub fn synthesize(files: &Files) -> Result<Domains> {
    let cpu_list = |key: &str| -> Result<Option<BTreeSet<u32>>> {
        match files.get(key) {
            None => Ok(None),
            Some(content) => parse_cpu_list(content)
                .map(|cpus| Some(cpus.into_iter().collect()))
                .map_err(|e| Error::parse(&sysfs_file(key), 1, e, content.trim())),
        }
    };
    let online = cpu_list("cpu/online")?
        .ok_or_else(|| Error::parse(&sysfs_file("cpu/online"), 1, "missing", ""))?;

    // node -> its CPUs, and node -> distances in the order of node ids.
    let mut nodes: BTreeMap<u32, BTreeSet<u32>> = BTreeMap::new();
    let mut distances: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (key, content) in files.range("node/".to_owned()..) {
        let Some(rest) = key.strip_prefix("node/") else {
            break;
        };
        let Some((dir, file)) = rest.split_once('/') else {
            continue;
        };
        let Some(node) = number_after(dir, "node") else {
            continue;
        };
        match file {
            "cpulist" => {
                nodes.insert(node, cpu_list(key)?.unwrap_or_default());
            }
            "distance" => {
                let d = content
                    .split_whitespace()
                    .map(str::parse)
                    .collect::<Result<Vec<u32>, _>>()
                    .map_err(|_| {
                        Error::parse(&sysfs_file(key), 1, "not distances", content.trim())
                    })?;
                distances.insert(node, d);
            }
            _ => {}
        }
    }
    let node_ids: Vec<u32> = nodes.keys().copied().collect();
    let distance = |a: u32, b: u32| -> Option<u32> {
        let col = node_ids.iter().position(|&n| n == b)?;
        distances.get(&a)?.get(col).copied()
    };
    let mut numa_distances: BTreeSet<u32> = BTreeSet::new();
    for &a in &node_ids {
        for &b in &node_ids {
            if let Some(d) = distance(a, b).filter(|_| a != b) {
                numa_distances.insert(d);
            }
        }
    }
    let node_of = |cpu: u32| {
        nodes
            .iter()
            .find(|(_, cpus)| cpus.contains(&cpu))
            .map(|(&n, _)| n)
    };

    let mut per_cpu = BTreeMap::new();
    for &cpu in &online {
        let dir = format!("cpu/cpu{cpu}");
        let clip = |span: BTreeSet<u32>| -> BTreeSet<u32> {
            span.intersection(&online).copied().collect()
        };
        let node_span = match node_of(cpu) {
            Some(node) => clip(nodes[&node].clone()),
            None => online.clone(),
        };
        let smt = cpu_list(&format!("{dir}/topology/thread_siblings_list"))?.unwrap_or_default();
        let mc = match last_level_cache(files, &dir)? {
            Some(llc) => llc,
            None => cpu_list(&format!("{dir}/topology/core_siblings_list"))?.unwrap_or_default(),
        };
        let mut candidates = vec![
            ("SMT", clip(smt)),
            ("MC", clip(mc).intersection(&node_span).copied().collect()),
            ("PKG", node_span),
        ];
        if nodes.len() > 1 {
            match node_of(cpu) {
                Some(home) if !numa_distances.is_empty() => {
                    for &d in &numa_distances {
                        let span = nodes
                            .iter()
                            .filter(|&(&n, _)| distance(home, n).is_some_and(|x| x <= d))
                            .flat_map(|(_, cpus)| cpus.iter().copied())
                            .collect();
                        candidates.push(("NUMA", clip(span)));
                    }
                }
                _ => candidates.push(("NUMA", online.clone())),
            }
        }
        let mut levels: Vec<Level> = Vec::new();
        let mut below: BTreeSet<u32> = BTreeSet::from([cpu]);
        for (name, span) in candidates {
            let span: BTreeSet<u32> = span.union(&below).copied().collect();
            if span.len() > below.len() {
                levels.push(Level {
                    name: name.to_owned(),
                    flags: Vec::new(),
                    span: span.iter().copied().collect(),
                });
                below = span;
            }
        }
        per_cpu.insert(cpu, levels);
    }
    Ok(Domains { per_cpu })
}

/// The CPUs sharing `dir`'s highest-level cache that holds data, if sysfs lists any.
fn last_level_cache(files: &Files, dir: &str) -> Result<Option<BTreeSet<u32>>> {
    let prefix = format!("{dir}/cache/");
    let mut best: Option<(u32, BTreeSet<u32>)> = None;
    for (key, content) in files.range(prefix.clone()..) {
        let Some(rest) = key.strip_prefix(&prefix) else {
            break;
        };
        let Some(index) = rest.strip_suffix("/level") else {
            continue;
        };
        let base = format!("{prefix}{index}");
        if files.get(&format!("{base}/type")).map(|t| t.trim()) == Some("Instruction") {
            continue;
        }
        let level: u32 = content
            .trim()
            .parse()
            .map_err(|_| Error::parse(&sysfs_file(key), 1, "not a cache level", content.trim()))?;
        let shared_key = format!("{base}/shared_cpu_list");
        let Some(shared) = files.get(&shared_key) else {
            continue;
        };
        let cpus = parse_cpu_list(shared)
            .map_err(|e| Error::parse(&sysfs_file(&shared_key), 1, e, shared.trim()))?;
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, cpus.into_iter().collect()));
        }
    }
    Ok(best.map(|(_, cpus)| cpus))
}

fn sysfs_file(key: &str) -> String {
    format!("{SYSFS}/{key}")
}

/// `s` is `prefix` followed by a decimal number.
fn number_after(s: &str, prefix: &str) -> Option<u32> {
    let digits = s.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// One difference between two snapshots, displayed as a sentence naming the CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopologyChange {
    /// The snapshots come from different sources and cannot be compared level by level.
    SourceChanged { before: Source, after: Source },
    /// The CPU had levels before and none after (it went offline, or lost its domains).
    AllLevelsGone { cpu: u32, was: Vec<String> },
    /// The CPU had no levels before and has some after.
    LevelsAppeared { cpu: u32, now: Vec<String> },
    /// A level is missing after: seed 000's symptom.
    LevelMissing {
        cpu: u32,
        level: String,
        was: Vec<String>,
        now: Vec<String>,
    },
    LevelAdded {
        cpu: u32,
        level: String,
        was: Vec<String>,
        now: Vec<String>,
    },
    /// Flags of a level changed: seed 002's `SD_BALANCE_NEWIDLE`.
    FlagsChanged {
        cpu: u32,
        level: String,
        removed: Vec<String>,
        added: Vec<String>,
    },
    SpanChanged {
        cpu: u32,
        level: String,
        was: Vec<u32>,
        now: Vec<u32>,
    },
}

impl fmt::Display for TopologyChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |n: &[String]| {
            if n.is_empty() {
                "none".to_owned()
            } else {
                n.join(" ")
            }
        };
        match self {
            TopologyChange::SourceChanged { before, after } => {
                write!(
                    f,
                    "topology read from {before} before and from {after} after, not compared"
                )
            }
            TopologyChange::AllLevelsGone { cpu, was } => {
                write!(f, "cpu{cpu}: no sched domains after (was {})", names(was))
            }
            TopologyChange::LevelsAppeared { cpu, now } => {
                write!(
                    f,
                    "cpu{cpu}: sched domains appeared after (now {})",
                    names(now)
                )
            }
            TopologyChange::LevelMissing {
                cpu,
                level,
                was,
                now,
            } => write!(
                f,
                "cpu{cpu}: sched domain level {level} missing after (was {}, now {})",
                names(was),
                names(now)
            ),
            TopologyChange::LevelAdded {
                cpu,
                level,
                was,
                now,
            } => write!(
                f,
                "cpu{cpu}: sched domain level {level} added after (was {}, now {})",
                names(was),
                names(now)
            ),
            TopologyChange::FlagsChanged {
                cpu,
                level,
                removed,
                added,
            } => {
                let changes: Vec<String> = removed
                    .iter()
                    .map(|r| format!("-{r}"))
                    .chain(added.iter().map(|a| format!("+{a}")))
                    .collect();
                write!(
                    f,
                    "cpu{cpu}: flags of {level} changed: {}",
                    changes.join(" ")
                )
            }
            TopologyChange::SpanChanged {
                cpu,
                level,
                was,
                now,
            } => write!(
                f,
                "cpu{cpu}: span of {level} changed (was {}, now {})",
                format_cpu_list(was),
                format_cpu_list(now)
            ),
        }
    }
}

/// What changed from `before` to `after`, CPU by CPU in ascending order. Levels are
/// matched by name and rank among levels of that name (a machine has several `NUMA`
/// levels). Spans are compared only where both snapshots know them.
pub fn diff(before: &Topology, after: &Topology) -> Vec<TopologyChange> {
    if before.source != after.source {
        return vec![TopologyChange::SourceChanged {
            before: before.source,
            after: after.source,
        }];
    }
    let empty = Vec::new();
    let cpus: BTreeSet<u32> = before
        .domains
        .per_cpu
        .keys()
        .chain(after.domains.per_cpu.keys())
        .copied()
        .collect();
    let mut changes = Vec::new();
    for cpu in cpus {
        let b = before.domains.per_cpu.get(&cpu).unwrap_or(&empty);
        let a = after.domains.per_cpu.get(&cpu).unwrap_or(&empty);
        let was: Vec<String> = b.iter().map(|l| l.name.clone()).collect();
        let now: Vec<String> = a.iter().map(|l| l.name.clone()).collect();
        match (b.is_empty(), a.is_empty()) {
            (true, true) => continue,
            (false, true) => {
                changes.push(TopologyChange::AllLevelsGone { cpu, was });
                continue;
            }
            (true, false) => {
                changes.push(TopologyChange::LevelsAppeared { cpu, now });
                continue;
            }
            (false, false) => {}
        }
        let (bk, ak) = (ranked(b), ranked(a));
        let (bmap, amap): (BTreeMap<_, _>, BTreeMap<_, _>) =
            (bk.iter().copied().collect(), ak.iter().copied().collect());
        for (key, level) in &bk {
            if !amap.contains_key(key) {
                changes.push(TopologyChange::LevelMissing {
                    cpu,
                    level: level.name.clone(),
                    was: was.clone(),
                    now: now.clone(),
                });
            }
        }
        for (key, level) in &ak {
            if !bmap.contains_key(key) {
                changes.push(TopologyChange::LevelAdded {
                    cpu,
                    level: level.name.clone(),
                    was: was.clone(),
                    now: now.clone(),
                });
            }
        }
        for (key, level) in &ak {
            let Some(old) = bmap.get(key) else {
                continue;
            };
            let (fb, fa): (BTreeSet<&String>, BTreeSet<&String>) =
                (old.flags.iter().collect(), level.flags.iter().collect());
            if fb != fa {
                changes.push(TopologyChange::FlagsChanged {
                    cpu,
                    level: level.name.clone(),
                    removed: old
                        .flags
                        .iter()
                        .filter(|f| !fa.contains(f))
                        .cloned()
                        .collect(),
                    added: level
                        .flags
                        .iter()
                        .filter(|f| !fb.contains(f))
                        .cloned()
                        .collect(),
                });
            }
            if !old.span.is_empty() && !level.span.is_empty() && old.span != level.span {
                changes.push(TopologyChange::SpanChanged {
                    cpu,
                    level: level.name.clone(),
                    was: old.span.clone(),
                    now: level.span.clone(),
                });
            }
        }
    }
    changes
}

/// Levels in order, each keyed by (name, rank among levels of that name).
fn ranked(levels: &[Level]) -> Vec<((&str, usize), &Level)> {
    let mut rank: BTreeMap<&str, usize> = BTreeMap::new();
    levels
        .iter()
        .map(|level| {
            let r = rank.entry(level.name.as_str()).or_default();
            *r += 1;
            ((level.name.as_str(), *r - 1), level)
        })
        .collect()
}

/// The kernel's cpulist format: `0,2-3`.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

const DEBUGFS_DOMAINS: &str = "/sys/kernel/debug/sched/domains";
const SYSCTL_DOMAINS: &str = "/proc/sys/kernel/sched_domain";
const SYSFS: &str = "/sys/devices/system";

/// Reads the topology of the machine whose filesystem starts at `root`: debugfs sched
/// domains if any CPU has some there, else the sysctl tree of older kernels, else the
/// sysfs topology. debugfs that is not mounted, not readable (not root) or empty (no
/// `sched_verbose`) counts as absent.
pub fn read(root: &Path) -> Result<Topology> {
    for (source, dir) in [
        (Source::Debugfs, DEBUGFS_DOMAINS),
        (Source::Sysctl, SYSCTL_DOMAINS),
    ] {
        let dir = super::files::path_below(root, dir);
        let files = read_domain_files(&dir)?;
        let domains = parse_domains(&files).map_err(|e| below(e, &dir))?;
        if domains.per_cpu.values().any(|levels| !levels.is_empty()) {
            return Ok(Topology { source, domains });
        }
    }
    let files = read_sysfs_files(root)?;
    let domains = synthesize(&files).map_err(|e| below(e, root))?;
    Ok(Topology {
        source: Source::Sysfs,
        domains,
    })
}

/// A parse error's file, relative to `dir`, as a path below `dir`.
fn below(e: Error, dir: &Path) -> Error {
    match &e {
        Error::Parse { file, .. } => {
            let path = dir.join(file.trim_start_matches('/'));
            e.at(&path)
        }
        _ => e,
    }
}

/// The entries of `dir` whose names are `prefix<number>`, with their numbers. An
/// absent or unreadable directory has none.
fn numbered_entries(dir: &Path, prefix: &str) -> Result<Vec<(u32, PathBuf)>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if is_absent(&e) => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: dir.to_owned(),
                source,
            });
        }
    };
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: dir.to_owned(),
            source,
        })?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|s| number_after(s, prefix))
        {
            found.push((n, entry.path()));
        }
    }
    found.sort();
    Ok(found)
}

/// Not there, or not for us: debugfs is mode 0700, and a CPU's directory vanishes when
/// it goes offline while we read.
fn is_absent(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
    )
}

/// Reads an optional file into `files` under `key`.
fn read_optional(files: &mut Files, key: String, path: &Path) -> Result<()> {
    match std::fs::read_to_string(path) {
        Ok(content) => {
            files.insert(key, content);
            Ok(())
        }
        Err(e) if is_absent(&e) => Ok(()),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

fn read_domain_files(dir: &Path) -> Result<Files> {
    let mut files = Files::new();
    for (cpu, cpu_dir) in numbered_entries(dir, "cpu")? {
        for (m, domain_dir) in numbered_entries(&cpu_dir, "domain")? {
            for file in ["name", "flags"] {
                read_optional(
                    &mut files,
                    format!("cpu{cpu}/domain{m}/{file}"),
                    &domain_dir.join(file),
                )?;
            }
        }
    }
    Ok(files)
}

fn read_sysfs_files(root: &Path) -> Result<Files> {
    let base = super::files::path_below(root, SYSFS);
    let mut files = Files::new();
    let online_path = base.join("cpu/online");
    let online = super::files::read_text(&online_path)?;
    let cpus = parse_cpu_list(&online)
        .map_err(|e| Error::parse(&online_path.display().to_string(), 1, e, online.trim()))?;
    files.insert("cpu/online".to_owned(), online);
    for cpu in cpus {
        let dir = format!("cpu/cpu{cpu}");
        for file in ["thread_siblings_list", "core_siblings_list"] {
            let key = format!("{dir}/topology/{file}");
            read_optional(&mut files, key.clone(), &base.join(&key))?;
        }
        for (k, _) in numbered_entries(&base.join(&dir).join("cache"), "index")? {
            for file in ["level", "type", "shared_cpu_list"] {
                let key = format!("{dir}/cache/index{k}/{file}");
                read_optional(&mut files, key.clone(), &base.join(&key))?;
            }
        }
    }
    for (node, _) in numbered_entries(&base.join("node"), "node")? {
        for file in ["cpulist", "distance"] {
            let key = format!("node/node{node}/{file}");
            read_optional(&mut files, key.clone(), &base.join(&key))?;
        }
    }
    Ok(files)
}
