//! The guest cache (`--guest-cache`), where guest kernels, kernels built
//! from trees, sysroots and images are kept, and keeping it within a byte
//! budget: least recently used entries are evicted, leftovers of
//! interrupted runs and builds swept. It sits below both of its writers,
//! the guest executor and [`crate::kernel`], and knows neither.
//!
//! What the cache holds (see [`kernels`](crate::executor::guest::image::kernels),
//! [`sysroot`](crate::executor::guest::image::sysroot),
//! [`initramfs`](crate::executor::guest::image::initramfs),
//! [`kernel::build`](crate::kernel::build),
//! [`kvm`](crate::executor::guest::machine::kvm)):
//!
//! - `kernels/<version>/` (an entry) and `kernels/<version>.lock`;
//! - `sysroots/<arch>/<key>/` (an entry) and `sysroots/<arch>/<key>.lock`;
//! - `images/initramfs/<sha256>.cpio.gz` (an entry; no lock: an image is
//!   written to a temporary sibling and renamed into place);
//! - `builds/<key>/` (an entry: a kernel built from a tree, kept whole by
//!   renaming its work directory) and `builds/<key>.lock`; beside them
//!   `builds/<key>.failed` (a lasting failure, a few hundred bytes, kept
//!   until removed by hand) and `builds/work-<key>-*` (a build under way,
//!   or a killed one's, removed by the next build of that key), neither
//!   counted nor evicted; `ccache/` (bounded by ccache itself:
//!   `kernel::build::CCACHE_MAX_SIZE`, not counted);
//! - temporary siblings of entries being built: `<version>.tmp-<pid>-<n>`,
//!   `<key>.tmp-<pid>-<n>`, `images/initramfs/tmp-<pid>-<n>[.gz]` (names
//!   made by [`unique_suffix`]);
//! - `samplers/<arch>-<sha256>` (the in-guest sampler,
//!   [`sampler`](crate::executor::guest::image::sampler):
//!   under a megabyte, built once per arch, source and compiler; neither
//!   counted nor evicted);
//! - `kvm-probe` (the KVM verdict: small, never removed) and the temporary
//!   directories of runs (`run-*`) and of the probe (`kvm-probe-*`).
//!
//! **Last use.** [`touch`] sets the modification time of the entry itself:
//! the file of an image, the directory of a kernel or sysroot (its own
//! mtime, not a stamp file inside: nothing is added to the entries the
//! builders check, and a directory's mtime changes only when a direct child
//! is added or removed, which the builders do only while building). A fresh
//! entry's mtime is therefore its build time even when nobody touched it.
//!
//! **What is evicted.** The budget covers the entries (kernels, sysroots,
//! images); lock files, `kvm-probe`, run directories and temporary siblings
//! are not counted. When the entries' total exceeds the budget, the least
//! recently used are removed ([`choose`]) until it fits, except entries
//! used within [`IN_USE`] (10 minutes): a run touches its kernel, sysroots,
//! build and image while it prepares, and QEMU has read the kernel and image
//! (kept open or copied into the guest's memory) by the time it boots, so
//! 10 minutes covers preparing a guest with a wide margin. Entries that
//! cannot be removed (lock held, recently touched, an error) stay and count;
//! the total may then remain above the budget.
//!
//! **Removing safely.** A kernel, sysroot or build is removed holding its
//! `<entry>.lock` as the builders take it (`File::lock`, i.e. `flock`, on
//! the same path), taken with `try_lock`: a held lock means a build or
//! check is under way and the entry is skipped. Under the lock the entry's
//! mtime is read again (a touch since the scan keeps it), then the entry is
//! renamed to a temporary sibling (it disappears at once for readers
//! without the lock, such as the KVM probe looking for a kernel) and that
//! is deleted. Lock files are never removed: a builder waiting on the old
//! lock file while a new one is created would let two builders in at once.
//! Images are plain files removed with one `unlink`; a reader that opened
//! one keeps reading it.
//!
//! **Sweeping.** `run-*` and `kvm-probe-*` directories (temporary
//! directories removed when a run ends; left by a killed agent) are removed
//! once nothing in them changed for [`STALE_RUN`] (a day); temporary
//! siblings once nothing in them changed for [`STALE_TEMP`] (an hour), and
//! for kernels and sysroots only while the entry's lock is free (builders
//! create and rename them under it).
//!
//! Sizes are the apparent sizes of the regular files, found by walking
//! the tree without following symlinks (a kernel's tree has absolute
//! symlinks).
//!
//! Agents sharing one cache: an entry that a builder has just found valid
//! and released its lock on, but that its caller has not touched yet, can
//! be evicted by another agent in that short window; calling [`touch`]
//! right after each cache hit keeps the window to a few instructions.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

