use super::*;

fn spec(program: &str, args: &[&str], timeout_ms: u64) -> Spec {
    Spec::new(
        program,
        args.iter().map(|s| s.to_string()).collect(),
        Duration::from_millis(timeout_ms),
    )
}

#[test]
fn measures_cpu_time_of_the_whole_tree() {
    // Two busy children of a shell: their CPU time must be counted, which
    // getrusage(RUSAGE_SELF) of the leader alone would miss.
    let s = spec(
        "/bin/sh",
        &[
            "-c",
            "for i in 1 2; do (i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done) & done; wait; echo done",
        ],
        60_000,
    );
    let out = run(&s, &Killer::default()).unwrap();
    assert_eq!(out.exit, Exit::Code(0));
    assert_eq!(out.stdout.trim(), "done");
    assert!(out.user + out.sys > Duration::from_millis(100), "{out:?}");
    assert!(!out.timed_out && !out.cancelled);
}

#[test]
fn exit_codes_and_stderr_are_kept() {
    let out = run(
        &spec("/bin/sh", &["-c", "echo oops >&2; exit 3"], 10_000),
        &Killer::default(),
    )
    .unwrap();
    assert_eq!(out.exit, Exit::Code(3));
    assert_eq!(out.stderr_tail.trim(), "oops");
}

#[test]
fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("grandchild.pid");
    let script = format!("sleep 60 & echo $! > {}; wait", pidfile.display());
    let t = Instant::now();
    let out = run(&spec("/bin/sh", &["-c", &script], 500), &Killer::default()).unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit, Exit::Signal(libc::SIGKILL));
    assert!(t.elapsed() < Duration::from_secs(10));
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The grandchild was in the group and must be gone (or a zombie being reaped by init).
    std::thread::sleep(Duration::from_millis(200));
    let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false);
    assert!(!alive, "grandchild {pid} survived the timeout");
}

#[test]
fn cancel_stops_a_run() {
    let killer = Killer::default();
    let k = killer.clone();
    let h = std::thread::spawn(move || run(&spec("/bin/sleep", &["60"], 60_000), &k));
    std::thread::sleep(Duration::from_millis(300));
    killer.cancel();
    let out = h.join().unwrap().unwrap();
    assert!(out.cancelled);
    assert!(out.wall < Duration::from_secs(10));
}

#[test]
fn missing_program_is_an_error() {
    assert!(
        run(
            &spec("/nonexistent/farm-workload", &[], 1000),
            &Killer::default()
        )
        .is_err()
    );
}
