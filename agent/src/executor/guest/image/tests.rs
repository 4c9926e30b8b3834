use super::tool::parse_sha256sum;
use super::*;

#[test]
fn sha256sum_output() {
    let line = "E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855  /x\n";
    assert_eq!(
        parse_sha256sum(line).unwrap(),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    );
    assert_eq!(parse_sha256sum("sha256sum: /x: No such file\n"), None);
    assert_eq!(parse_sha256sum(""), None);
}

#[test]
fn tail_keeps_last_lines() {
    assert_eq!(tail("a\nb\nc\n", 2), "b\nc");
    assert_eq!(tail("a", 5), "a");
}

#[test]
fn ldd_output() {
    let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
\t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
    assert_eq!(
        parse_ldd(out).unwrap(),
        [
            PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
            PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
            PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
        ]
    );
    let e = parse_ldd(&format!("{out}\tlibfoo.so.3 => not found\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("`libfoo.so.3`"), "{e}");
    assert!(parse_ldd("\tstatically linked\n").unwrap().is_empty());
    assert!(parse_ldd("\tlibx.so => /lib/../etc/x (0x1)\n").is_err());
}
