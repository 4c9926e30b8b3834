use super::*;

/// `readelf -W -l -d usr/bin/stress-ng` of stress-ng 0.15.06-2 s390x,
/// shortened.
const STRESS_NG_S390X: &str = "
Elf file type is DYN (Position-Independent Executable file)
Entry point 0x545e8
There are 10 program headers, starting at offset 64

Program Headers:
  Type           Offset   VirtAddr           PhysAddr           FileSiz  MemSiz   Flg Align
  PHDR           0x000040 0x0000000000000040 0x0000000000000040 0x000230 0x000230 R   0x8
  INTERP         0x000270 0x0000000000000270 0x0000000000000270 0x00000f 0x00000f R   0x1
      [Requesting program interpreter: /lib/ld64.so.1]
  LOAD           0x000000 0x0000000000000000 0x0000000000000000 0x1b5d30 0x1b5d30 R E 0x1000

 Section to Segment mapping:
  Segment Sections...
   00     
   01     .interp 
   05     .dynamic 

Dynamic section at offset 0x259880 contains 40 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libm.so.6]
 0x0000000000000001 (NEEDED)             Shared library: [libEGL.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libGLESv2.so.2]
 0x0000000000000001 (NEEDED)             Shared library: [libJudy.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libapparmor.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libbsd.so.0]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x0000000000000001 (NEEDED)             Shared library: [libcrypt.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libgbm.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libjpeg.so.62]
 0x0000000000000001 (NEEDED)             Shared library: [libkmod.so.2]
 0x0000000000000001 (NEEDED)             Shared library: [libsctp.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libxxhash.so.0]
 0x0000000000000001 (NEEDED)             Shared library: [libz.so.1]
 0x000000000000000c (INIT)               0x46250
 0x000000000000001e (FLAGS)              BIND_NOW
 0x000000006ffffffb (FLAGS_1)            Flags: NOW PIE
 0x0000000000000000 (NULL)               0x0
";

