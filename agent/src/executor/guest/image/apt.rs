//! Exact package names for apt.
//!
//! apt-get and apt-cache read a name that is no package's name and holds a
//! character of a regular expression (`.`, `+`, `?`, `*`, ...) as a regular
//! expression over package names: `linux-image-6.1.0.47-amd64` means
//! linux-image-6.1.0-47-amd64, its `-unsigned` and its `-dbg`
//! (`testdata/` holds what apt-cache says of it), and `apt-get download`
//! of it downloads all three. So before anything is downloaded, every name
//! is asked of apt exactly as it will be downloaded, and the answer must
//! show a package of exactly that name ([`missing`]).
//!
//! The question is `apt-cache showpkg`, because its answer proves exact
//! existence where the others do not:
//! - it heads each package it shows with `Package: <name>`, so the answer
//!   to a name read as a regular expression shows other names, never the
//!   name asked;
//! - it lists the package's versions, so a purely virtual name (one that
//!   packages only provide, which `apt-get download` cannot fetch) is told
//!   from a real package by its empty `Versions:` list;
//! - its labels are not translated (`apt-cache policy`'s `Installed:` and
//!   `Candidate:` are), so the answer reads the same under any locale;
//! - a name apt does not know prints nothing and exits 0, so "no such
//!   package" is not confused with a broken apt (which exits non-zero).

use std::collections::BTreeSet;
use std::path::Path;

use super::tool::{ToolError, run_tool};

pub(crate) const APT_CACHE: &str = "/usr/bin/apt-cache";
pub(crate) const DPKG: &str = "/usr/bin/dpkg";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// Qualified (`name:arch`); nothing was downloaded.
    #[error("apt knows no package named exactly {} (`apt-get update` may be needed)", .0.join(", "))]
    NoPackage(Vec<String>),
}

/// The native Debian architecture (`amd64`), by `dpkg --print-architecture`.
pub(crate) fn native_arch() -> Result<String, ToolError> {
    let out = run_tool(Path::new(DPKG), &["--print-architecture"], None)?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Of `names` (without an arch qualifier) of the Debian arch `arch`, those
/// apt knows no real package of exactly that name for, in the order given;
/// one `apt-cache showpkg` answers for all of them.
pub(crate) fn missing<S: AsRef<str>>(
    names: &[S],
    arch: &str,
    native: &str,
) -> Result<Vec<String>, ToolError> {
    let args: Vec<String> = std::iter::once("showpkg".to_string())
        .chain(names.iter().map(|n| format!("{}:{arch}", n.as_ref())))
        .collect();
    let out = run_tool(Path::new(APT_CACHE), &args, None)?;
    let output = String::from_utf8_lossy(&out.stdout);
    let real = real_packages(&output);
    Ok(names
        .iter()
        .map(AsRef::as_ref)
        .filter(|n| !real.contains(shown(n, arch, native).as_str()))
        .map(str::to_string)
        .collect())
}

/// Fails, naming them, unless apt knows every one of `names` (without an
/// arch qualifier) of the Debian arch `arch` by exactly that name.
pub(crate) fn require<S: AsRef<str>>(names: &[S], arch: &str, native: &str) -> Result<(), Error> {
    let missing = missing(names, arch, native)?;
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::NoPackage(
        missing.iter().map(|p| format!("{p}:{arch}")).collect(),
    ))
}

/// `name` of the Debian arch `arch` as `apt-cache showpkg` heads it: apt
/// prints a package of the native arch (or of `all`) unqualified, and any
/// other as `name:arch` (apt's `FullName(true)`).
pub fn shown(name: &str, arch: &str, native: &str) -> String {
    if arch == native || arch == "all" {
        name.to_string()
    } else {
        format!("{name}:{arch}")
    }
}

/// Whether `apt-cache showpkg` output shows a real package headed exactly
/// `shown` (see [`shown`]).
pub fn showpkg_has_exactly(output: &str, shown: &str) -> bool {
    real_packages(output).contains(shown)
}

/// The packages, as headed, that `apt-cache showpkg` output shows with at
/// least one version. A package's `Versions: ` line is followed by one
/// unindented line per version, then a blank line; a virtual package's by
/// the blank line at once.
fn real_packages(output: &str) -> BTreeSet<&str> {
    let mut real = BTreeSet::new();
    let mut lines = output.lines();
    let mut current = None;
    while let Some(line) = lines.next() {
        if let Some(name) = line.strip_prefix("Package: ") {
            current = Some(name.trim_end());
        } else if line.trim_end() == "Versions:"
            && let Some(name) = current.take()
            && lines
                .next()
                .is_some_and(|v| !v.trim().is_empty() && !v.starts_with(' '))
        {
            real.insert(name);
        }
    }
    real
}

#[cfg(test)]
mod tests;
