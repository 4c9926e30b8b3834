//! The image a guest boots: its kernel ([`kernels`]: a Debian kernel of
//! the version's arch, or a `file:` image), the packages of any arch it
//! carries ([`sysroot`]: the external tools, s390x's busybox, with their
//! libraries), the kernel modules its channel needs ([`modules`]), the
//! initramfs itself ([`initramfs`]: busybox, the runner, the workload's
//! files, the job and the state), all kept in the guest cache
//! ([`crate::cache`]).
//!
//! The initramfs carries the workload's program with every shared library it
//! needs (the farm's own `farm-workload` on x86_64, gathered by `ldd`;
//! Debian's builds of external tools on any arch, gathered from their
//! packages), a static busybox, and three files the host writes: `/job` and
//! `/state` ([`super::runner::protocol`]) and `/modules`, the kernel modules
//! to load for the channel.

pub mod apt;
pub mod initramfs;
pub mod kernels;
pub mod modules;
pub mod sampler;
pub mod sysroot;
mod tool;

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};

use initramfs::{BASE_DIRS, Entry, Initramfs};
pub use tool::ToolError;
pub(crate) use tool::tail;

const LDD: &str = "/usr/bin/ldd";

/// Where the channel's kernel modules are put in the guest.
const MODULE_DIR: &str = "lib/farm-modules";

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("guest job: {binary}: {detail}")]
    Binary { binary: String, detail: String },
    /// What `ldd` said, or failed to say, of a binary.
    /// `detail` is not a `#[source]`: the message already holds its text,
    /// and an error chain (anyhow's `Caused by`) would print it twice.
    #[error("guest job: {binary}: {detail}")]
    Ldd { binary: String, detail: LddError },
    #[error(transparent)]
    Initramfs(#[from] initramfs::Error),
}

/// Why the shared libraries of a binary could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum LddError {
    #[error("cannot run {ldd}: {source}")]
    Spawn {
        ldd: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// `stderr` is the tail of what it printed.
    #[error("{ldd} exited with {status}: {stderr}")]
    Exited {
        ldd: &'static str,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("ldd cannot resolve the shared library `{0}`")]
    NotFound(String),
    #[error("unexpected ldd line `{0}`")]
    UnexpectedLine(String),
    #[error("refusing the library path in `{0}`")]
    BadPath(String),
}

/// The shared libraries (and loader) of `binary`, by `ldd`; a binary with a
/// library ldd cannot find is refused, naming it. A static binary has none.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, Error> {
    let fail = |detail: LddError| Error::Ldd {
        binary: binary.display().to_string(),
        detail,
    };
    let out = Command::new(LDD)
        .arg(binary)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| fail(LddError::Spawn { ldd: LDD, source }))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stdout.contains("not a dynamic executable")
            || stderr.contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(fail(LddError::Exited {
            ldd: LDD,
            status: out.status,
            stderr: tail(&stderr, 5),
        }));
    }
    parse_ldd(&stdout).map_err(fail)
}

/// The absolute paths in `ldd`'s output. `name => not found` is an error
/// naming the library; the vDSO (no path) is skipped.
pub fn parse_ldd(out: &str) -> Result<Vec<PathBuf>, LddError> {
    let mut libs = Vec::new();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("statically linked") {
            continue;
        }
        let (name, target) = match line.split_once("=>") {
            Some((n, t)) => (n.trim(), t.trim()),
            None => (line, line),
        };
        if target.starts_with("not found") {
            return Err(LddError::NotFound(name.to_owned()));
        }
        let path = target.split_whitespace().next().unwrap_or("");
        if path.is_empty() || path.starts_with('(') {
            continue; // linux-vdso.so.1 (0x...)
        }
        let path = Path::new(path);
        if !path.is_absolute() {
            if line.contains("=>") {
                return Err(LddError::UnexpectedLine(line.to_owned()));
            }
            continue; // the vDSO without "=>"
        }
        if path
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
        {
            return Err(LddError::BadPath(line.to_owned()));
        }
        if !libs.iter().any(|l: &PathBuf| l == path) {
            libs.push(path.to_path_buf());
        }
    }
    Ok(libs)
}

