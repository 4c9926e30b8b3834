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
//!
//! Its `--calibrate` (`calibrate.c`, appended to `sampler.c`) times a
//! fixed loop: the runner calls it in the guest before the workload, and
//! [`host_calibration`] runs the host arch's build natively, once per
//! agent, for `guest_slowdown` (`slowdown`).

use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::tool::{ToolError, run_tool, sha256_file};
use crate::cache::unique_suffix;
use crate::executor::guest::arch::GuestArch;
use crate::executor::guest::slowdown::{Calibration, CalibrationError};

/// The sampler's source, built into the agent so that an agent carries the
/// sampler its host parser expects: `sampler.c`, then what it declares,
/// each a concern of its own: the stat-line readers (`statline.c`) and the
/// calibration (`calibrate.c`).
pub const SOURCE: &str = concat!(
    include_str!("sampler.c"),
    include_str!("statline.c"),
    include_str!("calibrate.c")
);

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
    #[error(
        "the calibration loop cannot run natively here: farm-sample is built for x86_64 and s390x, not {0}"
    )]
    NotNative(&'static str),
    /// The line is cut to a readable length.
    #[error("the in-guest sampler for {arch}: malformed calibrate line `{line}`: {source}")]
    Calibration {
        arch: GuestArch,
        line: String,
        source: CalibrationError,
    },
}

/// The host's own timing of the calibration loop, measured at the agent's
/// first guest run and kept for the agent's life (the host does not change
/// under it, and each measurement builds or finds the sampler and runs it);
/// `None`, said once in the log, where it cannot be measured: runs then
/// have no `guest_slowdown`, their other figures stand.
pub fn host_calibration(cache: &Path) -> Option<Calibration> {
    static HOST: OnceLock<Option<Calibration>> = OnceLock::new();
    *HOST.get_or_init(|| match calibrate_host(cache) {
        Ok(c) => {
            tracing::info!(
                iterations = c.iterations,
                median_ns = c.median_ns,
                "timed the calibration loop on the host"
            );
            Some(c)
        }
        Err(e) => {
            tracing::warn!(error = %e, "guest runs will have no guest_slowdown");
            None
        }
    })
}

/// The calibration loop timed now by the sampler built for the host's own
/// arch, run natively: the same source as the guests' sampler (for x86_64
/// guests the same binary), so that the two sides time the same work.
pub fn calibrate_host(cache: &Path) -> Result<Calibration, Error> {
    let arch = GuestArch::ALL
        .into_iter()
        .find(|a| a.uname() == std::env::consts::ARCH)
        .ok_or(Error::NotNative(std::env::consts::ARCH))?;
    let bin = build(cache, arch)?;
    let out =
        run_tool(&bin, &["--calibrate"], None).map_err(|source| Error::Tool { arch, source })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or("");
    let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
    let parsed = if kind == "calibrate" {
        Calibration::parse(rest)
    } else {
        Err(CalibrationError::Shape)
    };
    parsed.map_err(|source| Error::Calibration {
        arch,
        line: farm_spec::excerpt(line),
        source,
    })
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
