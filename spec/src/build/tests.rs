use super::*;

fn option(s: &str) -> Result<String, String> {
    s.parse::<ConfigOption>()
        .map(|o| o.to_string())
        .map_err(|e| e.to_string())
}

#[test]
fn options_parse_to_their_canonical_line() {
    assert_eq!(option("CONFIG_HZ_1000=y"), Ok("CONFIG_HZ_1000=y".into()));
    assert_eq!(option("CONFIG_PREEMPT=n"), Ok("CONFIG_PREEMPT=n".into()));
    assert_eq!(option("CONFIG_HZ=1000"), Ok("CONFIG_HZ=1000".into()));
    assert_eq!(option("CONFIG_NR_CPUS=-1"), Ok("CONFIG_NR_CPUS=-1".into()));
    assert_eq!(
        option("CONFIG_PHYSICAL_START=0x1000000"),
        Ok("CONFIG_PHYSICAL_START=0x1000000".into())
    );
    assert_eq!(option("CONFIG_X=0xABc"), Ok("CONFIG_X=0xabc".into()));
    assert_eq!(
        option("CONFIG_CMDLINE=\"console=ttyS0 quiet\""),
        Ok("CONFIG_CMDLINE=\"console=ttyS0 quiet\"".into())
    );
    let n: ConfigOption = "CONFIG_PREEMPT=n".parse().unwrap();
    assert_eq!(n.config_line(), "# CONFIG_PREEMPT is not set");
}

#[test]
fn bad_options_say_why() {
    assert_eq!(
        option("HZ=1000"),
        Err(
            "`HZ=1000`: an option's name is CONFIG_ and capitals, digits and _, at most 100 \
             characters"
                .into()
        )
    );
    assert_eq!(
        option("CONFIG_HZ"),
        Err("`CONFIG_HZ`: a fragment is CONFIG_NAME=VALUE".into())
    );
    assert_eq!(
        option("CONFIG_hz=y"),
        Err(
            "`CONFIG_hz=y`: an option's name is CONFIG_ and capitals, digits and _, at most \
             100 characters"
                .into()
        )
    );
    assert_eq!(
        option("CONFIG_HZ=yes"),
        Err(
            "`CONFIG_HZ=yes`: a value is y, n, m, a decimal or 0x hex number, or a quoted \
             string"
                .into()
        )
    );
    assert_eq!(
        option("CONFIG_X=0x"),
        Err("`CONFIG_X=0x`: a hex value is 0x and 1 to 16 hex digits".into())
    );
    for s in [
        "CONFIG_X=\"a\\\"",
        "CONFIG_X=\"$(reboot)\\n\"",
        "CONFIG_X=\"open",
    ] {
        assert!(
            option(s).unwrap_err().ends_with(
                "a string value is quoted, at most 256 printable ASCII characters, without \" \
                 or \\"
            ),
            "{s}"
        );
    }
    // A long value is quoted only by its start.
    let long = format!("CONFIG_X=\"{}\"", "a".repeat(300));
    assert_eq!(
        option(&long),
        Err(format!(
            "`CONFIG_X=\"{}…`: a string value is quoted, at most 256 printable ASCII \
             characters, without \" or \\",
            "a".repeat(30)
        ))
    );
}

#[test]
fn a_configuration_holds_an_option_only_as_set() {
    let config = "CONFIG_SMP=y\nCONFIG_NUMA=m\n# CONFIG_PCI is not set\nCONFIG_HZ=250\n";
    let held = |s: &str| s.parse::<ConfigOption>().unwrap().held_by(config);
    assert!(held("CONFIG_SMP=y"));
    assert!(!held("CONFIG_NUMA=y"));
    assert!(held("CONFIG_PCI=n"));
    assert!(held("CONFIG_ACPI=n"), "never set is not set");
    assert!(!held("CONFIG_SMP=n"));
    assert!(held("CONFIG_HZ=250"));
    assert!(!held("CONFIG_HZ=1000"));
}

#[test]
fn builds_check_their_fields_and_name_them() {
    let none: [&str; 0] = [];
    assert!(KernelBuild::parse("", &none, &none).unwrap().is_default());
    assert!(
        KernelBuild::parse("tinyconfig", &none, &none)
            .unwrap()
            .is_default()
    );
    let b = KernelBuild::parse(
        "fleet-6.1.config",
        &["CONFIG_HZ_1000=y", "CONFIG_PREEMPT=n"],
        &["0001-sched-fix.patch"],
    )
    .unwrap();
    assert_eq!(
        b.to_string(),
        "fleet-6.1.config CONFIG_HZ_1000=y CONFIG_PREEMPT=n +0001-sched-fix.patch"
    );
    assert!(
        b.merged_fragment()
            .starts_with("CONFIG_HZ_1000=y\n# CONFIG_PREEMPT is not set\nCONFIG_64BIT=y\n")
    );
    assert_eq!(b.required().len(), 2 + RUNNER_NEEDS.len());
    let err =
        |c: &str, f: &[&str], p: &[&str]| KernelBuild::parse(c, f, p).unwrap_err().to_string();
    assert_eq!(
        err("../etc/shadow", &[], &[]),
        "config: `../etc/shadow`: a base configuration is `tinyconfig`, `defconfig` or the name \
         of a file in an agent's --build-configs directory (letters, digits and . _ + -)"
    );
    assert_eq!(
        err("defconfig", &["CONFIG_HZ=100", "CONFIG_HZ=1000"], &[]),
        "fragments[1]: CONFIG_HZ is set twice (also fragments[0])"
    );
    assert_eq!(
        err("defconfig", &["CONFIG_HZ=100", "CONFIG_NUMA=n"], &[]),
        "fragments[1]: `CONFIG_NUMA=n`: the guest runner needs CONFIG_NUMA=y"
    );
    // Saying what the runner needs anyway is no contradiction.
    assert!(KernelBuild::parse("", &["CONFIG_NUMA=y"], &none).is_ok());
    assert_eq!(
        err("", &[], &["a.patch", ".hidden"]),
        "patches[1]: `.hidden`: a file name is letters, digits and . _ + -, starting with a \
         letter or digit, at most 100 characters"
    );
    assert_eq!(
        err("", &[], &["sub/a.patch"]),
        "patches[0]: `sub/a.patch`: a file name is letters, digits and . _ + -, starting with a \
         letter or digit, at most 100 characters"
    );
    assert_eq!(
        err("", &[], &["a.patch", "a.patch"]),
        "patches[1]: patch `a.patch` is applied twice (also patches[0])"
    );
    let many: Vec<String> = (0..=KernelBuild::MAX_FRAGMENTS)
        .map(|i| format!("CONFIG_X{i}=y"))
        .collect();
    assert_eq!(
        err(
            "",
            &many.iter().map(String::as_str).collect::<Vec<_>>(),
            &[]
        ),
        "fragments: at most 256 fragment options"
    );
    let many: Vec<String> = (0..=KernelBuild::MAX_PATCHES)
        .map(|i| format!("{i}.patch"))
        .collect();
    assert_eq!(
        err(
            "",
            &[],
            &many.iter().map(String::as_str).collect::<Vec<_>>()
        ),
        "patches: at most 32 patches"
    );
}
