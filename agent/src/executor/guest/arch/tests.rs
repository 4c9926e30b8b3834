use super::*;

#[test]
fn guest_arches_of_the_farm_arches() {
    for a in GuestArch::ALL {
        assert_eq!(GuestArch::try_from(a.arch()), Ok(a));
    }
    assert_eq!(GuestArch::X86_64.deb_arch(), "amd64");
    assert_eq!(GuestArch::S390x.uname(), "s390x");
    for a in [Arch::Aarch64, Arch::Ppc64le] {
        let e = GuestArch::try_from(a).unwrap_err();
        assert_eq!(e, NoGuest(a));
        assert!(
            e.to_string().starts_with(&format!("no guest for arch {a}")),
            "{e}"
        );
    }
    assert_eq!(Accel::Kvm.executor(), Executor::Kvm);
    assert_eq!(Accel::Tcg.name(), "tcg");
}
