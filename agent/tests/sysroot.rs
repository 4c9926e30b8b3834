//! Fetches Debian's s390x builds of the external workloads (and
//! busybox-static) into a sysroot, checks that the closures of their
//! binaries resolve, that a second fetch comes from the cache, and which
//! kernel modules the s390x kernel needs for virtio-serial.
//!
//! Needs apt and dpkg with the s390x architecture added
//! (`dpkg --add-architecture s390x && apt-get update`), binutils (readelf)
//! and access to Debian's package archive. A missing prerequisite fails
//! the test with the command that fixes it; it never skips.

use std::path::{Path, PathBuf};

use farm_agent::executor::guest::image::{kernels, modules, sysroot};

const S390X_SET: &[&str] = &["stress-ng", "sysbench", "rt-tests", "busybox-static"];

fn cache() -> PathBuf {
    // The agent's own default, as README's commands use it.
    farm_agent::executor::guest::default_cache().expect("no HOME for the default guest cache")
}

fn require_prerequisites() {
    for (tool, package) in [
        ("/usr/bin/apt-get", "apt"),
        ("/usr/bin/apt-cache", "apt"),
        ("/usr/bin/dpkg-deb", "dpkg"),
        ("/usr/bin/readelf", "binutils"),
        ("/usr/bin/sha256sum", "coreutils"),
    ] {
        assert!(
            Path::new(tool).is_file(),
            "{tool} is missing: apt-get install -y {package}"
        );
    }
}

fn size(files: &[(PathBuf, String)]) -> u64 {
    files
        .iter()
        .map(|(f, _)| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum()
}

#[test]
fn s390x_workloads_resolve_completely_and_are_cached() {
    require_prerequisites();
    let cache = cache();
    let t = std::time::Instant::now();
    let root = sysroot::fetch(&cache, "s390x", S390X_SET).unwrap_or_else(|e| panic!("{e}"));
    let debs: u64 = root
        .packages
        .iter()
        .map(|p| {
            let deb = root.root.parent().unwrap().join("debs").join(&p.deb);
            std::fs::metadata(deb).map(|m| m.len()).unwrap_or(0)
        })
        .sum();
    eprintln!(
        "fetch (downloaded: {}): {:.1?}, {} packages, {} KiB of .deb: {}",
        root.downloaded,
        t.elapsed(),
        root.packages.len(),
        debs / 1024,
        root.packages
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let names: Vec<&str> = root.packages.iter().map(|p| p.name.as_str()).collect();
    for must in [
        "stress-ng",
        "libc6",
        "libjudydebian1",
        "libnuma1",
        "busybox-static",
    ] {
        assert!(names.contains(&must), "{must} missing from {names:?}");
    }
    for never in [
        "perl",
        "perl-base",
        "python3",
        "python3.11-minimal",
        "debconf",
        "dpkg",
    ] {
        assert!(!names.contains(&never), "{never} fetched: {names:?}");
    }

    let stress =
        sysroot::closure(&root.root, "usr/bin/stress-ng").unwrap_or_else(|e| panic!("{e}"));
    let guest: Vec<&str> = stress.iter().map(|(_, g)| g.as_str()).collect();
    eprintln!(
        "stress-ng closure ({} KiB): {guest:?}",
        size(&stress) / 1024
    );
    assert_eq!(guest[0], "/usr/bin/stress-ng");
    assert!(guest.contains(&"/lib/ld64.so.1"), "{guest:?}");
    assert!(guest.iter().any(|g| g.ends_with("/libc.so.6")), "{guest:?}");
    assert!(
        guest.iter().any(|g| g.ends_with("/libJudy.so.1")),
        "{guest:?}"
    );
    for (file, _) in &stress {
        let meta = std::fs::symlink_metadata(file).unwrap();
        assert!(meta.is_file(), "{} is not a regular file", file.display());
    }
    for binary in ["usr/bin/sysbench", "usr/bin/hackbench"] {
        let files = sysroot::closure(&root.root, binary).unwrap_or_else(|e| panic!("{e}"));
        eprintln!(
            "{binary} closure ({} KiB): {:?}",
            size(&files) / 1024,
            files.iter().map(|(_, g)| g).collect::<Vec<_>>()
        );
        assert!(files.iter().any(|(_, g)| g == "/lib/ld64.so.1"));
    }
    // busybox-static is static: the binary alone.
    let busybox = sysroot::closure(&root.root, "bin/busybox").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(busybox.len(), 1, "{busybox:?}");

    // A library that is not there is an error naming it and the binary.
    let err = sysroot::closure(&root.root, "usr/bin/no-such")
        .unwrap_err()
        .to_string();
    assert!(err.contains("usr/bin/no-such"), "{err}");

    let again = sysroot::fetch(&cache, "s390x", S390X_SET).unwrap_or_else(|e| panic!("{e}"));
    assert!(!again.downloaded);
    assert_eq!(again.packages, root.packages);
    assert_eq!(again.root, root.root);
}

/// The same code serves x86_64 guests, where apt-cache prints the native
/// arch's names unqualified.
#[test]
fn amd64_workloads_resolve_too() {
    require_prerequisites();
    let root = sysroot::fetch(&cache(), "amd64", &["stress-ng", "sysbench", "rt-tests"])
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = root.packages.iter().map(|p| p.name.as_str()).collect();
    eprintln!("amd64: {} packages: {names:?}", names.len());
    assert!(
        names.contains(&"libc6") && !names.contains(&"python3"),
        "{names:?}"
    );
    for binary in ["usr/bin/stress-ng", "usr/bin/sysbench", "usr/bin/hackbench"] {
        let files = sysroot::closure(&root.root, binary).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            files
                .iter()
                .any(|(_, g)| g == "/lib64/ld-linux-x86-64.so.2"),
            "{files:?}"
        );
    }
}

#[test]
fn the_s390x_kernel_needs_only_virtio_console_for_virtio_serial() {
    require_prerequisites();
    let kernel =
        kernels::resolve("debian:6.1.0-50-s390x", &cache()).unwrap_or_else(|e| panic!("{e}"));
    let order =
        modules::load_order(&kernel.modules, "virtio_console").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        order,
        [kernel.modules.join("kernel/drivers/char/virtio_console.ko")]
    );
    // Built in there (the ccw transport is not even a module).
    assert!(
        modules::load_order(&kernel.modules, "virtio_ring")
            .unwrap()
            .is_empty()
    );
}
