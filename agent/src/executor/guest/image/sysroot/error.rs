//! What went wrong in one step of [`super::fetch`] or [`super::closure`]:
//! the outer [`super::Error`] names the sysroot or binary and the step.

use std::io;
use std::path::PathBuf;

use super::super::tool::ToolError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("sysroot {arch} [{packages}]: {step}: {detail}")]
    Fetch {
        arch: String,
        packages: String,
        step: &'static str,
        /// Boxed: a tool's error is large, and so would every result be.
        /// Not a `#[source]`: the message already holds its text, and an
        /// error chain (anyhow's `Caused by`) would print it twice.
        detail: Box<Detail>,
    },
    #[error("closure of {binary} in {root}: {step}: {detail}")]
    Closure {
        binary: String,
        root: String,
        step: &'static str,
        /// Boxed: a tool's error is large, and so would every result be.
        /// Not a `#[source]`: the message already holds its text, and an
        /// error chain (anyhow's `Caused by`) would print it twice.
        detail: Box<Detail>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum Detail {
    #[error("bad architecture `{0}` (a-z 0-9 only)")]
    BadArch(String),
    #[error("no packages requested")]
    NoPackages,
    #[error("bad package name `{0}` (a-z 0-9 + - . only)")]
    BadPackage(String),
    #[error("{0} package names are too long for a cache key")]
    KeyTooLong(usize),
    #[error("{0} is missing (install the Debian packages apt and dpkg)")]
    NoAptTool(&'static str),
    #[error("{0} is missing (install the Debian package binutils)")]
    NoReadelf(&'static str),
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error(transparent)]
    Io(#[from] io::Error),
    #[error(
        "dpkg does not know the architecture {arch} (native {native}, foreign: {foreign}); \
         run `dpkg --add-architecture {arch} && apt-get update` as root"
    )]
    ArchUnknown {
        arch: String,
        native: String,
        /// Space-separated.
        foreign: String,
    },
    #[error("{source} (is the package known for {arch}? `apt-get update` may be needed)")]
    Depends {
        #[source]
        source: ToolError,
        arch: String,
    },
    #[error(transparent)]
    Apt(#[from] super::super::apt::Error),
    #[error("apt-cache does not know {name}:{arch}")]
    UnknownPackage { name: String, arch: String },
    /// `what` names the file or package the tool worked on.
    #[error("{what}: {source}")]
    ToolOn {
        what: String,
        #[source]
        source: ToolError,
    },
    #[error("{}: {source}", path.display())]
    Path {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("unexpected file {0}")]
    UnexpectedFile(String),
    /// Both lists space-separated.
    #[error("downloaded [{found}], wanted [{wanted}]")]
    Downloaded { found: String, wanted: String },
    #[error("manifest names a bad .deb `{0}`")]
    BadDeb(String),
    #[error("unexpected manifest line `{0}`")]
    ManifestLine(String),
    #[error("manifest lacks arch, request or packages")]
    ManifestIncomplete,
    #[error("manifest: {0}")]
    Manifest(#[source] io::Error),
    /// Both requests space-separated.
    #[error("manifest is for {arch} [{request}], not {wanted_arch} [{wanted}]")]
    ManifestMismatch {
        arch: String,
        request: String,
        wanted_arch: String,
        wanted: String,
    },
    #[error("{deb} has sha256 {actual}, the manifest says {expected}")]
    Sha256 {
        deb: String,
        actual: String,
        expected: String,
    },
    #[error("{} is missing", .0.display())]
    NoRoot(PathBuf),
    #[error("bad path `{0}`")]
    BadPath(String),
    #[error("{interp} of {binary}: {source}")]
    Interpreter {
        interp: String,
        binary: String,
        #[source]
        source: Box<Detail>,
    },
    /// `search` is the directories, comma-separated.
    #[error("`{name}` (needed by {by}) is in none of {search}")]
    NotFound {
        name: String,
        by: String,
        search: String,
    },
    #[error("{0}: too many symlinks")]
    TooManySymlinks(String),
    #[error("{rel}: {} is not a file", real.display())]
    NotAFile { rel: String, real: PathBuf },
}
