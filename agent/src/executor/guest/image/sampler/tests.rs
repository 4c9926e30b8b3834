//! The sampler built by the host's gcc (x86_64, as the guests of this arch
//! get it) and run on a fake `/proc` (`--root`): its lines, exactly.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// The sampler built for x86_64 into a cache of its own (gcc and libc6-dev
/// are needed: the test fails, naming them, without).
fn built() -> (tempfile::TempDir, PathBuf) {
    let cache = tempfile::tempdir().unwrap();
    let bin = build(cache.path(), GuestArch::X86_64).unwrap();
    (cache, bin)
}

/// A fake root: the workload (session 40: pid 41 with threads 41 and 43, a
/// full-length `stat`), the runner (pid 1, session 0) and a process of
/// another session with a thread (pid 50).
fn fake_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let w = |p: &str, s: &str| {
        let p = root.path().join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, s).unwrap();
    };
    w("proc/uptime", "12.34 40.00\n");
    w("proc/stat", "cpu  1 2 3 4\ncpu0 1 2 3 4\nintr 5\nctxt 9\n");
    w("proc/1/stat", "1 (init) S 0 0 0 0\n");
    w("proc/1/task/1/stat", "1 (init) S 0 0 0 0\n");
    w("proc/41/stat", "41 (hog) R 40 40 40 0\n");
    w("proc/41/task/41/stat", "41 (hog) R 40 40 40 0\n");
    w(
        "proc/41/task/41/sched",
        "hog (41, #threads: 2)\nse.exec_start : 1.0\nse.nr_migrations                             :                    7\n",
    );
    w("proc/41/task/41/schedstat", "100 200 3\n");
    w(
        "proc/41/task/43/stat",
        "43 (a b) R 40 40 40 0 -1 4194560 0 0 0 0 11 12 0 0 20 0 2 0 5 0 0 \
         18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
    );
    w("proc/41/task/43/schedstat", "5 6 7\n");
    w("proc/50/stat", "50 (other) S 1 50 50 0\n");
    w("proc/50/task/50/stat", "50 (other) S 1 50 50 0\n");
    w("proc/50/task/50/schedstat", "9 9 9\n");
    w("tmp/sid", "40\n");
    w("tmp/stop", "");
    root
}

fn run(bin: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn sweeps_the_session_and_skips_the_rest() {
    let (_cache, bin) = built();
    let root = fake_root();
    let r = root.path().to_str().unwrap();
    let args = [
        "--session-from",
        "/tmp/sid",
        "--interval-ms",
        "10",
        "--stop",
        "/tmp/stop",
        "--root",
        r,
    ];
    let (code, out, err) = run(&bin, &args);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        without_cost(&out).lines().collect::<Vec<_>>(),
        [
            "sample 12.34",
            "task 41 (hog) R 40 40 40 0",
            "mig /proc/41/task/41/sched:se.nr_migrations : 7",
            "rq /proc/41/task/41/schedstat:100 200 3",
            // Cut after field 39 (processor, 3); no `sched` file, no `mig`.
            "task 43 (a b) R 40 40 40 0 -1 4194560 0 0 0 0 11 12 0 0 20 0 2 0 5 0 0 \
             18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3",
            "rq /proc/41/task/43/schedstat:5 6 7",
            "cpu cpu  1 2 3 4",
            "cpu cpu0 1 2 3 4",
            "sampler",
        ]
    );
    // The same session given directly.
    let mut direct = args.to_vec();
    direct[0] = "--session";
    direct[1] = "40";
    assert_eq!(without_cost(&run(&bin, &direct).1), without_cost(&out));
}

/// The output with the `sampler` line's CPU time (its own, a few ms at
/// most here) cut off, after checking its form.
fn without_cost(out: &str) -> String {
    let (rest, last) = out.trim_end().rsplit_once('\n').unwrap();
    let time = last
        .strip_prefix("sampler 0m0.")
        .and_then(|t| t.strip_suffix("s 0m0.000s 0m0.000s 0m0.000s"))
        .unwrap_or_else(|| panic!("{last}"));
    assert!(
        time.len() == 3 && time.bytes().all(|b| b.is_ascii_digit()),
        "{last}"
    );
    format!("{rest}\nsampler\n")
}

