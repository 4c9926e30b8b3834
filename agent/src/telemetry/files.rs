//! Reading the sampled machine's files below a root (`/`, or a fixture's
//! directory in tests).

use std::path::{Path, PathBuf};

use super::error::{Error, Result};

/// `abs`, an absolute path on the sampled machine, as a path below `root`.
pub(super) fn path_below(root: &Path, abs: &str) -> PathBuf {
    root.join(abs.trim_start_matches('/'))
}

/// Reads a whole file as text; bytes that are not UTF-8 (a thread may name itself
/// anything) are replaced rather than refused.
pub(super) fn read_text(path: &Path) -> Result<String> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}
