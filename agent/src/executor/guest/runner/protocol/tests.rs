use super::*;

const RECORDED: &str = "farm-job 2\r\nrelease 6.1.0-57-cloud-amd64\r\nbegin\r\n\
end\r\nout some chatter\r\nout metric hog_ops_per_s 123456.5 ops/s higher\r\n\
err a warning\r\nexit 0\r\nwall_s 1.02\r\ndone\r\n";

#[test]
fn domains_before_and_after_the_state() {
    let text = "farm-job 2\nrelease 6.1.0-57-cloud-amd64\n\
        domain before 0 1 NUMA\ndomain before 0 0 MC\ndomain before 1 0 MC\n\
        online 0-3\ndomain after 0 0 MC\ndomain after 1 0 MC\n\
        begin\nend\nexit 0\nwall_s 1.00\ndone\n";
    let r = parse_run(text).unwrap();
    assert_eq!(r.domains_before[&0], ["MC", "NUMA"]);
    assert_eq!(r.domains_after[&0], ["MC"]);
    assert_eq!(r.online, "0-3");
    for bad in [
        "domain sideways 0 0 MC",
        "domain before x 0 MC",
        "domain before 0 0",
    ] {
        let text = format!("farm-job 2\nrelease r\n{bad}\nexit 0\nwall_s 1\ndone\n");
        let e = parse_run(&text).unwrap_err().to_string();
        assert!(e.contains("malformed domain line"), "{bad}: {e}");
    }
    // A state the guest could not apply fails the run.
    let e = parse_run("farm-job 2\nrelease r\nerror state cycle 1\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("could not state cycle 1"), "{e}");
}

#[test]
fn the_state_file_holds_numbers_only() {
    let s = GuestState {
        cycle: vec![1, 3],
        offline: vec![2],
        autogroup: Some(false),
        ..GuestState::default()
    };
    assert_eq!(s.file(), "cycle 1\ncycle 3\noffline 2\nautogroup 0\n");
    let s = GuestState {
        cgroup: true,
        cpu_weight: Some(50),
        cpu_max: Some((50000, 100000)),
        cpuset: vec![0, 1, 3],
        ..GuestState::default()
    };
    assert_eq!(
        s.file(),
        "cgroup 1\ncpu_weight 50\ncpu_max 50000 100000\ncpuset 0-1,3\n"
    );
    // Limits without the cgroup are not written: the runner has nowhere to put them.
    let s = GuestState {
        cpu_weight: Some(50),
        ..GuestState::default()
    };
    assert_eq!(s.file(), "");
    assert_eq!(GuestState::default().file(), "");
}

#[test]
fn parses_a_recorded_run() {
    let r = parse_run(RECORDED).unwrap();
    assert_eq!(r.release, "6.1.0-57-cloud-amd64");
    assert_eq!(r.exit_code, 0);
    assert_eq!(r.wall_s, 1.02);
    assert_eq!(
        r.stdout,
        "some chatter\nmetric hog_ops_per_s 123456.5 ops/s higher\n"
    );
    assert_eq!(r.stderr, "a warning\n");
}

#[test]
fn malformed_or_truncated_runs_are_errors() {
    let cut = &RECORDED[..RECORDED.find("done").unwrap()];
    assert!(
        parse_run(cut)
            .unwrap_err()
            .to_string()
            .contains("no `done`")
    );
    assert!(
        parse_run(&RECORDED.replace("exit 0\r\n", ""))
            .unwrap_err()
            .to_string()
            .contains("exit code")
    );
    assert!(
        parse_run(&RECORDED.replace("wall_s 1.02", "wall_s x"))
            .unwrap_err()
            .to_string()
            .contains("`wall_s x`")
    );
    assert!(
        parse_run(&RECORDED.replace("begin", "rm -rf"))
            .unwrap_err()
            .to_string()
            .contains("unknown line `rm -rf`")
    );
    assert!(parse_run("").unwrap_err().to_string().contains("nothing"));
    assert!(
        parse_run("farm-job 1\n")
            .unwrap_err()
            .to_string()
            .contains("first line")
    );
}

#[test]
fn a_nonzero_exit_is_data() {
    let r = parse_run(&RECORDED.replace("exit 0", "exit 2")).unwrap();
    assert_eq!(r.exit_code, 2);
}

#[test]
fn job_arguments_are_validated() {
    let job = Job::built_in("cpu-hog", &[("threads", "2"), ("seconds", "1")]).unwrap();
    assert_eq!(
        job.file(),
        "/bin/farm-workload\ncpu-hog\n--param\nthreads=2\n--param\nseconds=1\n"
    );
    for bad in [
        "x;reboot", "$(id)", "`id`", "a b", "a\nb", "", "x|y", "x&", "'", "\"", "*", "~",
    ] {
        let e = Job::new("/usr/bin/stress-ng", vec![bad.into()]).unwrap_err();
        assert!(
            matches!(e, Error::Argument(ref a) if a == bad),
            "{bad:?}: {e}"
        );
        assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
    }
    let e = Job::built_in("cpu-hog", &[("threads", "$(id)")]).unwrap_err();
    assert!(e.to_string().contains("`threads=$(id)`"), "{e}");
    for bad in ["stress-ng", "/usr/../bin/sh", "/usr/bin/a b", ""] {
        let e = Job::new(bad, vec![]).unwrap_err();
        assert!(matches!(e, Error::Program(_)), "{bad}: {e}");
    }
    let job = Job::new(
        "/usr/bin/stress-ng",
        vec!["--taskset".into(), "0,2-3".into(), "10s".into()],
    )
    .unwrap();
    assert_eq!(job.file(), "/usr/bin/stress-ng\n--taskset\n0,2-3\n10s\n");
}

#[test]
fn a_report_is_complete_at_its_done_line_only() {
    let tail = |t: &str| t.as_bytes()[t.len().saturating_sub(8)..].to_vec();
    assert!(is_complete(&tail(RECORDED)));
    assert!(is_complete(&tail("farm-job 2\nexit 0\ndone\n")));
    // Half a line, a workload's line, and a line after `done` are not the end.
    assert!(!is_complete(&tail("farm-job 2\nexit 0\ndon")));
    assert!(!is_complete(&tail("farm-job 2\nexit 0\ndone")));
    assert!(!is_complete(&tail("farm-job 2\nout done\n")));
    assert!(!is_complete(&tail("farm-job 2\ndone\nexit 0\n")));
    assert!(!is_complete(b""));
}
