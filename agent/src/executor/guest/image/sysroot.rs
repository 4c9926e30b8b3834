//! Debian binaries of any architecture for guest initramfs images.
//!
//! s390x guests cannot run our own Rust binaries (only the x86_64 Rust
//! target exists here), so they run Debian's builds of the external
//! workloads (stress-ng, sysbench, rt-tests' hackbench) with busybox-static.
//! [`fetch`] gathers such packages of one Debian architecture, with the
//! library packages they depend on, into one unpacked tree (a "sysroot");
//! [`closure`] names the files a guest needs from it to run one binary.
//!
//! Layout of the cache: `<cache>/sysroots/<arch>/<key>/` holds `debs/`
//! (the downloaded packages), their unpacked union in `root/`, and
//! `manifest` (`arch`, `request` and one `package <name> <version> <deb>
//! <sha256>` line per package). The key is the sorted requested names
//! joined by commas. An entry is reused when its manifest matches the
//! request and every `.deb` still has its sha256; otherwise it is rebuilt
//! from a fresh download in a temporary sibling that is renamed into
//! place, under a lock file per entry (as [`super::kernels`] does).
//!
//! Which dependencies are fetched: `apt-cache depends --recurse` (Depends
//! and PreDepends only) gives the whole graph, then it is walked from the
//! requested packages through *library packages of the architecture* only
//! (`Multi-Arch: same` or Section `libs`): a guest needs the shared
//! libraries, not what a maintainer script or a helper script needs
//! (rt-tests depends on python3, which pulls perl, dpkg and tar; the
//! `-common` data packages are `Architecture: all`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ffi::OsStr;
use std::fs;
use std::path::{Component, Path, PathBuf};

use super::apt::{self, APT_CACHE, DPKG};
use super::tool::{run_tool, sha256_file};
use crate::cache::unique_suffix;

mod error;
pub use error::{Detail, Error};

const APT_GET: &str = "/usr/bin/apt-get";
const DPKG_DEB: &str = "/usr/bin/dpkg-deb";
const READELF: &str = "/usr/bin/readelf";

/// More symlinks than this while resolving one path is a loop.
const MAX_SYMLINKS: usize = 40;

/// One unpacked package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Package {
    pub name: String,
    pub version: String,
    /// File name of the `.deb` in the entry's `debs/`.
    pub deb: String,
    pub sha256: String,
}

/// Unpacked Debian packages of one arch, with the library packages they
/// depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sysroot {
    /// The unpacked tree: `usr/bin/stress-ng`, `lib/<triplet>/libc.so.6`, ...
    pub root: PathBuf,
    /// The Debian architecture (`s390x`, `amd64`).
    pub arch: String,
    /// The requested package names, sorted.
    pub requested: Vec<String>,
    /// Every package unpacked into `root`, sorted by name.
    pub packages: Vec<Package>,
    /// Whether this call downloaded it (false: reused from the cache).
    pub downloaded: bool,
}

