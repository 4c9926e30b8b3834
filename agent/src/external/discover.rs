//! Which external programs this machine has. Reads directories, runs nothing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::spec::{ExternalSpec, Source};

/// The specs among `specs` whose programs are present, each with the
/// program's path, in the order of `specs`; where each is looked for is
/// [`discover`](super::discover)'s documentation.
pub(super) fn present(
    specs: &'static [ExternalSpec],
    path_env: &str,
    extra_dirs: &[PathBuf],
) -> Vec<(&'static str, PathBuf)> {
    let path_dirs: Vec<&Path> = path_env
        .split(':')
        .map(Path::new)
        .filter(|d| d.is_absolute())
        .collect();
    let extra: Vec<&Path> = extra_dirs.iter().map(PathBuf::as_path).collect();
    let mut found = Vec::new();
    for spec in specs {
        let dirs: Vec<&Path> = match spec.source {
            Source::Debian { .. } => path_dirs.iter().chain(&extra).copied().collect(),
            Source::UserBuilt => extra.clone(),
        };
        found.extend(find(&dirs, spec).map(|path| (spec.name(), path)));
    }
    found
}

fn find(dirs: &[&Path], spec: &ExternalSpec) -> Option<PathBuf> {
    dirs.iter().find_map(|dir| {
        let program = dir.join(spec.program());
        let server_ok = spec.server.is_none_or(|s| is_executable(&dir.join(s)));
        (is_executable(&program) && server_ok).then_some(program)
    })
}

/// A regular file (links followed) with an execute bit.
fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