/// libc6 2.36 s390x `lib/s390x-linux-gnu/libc.so.6`, the lines that matter.
const LIBC_S390X: &str = "
Elf file type is DYN (Shared object file)
  INTERP         0x1b6a20 0x00000000001b6a20 0x00000000001b6a20 0x00000f 0x00000f R   0x10
      [Requesting program interpreter: /lib/ld64.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [ld64.so.1]
 0x000000000000000e (SONAME)             Library soname: [libc.so.6]
";

/// `readelf -W -l -d /bin/ls` on Debian 12 x86_64, shortened.
const LS_X86_64: &str = "
Elf file type is DYN (Position-Independent Executable file)
Entry point 0x61d0
There are 13 program headers, starting at offset 64

Program Headers:
  Type           Offset   VirtAddr           PhysAddr           FileSiz  MemSiz   Flg Align
  PHDR           0x000040 0x0000000000000040 0x0000000000000040 0x0002d8 0x0002d8 R   0x8
  INTERP         0x000318 0x0000000000000318 0x0000000000000318 0x00001c 0x00001c R   0x1
      [Requesting program interpreter: /lib64/ld-linux-x86-64.so.2]
Dynamic section at offset 0x23d98 contains 27 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libselinux.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x000000000000000c (INIT)               0x4000
 0x000000006ffffffb (FLAGS_1)            Flags: PIE
";

/// `readelf -W -l -d /bin/busybox` (busybox-static, x86_64), shortened.
const STATIC: &str = "
Elf file type is EXEC (Executable file)
Entry point 0x401a30
There are 10 program headers, starting at offset 64

There is no dynamic section in this file.
";

#[test]
fn readelf_of_an_s390x_executable() {
    let d = parse_readelf(STRESS_NG_S390X);
    assert_eq!(d.interp.as_deref(), Some("/lib/ld64.so.1"));
    assert_eq!(d.needed.len(), 14);
    assert_eq!(d.needed[0], "libm.so.6");
    assert_eq!(d.needed[3], "libJudy.so.1");
    assert_eq!(d.needed[13], "libz.so.1");
    assert_eq!(d.soname, None);
    assert!(d.runpath.is_empty());
}

#[test]
fn readelf_of_libc_names_its_soname_and_the_loader() {
    let d = parse_readelf(LIBC_S390X);
    assert_eq!(d.interp.as_deref(), Some("/lib/ld64.so.1"));
    assert_eq!(d.needed, ["ld64.so.1"]);
    assert_eq!(d.soname.as_deref(), Some("libc.so.6"));
}

#[test]
fn readelf_of_an_x86_64_executable_and_a_static_one() {
    let d = parse_readelf(LS_X86_64);
    assert_eq!(d.interp.as_deref(), Some("/lib64/ld-linux-x86-64.so.2"));
    assert_eq!(d.needed, ["libselinux.so.1", "libc.so.6"]);
    assert_eq!(parse_readelf(STATIC), ElfDeps::default());
}

#[test]
fn runpath_wins_over_rpath() {
    let text = " 0x000000000000000f (RPATH)              Library rpath: [/opt/a]
 0x000000000000001d (RUNPATH)            Library runpath: [$ORIGIN/../lib:/opt/b]
";
    assert_eq!(parse_readelf(text).runpath, ["$ORIGIN/../lib", "/opt/b"]);
    let text = " 0x000000000000000f (RPATH)              Library rpath: [/opt/a]\n";
    assert_eq!(parse_readelf(text).runpath, ["/opt/a"]);
}

/// From `apt-cache depends --recurse --no-recommends ... sysbench:s390x
/// rt-tests:s390x`, shortened.
const DEPENDS_S390X: &str = "sysbench:s390x
  Depends: libaio1:s390x
  Depends: libc6:s390x
 |Depends: libluajit2-5.1-2:s390x
  Depends: libluajit-5.1-2:s390x
  Depends: libmariadb3:s390x
rt-tests:s390x
  Depends: libc6:s390x
  Depends: libnuma1:s390x
  Depends: python3:s390x
libaio1:s390x
libc6:s390x
  Depends: libgcc-s1:s390x
libluajit2-5.1-2:s390x
  Depends: <libluajit2-5.1-common:s390x>
    libluajit2-5.1-common
  Depends: libc6:s390x
libluajit-5.1-2:s390x
  Depends: libluajit2-5.1-2:s390x
libmariadb3:s390x
  Depends: <mariadb-common:s390x>
    mariadb-common
  Depends: libc6:s390x
  Depends: zlib1g:s390x
libnuma1:s390x
  Depends: libc6:s390x
python3:s390x
  PreDepends: python3-minimal:s390x
  Depends: libpython3-stdlib:s390x
python3-minimal:s390x
  Depends: dpkg
libpython3-stdlib:s390x
  Depends: libc6:s390x
libgcc-s1:s390x
  Depends: gcc-12-base:s390x
  Depends: libc6:s390x
zlib1g:s390x
  Depends: libc6:s390x
gcc-12-base:s390x
<libluajit2-5.1-common:s390x>
libluajit2-5.1-common
<mariadb-common:s390x>
mariadb-common
  Depends: mysql-common
mysql-common
dpkg
  PreDepends: tar
tar
";

/// `apt-cache show` fields of the same packages (only the ones read).
const SHOW_S390X: &str = "Package: sysbench
Architecture: s390x
Section: misc

Package: rt-tests
Architecture: s390x
Section: misc

Package: libaio1
Architecture: s390x
Multi-Arch: same
Section: libs

Package: libc6
Architecture: s390x
Multi-Arch: same
Section: libs

Package: libluajit2-5.1-2
Architecture: s390x
Multi-Arch: same
Section: interpreters

Package: libluajit-5.1-2
Architecture: s390x
Multi-Arch: same
Section: libs

Package: libmariadb3
Architecture: s390x
Multi-Arch: same
Section: libs

Package: libnuma1
Architecture: s390x
Multi-Arch: same
Section: libs

Package: python3
Architecture: s390x
Multi-Arch: allowed
Section: python

Package: python3-minimal
Architecture: s390x
Multi-Arch: allowed
Section: python

Package: libpython3-stdlib
Architecture: s390x
Multi-Arch: same
Section: python

Package: libgcc-s1
Architecture: s390x
Multi-Arch: same
Section: libs

Package: zlib1g
Architecture: s390x
Multi-Arch: same
Section: libs

Package: gcc-12-base
Architecture: s390x
Multi-Arch: same
Section: libs
";

#[test]
fn depends_output_keeps_alternatives_together() {
    let g = parse_depends(DEPENDS_S390X);
    assert_eq!(
        g["sysbench:s390x"],
        [
            vec!["libaio1:s390x".to_string()],
            vec!["libc6:s390x".into()],
            vec![
                "libluajit2-5.1-2:s390x".into(),
                "libluajit-5.1-2:s390x".into()
            ],
            vec!["libmariadb3:s390x".into()],
        ]
    );
    assert_eq!(
        g["libmariadb3:s390x"][0],
        ["<mariadb-common:s390x>", "mariadb-common"]
    );
    assert_eq!(g["python3:s390x"].len(), 2, "PreDepends count");
    assert!(g["gcc-12-base:s390x"].is_empty());
}

#[test]
fn only_library_packages_of_the_arch_are_walked() {
    let g = parse_depends(DEPENDS_S390X);
    let libs = parse_show(SHOW_S390X, "s390x");
    assert!(libs.contains("libluajit2-5.1-2"), "Multi-Arch: same counts");
    assert!(!libs.contains("python3") && !libs.contains("sysbench"));
    let picked = select(
        &g,
        &libs,
        &["rt-tests".into(), "sysbench".into()],
        "s390x",
        "amd64",
    )
    .unwrap();
    assert_eq!(
        picked,
        [
            "gcc-12-base",
            "libaio1",
            "libc6",
            "libgcc-s1",
            "libluajit2-5.1-2",
            "libmariadb3",
            "libnuma1",
            "rt-tests",
            "sysbench",
            "zlib1g"
        ],
        "no python, no -common data packages, the first alternative only"
    );
    let err = select(&g, &libs, &["stress-ng".into()], "s390x", "amd64")
        .unwrap_err()
        .to_string();
    assert!(err.contains("stress-ng:s390x"), "{err}");
}

#[test]
fn the_native_arch_is_printed_unqualified() {
    let g = parse_depends(
        "stress-ng\n  Depends: libc6\n  Depends: libdrm-common\nlibc6\nlibdrm-common\n",
    );
    let libs = parse_show(
        "Package: libc6\nArchitecture: amd64\nMulti-Arch: same\nSection: libs\n\n\
         Package: libdrm-common\nArchitecture: all\nMulti-Arch: foreign\nSection: libs\n",
        "amd64",
    );
    assert_eq!(
        select(&g, &libs, &["stress-ng".into()], "amd64", "amd64").unwrap(),
        ["libc6", "stress-ng"]
    );
    assert_eq!(
        own_name("libc6", "amd64", "amd64").as_deref(),
        Some("libc6")
    );
    assert_eq!(own_name("libc6", "s390x", "amd64"), None);
    assert_eq!(own_name("libc6:i386", "amd64", "amd64"), None);
    assert_eq!(own_name("<x:s390x>", "s390x", "amd64"), None);
}

#[test]
fn a_foreign_arch_must_be_added_first() {
    assert!(arch_enabled("amd64\n", "s390x\n", "s390x").is_ok());
    assert!(arch_enabled("amd64\n", "", "amd64").is_ok());
    let err = arch_enabled("amd64\n", "i386\n", "s390x")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("dpkg --add-architecture s390x && apt-get update"),
        "{err}"
    );
}

