//! Kernels for guests: `debian:<version>` resolved to an unpacked Debian
//! kernel package in a cache directory.
//!
//! Layout of the cache: `<cache>/kernels/<version>/` holds the `.deb`, its
//! unpacked tree in `root/`, and `manifest` (`package`, `deb`, `sha256`
//! lines). An entry is reused when its manifest is there, the `.deb`'s
//! sha256 still matches and the kernel image and modules are present;
//! otherwise it is rebuilt from a fresh download. Entries are built in a
//! temporary sibling and renamed into place; a lock file serialises
//! concurrent resolutions of the same version.

use std::fs;
use std::path::{Path, PathBuf};

use super::apt;
use super::tool::{ToolError, run_tool, sha256_file};
use crate::cache::unique_suffix;
use farm_spec::kernel::KernelError;
use farm_spec::{Arch, DebianKernel, Kernel as SpecKernel};

const APT_GET: &str = "/usr/bin/apt-get";
const DPKG_DEB: &str = "/usr/bin/dpkg-deb";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kernel `{0}`: {1}")]
    Name(String, String),
    /// A name `farm_spec` refused; its message quotes the name.
    #[error("kernel {0}")]
    Spec(KernelError),
    #[error("kernel `{kernel}`: {step}: {source}")]
    Step {
        kernel: String,
        step: &'static str,
        source: Cause,
    },
}