/// Downloads `packages` (names without arch qualifier) for the Debian arch
/// `arch` together with the library packages they depend on, and unpacks
/// them into one root under `cache`; reuses a valid cached copy.
pub fn fetch(cache: &Path, arch: &str, packages: &[&str]) -> Result<Sysroot, Error> {
    let mut requested: Vec<String> = packages.iter().map(|p| p.to_string()).collect();
    requested.sort();
    requested.dedup();
    let fail = |step: &'static str| {
        let (arch, packages) = (arch.to_string(), requested.join(" "));
        move |detail: Detail| Error::Fetch {
            arch: arch.clone(),
            packages: packages.clone(),
            step,
            detail: Box::new(detail),
        }
    };
    let io = |step: &'static str| {
        let f = fail(step);
        move |e: std::io::Error| f(Detail::Io(e))
    };
    let key = cache_key(arch, &requested).map_err(fail("check the request"))?;

    let dir = cache.join("sysroots").join(arch);
    fs::create_dir_all(&dir).map_err(io("create the cache directory"))?;
    let lock = fs::File::create(dir.join(format!("{key}.lock"))).map_err(io("lock"))?;
    lock.lock().map_err(io("lock"))?;
    let entry = dir.join(&key);

    if entry.join("manifest").is_file() {
        match check_entry(&entry, arch, &requested) {
            Ok(sysroot) => {
                tracing::debug!(arch, key, "sysroot reused from the cache");
                return Ok(sysroot);
            }
            Err(why) => {
                tracing::warn!(arch, key, %why, "cached sysroot invalid, downloading again")
            }
        }
    }
    if entry.exists() {
        fs::remove_dir_all(&entry).map_err(io("remove the invalid cache entry"))?;
    }

    for tool in [APT_CACHE, APT_GET, DPKG, DPKG_DEB] {
        if !Path::new(tool).is_file() {
            return Err(fail("find tools")(Detail::NoAptTool(tool)));
        }
    }
    let native = check_arch(arch).map_err(fail("check the dpkg architectures"))?;
    let wanted = resolve(arch, &native, &requested).map_err(fail("resolve dependencies"))?;
    // apt-get would read a name it does not know as a pattern (see apt).
    apt::require(&wanted, arch, &native).map_err(|e| fail("apt-cache showpkg")(e.into()))?;
    tracing::info!(arch, packages = %wanted.join(" "), "downloading a sysroot");

    let tmp = dir.join(format!("{key}.{}", unique_suffix()));
    let debs = tmp.join("debs");
    fs::create_dir_all(&debs).map_err(io("create a download directory"))?;
    let built = (|| {
        let args: Vec<String> = std::iter::once("download".to_string())
            .chain(wanted.iter().map(|p| format!("{p}:{arch}")))
            .collect();
        run_tool(Path::new(APT_GET), &args, Some(&debs))
            .map_err(|e| fail("apt-get download")(Detail::Tool(e)))?;
        let packages = downloaded_packages(&debs, &wanted).map_err(fail("check the downloads"))?;
        let root = tmp.join("root");
        for p in &packages {
            let deb = debs.join(&p.deb);
            run_tool(
                Path::new(DPKG_DEB),
                &[OsStr::new("-x"), deb.as_os_str(), root.as_os_str()],
                None,
            )
            .map_err(|e| {
                fail("dpkg-deb -x")(Detail::ToolOn {
                    what: p.deb.clone(),
                    source: e,
                })
            })?;
        }
        fs::write(tmp.join("manifest"), manifest(arch, &requested, &packages))
            .map_err(io("write the manifest"))
    })();
    if let Err(e) = built {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    fs::rename(&tmp, &entry).map_err(io("move into the cache"))?;
    let mut sysroot =
        check_entry(&entry, arch, &requested).map_err(fail("check the unpacked sysroot"))?;
    sysroot.downloaded = true;
    tracing::info!(
        arch,
        key,
        packages = sysroot.packages.len(),
        "sysroot downloaded"
    );
    Ok(sysroot)
}

/// The cache key of a sorted request; names and arch are validated so that
/// each can only ever be one path component and one apt argument.
fn cache_key(arch: &str, requested: &[String]) -> Result<String, Detail> {
    if arch.is_empty()
        || !arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(Detail::BadArch(arch.to_owned()));
    }
    if requested.is_empty() {
        return Err(Detail::NoPackages);
    }
    for name in requested {
        validate_package_name(name)?;
    }
    let key = requested.join(",");
    if key.len() > 200 {
        return Err(Detail::KeyTooLong(requested.len()));
    }
    Ok(key)
}

/// Debian policy 5.6.1: lower case letters, digits, `+ - .`, at least two
/// characters, starting with a letter or digit.
fn validate_package_name(name: &str) -> Result<(), Detail> {
    let ok = name.len() >= 2
        && name.len() <= 100
        && name.as_bytes()[0].is_ascii_alphanumeric()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+-.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Detail::BadPackage(name.to_owned()))
    }
}