/// A name unique within this machine for a temporary sibling of a cache entry.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "tmp-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Entries used this recently are never evicted: a guest being prepared
/// (or just booting) may need them.
pub const IN_USE: Duration = Duration::from_secs(10 * 60);
/// A `run-*` or `kvm-probe-*` directory in which nothing changed for this
/// long is left over by a killed agent.
pub const STALE_RUN: Duration = Duration::from_secs(24 * 60 * 60);
/// A temporary sibling in which nothing changed for this long is left over
/// by an interrupted build.
pub const STALE_TEMP: Duration = Duration::from_secs(60 * 60);

/// What a path in the cache is. Entries order as they are cheaper to
/// rebuild (an image in a second, a kernel by a download, a build in
/// minutes of both CPUs), which breaks ties between entries last used at
/// the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `images/initramfs/<sha256>.cpio.gz`.
    Image,
    /// `sysroots/<arch>/<key>/`.
    Sysroot,
    /// `kernels/<version>/`.
    Kernel,
    /// `builds/<key>/`.
    Build,
    /// A `run-*` or `kvm-probe-*` temporary directory (swept, not evicted).
    Run,
    /// A temporary sibling of an entry (swept, not evicted).
    Temp,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Image => "image",
            Kind::Sysroot => "sysroot",
            Kind::Kernel => "kernel",
            Kind::Build => "built kernel",
            Kind::Run => "run directory",
            Kind::Temp => "temporary",
        }
    }
}

/// One path of the cache, as [`choose`] weighs it and [`Evicted`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: PathBuf,
    /// Apparent size of its regular files.
    pub bytes: u64,
    /// Last use: the entry's own mtime (for a swept run directory or
    /// temporary, the newest mtime in it).
    pub used: SystemTime,
    pub kind: Kind,
}

/// What [`evict`] did.
#[derive(Debug, Default)]
pub struct Evicted {
    /// Entries evicted and run directories and temporaries swept.
    pub removed: Vec<Entry>,
    /// Their total size.
    pub bytes: u64,
    /// Total size of the entries left (may exceed the budget when recently
    /// used or locked entries alone do).
    pub kept_bytes: u64,
    /// Entries skipped because their lock was held.
    pub locked: Vec<PathBuf>,
    /// Entries that could not be measured or removed; they stay (and count).
    pub failed: Vec<Error>,
}

/// An operation on a path of the cache that failed.
#[derive(Debug, thiserror::Error)]
#[error("guest cache: {what} {}: {source}", path.display())]
pub struct Error {
    pub path: PathBuf,
    pub what: &'static str,
    #[source]
    pub source: io::Error,
}

fn err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> Error {
    move |source| Error {
        path: path.to_path_buf(),
        what,
        source,
    }
}

/// Marks the entry at `path` (an image file, or a kernel's, sysroot's or
/// build's directory; see [`entry_of`]) as used now, by setting its mtime. A failure
/// is logged only: the entry may then be evicted sooner, and is rebuilt
/// when needed again.
pub fn touch(path: &Path) {
    let r = File::open(path).and_then(|f| f.set_modified(SystemTime::now()));
    if let Err(e) = r {
        tracing::warn!(path = %path.display(), error = %e, "cannot mark a guest cache entry used");
    }
}

