//! The guest's initramfs: busybox-static with its applet links and an
//! `/init` (busybox sh). The newc cpio archive is written here (a tiny
//! format: a 110-byte ASCII header, the name, the data, each padded to 4
//! bytes) so that device nodes need no privileges and the archive is
//! deterministic; `gzip -n` compresses it. The result is cached under
//! `<cache>/initramfs/<sha256 of the cpio>.cpio.gz`: the cpio is a pure
//! function of the inputs (busybox, its applet list, the init script and
//! the other members). The `/init` of a run's image is the runner
//! ([`crate::executor::guest::runner::RUNNER`]); the KVM probe has one of
//! its own.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::tool::{ToolError, run_tool, sha256_file};
use crate::cache::unique_suffix;

/// Where the Debian package `busybox-static` installs busybox.
pub const BUSYBOX: &str = "/bin/busybox";
const GZIP: &str = "/usr/bin/gzip";

/// Why an initramfs could not be built: the step, and what went wrong in it.
#[derive(Debug, thiserror::Error)]
#[error("initramfs: {step}: {source}")]
pub struct Error {
    pub step: &'static str,
    pub source: Cause,
}

/// What went wrong in a step of building an initramfs.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    #[error("{} is missing (install the Debian package busybox-static)", .0.display())]
    NoBusybox(PathBuf),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tool(#[from] ToolError),
}

fn step<E: Into<Cause>>(step: &'static str) -> impl Fn(E) -> Error {
    move |e| Error {
        step,
        source: e.into(),
    }
}

fn io(s: &'static str) -> impl Fn(std::io::Error) -> Error {
    step(s)
}

/// An initramfs in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initramfs {
    pub path: PathBuf,
    /// sha256 of the uncompressed cpio: the cache key.
    pub key: String,
    /// Whether this call wrote it (false: reused).
    pub built: bool,
}

/// How busybox's applets (`mount`, `cat`, ...) get their links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applets {
    /// Listed by running busybox here: the archive carries every link.
    Listed,
    /// A busybox of another arch cannot run here: the archive carries
    /// `/bin/sh` only, and `/init` runs `busybox --install -s` first.
    InstalledAtBoot,
}

