use super::*;

fn check(name: &str, expect: Result<&str, &str>) {
    match (name.parse::<Kernel>(), expect) {
        (Ok(k), Ok(what)) => {
            let got = match &k {
                Kernel::Running => "running".to_owned(),
                Kernel::Release(r) => format!("release {r}"),
                Kernel::Debian(d) => format!("debian {} {}", d.version(), d.arch()),
                Kernel::File(p) => format!("file {}", p.path()),
            };
            assert_eq!(got, what, "{name}");
            assert_eq!(k.to_string(), name, "round trip");
        }
        (Err(e), Err(why)) => assert_eq!(e.to_string(), why, "{name}"),
        (got, expect) => panic!("{name}: got {got:?}, expected {expect:?}"),
    }
}

#[test]
fn kernels() {
    check("running", Ok("running"));
    check("6.1.0-57-amd64", Ok("release 6.1.0-57-amd64"));
    check(
        "debian:6.1.0-57-cloud-amd64",
        Ok("debian 6.1.0-57-cloud-amd64 x86_64"),
    );
    check(
        "debian:6.12.107+deb12-amd64",
        Ok("debian 6.12.107+deb12-amd64 x86_64"),
    );
    check("debian:6.1.0-50-s390x", Ok("debian 6.1.0-50-s390x s390x"));
    check("debian:6.1.0-50-arm64", Ok("debian 6.1.0-50-arm64 aarch64"));
    check(
        "debian:6.1.0-50-powerpc64le",
        Ok("debian 6.1.0-50-powerpc64le ppc64le"),
    );
    check(
        "file:/srv/kernels/vmlinuz-rc1",
        Ok("file /srv/kernels/vmlinuz-rc1"),
    );
    check("", Err("a kernel name is not empty"));
    check("6.1 x", Err("a kernel release has no whitespace"));
    check(
        "debian:6.1;rm",
        Err(
            "`debian:6.1;rm`: a Debian kernel version starts with a digit and is letters and digits separated by single . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)",
        ),
    );
    check(
        "debian:-o",
        Err(
            "`debian:-o`: a Debian kernel version starts with a digit and is letters and digits separated by single . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)",
        ),
    );
    for bad in [
        "6.+-amd64",
        "6..1-amd64",
        "6.1.0-57-amd64-",
        "a6.1-amd64",
        "6.1*-amd64",
    ] {
        let name = format!("debian:{bad}");
        let want = format!(
            "`{name}`: a Debian kernel version starts with a digit and is letters and digits \
             separated by single . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)"
        );
        check(&name, Err(&want));
    }
    check(
        "debian:",
        Err(
            "`debian:`: a Debian kernel version starts with a digit and is letters and digits separated by single . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)",
        ),
    );
    check(
        "debian:6.1.0-50-i386",
        Err(
            "`debian:6.1.0-50-i386`: the version must end with a Debian flavour naming its arch (amd64, s390x, arm64, powerpc64le)",
        ),
    );
    check(
        &format!("debian:{}-amd64", "1".repeat(95)),
        Err(&format!(
            "`debian:{}…`: a Debian kernel version has at most 100 characters",
            "1".repeat(33)
        )),
    );
    check(
        "file:relative",
        Err("`file:relative`: a kernel image is an absolute path without `..`"),
    );
    check(
        "file:/srv/../etc/x",
        Err("`file:/srv/../etc/x`: a kernel image is an absolute path without `..`"),
    );
    check(
        "file:/srv/k$x",
        Err("`file:/srv/k$x`: a kernel image's path is letters, digits and / . _ + - ~"),
    );
    check(
        "git:linux@v6.1",
        Err(
            "`git:linux@v6.1`: a kernel is `running`, a release, `debian:<version>` or `file:<path>`",
        ),
    );
    check(
        &format!("file:/{}", "a".repeat(5000)),
        Err("a kernel name has at most 4101 bytes"),
    );
}

#[test]
fn arches() {
    for a in Arch::ALL {
        assert_eq!(a.uname().parse::<Arch>(), Ok(a));
        assert_eq!(
            Arch::of_debian_version(&format!("6.1.0-1{}", a.debian_flavour())),
            Some(a)
        );
    }
    assert_eq!(Arch::of_debian_version("amd64"), None);
    assert_eq!(Arch::X86_64.deb_arch(), "amd64");
    assert_eq!(Arch::Ppc64le.deb_arch(), "ppc64el");
    assert_eq!(
        "i686".parse::<Arch>().unwrap_err().to_string(),
        "unknown arch `i686` (known: x86_64, s390x, aarch64, ppc64le)"
    );
}