/// The native architecture; fails unless dpkg knows `arch`: apt cannot
/// download a foreign architecture's packages before it has been added and
/// its lists fetched.
fn check_arch(arch: &str) -> Result<String, Detail> {
    let native = apt::native_arch()?;
    let foreign = run_tool(Path::new(DPKG), &["--print-foreign-architectures"], None)?;
    arch_enabled(&native, &String::from_utf8_lossy(&foreign.stdout), arch)?;
    Ok(native)
}

fn arch_enabled(native: &str, foreign: &str, arch: &str) -> Result<(), Detail> {
    if native.trim() == arch || foreign.split_whitespace().any(|a| a == arch) {
        return Ok(());
    }
    Err(Detail::ArchUnknown {
        arch: arch.to_owned(),
        native: native.trim().to_owned(),
        foreign: foreign.split_whitespace().collect::<Vec<_>>().join(" "),
    })
}

/// The packages to download: the requested ones and the library packages
/// they depend on, recursively, sorted.
fn resolve(arch: &str, native: &str, requested: &[String]) -> Result<Vec<String>, Detail> {
    let mut args: Vec<String> = [
        "depends",
        "--recurse",
        "--no-recommends",
        "--no-suggests",
        "--no-conflicts",
        "--no-breaks",
        "--no-replaces",
        "--no-enhances",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(requested.iter().map(|p| format!("{p}:{arch}")));
    let out = run_tool(Path::new(APT_CACHE), &args, None).map_err(|source| Detail::Depends {
        source,
        arch: arch.to_owned(),
    })?;
    let graph = parse_depends(&String::from_utf8_lossy(&out.stdout));

    // What apt-cache printed for the native arch is unqualified; ask
    // `apt-cache show` about every real package of our arch in the graph.
    let ours: BTreeSet<String> = graph
        .keys()
        .filter_map(|n| own_name(n, arch, native))
        .collect();
    let mut args = vec!["show".to_string(), "--no-all-versions".to_string()];
    args.extend(ours.iter().map(|p| format!("{p}:{arch}")));
    let out = run_tool(Path::new(APT_CACHE), &args, None)?;
    let libraries = parse_show(&String::from_utf8_lossy(&out.stdout), arch);
    select(&graph, &libraries, requested, arch, native)
}

/// One dependency: any one of the alternatives satisfies it. A virtual
/// package (`<name>` in apt-cache's output) stands for its providers.
type Group = Vec<String>;

/// `apt-cache depends --recurse` output: each package as printed (`name`
/// for the native arch, `name:arch` otherwise, `<name>` when virtual) with
/// its dependency groups.
fn parse_depends(text: &str) -> BTreeMap<String, Vec<Group>> {
    let mut graph: BTreeMap<String, Vec<Group>> = BTreeMap::new();
    let mut current: Option<String> = None;
    // The previous dependency line ended its group with `|`: the next one
    // is an alternative of the same group.
    let mut continues = false;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(' ') {
            let name = line.trim().to_string();
            graph.entry(name.clone()).or_default();
            current = Some(name);
            continues = false;
            continue;
        }
        let Some(pkg) = &current else { continue };
        let groups = graph.entry(pkg.clone()).or_default();
        if line.starts_with("    ") {
            // A provider of the virtual package on the line above.
            if let Some(group) = groups.last_mut() {
                group.push(line.trim().to_string());
            }
            continue;
        }
        let trimmed = line.trim_start();
        let (alternative, rest) = match trimmed.strip_prefix('|') {
            Some(rest) => (true, rest),
            None => (false, trimmed),
        };
        let Some((kind, target)) = rest.split_once(": ") else {
            continue;
        };
        if kind != "Depends" && kind != "PreDepends" {
            continue;
        }
        let target = target.trim().to_string();
        match groups.last_mut() {
            Some(group) if continues => group.push(target),
            _ => groups.push(vec![target]),
        }
        continues = alternative;
    }
    graph
}

