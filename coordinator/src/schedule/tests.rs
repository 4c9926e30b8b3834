use super::*;

/// 2026-12-01T00:00:00Z in unix ms.
const DEC1: u64 = 1_796_083_200_000;
const HOUR: u64 = 3_600_000;

#[test]
fn cron_has_exactly_five_fields() {
    assert!(cron("0 3 * * *").is_ok());
    let e = cron("0 0 3 * * *").unwrap_err().to_string();
    assert!(e.contains("6 fields") && e.contains("five"), "{e}");
    assert!(
        cron("0 3 * *")
            .unwrap_err()
            .to_string()
            .contains("4 fields")
    );
    let e = cron("61 3 * * *").unwrap_err().to_string();
    assert!(e.contains("61 3 * * *"), "{e}");
}

#[test]
fn instants_are_utc_and_strictly_after() {
    let nightly = cron("0 3 * * *").unwrap();
    assert_eq!(next_after(&nightly, DEC1), Some(DEC1 + 3 * HOUR));
    // Exactly at an instant: the next one, a day later.
    assert_eq!(
        next_after(&nightly, DEC1 + 3 * HOUR),
        Some(DEC1 + 27 * HOUR)
    );
    let never = cron("0 0 30 2 *").unwrap();
    assert_eq!(next_after(&never, DEC1), None);
}

#[test]
fn missed_instants_run_once_for_the_latest() {
    let hourly = cron("0 * * * *").unwrap();
    assert_eq!(latest_due(&hourly, DEC1, DEC1 + HOUR - 1), None);
    assert_eq!(latest_due(&hourly, DEC1, DEC1 + HOUR), Some(DEC1 + HOUR));
    // Down for a day and a half: one execution, for the last instant.
    assert_eq!(
        latest_due(&hourly, DEC1, DEC1 + 36 * HOUR + 59_000),
        Some(DEC1 + 36 * HOUR)
    );
    let minutely = cron("* * * * *").unwrap();
    // Two years of minutes: one search, still the latest.
    let later = DEC1 + 2 * 365 * 24 * HOUR + 30_000;
    assert_eq!(latest_due(&minutely, DEC1, later), Some(later - 30_000));
}

#[test]
fn new_kernels_are_matching_unseen_and_once() {
    let caps = Capabilities {
        kernel_release: "6.12.9-amd64".into(),
        guest_kernels: vec![
            "debian:6.1.0-57-cloud-amd64".into(),
            "file:/srv/kernels/v6.13-rc1".into(),
            "file:/srv/kernels/v6.13-rc2".into(),
        ],
        ..Default::default()
    };
    let cat = catalogue(&caps);
    let files = kernel_glob("file:/srv/kernels/*").unwrap();
    assert_eq!(
        new_kernels(&files, &cat, &["file:/srv/kernels/v6.13-rc1".into()]),
        vec!["file:/srv/kernels/v6.13-rc2".to_string()]
    );
    let hosts = kernel_glob("6.12.*").unwrap();
    assert_eq!(
        new_kernels(&hosts, &cat, &[]),
        vec!["6.12.9-amd64".to_string()]
    );
    assert!(kernel_glob("file:[").is_err());
}
