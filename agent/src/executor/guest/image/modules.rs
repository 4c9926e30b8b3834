//! Kernel modules a guest must `insmod` itself: busybox has no modprobe
//! that knows the kernel's module tree, so the runner loads the files in
//! order, dependencies first.
//!
//! The order comes from `lib/modules/<version>/modules.dep` when it is
//! there. Debian's linux-image packages do not ship it (their postinst runs
//! depmod), so for an unpacked package it comes from what depmod reads: the
//! `depends=` entry of each module's `.modinfo` section (by `readelf -p`).
//! A module listed in `modules.builtin` is built in: nothing to load. On
//! Debian's 6.1 s390x kernel `virtio_console` needs nothing else (virtio,
//! virtio_ring and the virtio_ccw transport are built in); on the amd64
//! ones it needs `virtio_ring` then `virtio` (and `virtio_pci` for the
//! transport).
//!
//! Seen working on s390x (no second serial port there): QEMU with
//! `-device virtio-serial-ccw -chardev file,id=farm,path=channel.log
//! -device virtserialport,chardev=farm,name=farm`; in the guest, after
//! `insmod virtio_console.ko`, the port is `/dev/vport0p1` at once (its
//! name is in `/sys/class/virtio-ports/vport0p1/name`; there is no udev
//! for `/dev/virtio-ports/farm`), and what is written to it is in
//! `channel.log` after `poweroff -f`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use super::tool::{ToolError, run_tool};

const READELF: &str = "/usr/bin/readelf";

/// Why a module's load order could not be found: where, and in which step.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("kernel modules in {dir}: module `{module}`: {step}: {source}")]
    Step {
        dir: String,
        module: String,
        step: &'static str,
        source: Cause,
    },
}

/// What went wrong in a step.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    #[error("`{0}` is not in modules.dep")]
    NotInModulesDep(String),
    #[error("`{0}` is needed but has no line in modules.dep")]
    NoDepLine(String),
    #[error("no module file for `{0}`, and it is not built in")]
    NoFile(String),
    #[error("`{path}` depends on `{name}`, which has no file")]
    NoDependencyFile { path: String, name: String },
    #[error("dependency cycle through `{0}`")]
    Cycle(String),
    #[error("{0} is compressed; only uncompressed .ko files can be loaded")]
    Compressed(String),
    #[error("{}: {source}", path.display())]
    Dir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Tool(#[from] ToolError),
}

/// The module files (absolute) to insmod, in order, for `module` (a name
/// such as `virtio_console`) of the kernel whose `lib/modules/<version>`
/// is `modules_dir`; empty when it is built in.
pub fn load_order(modules_dir: &Path, module: &str) -> Result<Vec<PathBuf>, Error> {
    let fail = |step: &'static str| {
        move |source: Cause| Error::Step {
            dir: modules_dir.display().to_string(),
            module: module.to_string(),
            step,
            source,
        }
    };
    let builtin = fs::read_to_string(modules_dir.join("modules.builtin")).unwrap_or_default();
    if builtin
        .lines()
        .any(|l| module_name(l).is_some_and(|n| n == canonical(module)))
    {
        return Ok(Vec::new());
    }
    let dep_file = modules_dir.join("modules.dep");
    let order = if dep_file.is_file() {
        let text =
            fs::read_to_string(&dep_file).map_err(|e| fail("read modules.dep")(Cause::Io(e)))?;
        order_from_modules_dep(&text, module).map_err(fail("modules.dep"))?
    } else {
        order_from_modinfo(modules_dir, module).map_err(fail("read .modinfo"))?
    };
    for rel in &order {
        if !rel.ends_with(".ko") {
            // busybox's insmod loads plain ELF objects only.
            return Err(fail("check the module files")(Cause::Compressed(
                rel.clone(),
            )));
        }
    }
    Ok(order.iter().map(|rel| modules_dir.join(rel)).collect())
}

/// The name of a module file (`kernel/drivers/char/virtio_console.ko`, or
/// `.ko.xz`, `.ko.zst`, `.ko.gz`), with `-` as `_` as the kernel does.
fn module_name(path: &str) -> Option<String> {
    let file = path.trim().rsplit('/').next()?;
    let stem = [".ko", ".ko.xz", ".ko.zst", ".ko.gz"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext))?;
    Some(canonical(stem))
}