/// The package name of a real package of `arch` as apt-cache prints it, or
/// None (virtual, or another architecture).
fn own_name(printed: &str, arch: &str, native: &str) -> Option<String> {
    if printed.starts_with('<') {
        return None;
    }
    match printed.split_once(':') {
        Some((name, qualifier)) => (qualifier == arch).then(|| name.to_string()),
        None => (arch == native).then(|| printed.to_string()),
    }
}

/// The names of library packages of `arch` in `apt-cache show` output:
/// `Multi-Arch: same` (the marker of a co-installable shared library) or
/// Section `libs` (libjudydebian1, which stress-ng needs, has no Multi-Arch).
fn parse_show(text: &str, arch: &str) -> BTreeSet<String> {
    let mut libraries = BTreeSet::new();
    for stanza in text.split("\n\n") {
        let field = |key: &str| {
            stanza
                .lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(str::trim)
        };
        let (Some(name), Some(a)) = (field("Package"), field("Architecture")) else {
            continue;
        };
        let section = field("Section").unwrap_or("");
        let section = section.rsplit('/').next().unwrap_or(section);
        let library = field("Multi-Arch") == Some("same") || section == "libs";
        if a == arch && library {
            libraries.insert(name.to_string());
        }
    }
    libraries
}

/// Walks the graph from `requested` through library packages: of each
/// dependency group, the first alternative (or provider) that is a library
/// package of `arch`; a group with none is not a library dependency.
fn select(
    graph: &BTreeMap<String, Vec<Group>>,
    libraries: &BTreeSet<String>,
    requested: &[String],
    arch: &str,
    native: &str,
) -> Result<Vec<String>, Detail> {
    let printed = |name: &str| {
        if arch == native {
            name.to_string()
        } else {
            format!("{name}:{arch}")
        }
    };
    let mut chosen = BTreeSet::new();
    let mut queue = VecDeque::new();
    for name in requested {
        if !graph.contains_key(&printed(name)) {
            return Err(Detail::UnknownPackage {
                name: name.clone(),
                arch: arch.to_owned(),
            });
        }
        chosen.insert(name.clone());
        queue.push_back(name.clone());
    }
    while let Some(name) = queue.pop_front() {
        for group in graph.get(&printed(&name)).into_iter().flatten() {
            // A virtual package's entry is followed by its providers in
            // the same group; own_name skips the `<virtual>` entry itself.
            let pick = group
                .iter()
                .filter_map(|alt| own_name(alt, arch, native))
                .find(|n| libraries.contains(n));
            if let Some(pick) = pick
                && chosen.insert(pick.clone())
            {
                queue.push_back(pick);
            }
        }
    }
    Ok(chosen.into_iter().collect())
}

