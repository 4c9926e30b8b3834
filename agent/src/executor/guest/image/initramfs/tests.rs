use super::*;

#[test]
fn newc_layout() {
    let archive = newc(&[
        Entry::File("init".into(), 0o755, b"#!/bin/sh\n"),
        Entry::Symlink("bin/sh".into(), "/bin/busybox".into()),
    ]);
    let text = String::from_utf8_lossy(&archive);
    // header of the first member: magic, ino 1, mode 0100755, size 10, namesize 5
    assert!(text.starts_with("07070100000001000081ED"), "{text}");
    assert_eq!(&archive[6 + 6 * 8..6 + 7 * 8], b"0000000A");
    assert_eq!(&archive[6 + 11 * 8..6 + 12 * 8], b"00000005");
    assert_eq!(&archive[110..115], b"init\0");
    // name padded to 4: 110 + 5 = 115 → 116; data 10 → 128
    assert_eq!(&archive[116..126], b"#!/bin/sh\n");
    assert_eq!(&archive[128..134], b"070701");
    assert!(text.contains("bin/sh\0"));
    assert!(text.contains("TRAILER!!!\0"));
    assert_eq!(archive.len() % 4, 0);
}

#[test]
fn applet_links_are_sanitised() {
    let applets = "/bin/sh\nusr/bin/env\nbin/busybox\n../etc/x\nbin//y\n\nsbin/poweroff\n";
    let e = entries(b"BB", applets, "init");
    let links: Vec<_> = e
        .iter()
        .filter_map(|e| match e {
            Entry::Symlink(n, _) => Some(n.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(links, ["bin/sh", "sbin/poweroff", "usr/bin/env"]);
}
