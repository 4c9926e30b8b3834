//! Which external programs this machine has. Reads directories, runs nothing.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::{EXTERNALS, ExternalSpec, Source};

/// NPB's problem classes, smallest first.
const NPB_CLASSES: &str = "SWABCDEF";

/// The external specs whose programs are present, each with the program's
/// path, in the order of [`EXTERNALS`](super::EXTERNALS).
///
/// `path_env` is a `PATH` value; its relative and empty entries are skipped
/// (a program found through them would depend on the agent's working
/// directory). Debian-packaged programs are looked for in `PATH`, then in
/// `extra_dirs`; user-built ones only in `extra_dirs`. The first directory
/// that has an executable regular file (or a link to one) of the program's
/// name wins. A client/server tool counts only where its server sits in the
/// same directory. NPB's `lu.<class>.x` yields one entry per class found,
/// smallest class first; [`npb_class`] reads the class back from the path.
pub fn discover(path_env: &str, extra_dirs: &[PathBuf]) -> Vec<(&'static str, PathBuf)> {
    let path_dirs: Vec<&Path> = path_env
        .split(':')
        .map(Path::new)
        .filter(|d| d.is_absolute())
        .collect();
    let extra: Vec<&Path> = extra_dirs.iter().map(PathBuf::as_path).collect();
    let mut found = Vec::new();
    for spec in EXTERNALS {
        let dirs: Vec<&Path> = match spec.source {
            Source::Debian { .. } => path_dirs.iter().chain(&extra).copied().collect(),
            Source::UserBuilt => extra.clone(),
        };
        match spec.program.split_once("<class>") {
            Some((prefix, suffix)) => {
                found.extend(classes(&dirs, prefix, suffix).map(|path| (spec.name, path)));
            }
            None => found.extend(find(&dirs, spec).map(|path| (spec.name, path))),
        }
    }
    found
}

/// The NPB class letter of a `<kernel>.<class>.x` path such as `/opt/npb/lu.C.x`.
pub fn npb_class(path: &Path) -> Option<char> {
    let name = path.file_name()?.to_str()?;
    let (_, class) = name.strip_suffix(".x")?.rsplit_once('.')?;
    let mut chars = class.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if NPB_CLASSES.contains(c) => Some(c),
        _ => None,
    }
}

fn find(dirs: &[&Path], spec: &ExternalSpec) -> Option<PathBuf> {
    dirs.iter().find_map(|dir| {
        let program = dir.join(spec.program);
        let server_ok = spec.server.is_none_or(|s| is_executable(&dir.join(s)));
        (is_executable(&program) && server_ok).then_some(program)
    })
}

/// Every `<prefix><class><suffix>` in `dirs`, one per class (the first
/// directory wins), smallest class first.
fn classes(dirs: &[&Path], prefix: &str, suffix: &str) -> impl Iterator<Item = PathBuf> {
    let mut by_class: BTreeMap<usize, PathBuf> = BTreeMap::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(class) = name
                .to_str()
                .and_then(|n| n.strip_prefix(prefix)?.strip_suffix(suffix))
            else {
                continue;
            };
            let mut chars = class.chars();
            let (Some(c), None) = (chars.next(), chars.next()) else {
                continue;
            };
            let Some(rank) = NPB_CLASSES.find(c) else {
                continue;
            };
            let path = entry.path();
            if !by_class.contains_key(&rank) && is_executable(&path) {
                by_class.insert(rank, path);
            }
        }
    }
    by_class.into_values()
}

/// A regular file (links followed) with an execute bit.
fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
