use super::*;

fn check(input: &str, expect: Result<&str, &str>) {
    let got = input.parse::<CpuSet>();
    match (got, expect) {
        (Ok(set), Ok(canonical)) => assert_eq!(set.to_string(), canonical, "{input:?}"),
        (Err(e), Err(why)) => assert_eq!(e.to_string(), why, "{input:?}"),
        (got, expect) => panic!("{input:?}: got {got:?}, expected {expect:?}"),
    }
}

#[test]
fn lists() {
    check("1", Ok("1"));
    check("1-3", Ok("1-3"));
    check("1,3-5", Ok("1,3-5"));
    check("3-5,1", Ok("1,3-5"));
    check("1,2,3", Ok("1-3"));
    check("0-3,2-6,8", Ok("0-6,8"));
    check("5-5", Ok("5"));
    check("0-99999", Ok("0-99999"));
    check("", Err("no CPUs given"));
    check("x", Err("`x` in `x` is not a CPU number"));
    check("1,", Err("`` in `1,` is not a CPU number"));
    check("1 ,2", Err("`1 ` in `1 ,2` is not a CPU number"));
    check("-1", Err("`` in `-1` is not a CPU number"));
    check("+1", Err("`+1` in `+1` is not a CPU number"));
    check("1-3:1/2", Err("`3:1/2` in `1-3:1/2` is not a CPU number"));
    check(
        "100000",
        Err("CPU 100000 is beyond the largest supported CPU number 99999"),
    );
    check(
        "0-4294967296",
        Err("CPU 4294967296 is beyond the largest supported CPU number 99999"),
    );
    check("5-3", Err("range `5-3` runs backwards"));
    check("1,".repeat(1024).trim_end_matches(','), Ok("1"));
    check(
        &"1,".repeat(1025),
        Err("more than 1024 items in a CPU list"),
    );
}

#[test]
fn long_values_are_quoted_by_a_prefix() {
    let long = "x".repeat(20_000);
    let e = long.parse::<CpuSet>().unwrap_err().to_string();
    assert!(e.len() < 120, "{} bytes", e.len());
    assert!(e.starts_with(&format!("`{}…` in", "x".repeat(40))), "{e}");
}

#[test]
fn kernel_lists() {
    assert_eq!(
        CpuSet::parse_kernel_list("0-3\n").unwrap().to_string(),
        "0-3"
    );
    assert!(CpuSet::parse_kernel_list("\n").unwrap().is_empty());
    assert!(CpuSet::parse_kernel_list("").unwrap().is_empty());
    assert_eq!(
        CpuSet::parse_kernel_list("0-1,x\n")
            .unwrap_err()
            .to_string(),
        "`x` in `0-1,x` is not a CPU number"
    );
}

#[test]
fn operations() {
    let s: CpuSet = "1,3-5,9".parse().unwrap();
    assert_eq!(s.count(), 5);
    assert_eq!(s.iter().collect::<Vec<_>>(), [1, 3, 4, 5, 9]);
    assert_eq!(s.first(), Some(1));
    assert!(s.contains(4) && s.contains(9) && !s.contains(2) && !s.contains(10));
    let all: CpuSet = "0-9".parse().unwrap();
    assert!(s.is_subset_of(&all));
    assert!(!all.is_subset_of(&s));
    assert_eq!(all.difference(&s).to_string(), "0,2,6-8");
    assert_eq!(s.difference(&all).to_string(), "");
    assert_eq!(s.difference(&CpuSet::default()), s);
    let huge: CpuSet = "1-99999".parse().unwrap();
    assert_eq!(huge.ranges(), &[(1, 99_999)]);
    assert_eq!(huge.count(), 99_999);
    assert_eq!(CpuSet::from_cpus([3, 1, 2, 7]).to_string(), "1-3,7");
}