/// The entry of `cache` that holds `path` (a path under `cache`):
/// `kernels/<version>`, `sysroots/<arch>/<key>`, `builds/<key>` or
/// `images/initramfs/<file>`; `None` for any other path. E.g. a kernel's
/// `vmlinuz` gives its `kernels/<version>`, a sysroot's `root` its entry.
pub fn entry_of(cache: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(cache).ok()?;
    let parts = rel
        .components()
        .map(|c| match c {
            Component::Normal(s) => Some(s),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let depth = match parts.first()?.to_str()? {
        "kernels" | "builds" => 2,
        "sysroots" => 3,
        "images" if parts.get(1).is_some_and(|p| *p == "initramfs") => 3,
        _ => return None,
    };
    (parts.len() >= depth).then(|| {
        parts[..depth]
            .iter()
            .fold(cache.to_path_buf(), |p, c| p.join(c))
    })
}

/// Whether something last used at `used` counts as used within `window`
/// of `now` (a time after `now`, from a skewed clock, does).
fn within(used: SystemTime, now: SystemTime, window: Duration) -> bool {
    now.duration_since(used).map_or(true, |age| age < window)
}

/// Which of `entries` to evict so that their total size fits `budget`:
/// indices into `entries`, least recently used first (ties: the cheaper
/// kind to rebuild, then by path), as few as needed. Entries used within
/// `in_use` of `now` are never chosen but count toward the total; when they
/// alone exceed the budget every other entry is chosen.
pub fn choose(entries: &[Entry], budget: u64, now: SystemTime, in_use: Duration) -> Vec<usize> {
    // Exact: u128 cannot overflow for any number of u64 sizes here.
    let mut total: u128 = entries.iter().map(|e| u128::from(e.bytes)).sum();
    let mut candidates: Vec<usize> = (0..entries.len())
        .filter(|&i| !within(entries[i].used, now, in_use))
        .collect();
    candidates.sort_by(|&a, &b| {
        let (a, b) = (&entries[a], &entries[b]);
        a.used
            .cmp(&b.used)
            .then(a.kind.cmp(&b.kind))
            .then_with(|| a.path.cmp(&b.path))
    });
    let mut chosen = Vec::new();
    for i in candidates {
        if total <= u128::from(budget) {
            break;
        }
        total -= u128::from(entries[i].bytes);
        chosen.push(i);
    }
    chosen
}

/// Whether a swept path whose newest change is `newest` is older than `after`.
fn stale(newest: SystemTime, now: SystemTime, after: Duration) -> bool {
    now.duration_since(newest).is_ok_and(|age| age > after)
}

/// Evicts least recently used entries of `cache` until the entries total
/// at most `budget_bytes` (see the module's documentation for what is kept),
/// and sweeps stale run directories and temporary siblings. A cache that
/// does not exist is empty. An error is returned only when a directory of
/// the layout cannot be listed; problems with single entries are logged,
/// reported in [`Evicted::failed`], and the entry is kept.
pub fn evict(cache: &Path, budget_bytes: u64) -> Result<Evicted, Error> {
    let now = SystemTime::now();
    let mut out = Evicted::default();
    let scan = scan(cache, &mut out.failed)?;

    for t in scan.sweep {
        let limit = if t.kind == Kind::Run {
            STALE_RUN
        } else {
            STALE_TEMP
        };
        if !stale(t.used, now, limit) {
            continue;
        }
        // A kernel's or sysroot's temporary is only built under its lock.
        let _guard = match temp_lock(&t.path) {
            None => None,
            Some(lock) => match try_lock(&lock) {
                Ok(Some(f)) => Some(f),
                Ok(None) => continue,
                Err(e) => {
                    warn_failed(&e);
                    out.failed.push(e);
                    continue;
                }
            },
        };
        match remove(&t.path) {
            Ok(()) => {
                tracing::info!(
                    path = %t.path.display(),
                    bytes = t.bytes,
                    idle_h = hours(now, t.used),
                    "removed a stale {} from the guest cache",
                    t.kind.name()
                );
                out.bytes += t.bytes;
                out.removed.push(t);
            }
            Err(e) if e.source.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                warn_failed(&e);
                out.failed.push(e);
            }
        }
    }

    let mut entries = scan.entries;
    loop {
        let plan = choose(&entries, budget_bytes, now, IN_USE);
        if plan.is_empty() {
            break;
        }
        let mut gone = vec![false; entries.len()];
        for i in plan {
            match remove_entry(&entries[i], now) {
                Ok(Outcome::Removed) => {
                    let e = &entries[i];
                    tracing::info!(
                        path = %e.path.display(),
                        bytes = e.bytes,
                        idle_h = hours(now, e.used),
                        budget_bytes,
                        "evicted a {} from the guest cache",
                        e.kind.name()
                    );
                    out.bytes += e.bytes;
                    out.removed.push(e.clone());
                    gone[i] = true;
                }
                Ok(Outcome::Gone) => gone[i] = true,
                // In use after all: kept, and counted as used now so that
                // the next plan chooses others.
                Ok(Outcome::Locked) => {
                    tracing::debug!(path = %entries[i].path.display(), "cache entry locked, not evicted");
                    out.locked.push(entries[i].path.clone());
                    entries[i].used = now;
                }
                Ok(Outcome::Touched) => entries[i].used = now,
                Err(e) => {
                    warn_failed(&e);
                    out.failed.push(e);
                    entries[i].used = now;
                }
            }
        }
        let mut i = 0;
        entries.retain(|_| {
            i += 1;
            !gone[i - 1]
        });
    }
    out.kept_bytes = entries
        .iter()
        .fold(0u64, |sum, e| sum.saturating_add(e.bytes));
    if !out.removed.is_empty() {
        tracing::info!(
            removed = out.removed.len(),
            bytes = out.bytes,
            kept_bytes = out.kept_bytes,
            budget_bytes,
            "guest cache evicted"
        );
    }
    Ok(out)
}

fn warn_failed(e: &Error) {
    tracing::warn!(error = %e, "guest cache entry kept");
}

fn hours(now: SystemTime, then: SystemTime) -> u64 {
    now.duration_since(then).unwrap_or_default().as_secs() / 3600
}

/// The cache's entries and what may be swept.
struct Scan {
    entries: Vec<Entry>,
    sweep: Vec<Entry>,
}

/// Lists `dir`'s children; a missing directory has none.
fn children(dir: &Path) -> Result<Vec<fs::DirEntry>, Error> {
    match fs::read_dir(dir) {
        Ok(rd) => rd.collect::<Result<Vec<_>, _>>().map_err(err("list", dir)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(err("list", dir)(e)),
    }
}

fn scan(cache: &Path, failed: &mut Vec<Error>) -> Result<Scan, Error> {
    let mut s = Scan {
        entries: Vec::new(),
        sweep: Vec::new(),
    };
    // Adds the path measured: entries by their own mtime, the rest by the
    // newest mtime in them.
    let mut add = |s: &mut Scan, path: PathBuf, kind: Kind| match measure(&path) {
        Ok(Some(m)) => {
            let swept = matches!(kind, Kind::Run | Kind::Temp);
            let e = Entry {
                path,
                bytes: m.bytes,
                used: if swept { m.newest } else { m.own },
                kind,
            };
            if swept {
                s.sweep.push(e)
            } else {
                s.entries.push(e)
            }
        }
        Ok(None) => {}
        Err(e) => {
            warn_failed(&e);
            failed.push(e);
        }
    };

    for c in children(cache)? {
        let name = c.file_name();
        let name = name.to_string_lossy();
        let is_dir = c.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && (name.starts_with("run-") || name.starts_with("kvm-probe-")) {
            add(&mut s, c.path(), Kind::Run);
        }
    }

    let mut locked_dirs = vec![(cache.join("kernels"), Kind::Kernel)];
    for c in children(&cache.join("sysroots"))? {
        if c.file_type().is_ok_and(|t| t.is_dir()) {
            locked_dirs.push((c.path(), Kind::Sysroot));
        }
    }
    for c in children(&cache.join("builds"))? {
        let name = c.file_name();
        let name = name.to_string_lossy();
        // Work directories and kept failures are the builder's (see above).
        if !c.file_type().is_ok_and(|t| t.is_dir()) || name.starts_with("work-") {
            continue;
        }
        if temp_base(&name).is_some_and(|b| !b.is_empty()) {
            add(&mut s, c.path(), Kind::Temp);
        } else {
            add(&mut s, c.path(), Kind::Build);
        }
    }
    for (dir, kind) in locked_dirs {
        for c in children(&dir)? {
            let name = c.file_name();
            let name = name.to_string_lossy();
            if name.ends_with(".lock") {
                continue;
            }
            if temp_base(&name).is_some_and(|b| !b.is_empty()) {
                add(&mut s, c.path(), Kind::Temp);
            } else if c.file_type().is_ok_and(|t| t.is_dir()) {
                add(&mut s, c.path(), kind);
            }
        }
    }

    let images = cache.join("images/initramfs");
    for c in children(&images)? {
        let name = c.file_name();
        let name = name.to_string_lossy();
        if !c.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        if temp_base(&name) == Some("") {
            add(&mut s, c.path(), Kind::Temp);
        } else if name.ends_with(".cpio.gz") {
            add(&mut s, c.path(), Kind::Image);
        }
    }
    Ok(s)
}

/// A temporary name made with [`unique_suffix`]: `<base>.tmp-<pid>-<n>`
/// gives `base`; `tmp-<pid>-<n>` and `tmp-<pid>-<n>.gz` (the initramfs
/// builder's) give `""`.
fn temp_base(name: &str) -> Option<&str> {
    let i = name.rfind("tmp-")?;
    let (head, tail) = (&name[..i], &name[i + 4..]);
    let tail = if head.is_empty() {
        tail.strip_suffix(".gz").unwrap_or(tail)
    } else {
        tail
    };
    let (pid, n) = tail.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(n) {
        return None;
    }
    if head.is_empty() {
        Some("")
    } else {
        head.strip_suffix('.').filter(|b| !b.is_empty())
    }
}

/// The lock file of the entry whose temporary sibling `path` is
/// (`kernels/<v>.tmp-1-2` → `kernels/<v>.lock`); `None` for an image's.
fn temp_lock(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    let base = temp_base(name).filter(|b| !b.is_empty())?;
    Some(path.with_file_name(format!("{base}.lock")))
}

/// The lock file of a kernel, sysroot or build entry: `<entry>.lock`.
fn entry_lock(path: &Path) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    Some(path.with_file_name(format!("{name}.lock")))
}

/// Sizes and times of a path, without following symlinks.
struct Measured {
    bytes: u64,
    own: SystemTime,
    newest: SystemTime,
}

/// Measures `path` by walking it; `None` when it vanished meanwhile.
fn measure(path: &Path) -> Result<Option<Measured>, Error> {
    let meta = match fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(err("stat", path)(e)),
    };
    let own = meta.modified().map_err(err("stat", path))?;
    let mut m = Measured {
        bytes: if meta.is_file() { meta.len() } else { 0 },
        own,
        newest: own,
    };
    let mut dirs = if meta.is_dir() {
        vec![path.to_path_buf()]
    } else {
        Vec::new()
    };
    while let Some(dir) = dirs.pop() {
        for c in children(&dir)? {
            let p = c.path();
            // DirEntry::metadata does not follow symlinks.
            let meta = match c.metadata() {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(err("stat", &p)(e)),
            };
            if let Ok(t) = meta.modified() {
                m.newest = m.newest.max(t);
            }
            if meta.is_dir() {
                dirs.push(p);
            } else if meta.is_file() {
                m.bytes = m.bytes.saturating_add(meta.len());
            }
        }
    }
    Ok(Some(m))
}