/// With --go, the sampler opens perf counters on the waiting leader, lets
/// it exec, and reports what it and every process it started counted.
#[test]
fn counts_the_released_workload_and_all_it_starts() {
    let (_cache, bin) = built();
    let root = fake_root();
    let go = root.path().join("tmp/go");
    let made = Command::new("mkfifo").arg(&go).status().unwrap();
    assert!(made.success());
    std::fs::remove_file(root.path().join("tmp/stop")).unwrap();
    // The leader waits on the FIFO, then execs a shell whose children
    // burn about 0.6 s of CPU between them: a fixed count of a shell loop
    // each (0.2 s here), not a fixed wall time, which a busy machine would
    // fill with less of it.
    let leader = Command::new("sh")
        .arg("-c")
        .arg(
            r#"exec 4<>"$0"; read x <&4; exec sh -c 'for i in 1 2 3; do sh -c "n=0; while [ \$n -lt 120000 ]; do n=\$((n+1)); done"; done; true'"#,
        )
        .arg(&go)
        .spawn()
        .unwrap();
    let pid = leader.id().to_string();
    let sampler = Command::new(&bin)
        .args(["--session", &pid, "--go", "/tmp/go", "--interval-ms", "10"])
        .args([
            "--stop",
            "/tmp/stop",
            "--root",
            root.path().to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = { leader }.wait().unwrap();
    assert!(status.success());
    std::fs::write(root.path().join("tmp/stop"), "").unwrap();
    let out = sampler.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert_eq!((out.status.code(), stderr.as_str()), (Some(0), ""));
    let counts: Vec<u64> = stdout
        .lines()
        .find_map(|l| l.strip_prefix("counts "))
        .unwrap_or_else(|| panic!("no counts line: {stdout}"))
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let [task_clock_ns, switches, _migrations, faults] = counts[..] else {
        panic!("{counts:?}");
    };
    // Three loops of about 0.2 s of CPU each, in grandchildren: counted, as
    // is the shells' own start-up; nothing before the exec (the wait on
    // --go).
    assert!(
        (250_000_000..1_500_000_000).contains(&task_clock_ns),
        "task clock {task_clock_ns} ns"
    );
    assert!(switches >= 6, "{switches} context switches");
    assert!(faults >= 100, "{faults} page faults");
    // No `mig` lines: the counters count migrations.
    assert!(!stdout.contains("\nmig "), "{stdout}");
}

#[test]
fn refuses_what_it_cannot_use() {
    let (_cache, bin) = built();
    let root = fake_root();
    let r = root.path().to_str().unwrap();
    let (code, _, err) = run(&bin, &["--session", "40", "--stop", "/tmp/stop"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("farm-sample: missing option\n"), "{err}");
    let (code, _, err) = run(
        &bin,
        &["--session", "40", "--interval-ms", "5", "--stop", "/s"],
    );
    assert_eq!(code, 2);
    assert!(
        err.starts_with("farm-sample: --interval-ms: not a number from 10 to 10000\n"),
        "{err}"
    );
    std::fs::write(root.path().join("tmp/sid"), "forty\n").unwrap();
    let (code, out, err) = run(
        &bin,
        &[
            "--session-from",
            "/tmp/sid",
            "--interval-ms",
            "10",
            "--stop",
            "/tmp/stop",
            "--root",
            r,
        ],
    );
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(err, "farm-sample: /tmp/sid: not a session id\n");
}

#[test]
fn is_built_once_per_source_and_compiler() {
    let cache = tempfile::tempdir().unwrap();
    let first = build(cache.path(), GuestArch::X86_64).unwrap();
    let mtime = std::fs::metadata(&first).unwrap().modified().unwrap();
    let again = build(cache.path(), GuestArch::X86_64).unwrap();
    assert_eq!(again, first);
    assert_eq!(
        std::fs::metadata(&again).unwrap().modified().unwrap(),
        mtime
    );
    // Only the binary is left: no work directory.
    let names: Vec<String> = std::fs::read_dir(cache.path().join("samplers"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("x86_64-"), "{names:?}");
}

/// `--calibrate` times the loop five times and says so in one line, which
/// the host's parser takes; the host's own timing is the same program.
#[test]
fn calibrates_a_fixed_loop_in_one_line() {
    let (cache, bin) = built();
    let (code, out, err) = run(&bin, &["--calibrate"]);
    assert_eq!((code, err.as_str()), (0, ""));
    let rest = out.strip_suffix('\n').unwrap().strip_prefix("calibrate ");
    let fields: Vec<u64> = rest
        .unwrap_or_else(|| panic!("{out}"))
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!((fields.len(), fields[0]), (6, 400_000), "{out}");
    // About 1 ms a repetition natively; a loaded test machine (a kernel
    // build beside it) preempts, but CPU time does not count the wait.
    let host = calibrate_host(cache.path()).unwrap();
    assert_eq!(host.iterations, 400_000);
    assert!(
        (50_000..50_000_000).contains(&host.median_ns),
        "{} ns",
        host.median_ns
    );
    // Within the bounds the guest's line is held to: the host runs it
    // as the guest's line is parsed.
    assert_eq!(
        Calibration::parse(rest.unwrap()).map(|c| c.iterations),
        Ok(400_000)
    );
}
