//! Fixture lines are real, from a farm host (kernel 6.18) unless marked: a program
//! copied to the name "a) R (b c", three spinning Python threads on two CPUs, kernel
//! threads, the agent's pid 1, and busybox init in an s390x guest.

use std::path::Path;

use super::{TaskSample, parse, read, read_process};

/// `(tid, comm, state, cpu, utime, stime, num_threads)`.
type Row<'a> = (u32, &'a str, char, u32, u64, u64, u32);

fn sample((tid, comm, state, cpu, utime, stime, num_threads): Row<'_>) -> TaskSample {
    TaskSample {
        tid,
        comm: comm.to_owned(),
        state,
        cpu,
        utime,
        stime,
        num_threads,
    }
}

#[test]
fn parses_real_lines() {
    let cases: &[(&str, TaskSample)] = &[
        (
            "5369 (a) R (b c) S 5368 5365 10146 0 -1 4194304 138 0 0 0 0 0 0 0 20 0 1 0 236734 2990080 420 18446744073709551615 94309249040384 94309249058313 140726088337520 0 0 0 0 6 0 1 0 0 17 1 0 0 0 0 0 94309249072400 94309249073664 94309266018304 140726088342237 140726088342255 140726088342255 140726088343529 0\n",
            sample((5369, "a) R (b c", 'S', 1, 0, 0, 1)),
        ),
        // Three spinning threads on two CPUs: two runnable on cpu0, one waiting for the GIL.
        (
            "5417 (python3) R 5365 5365 10146 0 -1 4194368 4 6556 0 0 8 0 3 0 20 0 4 0 236815 243519488 3347 18446744073709551615 93936801697792 93936801698133 140732426991680 0 0 0 0 16781312 2 0 0 0 -1 0 0 0 0 0 0 93936801709488 93936801710104 93937003380736 140732426999728 140732427000108 140732427000108 140732427001807 0",
            sample((5417, "python3", 'R', 0, 8, 0, 4)),
        ),
        (
            "5418 (python3) R 5365 5365 10146 0 -1 4194368 4 6556 0 0 6 0 3 0 20 0 4 0 236815 243519488 3347 18446744073709551615 93936801697792 93936801698133 140732426991680 0 0 0 0 16781312 2 0 0 0 -1 0 0 0 0 0 0 93936801709488 93936801710104 93937003380736 140732426999728 140732427000108 140732427000108 140732427001807 0",
            sample((5418, "python3", 'R', 0, 6, 0, 4)),
        ),
        (
            "5419 (python3) S 5365 5365 10146 0 -1 4194368 3 6556 0 0 6 0 3 0 20 0 4 0 236819 243519488 3347 18446744073709551615 93936801697792 93936801698133 140732426991680 0 0 0 0 16781312 2 1 0 0 -1 1 0 0 0 0 0 93936801709488 93936801710104 93937003380736 140732426999728 140732427000108 140732427000108 140732427001807 0",
            sample((5419, "python3", 'S', 1, 6, 0, 4)),
        ),
        (
            "1 (process_api) S 0 0 0 0 -1 4194560 448 36565847 0 5186 0 18 135487 28435 20 0 14 0 24 45330432 3154 18446744073709551615 1 1 0 0 0 0 0 4096 1256 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
            sample((1, "process_api", 'S', 0, 0, 18, 14)),
        ),
        (
            "10 (kworker/0:0H-kblockd) I 2 0 0 0 -1 69238880 0 0 0 0 0 38 0 0 0 -20 1 0 24 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0",
            sample((10, "kworker/0:0H-kblockd", 'I', 0, 0, 38, 1)),
        ),
        // Since Linux 6.x a kernel thread's full name shows, beyond 15 bytes.
        (
            "17 (rcu_exp_gp_kthread_worker) S 2 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 24 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0",
            sample((17, "rcu_exp_gp_kthread_worker", 'S', 1, 0, 0, 1)),
        ),
        (
            "22 (ksoftirqd/1) S 2 0 0 0 -1 69238848 0 0 0 0 16 41 0 0 20 0 1 0 24 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0",
            sample((22, "ksoftirqd/1", 'S', 1, 16, 41, 1)),
        ),
        // s390x guest, busybox init.
        (
            "1 (init) S 0 0 0 0 -1 4194560 95 386 0 0 1 59 1 7 20 0 1 0 314 2375680 369 18446744073709551615 16777216 18788472 4397577251168 0 0 0 0 4 65538 1 0 0 17 0 0 0 0 0 0 18792952 18830552 35512320 4397577252810 4397577252832 4397577252832 4397577252850 0",
            sample((1, "init", 'S', 0, 1, 59, 1)),
        ),
        // Written: a thread that named itself with a newline and a trailing ")", in
        // uninterruptible sleep on cpu 7.
        (
            "4242 (x\ny)) D 1 1 1 0 -1 0 0 0 0 0 123 45 0 0 20 0 1 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 7 0 0 0 0 0 0 0 0 0 0 0 0 0",
            sample((4242, "x\ny)", 'D', 7, 123, 45, 1)),
        ),
        // Written: a zombie keeps its last CPU and its times.
        (
            "77 (defunct) Z 1 77 77 0 -1 4227084 0 0 0 0 3 1 0 0 20 0 1 0 500 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0",
            sample((77, "defunct", 'Z', 1, 3, 1, 1)),
        ),
    ];
    for (line, want) in cases {
        let got = parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(&got, want, "{line:?}");
        assert_eq!(got.is_runnable(), want.state == 'R');
    }
}

