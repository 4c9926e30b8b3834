//! Running the tools images are built with (never through a shell), and
//! reading what they print.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Why a tool the images are built with failed.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("cannot run {}: {source}", program.display())]
    Spawn {
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{} exited with {status}: {stderr_tail}", program.display())]
    Failed {
        program: PathBuf,
        status: std::process::ExitStatus,
        stderr_tail: String,
    },
    #[error("{} exited with {status}", program.display())]
    Status {
        program: PathBuf,
        status: std::process::ExitStatus,
    },
    #[error("sha256sum of {}: unexpected output", .0.display())]
    Sha256Output(PathBuf),
}

/// Runs `program` (an absolute path) with `args`, never through a shell;
/// a non-zero exit is an error carrying the tail of its stderr.
pub(crate) fn run_tool<S: AsRef<OsStr>>(
    program: &Path,
    args: &[S],
    cwd: Option<&Path>,
) -> Result<Output, ToolError> {
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::null());
    if let Some(cwd) = cwd {
        cmd.current_dir(cwd);
    }
    tracing::debug!(program = %program.display(), "running tool");
    let out = cmd.output().map_err(|source| ToolError::Spawn {
        program: program.to_path_buf(),
        source,
    })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        return Err(ToolError::Failed {
            program: program.to_path_buf(),
            status: out.status,
            stderr_tail: tail(&stderr, 10),
        });
    }
    Ok(out)
}

/// sha256 of a file, by `/usr/bin/sha256sum` (the crate has no hash dependency).
pub(crate) fn sha256_file(path: &Path) -> Result<String, ToolError> {
    let out = run_tool(Path::new("/usr/bin/sha256sum"), &[path], None)?;
    parse_sha256sum(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| ToolError::Sha256Output(path.to_path_buf()))
}

pub(super) fn parse_sha256sum(out: &str) -> Option<String> {
    let hex = out.split_whitespace().next()?;
    (hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| hex.to_ascii_lowercase())
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.trim_end().lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