/// The `.deb` files apt-get left in `dir`, one per wanted package.
fn downloaded_packages(dir: &Path, wanted: &[String]) -> Result<Vec<Package>, Detail> {
    let mut found = BTreeMap::new();
    let entries = fs::read_dir(dir).map_err(|source| Detail::Path {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let path = entry?.path();
        let file = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string();
        if !file.ends_with(".deb") {
            continue;
        }
        let (name, version, _) =
            parse_deb_file_name(&file).ok_or_else(|| Detail::UnexpectedFile(file.clone()))?;
        let sha256 = sha256_file(&path)?;
        found.insert(
            name.clone(),
            Package {
                name,
                version,
                deb: file,
                sha256,
            },
        );
    }
    let names: Vec<&String> = found.keys().collect();
    let wanted_names: Vec<&String> = wanted.iter().collect();
    if names != wanted_names {
        return Err(Detail::Downloaded {
            found: found.keys().cloned().collect::<Vec<_>>().join(" "),
            wanted: wanted.join(" "),
        });
    }
    Ok(found.into_values().collect())
}

/// `name_version_arch.deb` as apt names its downloads (an epoch's `:` is
/// written `%3a`).
fn parse_deb_file_name(file: &str) -> Option<(String, String, String)> {
    let stem = file.strip_suffix(".deb")?;
    let mut parts = stem.split('_');
    let (name, version, arch) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || name.is_empty() || version.is_empty() || arch.is_empty() {
        return None;
    }
    Some((
        name.to_string(),
        version.replace("%3a", ":").replace("%3A", ":"),
        arch.to_string(),
    ))
}

fn manifest(arch: &str, requested: &[String], packages: &[Package]) -> String {
    let mut out = format!("arch {arch}\nrequest {}\n", requested.join(","));
    for p in packages {
        out.push_str(&format!(
            "package {} {} {} {}\n",
            p.name, p.version, p.deb, p.sha256
        ));
    }
    out
}

fn parse_manifest(text: &str) -> Result<(String, Vec<String>, Vec<Package>), Detail> {
    let (mut arch, mut request, mut packages) = (None, None, Vec::new());
    for line in text.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        match fields.as_slice() {
            ["arch", a] => arch = Some(a.to_string()),
            ["request", r] => request = Some(r.split(',').map(str::to_string).collect()),
            ["package", name, version, deb, sha256] => {
                if deb.contains('/') || !deb.ends_with(".deb") {
                    return Err(Detail::BadDeb(deb.to_string()));
                }
                packages.push(Package {
                    name: name.to_string(),
                    version: version.to_string(),
                    deb: deb.to_string(),
                    sha256: sha256.to_string(),
                });
            }
            _ => return Err(Detail::ManifestLine(line.to_owned())),
        }
    }
    match (arch, request) {
        (Some(a), Some(r)) if !packages.is_empty() => Ok((a, r, packages)),
        _ => Err(Detail::ManifestIncomplete),
    }
}

fn check_entry(entry: &Path, arch: &str, requested: &[String]) -> Result<Sysroot, Detail> {
    let text = fs::read_to_string(entry.join("manifest")).map_err(Detail::Manifest)?;
    let (a, request, packages) = parse_manifest(&text)?;
    if a != arch || request != requested {
        return Err(Detail::ManifestMismatch {
            arch: a,
            request: request.join(" "),
            wanted_arch: arch.to_owned(),
            wanted: requested.join(" "),
        });
    }
    for p in &packages {
        let actual = sha256_file(&entry.join("debs").join(&p.deb))?;
        if actual != p.sha256 {
            return Err(Detail::Sha256 {
                deb: p.deb.clone(),
                actual,
                expected: p.sha256.clone(),
            });
        }
    }
    let root = entry.join("root");
    if !root.is_dir() {
        return Err(Detail::NoRoot(root));
    }
    Ok(Sysroot {
        root,
        arch: arch.to_string(),
        requested: requested.to_vec(),
        packages,
        downloaded: false,
    })
}

/// What the dynamic linker needs to know of one ELF file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ElfDeps {
    /// PT_INTERP: the loader's absolute path.
    pub interp: Option<String>,
    /// DT_NEEDED, in order.
    pub needed: Vec<String>,
    /// DT_SONAME.
    pub soname: Option<String>,
    /// DT_RUNPATH, else DT_RPATH, split at `:`.
    pub runpath: Vec<String>,
}

