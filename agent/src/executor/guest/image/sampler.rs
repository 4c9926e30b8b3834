//! The in-guest sampler, `farm-sample` (`sampler.c`): a static C program
//! built by the host for the guest's arch and carried in every image.
//!
//! Why C: the farm's Rust binaries exist for x86_64 only (the hosts have
//! one Rust target), s390x guests need a sampler too, and the runner's
//! shell loop costs what it measures (a fork per kind per sweep: 9–25% of
//! the workload's CPU under TCG). Debian's gcc builds it for x86_64 and its
//! cross gcc (`gcc-s390x-linux-gnu` with `libc6-dev-s390x-cross`) for
//! s390x; statically, so an image needs no library for it whatever the
//! workload brings. What it writes is described in the source; the host
//! reads it with `runner::telemetry`, the one parser of those lines.
//!
//! Built once per arch, source and compiler: `samplers/<arch>-<sha256>`
//! in the guest cache, where the sha256 is over the source and the
//! compiler's `--version`; written to a temporary sibling and renamed into
//! place, so a reader sees a whole binary or none. It is ~0.8 MB, neither
//! counted in the cache's budget nor evicted.

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};

use super::{ToolError, run_tool, sha256_file, unique_suffix};
use crate::executor::guest::machine::arch::GuestArch;

/// The sampler's source, built into the agent so that an agent carries the
/// sampler its host parser expects.
pub const SOURCE: &str = include_str!("sampler.c");

/// Where the image carries it.
pub const GUEST_PATH: &str = "/bin/farm-sample";

/// Why the sampler could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "the in-guest sampler for {arch}: {gcc} is missing (install the Debian packages {packages})"
    )]
    NoCompiler {
        arch: GuestArch,
        gcc: &'static str,
        packages: &'static str,
    },
    #[error("the in-guest sampler for {arch}: {step}: {source}")]
    Io {
        arch: GuestArch,
        step: &'static str,
        source: std::io::Error,
    },
    #[error("the in-guest sampler for {arch}: {source}")]
    Tool { arch: GuestArch, source: ToolError },
}

/// The sampler for `arch`, built now unless the cache has it.
pub fn build(cache: &Path, arch: GuestArch) -> Result<PathBuf, Error> {
    let (gcc, packages) = arch.gcc();
    if !Path::new(gcc).is_file() {
        return Err(Error::NoCompiler {
            arch,
            gcc,
            packages,
        });
    }
    let io = |step| move |source| Error::Io { arch, step, source };
    let tool = |source| Error::Tool { arch, source };
    let dir = cache.join("samplers");
    fs::create_dir_all(&dir).map_err(io("create the directory"))?;
    let version = run_tool(Path::new(gcc), &["--version"], None).map_err(tool)?;
    let version = String::from_utf8_lossy(&version.stdout);
    let work = dir.join(format!("{arch}.{}", unique_suffix()));
    fs::create_dir(&work).map_err(io("create the work directory"))?;
    let built = (|| {
        let src = work.join("sampler.c");
        // The key covers the compiler: a new gcc builds anew.
        fs::write(
            &src,
            format!("{SOURCE}\n/* {} */\n", version.lines().next().unwrap_or("")),
        )
        .map_err(io("write the source"))?;
        let key = sha256_file(&src).map_err(tool)?;
        let dest = dir.join(format!("{arch}-{key}"));
        if dest.is_file() {
            return Ok(dest);
        }
        let bin = work.join("farm-sample");
        let args = [
            OsStr::new("-std=c11"),
            OsStr::new("-O2"),
            OsStr::new("-static"),
            OsStr::new("-Wall"),
            OsStr::new("-Wextra"),
            OsStr::new("-o"),
            bin.as_os_str(),
            src.as_os_str(),
        ];
        run_tool(Path::new(gcc), &args, None).map_err(tool)?;
        fs::rename(&bin, &dest).map_err(io("put the binary in place"))?;
        tracing::info!(arch = %arch, path = %dest.display(), "built the in-guest sampler");
        Ok(dest)
    })();
    let _ = fs::remove_dir_all(&work);
    built
}

#[cfg(test)]
mod tests;