fn canonical(name: &str) -> String {
    name.replace('-', "_")
}

/// `modules.dep` as module file → the files it depends on.
fn parse_modules_dep(text: &str) -> BTreeMap<String, Vec<String>> {
    text.lines()
        .filter_map(|line| {
            let (module, deps) = line.split_once(':')?;
            Some((
                module.trim().to_string(),
                deps.split_whitespace().map(str::to_string).collect(),
            ))
        })
        .collect()
}

/// From `modules.dep` text: the module files (relative to the modules
/// directory) to insmod for `module`, its dependencies first.
pub fn order_from_modules_dep(modules_dep: &str, module: &str) -> Result<Vec<String>, Cause> {
    let deps = parse_modules_dep(modules_dep);
    let by_name: BTreeMap<String, String> = deps
        .keys()
        .filter_map(|path| Some((module_name(path)?, path.clone())))
        .collect();
    let start = by_name
        .get(&canonical(module))
        .ok_or_else(|| Cause::NotInModulesDep(module.to_string()))?;
    topological(start, &|path: &str| {
        deps.get(path)
            .cloned()
            .ok_or_else(|| Cause::NoDepLine(path.to_string()))
    })
}

/// The same order from the modules' own `depends=` lists, for a module
/// tree without `modules.dep`.
fn order_from_modinfo(modules_dir: &Path, module: &str) -> Result<Vec<String>, Cause> {
    let mut files = Vec::new();
    walk(modules_dir, modules_dir, &mut files)?;
    let by_name: BTreeMap<String, String> = files
        .into_iter()
        .filter_map(|rel| Some((module_name(&rel)?, rel)))
        .collect();
    let start = by_name
        .get(&canonical(module))
        .ok_or_else(|| Cause::NoFile(module.to_string()))?;
    topological(start, &|path: &str| {
        let out = run_tool(
            Path::new(READELF),
            &[
                std::ffi::OsStr::new("-p"),
                std::ffi::OsStr::new(".modinfo"),
                modules_dir.join(path).as_os_str(),
            ],
            None,
        )?;
        modinfo_depends(&String::from_utf8_lossy(&out.stdout))
            .iter()
            .map(|name| {
                by_name
                    .get(&canonical(name))
                    .cloned()
                    .ok_or_else(|| Cause::NoDependencyFile {
                        path: path.to_string(),
                        name: name.clone(),
                    })
            })
            .collect()
    })
}

/// The `depends=` list of `readelf -p .modinfo` output.
fn modinfo_depends(text: &str) -> Vec<String> {
    text.lines()
        .find_map(|line| {
            let (_, rest) = line.split_once(']')?;
            rest.trim_start().strip_prefix("depends=")
        })
        .map(|list| {
            list.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Depth-first post-order from `start`: every module after the modules it
/// depends on. modules.dep lists dependencies in the reverse of modprobe's
/// load order, so they are visited last to first.
fn topological(
    start: &str,
    deps_of: &dyn Fn(&str) -> Result<Vec<String>, Cause>,
) -> Result<Vec<String>, Cause> {
    fn visit(
        path: &str,
        deps_of: &dyn Fn(&str) -> Result<Vec<String>, Cause>,
        visiting: &mut BTreeSet<String>,
        out: &mut Vec<String>,
    ) -> Result<(), Cause> {
        if out.iter().any(|p| p == path) {
            return Ok(());
        }
        if !visiting.insert(path.to_string()) {
            return Err(Cause::Cycle(path.to_string()));
        }
        for dep in deps_of(path)?.iter().rev() {
            visit(dep, deps_of, visiting, out)?;
        }
        visiting.remove(path);
        out.push(path.to_string());
        Ok(())
    }
    let mut out = Vec::new();
    visit(start, deps_of, &mut BTreeSet::new(), &mut out)?;
    Ok(out)
}

/// Module files under `dir`, relative to `base`.
fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), Cause> {
    let entries = fs::read_dir(dir).map_err(|source| Cause::Dir {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry?;
        let kind = entry.file_type()?;
        let path = entry.path();
        if kind.is_dir() {
            walk(base, &path, out)?;
        } else if kind.is_file()
            && module_name(&entry.file_name().to_string_lossy()).is_some()
            && let Ok(rel) = path.strip_prefix(base)
        {
            out.push(rel.to_string_lossy().to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