/// Parses `readelf -W -l -d` output. A static binary has neither
/// interpreter nor needed libraries.
pub fn parse_readelf(text: &str) -> ElfDeps {
    let mut deps = ElfDeps::default();
    let mut rpath = Vec::new();
    // The value between the brackets after `marker`.
    let bracketed = |line: &str, marker: &str| {
        let rest = &line[line.find(marker)? + marker.len()..];
        let rest = rest.trim_start().strip_prefix('[')?;
        rest.rfind(']').map(|end| rest[..end].to_string())
    };
    for line in text.lines() {
        if let Some(rest) = line.trim().strip_prefix("[Requesting program interpreter:") {
            deps.interp = rest.strip_suffix(']').map(|v| v.trim().to_string());
        } else if line.contains("(NEEDED)") {
            deps.needed.extend(bracketed(line, "Shared library:"));
        } else if line.contains("(SONAME)") {
            deps.soname = bracketed(line, "Library soname:");
        } else if line.contains("(RUNPATH)") {
            if let Some(v) = bracketed(line, "Library runpath:") {
                deps.runpath = v.split(':').map(str::to_string).collect();
            }
        } else if line.contains("(RPATH)")
            && let Some(v) = bracketed(line, "Library rpath:")
        {
            rpath = v.split(':').map(str::to_string).collect();
        }
    }
    // The loader ignores DT_RPATH when DT_RUNPATH is there.
    if deps.runpath.is_empty() {
        deps.runpath = rpath;
    }
    deps
}

/// What a guest needs to run `binary` (a path inside `root` such as
/// `usr/bin/stress-ng`): the binary, its ELF interpreter and every
/// DT_NEEDED library transitively, as (real file in `root`, absolute path
/// in the guest) pairs, the binary first. Symlinks are followed inside
/// `root` to the real file, which the guest gets at the path the loader
/// looks for.
pub fn closure(root: &Path, binary: &str) -> Result<Vec<(PathBuf, String)>, Error> {
    let fail = |step: &'static str| {
        move |detail: Detail| Error::Closure {
            binary: binary.to_string(),
            root: root.display().to_string(),
            step,
            detail: Box::new(detail),
        }
    };
    if !Path::new(READELF).is_file() {
        return Err(fail("find tools")(Detail::NoReadelf(READELF)));
    }
    let dirs = library_dirs(root).map_err(fail("list library directories"))?;
    let binary_rel = guest_relative(binary).map_err(fail("check the path"))?;

    let read = |real: &Path, guest: &str| {
        run_tool(
            Path::new(READELF),
            &[
                OsStr::new("-W"),
                OsStr::new("-l"),
                OsStr::new("-d"),
                real.as_os_str(),
            ],
            None,
        )
        .map(|out| parse_readelf(&String::from_utf8_lossy(&out.stdout)))
        .map_err(|source| {
            fail("readelf")(Detail::ToolOn {
                what: guest.to_owned(),
                source,
            })
        })
    };

    let mut out: Vec<(PathBuf, String)> = Vec::new();
    // Guest paths already in `out`; sonames the loader will not search for
    // again: those found already, and the loader's own (libc.so.6 needs
    // `ld64.so.1`, which the loader satisfies with itself).
    let mut installed = BTreeSet::new();
    let mut provided = BTreeSet::new();
    let mut queue = VecDeque::new();
    let real = resolve_in_root(root, &binary_rel).map_err(fail("resolve the binary"))?;
    installed.insert(format!("/{binary_rel}"));
    out.push((real.clone(), format!("/{binary_rel}")));
    queue.push_back((real, format!("/{binary_rel}")));

    while let Some((real, guest)) = queue.pop_front() {
        let deps = read(&real, &guest)?;
        if let Some(interp) = &deps.interp
            && installed.insert(interp.clone())
        {
            let rel = guest_relative(interp).map_err(fail("check the interpreter"))?;
            let real = resolve_in_root(root, &rel).map_err(|e| {
                fail("find the interpreter")(Detail::Interpreter {
                    interp: interp.clone(),
                    binary: guest.clone(),
                    source: Box::new(e),
                })
            })?;
            provided.extend(read(&real, interp)?.soname);
            out.push((real.clone(), interp.clone()));
            queue.push_back((real, interp.clone()));
        }
        let origin = Path::new(&guest)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        for name in &deps.needed {
            if provided.contains(name) {
                continue;
            }
            // DT_RUNPATH/DT_RPATH first (absolute or $ORIGIN-relative),
            // then the default directories.
            let mut search: Vec<String> = deps
                .runpath
                .iter()
                .map(|d| d.replace("${ORIGIN}", &origin).replace("$ORIGIN", &origin))
                .filter(|d| d.starts_with('/'))
                .filter_map(|d| guest_relative(&d).ok())
                .collect();
            search.extend(dirs.iter().cloned());
            let found = search.iter().find_map(|dir| {
                let rel = format!("{dir}/{name}");
                resolve_in_root(root, &rel)
                    .ok()
                    .map(|real| (real, format!("/{rel}")))
            });
            let Some((real, lib_guest)) = found else {
                return Err(fail("find a needed library")(Detail::NotFound {
                    name: name.clone(),
                    by: guest.clone(),
                    search: search.join(", "),
                }));
            };
            provided.insert(name.clone());
            if installed.insert(lib_guest.clone()) {
                out.push((real.clone(), lib_guest.clone()));
                queue.push_back((real, lib_guest));
            }
        }
    }
    Ok(out)
}