/// Builds (or reuses) under `cache` the initramfs with `busybox` (a static
/// busybox for the guest's arch, normally [`BUSYBOX`] on x86_64), `init` as
/// `/init`, and `extra` members (added after the busybox tree; their
/// directories must be among them or the base ones).
pub fn build_with(
    cache: &Path,
    busybox: &Path,
    applets: Applets,
    init: &str,
    extra: &[Entry<'_>],
) -> Result<Initramfs, Error> {
    if !busybox.is_file() {
        return Err(step("find busybox")(Cause::NoBusybox(
            busybox.to_path_buf(),
        )));
    }
    let dir = cache.join("initramfs");
    fs::create_dir_all(&dir).map_err(io("create the cache directory"))?;
    let applets = match applets {
        Applets::Listed => {
            let out =
                run_tool(busybox, &["--list-full"], None).map_err(step("busybox --list-full"))?;
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        Applets::InstalledAtBoot => "bin/sh\n".to_string(),
    };
    let busybox_bytes = fs::read(busybox).map_err(io("read busybox"))?;
    let mut members = entries(&busybox_bytes, &applets, init);
    members.extend(extra.iter().cloned());
    let cpio = newc(&members);

    let tmp = dir.join(unique_suffix());
    fs::write(&tmp, &cpio).map_err(io("write the cpio"))?;
    let key = sha256_file(&tmp);
    let key = match key {
        Ok(k) => k,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(step("sha256 of the cpio")(e));
        }
    };
    let path = dir.join(format!("{key}.cpio.gz"));
    if path.is_file() {
        let _ = fs::remove_file(&tmp);
        return Ok(Initramfs {
            path,
            key,
            built: false,
        });
    }
    let gz = dir.join(format!("{}.gz", unique_suffix()));
    let gzipped = gzip(&tmp, &gz);
    let _ = fs::remove_file(&tmp);
    if let Err(e) = gzipped {
        let _ = fs::remove_file(&gz);
        return Err(step("gzip")(e));
    }
    fs::rename(&gz, &path).map_err(io("move into the cache"))?;
    tracing::info!(path = %path.display(), "initramfs built");
    Ok(Initramfs {
        path,
        key,
        built: true,
    })
}

fn gzip(from: &Path, to: &Path) -> Result<(), Cause> {
    let input = fs::File::open(from)?;
    let output = fs::File::create(to)?;
    let status = Command::new(GZIP)
        .args(["-n", "-6", "-c"])
        .stdin(input)
        .stdout(output)
        .stderr(Stdio::inherit())
        .status()
        .map_err(|source| ToolError::Spawn {
            program: GZIP.into(),
            source,
        })?;
    if !status.success() {
        return Err(ToolError::Status {
            program: GZIP.into(),
            status,
        }
        .into());
    }
    Ok(())
}

/// One archive member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry<'a> {
    Dir(String),
    File(String, u32, &'a [u8]),
    Symlink(String, String),
    /// name, mode bits, major, minor
    CharDev(String, u32, u32, u32),
}

/// The directories every initramfs has.
pub(crate) const BASE_DIRS: &[&str] = &[
    "bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root",
];

fn entries<'a>(busybox: &'a [u8], applets: &str, init: &'a str) -> Vec<Entry<'a>> {
    let mut out: Vec<Entry<'a>> = BASE_DIRS
        .iter()
        .map(|d| Entry::Dir(d.to_string()))
        .collect();
    out.push(Entry::CharDev("dev/console".into(), 0o600, 5, 1));
    out.push(Entry::CharDev("dev/null".into(), 0o666, 1, 3));
    out.push(Entry::File("bin/busybox".into(), 0o755, busybox));
    out.push(Entry::File("init".into(), 0o755, init.as_bytes()));
    let mut links: Vec<&str> = applets
        .lines()
        .map(|l| l.trim().trim_start_matches('/'))
        .filter(|l| {
            !l.is_empty() && *l != "bin/busybox" && !l.split('/').any(|c| c == ".." || c.is_empty())
        })
        .collect();
    links.sort_unstable();
    links.dedup();
    for link in links {
        out.push(Entry::Symlink(link.to_string(), "/bin/busybox".into()));
    }
    out
}

/// A newc ("070701") archive of `entries`, with the trailer.
pub(crate) fn newc(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (e, ino) in entries.iter().zip(1u32..) {
        let (name, mode, data, rdev): (&str, u32, &[u8], (u32, u32)) = match e {
            Entry::Dir(n) => (n, 0o040755, &[], (0, 0)),
            Entry::File(n, m, d) => (n, 0o100000 | m, d, (0, 0)),
            Entry::Symlink(n, t) => (n, 0o120777, t.as_bytes(), (0, 0)),
            Entry::CharDev(n, m, maj, min) => (n, 0o020000 | m, &[], (*maj, *min)),
        };
        let nlink = if matches!(e, Entry::Dir(_)) { 2 } else { 1 };
        member(&mut out, name, ino, mode, nlink, data, rdev);
    }
    member(&mut out, "TRAILER!!!", 0, 0, 1, &[], (0, 0));
    out
}

fn member(
    out: &mut Vec<u8>,
    name: &str,
    ino: u32,
    mode: u32,
    nlink: u32,
    data: &[u8],
    rdev: (u32, u32),
) {
    let fields = [
        ino,
        mode,
        0, // uid
        0, // gid
        nlink,
        0, // mtime
        data.len() as u32,
        0, // devmajor
        0, // devminor
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0, // check
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        write!(out, "{f:08X}").expect("writing to a Vec");
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

#[cfg(test)]
mod tests;
