//! Reading and writing the kernel's files a state changes, each failure
//! naming the file.

use std::fs;
use std::path::Path;

use super::error::{Error, Result};

pub(super) fn read_trimmed(path: &Path) -> Result<String> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|source| Error::Io {
            path: path.into(),
            source,
        })
}

pub(super) fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).map_err(|source| Error::Io {
        path: path.into(),
        source,
    })
}
