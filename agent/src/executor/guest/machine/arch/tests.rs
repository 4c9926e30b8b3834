use super::*;

#[test]
fn arch_of_debian_flavours() {
    for (v, a) in [
        ("6.1.0-47-cloud-amd64", Some(GuestArch::X86_64)),
        ("6.12.107+deb12-amd64", Some(GuestArch::X86_64)),
        ("6.1.0-50-s390x", Some(GuestArch::S390x)),
        ("6.1.0-50-arm64", None),
        ("amd64", None),
    ] {
        assert_eq!(GuestArch::of_debian_version(v), a, "{v}");
    }
    assert_eq!(GuestArch::from_uname("s390x"), Some(GuestArch::S390x));
    assert_eq!(GuestArch::from_uname("aarch64"), None);
}
