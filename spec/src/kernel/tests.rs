use super::*;

fn check(name: &str, expect: Result<&str, &str>) {
    match (name.parse::<Kernel>(), expect) {
        (Ok(k), Ok(what)) => {
            let got = match &k {
                Kernel::Running => "running".to_owned(),
                Kernel::Release(r) => format!("release {r}"),
                Kernel::Debian(d) => format!("debian {} {}", d.version(), d.arch()),
                Kernel::File(p) => format!("file {}", p.path()),
                Kernel::Git(g) => match g.variant() {
                    Some(v) => format!("git {} {} build {v}", g.repo(), g.rev()),
                    None => format!("git {} {}", g.repo(), g.rev()),
                },
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
        "svn:linux@1234",
        Err(
            "`svn:linux@1234`: a kernel is `running`, a release, `debian:<version>`, `file:<path>` or `git:<repo>@<ref>`",
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

#[test]
fn kernels_from_trees() {
    check("git:linux@v6.1", Ok("git linux v6.1"));
    check("git:tip@sched/urgent", Ok("git tip sched/urgent"));
    check("git:linux@1b9508f", Ok("git linux 1b9508f"));
    check("git:linux@v6.1#fix", Ok("git linux v6.1 build fix"));
    check(
        "git:tip@sched/urgent#hz-1000",
        Ok("git tip sched/urgent build hz-1000"),
    );
    let variant = "after `#` comes the name of one of the matrix's [builds.<name>]: at most 32 \
                   lowercase letters, digits, _ and -";
    for bad in [
        "git:linux@v6.1#",
        "git:linux@v6.1#Fix",
        "git:linux@v6.1#a#b",
        "git:linux@v6.1#../x",
    ] {
        check(bad, Err(&format!("`{bad}`: {variant}")));
    }
    check(
        "git:linux-stable@3fed382b46baac83ba4f8bb2c6d7e6ae5c3e7f5e",
        Ok("git linux-stable 3fed382b46baac83ba4f8bb2c6d7e6ae5c3e7f5e"),
    );
    check("git:my_tree@v6.12-rc1+fix", Ok("git my_tree v6.12-rc1+fix"));
    let form = "a kernel from a tree is `git:<repo>@<ref>` (e.g. git:linux@v6.1)";
    check("git:linux", Err(&format!("`git:linux`: {form}")));
    let repo = "a repository is a name of at most 64 letters, digits, _ and -, starting with a \
                letter or digit (one an agent's --kernel-repo gives)";
    for bad in ["", "-x", "/srv/linux", "../linux", "a.b", "x;y"] {
        let name = format!("git:{bad}@v6.1");
        check(&name, Err(&format!("`{name}`: {repo}")));
    }
    let refs = "a ref is a commit id, tag or branch of at most 200 characters: letters, digits \
                and . _ - + in parts joined by single /, no part starting with . or - or ending \
                in . or .lock, and no ..";
    // Options, ranges, revision expressions, reflogs and path tricks.
    for bad in [
        "",
        "--output=/etc/x",
        "-n",
        "v6.0..v6.1",
        "v6.1^",
        "v6.1~2",
        "HEAD@{1}",
        "v6.1:kernel",
        "a//b",
        "/v6.1",
        "v6.1/",
        "x/.hidden",
        "x.lock",
        "x.",
        "x$(id)",
        "x`id`",
        "@",
    ] {
        let name = format!("git:linux@{bad}");
        check(&name, Err(&format!("`{}`: {refs}", excerpt(&name))));
    }
    let long = format!("git:linux@{}", "a".repeat(201));
    check(&long, Err(&format!("`{}`: {refs}", excerpt(&long))));
    assert!("git:linux@v6.1".parse::<Kernel>().unwrap().is_guest());
}