/// The directories the loader searches, relative to `root`: the multiarch
/// ones (`lib/<triplet>`, `usr/lib/<triplet>`, with the triplet read from
/// what exists) first, then `lib`, `usr/lib`, `lib64`, `usr/lib64`.
fn library_dirs(root: &Path) -> Result<Vec<String>, Detail> {
    let mut triplets = BTreeSet::new();
    for base in ["lib", "usr/lib"] {
        let Ok(entries) = fs::read_dir(root.join(base)) else {
            continue;
        };
        for entry in entries {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().to_string();
            if name.contains("-linux-") && entry.path().is_dir() {
                triplets.insert(name);
            }
        }
    }
    let mut dirs = Vec::new();
    for t in &triplets {
        dirs.push(format!("lib/{t}"));
        dirs.push(format!("usr/lib/{t}"));
    }
    dirs.extend(["lib", "usr/lib", "lib64", "usr/lib64"].map(String::from));
    Ok(dirs.into_iter().filter(|d| root.join(d).is_dir()).collect())
}

/// `path` (absolute or not) as a path relative to the guest's `/`, with no
/// `..`, `.` or empty components.
fn guest_relative(path: &str) -> Result<String, Detail> {
    let rel = path.trim_start_matches('/');
    let ok = !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        && !rel
            .split('/')
            .any(|c| c.is_empty() || c == "." || c == "..");
    if ok {
        Ok(rel.to_string())
    } else {
        Err(Detail::BadPath(path.to_owned()))
    }
}

/// The real (non-symlink) file `rel` names inside `root`, following
/// symlinks as the guest would see them: an absolute target is relative
/// to `root`, and `..` never leaves it.
fn resolve_in_root(root: &Path, rel: &str) -> Result<PathBuf, Detail> {
    let mut done: Vec<String> = Vec::new();
    let mut todo: VecDeque<String> = rel.split('/').map(str::to_string).collect();
    let mut links = 0;
    while let Some(c) = todo.pop_front() {
        match c.as_str() {
            "" | "." => continue,
            ".." => {
                done.pop();
                continue;
            }
            _ => {}
        }
        done.push(c);
        let here = root.join(done.join("/"));
        let meta = fs::symlink_metadata(&here).map_err(|source| Detail::Path {
            path: here.clone(),
            source,
        })?;
        if !meta.file_type().is_symlink() {
            continue;
        }
        links += 1;
        if links > MAX_SYMLINKS {
            return Err(Detail::TooManySymlinks(rel.to_owned()));
        }
        let target = fs::read_link(&here).map_err(|source| Detail::Path {
            path: here.clone(),
            source,
        })?;
        let target = target.to_string_lossy().to_string();
        done.pop();
        if target.starts_with('/') {
            done.clear();
        }
        for (i, part) in target.split('/').enumerate() {
            todo.insert(i, part.to_string());
        }
    }
    let real = root.join(done.join("/"));
    if real.is_file() {
        Ok(real)
    } else {
        Err(Detail::NotAFile {
            rel: rel.to_owned(),
            real,
        })
    }
}

#[cfg(test)]
mod tests;