/// Opens `lock` as the builders do and takes it if free: `None` when
/// another holds it.
fn try_lock(lock: &Path) -> Result<Option<File>, Error> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock)
        .map_err(err("open the lock", lock))?;
    match f.try_lock() {
        Ok(()) => Ok(Some(f)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(err("lock", lock)(e)),
    }
}

/// Removes a file, or a directory and everything in it (symlinks are
/// removed, never followed).
fn remove(path: &Path) -> Result<(), Error> {
    let meta = fs::symlink_metadata(path).map_err(err("stat", path))?;
    if meta.is_dir() {
        fs::remove_dir_all(path).map_err(err("remove", path))
    } else {
        fs::remove_file(path).map_err(err("remove", path))
    }
}

enum Outcome {
    Removed,
    /// Someone else removed it.
    Gone,
    /// Its lock is held.
    Locked,
    /// Used since the scan.
    Touched,
}

/// Removes one entry chosen for eviction, under its lock if it has one.
fn remove_entry(e: &Entry, now: SystemTime) -> Result<Outcome, Error> {
    let _guard = match e.kind {
        Kind::Kernel | Kind::Sysroot | Kind::Build => {
            let lock = entry_lock(&e.path).ok_or_else(|| Error {
                path: e.path.clone(),
                what: "find the lock of",
                source: io::Error::other("not a cache entry"),
            })?;
            match try_lock(&lock)? {
                Some(f) => Some(f),
                None => return Ok(Outcome::Locked),
            }
        }
        _ => None,
    };
    let used = match fs::symlink_metadata(&e.path) {
        Ok(m) => m.modified().map_err(err("stat", &e.path))?,
        Err(x) if x.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Gone),
        Err(x) => return Err(err("stat", &e.path)(x)),
    };
    if within(used, now, IN_USE) {
        return Ok(Outcome::Touched);
    }
    match e.kind {
        Kind::Kernel | Kind::Sysroot | Kind::Build => {
            // Gone for every reader at once; the rest is a temporary
            // sibling, swept later should its removal fail.
            let name = e.path.file_name().unwrap_or_default().to_string_lossy();
            let doomed = e.path.with_file_name(format!("{name}.{}", unique_suffix()));
            fs::rename(&e.path, &doomed).map_err(err("move away", &e.path))?;
            remove(&doomed)?;
        }
        _ => match fs::remove_file(&e.path) {
            Ok(()) => {}
            Err(x) if x.kind() == io::ErrorKind::NotFound => return Ok(Outcome::Gone),
            Err(x) => return Err(err("remove", &e.path)(x)),
        },
    }
    Ok(Outcome::Removed)
}

#[cfg(test)]
mod tests;
