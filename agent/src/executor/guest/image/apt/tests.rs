//! Captured with apt 2.6.1 (Debian bookworm, lists of 2025-05-20 with
//! bookworm-security) on an amd64 host without foreign architectures:
//! `apt-cache showpkg <names> > testdata/showpkg-<names>.txt`.

use super::*;

/// Whether the capture `file` shows a real package headed exactly `name`.
fn check(file: &str, name: &str, expected: bool) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/executor/guest/image/apt/testdata")
        .join(file);
    let output =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        showpkg_has_exactly(&output, name),
        expected,
        "{file}: {name}"
    );
}

#[test]
fn an_exact_name_is_found() {
    check(
        "showpkg-linux-image-6.1.0-47-amd64.txt",
        "linux-image-6.1.0-47-amd64",
        true,
    );
    // What kernels::download asks: both candidates in one call, qualified.
    for name in [
        "linux-image-6.1.0-47-amd64-unsigned",
        "linux-image-6.1.0-47-amd64",
    ] {
        check("showpkg-unsigned-and-signed-amd64.txt", name, true);
    }
    // A prefix of a name shown is not that name.
    check(
        "showpkg-unsigned-and-signed-amd64.txt",
        "linux-image-6.1.0-47",
        false,
    );
}

#[test]
fn a_name_read_as_a_regular_expression_is_not_found() {
    // apt shows the three packages the pattern matches, none of them the
    // name asked.
    let file = "showpkg-linux-image-6.1.0.47-amd64.txt";
    check(file, "linux-image-6.1.0.47-amd64", false);
    // What it matched is there, so the capture is the regex's answer.
    check(file, "linux-image-6.1.0-47-amd64", true);
    check(file, "linux-image-6.1.0-47-amd64-unsigned", true);
    check(file, "linux-image-6.1.0-47-amd64-dbg", true);
}

#[test]
fn an_unknown_name_is_not_found() {
    // Not in these lists: apt printed nothing (and exited 0).
    check(
        "showpkg-linux-image-6.1.0-27-amd64.txt",
        "linux-image-6.1.0-27-amd64",
        false,
    );
}

#[test]
fn a_virtual_package_is_not_found() {
    // Known only as what exim4 and others provide: no version to download.
    check(
        "showpkg-mail-transport-agent.txt",
        "mail-transport-agent",
        false,
    );
}

#[test]
fn names_are_shown_qualified_only_for_a_foreign_arch() {
    assert_eq!(shown("stress-ng", "amd64", "amd64"), "stress-ng");
    assert_eq!(shown("tzdata", "all", "amd64"), "tzdata");
    assert_eq!(shown("stress-ng", "s390x", "amd64"), "stress-ng:s390x");
}

#[test]
fn a_foreign_package_is_found_only_qualified() {
    // The form apt gives a foreign arch's package (`FullName(true)`), as
    // in sysroot's captures of `apt-cache depends ...:s390x`.
    let output = "Package: stress-ng:s390x\nVersions: \n0.15.06-2 (/var/lib/apt/lists/x_Packages)\n\n\nReverse Depends: \n";
    assert!(showpkg_has_exactly(output, "stress-ng:s390x"));
    assert!(!showpkg_has_exactly(output, "stress-ng"));
}

#[test]
fn this_machines_apt_is_asked_exactly() {
    // Needs apt and dpkg (every Debian system has them, and bash installed):
    // `ba.h` matches bash as a pattern, and is no package.
    let native = native_arch().expect("dpkg --print-architecture");
    assert_eq!(
        missing(&["bash", "ba.h"], &native, &native).expect("apt-cache showpkg"),
        ["ba.h"]
    );
    let err = require(&["ba.h"], &native, &native)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!(
            "apt knows no package named exactly ba.h:{native} (`apt-get update` may be needed)"
        )
    );
}