/// Where the farm's own workload binary lives in the guest.
pub const GUEST_BINARY: &str = "/bin/farm-workload";

/// What goes into a run's initramfs. The runner and the texts of its
/// `/job` and `/state` come from [`super::runner`], which checked them.
#[derive(Debug, Clone)]
pub struct Image<'a> {
    /// A static busybox for the guest's arch.
    pub busybox: &'a Path,
    /// Whether that busybox runs on this host (it lists its applets here;
    /// a foreign one installs them at boot).
    pub busybox_native: bool,
    /// Files to carry: (file on the host, absolute path in the guest): the
    /// workload's program and its libraries.
    pub files: Vec<(PathBuf, String)>,
    /// Kernel modules to load, in order (their dependencies first).
    pub modules: Vec<PathBuf>,
    /// `/init`: the runner script.
    pub init: &'a str,
    /// The text of `/job` and of `/state`.
    pub job: &'a str,
    pub state: &'a str,
}

/// The files that run the farm's own `workload_bin` in a guest of the
/// host's arch: itself at [`GUEST_BINARY`] and the libraries `ldd` names, at
/// their host paths.
pub fn native_files(workload_bin: &Path) -> Result<Vec<(PathBuf, String)>, Error> {
    let fail = |detail: String| Error::Binary {
        binary: workload_bin.display().to_string(),
        detail,
    };
    if !workload_bin.is_file() {
        return Err(fail("not found".into()));
    }
    let mut files = vec![(workload_bin.to_path_buf(), GUEST_BINARY.to_string())];
    for lib in shared_libraries(workload_bin)? {
        let guest = lib.display().to_string();
        files.push((lib, guest));
    }
    Ok(files)
}

/// Builds (or reuses, by the hash of its contents) the initramfs of
/// `image` under `cache`.
pub fn build(cache: &Path, image: &Image<'_>) -> Result<Initramfs, Error> {
    let mut contents: Vec<(String, Vec<u8>)> = Vec::new();
    let mut modules_file = String::new();
    for (host, guest) in &image.files {
        let bytes = fs::read(host).map_err(|e| Error::Binary {
            binary: host.display().to_string(),
            detail: format!("read: {e}"),
        })?;
        let rel = guest.trim_start_matches('/');
        if !guest.starts_with('/')
            || rel.is_empty()
            || Path::new(rel)
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(Error::Binary {
                binary: host.display().to_string(),
                detail: format!("refusing the guest path `{guest}`"),
            });
        }
        contents.push((rel.to_string(), bytes));
    }
    for (i, m) in image.modules.iter().enumerate() {
        let bytes = fs::read(m).map_err(|e| Error::Binary {
            binary: m.display().to_string(),
            detail: format!("read: {e}"),
        })?;
        let name = m.file_name().unwrap_or_default().to_string_lossy();
        let rel = format!("{MODULE_DIR}/{i:02}-{name}");
        modules_file.push_str(&format!("/{rel}\n"));
        contents.push((rel, bytes));
    }
    let mut dirs: Vec<String> = Vec::new();
    for (path, _) in &contents {
        let mut prefix = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if !BASE_DIRS.contains(&prefix.as_str()) && !dirs.contains(&prefix) {
                dirs.push(prefix.clone());
            }
        }
    }
    let mut extra: Vec<Entry<'_>> = dirs.into_iter().map(Entry::Dir).collect();
    for (path, bytes) in &contents {
        extra.push(Entry::File(path.clone(), 0o755, bytes));
    }
    extra.push(Entry::File("job".into(), 0o644, image.job.as_bytes()));
    extra.push(Entry::File("state".into(), 0o644, image.state.as_bytes()));
    if !image.modules.is_empty() {
        extra.push(Entry::File(
            "modules".into(),
            0o644,
            modules_file.as_bytes(),
        ));
    }
    let applets = if image.busybox_native {
        initramfs::Applets::Listed
    } else {
        initramfs::Applets::InstalledAtBoot
    };
    Ok(initramfs::build_with(
        cache,
        image.busybox,
        applets,
        image.init,
        &extra,
    )?)
}

#[cfg(test)]
mod tests;
