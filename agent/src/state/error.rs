//! Why a machine state could not be applied or restored.

use std::path::PathBuf;

use super::{hotplug, journal};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Journal(#[from] journal::Error),
    #[error("state `{state}`: {why}")]
    Refused { state: String, why: String },
    #[error("state `{state}`: {source}")]
    Hotplug {
        state: String,
        source: hotplug::Error,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
