use super::*;

#[test]
fn verdicts_are_kept_per_key() {
    let key = "host 6.1.0-1 qemu 123";
    let works = record(key, &Verdict::Works);
    assert_eq!(parse_record(&works, key), Some(Verdict::Works));
    let fails = record(key, &Verdict::Fails("hung\nat boot".into()));
    assert_eq!(
        parse_record(&fails, key),
        Some(Verdict::Fails("hung at boot".into()))
    );
    // Another host kernel or QEMU: probe again.
    assert_eq!(parse_record(&works, "host 6.2 qemu 123"), None);
    assert_eq!(parse_record("", key), None);
    assert_eq!(parse_record(&format!("{key}\nmaybe\n"), key), None);
}
