use super::*;
use farm_spec::build::RUNNER_NEEDS;

fn inputs() -> Inputs {
    Inputs {
        base: None,
        patches: Vec::new(),
    }
}

#[test]
fn the_default_build_keeps_its_key_and_any_input_changes_it() {
    let commit: Commit = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
    let default = key_text(&commit, &KernelBuild::default(), &inputs(), "gcc 12");
    // As before `[build]` existed: kept builds stay valid.
    let runner: String = RUNNER_NEEDS
        .iter()
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect();
    assert_eq!(
        default,
        format!(
            "farm kernel build 1\ncommit {commit}\narch x86_64\nbase tinyconfig\n\
             toolchain gcc 12\n{runner}"
        )
    );
    let spec = |c: &str, f: &[&str], p: &[&str]| KernelBuild::parse(c, f, p).unwrap();
    let with_patch = |body: &[u8]| Inputs {
        base: None,
        patches: vec![("fix.patch".into(), body.to_vec())],
    };
    let keys = [
        default.clone(),
        key_text(&commit, &KernelBuild::default(), &inputs(), "gcc 13"),
        key_text(&commit, &spec("defconfig", &[], &[]), &inputs(), "gcc 12"),
        key_text(
            &commit,
            &spec("", &["CONFIG_HZ_1000=y"], &[]),
            &inputs(),
            "gcc 12",
        ),
        key_text(
            &commit,
            &spec("", &[], &["fix.patch"]),
            &with_patch(b"a"),
            "gcc 12",
        ),
        key_text(
            &commit,
            &spec("", &[], &["fix.patch"]),
            &with_patch(b"b"),
            "gcc 12",
        ),
        key_text(
            &commit,
            &spec("fleet.config", &[], &[]),
            &Inputs {
                base: Some(b"CONFIG_SMP=y\n".to_vec()),
                patches: Vec::new(),
            },
            "gcc 12",
        ),
    ];
    for (i, a) in keys.iter().enumerate() {
        for b in &keys[i + 1..] {
            assert_ne!(a, b);
        }
    }
}

#[test]
fn a_configuration_holds_what_a_build_requires_only_as_set() {
    let config = "CONFIG_SMP=y\nCONFIG_NUMA=m\n# CONFIG_PCI is not set\nCONFIG_HZ=250\n";
    let b = KernelBuild::parse("", &["CONFIG_HZ=250", "CONFIG_PREEMPT=n"], &[] as &[&str]).unwrap();
    let missing = not_held(&b.required(), config);
    // The matrix's options hold; of the runner's needs, SMP alone does.
    assert_eq!(missing.len(), RUNNER_NEEDS.len() - 1);
    assert_eq!(
        missing[..3],
        ["CONFIG_64BIT=y", "CONFIG_NUMA=y", "CONFIG_ACPI=y"]
    );
}