/// What went wrong in a step of resolving a Debian kernel.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    #[error("{0} is missing (install the Debian packages apt and dpkg)")]
    NoTool(&'static str),
    /// apt knows neither candidate package by exactly its name.
    #[error(transparent)]
    Apt(#[from] apt::Error),
    /// Each package tried, with why `apt-get download` failed for it.
    #[error("{}", .0.iter().map(|(p, e)| format!("{p}: {e}")).collect::<Vec<_>>().join("; "))]
    Download(Vec<(String, ToolError)>),
    #[error("{count} .deb files in {}", dir.display())]
    Debs { count: usize, dir: PathBuf },
    #[error("manifest: {0}")]
    Manifest(#[source] std::io::Error),
    #[error("manifest has no `{0}`")]
    ManifestField(&'static str),
    #[error("manifest names a bad .deb `{0}`")]
    BadDeb(String),
    #[error("{deb} has sha256 {actual}, the manifest says {expected}")]
    Sha256 {
        deb: String,
        actual: String,
        expected: String,
    },
    #[error("{} is missing", .0.display())]
    Missing(PathBuf),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tool(#[from] ToolError),
}

/// An unpacked kernel, ready to boot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kernel {
    /// `debian:<version>`.
    pub name: String,
    /// `uname -r` of the kernel, e.g. `6.1.0-57-cloud-amd64`.
    pub version: String,
    /// The Debian package it came from.
    pub package: String,
    /// sha256 of the package file.
    pub deb_sha256: String,
    /// `boot/vmlinuz-<version>`.
    pub vmlinuz: PathBuf,
    /// `lib/modules/<version>`.
    pub modules: PathBuf,
    /// Whether this call downloaded it (false: reused from the cache).
    pub downloaded: bool,
}

/// The Debian kernel `name` names (`debian:<version>`, by
/// `farm_spec::Kernel`: a version that can only ever be one argument of a
/// package name and one path component, with the arch of its flavour).
/// Whether this agent boots guests of that arch is the guest machine's to
/// say.
pub fn debian(name: &str) -> Result<DebianKernel, Error> {
    match parse(name)? {
        SpecKernel::Debian(d) => Ok(d),
        _ => Err(Error::Name(
            name.to_string(),
            "must be debian:<version>".into(),
        )),
    }
}

/// `name` parsed by `farm_spec`, the error naming it.
fn parse(name: &str) -> Result<SpecKernel, Error> {
    name.parse().map_err(|e| match e {
        // These say nothing of the name.
        KernelError::Empty | KernelError::TooLong | KernelError::Whitespace => {
            Error::Name(name.to_string(), e.to_string())
        }
        e => Error::Spec(e),
    })
}

/// Resolves `name` (`debian:<version>`) to an unpacked kernel under `cache`,
/// downloading it when the cache has no valid copy.
pub fn resolve(name: &str, cache: &Path) -> Result<Kernel, Error> {
    let debian = debian(name)?;
    let (version, arch) = (debian.version(), debian.arch());
    let step = |step: &'static str| {
        move |cause: Cause| Error::Step {
            kernel: name.to_string(),
            step,
            source: cause,
        }
    };
    let io = |step_name: &'static str| {
        move |e: std::io::Error| Error::Step {
            kernel: name.to_string(),
            step: step_name,
            source: Cause::Io(e),
        }
    };
    let dir = cache.join("kernels");
    fs::create_dir_all(&dir).map_err(io("create the cache directory"))?;
    let lock = fs::File::create(dir.join(format!("{version}.lock"))).map_err(io("lock"))?;
    lock.lock().map_err(io("lock"))?;
    let entry = dir.join(version);

    if entry.join("manifest").is_file() {
        match check_entry(&entry, name, version) {
            Ok(kernel) => {
                tracing::debug!(kernel = name, "kernel reused from the cache");
                return Ok(kernel);
            }
            Err(why) => {
                tracing::warn!(kernel = name, %why, "cached kernel invalid, downloading again")
            }
        }
    }
    if entry.exists() {
        fs::remove_dir_all(&entry).map_err(io("remove the invalid cache entry"))?;
    }

    for tool in [APT_GET, apt::APT_CACHE, apt::DPKG, DPKG_DEB] {
        if !Path::new(tool).is_file() {
            return Err(step("find tools")(Cause::NoTool(tool)));
        }
    }
    let tmp = dir.join(format!("{version}.{}", unique_suffix()));
    fs::create_dir_all(&tmp).map_err(io("create a download directory"))?;
    let built = (|| {
        let package = download(version, arch, &tmp).map_err(step("apt-get download"))?;
        let deb = find_deb(&tmp).map_err(step("find the downloaded .deb"))?;
        let sha = sha256_file(&deb).map_err(|e| step("sha256 of the .deb")(e.into()))?;
        run_tool(
            Path::new(DPKG_DEB),
            &[
                std::ffi::OsStr::new("-x"),
                deb.as_os_str(),
                tmp.join("root").as_os_str(),
            ],
            None,
        )
        .map_err(|e| step("dpkg-deb -x")(e.into()))?;
        let deb_name = deb.file_name().unwrap_or_default().to_string_lossy();
        fs::write(
            tmp.join("manifest"),
            format!("package {package}\ndeb {deb_name}\nsha256 {sha}\n"),
        )
        .map_err(io("write the manifest"))?;
        Ok(())
    })();
    if let Err(e) = built {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, &entry).map_err(io("move into the cache"))?;
    let mut kernel =
        check_entry(&entry, name, version).map_err(step("check the unpacked kernel"))?;
    kernel.downloaded = true;
    tracing::info!(kernel = name, package = %kernel.package, sha256 = %kernel.deb_sha256, "kernel downloaded");
    Ok(kernel)
}

/// `apt-get download` of the `-unsigned` package, or the plain one when
/// there is no `-unsigned` package, of `arch` (a foreign arch must have
/// been added with `dpkg --add-architecture`); returns the package name.
/// Only a package apt knows by exactly its name is downloaded: a version
/// holds `.`, and apt would read a name it does not know as a pattern.
fn download(version: &str, arch: Arch, dir: &Path) -> Result<String, Cause> {
    let deb_arch = arch.deb_arch();
    let candidates = [
        format!("linux-image-{version}-unsigned"),
        format!("linux-image-{version}"),
    ];
    let native = apt::native_arch().map_err(apt::Error::from)?;
    let missing = apt::missing(&candidates, deb_arch, &native)?;
    let mut errors = Vec::new();
    for package in candidates.iter().filter(|p| !missing.contains(p)) {
        let package = format!("{package}:{deb_arch}");
        match run_tool(
            Path::new(APT_GET),
            &["download", package.as_str()],
            Some(dir),
        ) {
            Ok(_) => return Ok(package),
            Err(e) => errors.push((package, e)),
        }
    }
    if errors.is_empty() {
        // Both candidates are missing.
        let names = missing.iter().map(|p| format!("{p}:{deb_arch}")).collect();
        return Err(apt::Error::NoPackage(names).into());
    }
    Err(Cause::Download(errors))
}

/// The kernels cached under `cache` (as [`resolve`] lays them out), as
/// `debian:<version>` names, sorted; entries without a manifest (being
/// built, or broken) are left out.
pub fn cached(cache: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(cache.join("kernels")) else {
        return Vec::new();
    };
    let mut out: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("manifest").is_file())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.to_owned();
            // Not a build's or an eviction's temporary sibling.
            let name = format!("debian:{version}");
            debian(&name).is_ok().then_some(name)
        })
        .collect();
    out.sort();
    out
}

/// What a kernel image is for, by its magic: an x86 bzImage has `HdrS` at
/// 0x202, an s390x image `S390EP` at 0x10008 (what `file` reads too).
pub fn image_arch(head: &[u8]) -> Option<Arch> {
    if head.get(0x202..0x206) == Some(b"HdrS") {
        Some(Arch::X86_64)
    } else if head.get(0x10008..0x1000e) == Some(b"S390EP") {
        Some(Arch::S390x)
    } else {
        None
    }
}