#[test]
fn requests_are_validated() {
    let r = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        cache_key("s390x", &r(&["busybox-static", "stress-ng"])).unwrap(),
        "busybox-static,stress-ng"
    );
    assert!(cache_key("s390x", &[]).is_err());
    for bad in ["../x", "-o", "a b", "X11", "a/b", "p;rm", "x"] {
        let err = cache_key("amd64", &r(&[bad])).unwrap_err().to_string();
        assert!(err.contains(bad), "{err}");
    }
    assert!(cache_key("../s390x", &r(&["ok"])).is_err());
}

#[test]
fn deb_file_names() {
    assert_eq!(
        parse_deb_file_name("busybox-static_1%3a1.35.0-4+deb12u1+b1_s390x.deb"),
        Some((
            "busybox-static".into(),
            "1:1.35.0-4+deb12u1+b1".into(),
            "s390x".into()
        ))
    );
    assert_eq!(parse_deb_file_name("x_1.deb"), None);
    assert_eq!(parse_deb_file_name("x_1_s390x.txt"), None);
}

#[test]
fn manifests_round_trip_and_corruption_is_refused() {
    let p = Package {
        name: "libc6".into(),
        version: "2.36-9+deb12u14".into(),
        deb: "libc6_2.36-9+deb12u14_s390x.deb".into(),
        sha256: "00".repeat(32),
    };
    let text = manifest("s390x", &["stress-ng".into()], std::slice::from_ref(&p));
    let (arch, request, packages) = parse_manifest(&text).unwrap();
    assert_eq!(
        (arch.as_str(), request),
        ("s390x", vec!["stress-ng".to_string()])
    );
    assert_eq!(packages, [p]);
    assert!(parse_manifest("arch s390x\nrequest a\npackage a 1 ../x.deb 00\n").is_err());

    let dir = tempfile::tempdir().unwrap();
    fs::create_dir_all(dir.path().join("debs")).unwrap();
    fs::create_dir_all(dir.path().join("root")).unwrap();
    fs::write(dir.path().join("debs").join(&packages[0].deb), b"changed").unwrap();
    fs::write(dir.path().join("manifest"), &text).unwrap();
    let err = check_entry(dir.path(), "s390x", &["stress-ng".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("the manifest says"), "{err}");
    let err = check_entry(dir.path(), "amd64", &["stress-ng".into()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("not amd64"), "{err}");
}

#[test]
fn symlinks_resolve_inside_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::create_dir_all(root.join("lib/s390x-linux-gnu")).unwrap();
    fs::create_dir_all(root.join("usr/lib")).unwrap();
    fs::write(root.join("lib/s390x-linux-gnu/ld64.so.1"), b"ld").unwrap();
    fs::write(root.join("lib/s390x-linux-gnu/libz.so.1.2.13"), b"z").unwrap();
    // Relative, absolute (to the guest's /, not the host's) and a loop.
    std::os::unix::fs::symlink("s390x-linux-gnu/ld64.so.1", root.join("lib/ld64.so.1")).unwrap();
    std::os::unix::fs::symlink("libz.so.1.2.13", root.join("lib/s390x-linux-gnu/libz.so.1"))
        .unwrap();
    std::os::unix::fs::symlink(
        "/lib/s390x-linux-gnu/libz.so.1",
        root.join("usr/lib/libz.so"),
    )
    .unwrap();
    std::os::unix::fs::symlink("../../../../../../etc/passwd", root.join("usr/lib/esc")).unwrap();
    std::os::unix::fs::symlink("loop", root.join("usr/lib/loop")).unwrap();
    assert_eq!(
        resolve_in_root(root, "lib/ld64.so.1").unwrap(),
        root.join("lib/s390x-linux-gnu/ld64.so.1")
    );
    assert_eq!(
        resolve_in_root(root, "usr/lib/libz.so").unwrap(),
        root.join("lib/s390x-linux-gnu/libz.so.1.2.13")
    );
    assert!(
        resolve_in_root(root, "usr/lib/esc").is_err(),
        "stays in the root"
    );
    assert!(
        resolve_in_root(root, "usr/lib/loop")
            .unwrap_err()
            .to_string()
            .contains("symlinks")
    );
    assert_eq!(
        library_dirs(root).unwrap(),
        ["lib/s390x-linux-gnu", "lib", "usr/lib"]
    );
    assert!(guest_relative("/usr/bin/../../etc").is_err());
    assert_eq!(guest_relative("/usr/bin/x").unwrap(), "usr/bin/x");
}
