use super::*;
use crate::executor::guest::arch::GuestArch;

#[test]
fn names_are_validated_strictly() {
    let d = debian("debian:6.1.0-57-cloud-amd64").unwrap();
    assert_eq!(
        (d.version(), d.arch()),
        ("6.1.0-57-cloud-amd64", Arch::X86_64)
    );
    let d = debian("debian:6.12.107+deb12-amd64").unwrap();
    assert_eq!(
        (d.version(), d.arch()),
        ("6.12.107+deb12-amd64", Arch::X86_64)
    );
    assert_eq!(debian("debian:6.1.0-50-s390x").unwrap().arch(), Arch::S390x);
    for bad in [
        "6.1.0-57-amd64",
        "debian:",
        "debian:../../etc",
        "debian:6.1/x",
        "debian:-o",
        "debian:6.1 x",
        "debian:6.1;rm",
        "ubuntu:6.1",
    ] {
        let err = debian(bad).unwrap_err().to_string();
        assert!(err.contains(bad), "{err}");
    }
    // A flavour the farm knows, of an arch this agent boots no guest of:
    // the name is valid, and the guest machine refuses its arch.
    for (name, arch) in [
        ("debian:6.1.0-50-arm64", Arch::Aarch64),
        ("debian:6.1.0-50-powerpc64le", Arch::Ppc64le),
    ] {
        assert_eq!(debian(name).unwrap().arch(), arch);
        let err = GuestArch::try_from(arch).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("no guest for arch {arch}")),
            "{err}"
        );
    }
}

#[test]
fn file_kernels_stay_inside_the_agents_kernel_directories() {
    let dir = tempfile::tempdir().unwrap();
    let kernels = dir.path().join("kernels");
    fs::create_dir(&kernels).unwrap();
    let mut bz = vec![0u8; 0x400];
    bz[0x202..0x206].copy_from_slice(b"HdrS");
    fs::write(kernels.join("vmlinuz-test"), &bz).unwrap();
    let mut s390 = vec![0u8; 0x10100];
    s390[0x10008..0x1000e].copy_from_slice(b"S390EP");
    fs::write(kernels.join("image-s390"), &s390).unwrap();
    fs::write(kernels.join("notes.txt"), b"not a kernel").unwrap();
    fs::write(dir.path().join("outside"), &bz).unwrap();
    let dirs = vec![kernels.clone()];

    let name = format!("file:{}", kernels.join("vmlinuz-test").display());
    let (k, arch) = resolve_file(&name, &dirs).unwrap();
    assert_eq!(arch, Arch::X86_64);
    assert_eq!(k.version, "vmlinuz-test");
    assert_eq!(k.deb_sha256.len(), 64);
    let (_, arch) = resolve_file(
        &format!("file:{}", kernels.join("image-s390").display()),
        &dirs,
    )
    .unwrap();
    assert_eq!(arch, Arch::S390x);
    for (bad, why) in [
        (
            format!("file:{}", dir.path().join("outside").display()),
            "not inside",
        ),
        (
            format!("file:{}/../outside", kernels.display()),
            "without `..`",
        ),
        (
            format!("file:{}", kernels.join("notes.txt").display()),
            "neither",
        ),
        (format!("file:{}", kernels.display()), "not inside"),
        ("file:relative".to_string(), "absolute"),
        (
            format!("file:{}", kernels.join("missing").display()),
            "No such file",
        ),
        ("file:/etc/no-such-file".to_string(), "not inside"),
    ] {
        let e = resolve_file(&bad, &dirs).unwrap_err().to_string();
        assert!(e.contains(why), "{bad}: {e}");
    }
    // A link out of the directory is followed, and refused.
    std::os::unix::fs::symlink(dir.path().join("outside"), kernels.join("link")).unwrap();
    let e = resolve_file(&format!("file:{}", kernels.join("link").display()), &dirs)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not inside"), "{e}");
    assert_eq!(
        file_kernels(&dirs),
        [
            (
                format!("file:{}", kernels.join("image-s390").display()),
                Arch::S390x
            ),
            (
                format!("file:{}", kernels.join("vmlinuz-test").display()),
                Arch::X86_64
            ),
        ]
    );
}

#[test]
fn a_corrupted_cache_entry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let entry = dir.path();
    fs::write(entry.join("k.deb"), b"not the package").unwrap();
    fs::write(
        entry.join("manifest"),
        "package p\ndeb k.deb\nsha256 0000000000000000000000000000000000000000000000000000000000000000\n",
    )
    .unwrap();
    let err = check_entry(entry, "debian:1", "1").unwrap_err();
    assert!(
        matches!(err, Cause::Sha256 { ref deb, ref expected, .. }
            if deb == "k.deb" && expected.starts_with("0000")),
        "{err}"
    );
    assert!(err.to_string().contains("the manifest says"), "{err}");
}

#[test]
fn a_version_apt_would_read_as_a_pattern_downloads_nothing() {
    // Needs apt and dpkg. As a pattern, linux-image-6.1.0.47-amd64 matches
    // linux-image-6.1.0-47-amd64 (and its -unsigned and -dbg) where the
    // lists have them; no package is named exactly so.
    let cache = tempfile::tempdir().unwrap();
    let err = resolve("debian:6.1.0.47-amd64", cache.path())
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "kernel `debian:6.1.0.47-amd64`: apt-get download: apt knows no package named exactly \
         linux-image-6.1.0.47-amd64-unsigned:amd64, linux-image-6.1.0.47-amd64:amd64 \
         (`apt-get update` may be needed)"
    );
    // The temporary download directory is gone, and nothing was cached.
    let left: Vec<_> = fs::read_dir(cache.path().join("kernels"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["6.1.0.47-amd64.lock"]);
}