/// A `file:<path>` kernel: an image of the agent's operator, booted as is.
/// It must lie (after resolving links) inside one of `dirs`, the
/// directories the agent was told to boot kernels from: a matrix names a
/// file, and the agent must not read any file a submitter names. Modules,
/// when the image has some, sit beside it in `<image>.modules/` (a
/// `lib/modules/<release>` tree).
pub fn resolve_file(name: &str, dirs: &[PathBuf]) -> Result<(Kernel, Arch), Error> {
    let bad = |why: String| Error::Name(name.to_string(), why);
    let path = match parse(name)? {
        SpecKernel::File(p) => p.path().to_string(),
        _ => return Err(bad("must be file:<absolute path>".into())),
    };
    let path = path.as_str();
    // One answer for everything outside the kernel directories, whether
    // it exists or not: the agent tells a submitter nothing about its files.
    let outside = || bad("not inside a kernel directory of this agent (--kernel-dir)".into());
    let lexically_inside = dirs.iter().any(|d| Path::new(path).starts_with(d));
    let real = fs::canonicalize(path).map_err(|e| {
        if lexically_inside {
            bad(format!("{path}: {e}"))
        } else {
            outside()
        }
    })?;
    let allowed = dirs
        .iter()
        .filter_map(|d| fs::canonicalize(d).ok())
        .any(|d| real.starts_with(&d) && real != d);
    if !allowed {
        return Err(outside());
    }
    let mut head = vec![0u8; 0x10010];
    let n = {
        use std::io::Read;
        let mut f = fs::File::open(&real).map_err(|e| bad(format!("{}: {e}", real.display())))?;
        let mut n = 0;
        loop {
            match f.read(&mut head[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return Err(bad(format!("{}: {e}", real.display()))),
            }
            if n == head.len() {
                break;
            }
        }
        n
    };
    let arch = image_arch(&head[..n]).ok_or_else(|| {
        bad(format!(
            "{} is neither an x86 bzImage nor an s390x kernel image",
            real.display()
        ))
    })?;
    let sha = sha256_file(&real).map_err(|e| bad(e.to_string()))?;
    let modules = PathBuf::from(format!("{}.modules", real.display()));
    let version = real
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((
        Kernel {
            name: name.to_string(),
            version,
            package: String::new(),
            deb_sha256: sha,
            vmlinuz: real,
            modules,
            downloaded: false,
        },
        arch,
    ))
}

/// The kernel images in `dirs` (not recursing), as `file:<path>` names
/// with their arch.
pub fn file_kernels(dirs: &[PathBuf]) -> Vec<(String, Arch)> {
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = format!("file:{}", path.display());
            if !path.is_file() {
                continue;
            }
            if let Ok((_, arch)) = resolve_file(&name, dirs) {
                out.push((name, arch));
            }
        }
    }
    out.sort();
    out
}

fn find_deb(dir: &Path) -> Result<PathBuf, Cause> {
    let mut debs = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "deb") {
            debs.push(path);
        }
    }
    match debs.len() {
        1 => Ok(debs.remove(0)),
        count => Err(Cause::Debs {
            count,
            dir: dir.to_path_buf(),
        }),
    }
}

fn check_entry(entry: &Path, name: &str, version: &str) -> Result<Kernel, Cause> {
    let manifest = fs::read_to_string(entry.join("manifest")).map_err(Cause::Manifest)?;
    let field = |key: &'static str| {
        manifest
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' '))
            .map(str::to_string)
            .ok_or(Cause::ManifestField(key))
    };
    let (package, deb, sha) = (field("package")?, field("deb")?, field("sha256")?);
    if deb.contains('/') {
        return Err(Cause::BadDeb(deb));
    }
    let actual = sha256_file(&entry.join(&deb))?;
    if actual != sha {
        return Err(Cause::Sha256 {
            deb,
            actual,
            expected: sha,
        });
    }
    let root = entry.join("root");
    let vmlinuz = root.join("boot").join(format!("vmlinuz-{version}"));
    let modules = root.join("lib").join("modules").join(version);
    if !vmlinuz.is_file() {
        return Err(Cause::Missing(vmlinuz));
    }
    if !modules.is_dir() {
        return Err(Cause::Missing(modules));
    }
    Ok(Kernel {
        name: name.to_string(),
        version: version.to_string(),
        package,
        deb_sha256: sha,
        vmlinuz,
        modules,
        downloaded: false,
    })
}

#[cfg(test)]
mod tests;
