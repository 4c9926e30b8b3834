use std::os::unix::fs::PermissionsExt;

use super::*;
use crate::identity::Name;

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn principal_of(cert: &Path) -> Result<Principal, identity::Error> {
    let pem = fs::read(cert).unwrap();
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
    Principal::of_certificate(&pem.contents)
}

#[test]
fn init_then_issue_writes_private_keys_and_named_certificates() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, server) = init(dir.path(), &["coord.lab".into(), "10.0.0.5".into()], 30).unwrap();
    assert_eq!(ca.cert, dir.path().join("ca.crt"));
    assert_eq!(server.key, dir.path().join("coordinator.key"));
    let agent = Principal::Agent(Name::parse("node-1").unwrap());
    let alice = Principal::Submitter(Name::parse("alice").unwrap());
    let a = issue(dir.path(), &agent, DEFAULT_DAYS).unwrap();
    let s = issue(dir.path(), &alice, DEFAULT_DAYS).unwrap();
    assert_eq!(a.cert, dir.path().join("agents/node-1.crt"));
    assert_eq!(s.key, dir.path().join("submitters/alice.key"));
    for key in [&ca.key, &server.key, &a.key, &s.key] {
        assert_eq!(mode(key), 0o600, "{}", key.display());
    }
    assert_eq!(principal_of(&a.cert), Ok(agent.clone()));
    assert_eq!(principal_of(&s.cert), Ok(alice));
    // The coordinator's own certificate is not a principal's.
    assert_eq!(
        principal_of(&server.cert),
        Err(identity::Error::NoPrincipal)
    );
    // Nothing is overwritten.
    assert_eq!(
        issue(dir.path(), &agent, DEFAULT_DAYS)
            .unwrap_err()
            .to_string(),
        format!(
            "{} exists: remove it first to issue it again",
            a.cert.display()
        )
    );
    assert!(matches!(
        init(dir.path(), &[], 30),
        Err(Error::Exists(p)) if p == ca.cert
    ));
}

#[test]
fn issuing_needs_the_authority_and_sane_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let agent = Principal::Agent(Name::parse("n").unwrap());
    assert!(matches!(
        issue(dir.path(), &agent, 30),
        Err(Error::Io { path, .. }) if path == dir.path().join("ca.crt")
    ));
    assert!(matches!(issue(dir.path(), &agent, 0), Err(Error::Days(0))));
    assert_eq!(
        init(dir.path(), &["bad host!".into()], 30)
            .unwrap_err()
            .to_string(),
        "host \"bad host!\" is neither an IP address nor a DNS name"
    );
    let many: Vec<String> = (0..=MAX_HOSTS).map(|i| format!("h{i}")).collect();
    assert!(matches!(
        init(dir.path(), &many, 30),
        Err(Error::TooManyHosts(65))
    ));
    // A refused init wrote nothing.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    // An authority key others can read is refused.
    init(dir.path(), &[], 30).unwrap();
    fs::set_permissions(dir.path().join(CA_KEY), fs::Permissions::from_mode(0o644)).unwrap();
    assert!(matches!(
        issue(dir.path(), &agent, 30),
        Err(Error::Secret { .. })
    ));
}

#[test]
fn server_names_include_loopback_once() {
    let sans = server_names(&["127.0.0.1".into(), "coord".into()]).unwrap();
    assert_eq!(
        sans,
        vec![
            SanType::IpAddress("127.0.0.1".parse().unwrap()),
            SanType::DnsName("coord".try_into().unwrap()),
            SanType::DnsName("localhost".try_into().unwrap()),
            SanType::IpAddress("::1".parse().unwrap()),
        ]
    );
}

#[test]
fn a_certificate_never_outlives_its_authority() {
    let ca_until = rcgen::date_time_ymd(2027, 1, 1);
    let p = leaf_params("n", DEFAULT_DAYS, ca_until);
    assert_eq!(p.not_after, ca_until);
    let later = rcgen::date_time_ymd(4000, 1, 1);
    let p = leaf_params("n", 30, later);
    assert!(p.not_after < later);
    assert!(p.not_after > p.not_before);
}

#[test]
fn what_a_failed_command_wrote_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.key"), dir.path().join("b.crt"));
    {
        let mut files = Files::default();
        files.write(&a, b"k", KEY_MODE).unwrap();
        // The second write fails (its directory does not exist) ...
        assert!(
            files
                .write(&dir.path().join("no/b.crt"), b"c", CERT_MODE)
                .is_err()
        );
    }
    // ... and the first file went with the command.
    assert!(!a.exists());
    let mut files = Files::default();
    files.write(&a, b"k", KEY_MODE).unwrap();
    files.write(&b, b"c", CERT_MODE).unwrap();
    files.keep();
    assert!(a.exists() && b.exists());
    assert_eq!(mode(&a), 0o600);
}