#[test]
fn parse_errors_name_the_content() {
    let cases: &[(&str, &str)] = &[
        (
            "",
            r#"/proc/<pid>/task/<tid>/stat line 1: no comm in parentheses: """#,
        ),
        (
            "12 ) x ( S 1",
            r#"/proc/<pid>/task/<tid>/stat line 1: no comm in parentheses: "12 ) x ( S 1""#,
        ),
        (
            "x12 (a) S 1",
            r#"/proc/<pid>/task/<tid>/stat line 1: the tid is not a number: "x12 (a) S 1""#,
        ),
        (
            "12 (a) RS 1",
            r#"/proc/<pid>/task/<tid>/stat line 1: the state is not a single letter: "12 (a) RS 1""#,
        ),
        (
            "12 (a) S 1 1 1 0 -1 0 0 0 0 0 5",
            r#"/proc/<pid>/task/<tid>/stat line 1: no field 15 (stime): "12 (a) S 1 1 1 0 -1 0 0 0 0 0 5""#,
        ),
        (
            "12 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 x",
            r#"/proc/<pid>/task/<tid>/stat line 1: field 20 (num_threads) is not a number: "12 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 x""#,
        ),
        (
            "12 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 -1 0 0 0 0 0 0 0 0 0 0 0 0 0",
            r#"/proc/<pid>/task/<tid>/stat line 1: field 39 (processor) is not a number: "12 (a) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 -1 0 0 0 0 0 0 0 0 0 0 0 0 0""#,
        ),
    ];
    for (input, want) in cases {
        match parse(input) {
            Ok(got) => panic!("{input:?} parsed as {got:?}"),
            Err(e) => assert_eq!(e.to_string(), *want, "input {input:?}"),
        }
    }
}

#[test]
fn reads_this_process() {
    let pid = std::process::id();
    let threads = read_process(Path::new("/"), pid).unwrap_or_else(|e| panic!("{e}"));
    let main = threads
        .iter()
        .find(|t| t.tid == pid)
        .unwrap_or_else(|| panic!("no main thread among {threads:?}"));
    assert!(threads.windows(2).all(|w| w[0].tid < w[1].tid));
    let again = read(Path::new("/"), pid, pid).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.comm, main.comm);
    // This test thread is running while it reads its own stat.
    let me = nix::unistd::gettid().as_raw().unsigned_abs();
    let me = read(Path::new("/"), pid, me).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(me.state, 'R');
}

#[test]
fn reader_errors() {
    let dir = tempfile::tempdir().unwrap();
    let gone = read_process(dir.path(), 4242).unwrap_err();
    assert_eq!(
        gone.to_string(),
        format!("cannot read {}/proc/4242/task", dir.path().display())
    );
    let task = dir.path().join("proc/4242/task");
    std::fs::create_dir_all(task.join("4242")).unwrap();
    std::fs::write(
        task.join("4242/stat"),
        "4242 (w) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 9 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
    )
    .unwrap();
    // A thread listed but gone before its stat is read is skipped.
    std::fs::create_dir_all(task.join("4243")).unwrap();
    let threads = read_process(dir.path(), 4242).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(threads, [sample((4242, "w", 'S', 3, 5, 6, 1))]);
    std::fs::write(task.join("4242/stat"), "4242 (w) S 1\n").unwrap();
    let bad = read_process(dir.path(), 4242).unwrap_err();
    assert_eq!(
        bad.to_string(),
        format!(
            "{}/proc/4242/task/4242/stat line 1: no field 14 (utime): \"4242 (w) S 1\"",
            dir.path().display()
        )
    );
}
