use super::super::placement::NodeMap;
use super::*;
use std::os::unix::process::CommandExt;

#[test]
fn instances_from_thread_names() {
    for (comm, want) in [
        ("stream-3", Some(3)),
        ("lu", None),
        ("lu-1", None),
        ("stream-x", None),
        ("cpu-hog-2", None),
    ] {
        assert_eq!(instance_of(comm), want, "{comm}");
    }
}

/// A task `stat` line: `utime` ticks, `threads` in its process, on `cpu`.
fn stat_line(tid: u32, state: char, utime: u64, threads: u32, cpu: u32) -> String {
    format!(
        "{tid} (w) {state} 1 1 1 0 -1 0 0 0 0 0 {utime} 0 0 0 20 0 {threads} 0 9 \
         0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 {cpu} 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
    )
}

fn write(root: &Path, path: &str, text: &str) {
    let path = root.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A fake `/proc`: `procs` as `(pid, threads)`, the first the parent of
/// the others; thread `t` runs on cpu `t % 4`, runnable when `t` is even.
fn fake_proc(procs: &[(u32, u32)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        root,
        "proc/stat",
        "cpu 4 0 4 400\ncpu0 1 0 1 100\ncpu1 1 0 1 100\ncpu2 1 0 1 100\ncpu3 1 0 1 100\n",
    );
    let kids: Vec<String> = procs[1..].iter().map(|(p, _)| p.to_string()).collect();
    for (i, &(pid, n)) in procs.iter().enumerate() {
        let children = if i == 0 {
            kids.join(" ")
        } else {
            String::new()
        };
        write(root, &format!("proc/{pid}/task/{pid}/children"), &children);
        write(
            root,
            &format!("proc/{pid}/stat"),
            &stat_line(pid, 'R', 10 * u64::from(n), n, pid % 4),
        );
        for tid in pid..pid + n {
            let state = if tid % 2 == 0 { 'R' } else { 'S' };
            write(
                root,
                &format!("proc/{pid}/task/{tid}/stat"),
                &stat_line(tid, state, 10, n, tid % 4),
            );
        }
    }
    dir
}

fn weights_at(samples: &[Sample], t_ms: u64) -> (f64, f64, usize) {
    let tick: Vec<&Sample> = samples.iter().filter(|s| s.t_ms == t_ms).collect();
    (
        tick.iter().map(|s| s.weight).sum(),
        tick.iter().map(|s| s.instance_weight).sum(),
        tick.len(),
    )
}

#[test]
fn a_subset_of_threads_stands_for_all_of_them() {
    // One process of 100 threads; each sweep may read 22 files.
    let dir = fake_proc(&[(500, 100)]);
    let mut sweeper = Sweeper::new(dir.path(), 500);
    let mut out = Collected::default();
    let mut read = std::collections::BTreeSet::new();
    for k in 0..6 {
        let (reads, _) = sweeper.sample(100 * k, 22, &mut out).expect("alive");
        assert!(reads <= 22, "sweep {k} read {reads} files");
        let (weight, within, n) = weights_at(&out.samples, 100 * k);
        // The process's own stat, then 21 of its threads.
        assert_eq!(n, 21, "sweep {k}");
        assert!((weight - 100.0).abs() < 1e-9, "sweep {k}: weights {weight}");
        assert!((within - 100.0).abs() < 1e-9, "sweep {k}: {within}");
        read.extend(out.samples.iter().map(|s| s.tid));
    }
    // In turn: five sweeps of 21 read every thread.
    assert_eq!(read.len(), 100);
    assert_eq!((out.threads_read, out.threads_seen), (6 * 21, 6 * 100));
    // The estimate per node: half the threads on cpus 0-1, half the
    // runnable ones (even tids: cpus 0 and 2) on each node.
    let map = NodeMap::from_nodes(&[
        farm_proto::NumaNode {
            id: 0,
            cpus: vec![0, 1],
        },
        farm_proto::NumaNode {
            id: 1,
            cpus: vec![2, 3],
        },
    ]);
    let placed = super::super::placement::summarize(&out.samples, &map);
    for node in &placed.nodes {
        assert!(
            (node.avg_threads - 50.0).abs() < 5.0,
            "node {}: {}",
            node.node,
            node.avg_threads
        );
        assert!((node.avg_runnable - 25.0).abs() < 5.0, "{node:?}");
    }
}

#[test]
fn many_processes_are_visited_in_turn() {
    // A parent and nine single-threaded children; sweeps of 4 files.
    let procs: Vec<(u32, u32)> = (0..10).map(|i| (600 + i, 1)).collect();
    let dir = fake_proc(&procs);
    let mut sweeper = Sweeper::new(dir.path(), 600);
    let mut out = Collected::default();
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..3 {
        sweeper.sample(100 * k, 4, &mut out).expect("alive");
        let (weight, within, n) = weights_at(&out.samples, 100 * k);
        assert_eq!(n, 4, "sweep {k}");
        // Each stands for 2.5 of the workload's 10 threads, and for
        // itself in its own instance.
        assert!((weight - 10.0).abs() < 1e-9, "sweep {k}: {weight}");
        assert!((within - 4.0).abs() < 1e-9, "sweep {k}: {within}");
        seen.extend(out.samples.iter().map(|s| s.instance));
    }
    assert_eq!(seen.len(), 10, "{seen:?}");
    // Stable instances: a process keeps its number from sweep to sweep.
    let mut by_tid = std::collections::BTreeMap::new();
    for s in &out.samples {
        assert_eq!(*by_tid.entry(s.tid).or_insert(s.instance), s.instance);
    }
    // A process that is gone is dropped; the others go on.
    std::fs::remove_dir_all(dir.path().join("proc/605")).unwrap();
    for k in 3..8 {
        sweeper.sample(100 * k, 4, &mut out).expect("alive");
    }
    assert!(!sweeper.order.contains(&605));
    assert_eq!(sweeper.order.len(), 9);
}

#[test]
fn the_budget_reads_less_then_sweeps_less_often() {
    let mut b = Budget::default();
    assert_eq!(b.quota, FIRST_READS);
    // 2 CPUs of workload per 100 ms sweep earn 0.8 ms; a file costs 10 µs
    // and a sweep 100 µs besides: about 70 files a sweep.
    for _ in 0..20 {
        let reads = b.quota.min(400);
        let starved = b.update(
            100e-6 + 10e-6 * reads as f64,
            reads,
            10e-6 * reads as f64,
            0.2,
            5.0,
        );
        assert!(!starved);
    }
    assert!((60..=80).contains(&b.quota), "quota {}", b.quota);
    // A workload that barely runs cannot pay for the smallest sweep.
    for _ in 0..20 {
        b.update(100e-6 + 10e-6 * 8.0, 8, 80e-6, 0.001, 5.0);
    }
    assert_eq!(b.quota, MIN_READS);
    assert!(
        b.update(100e-6 + 80e-6, 8, 80e-6, 0.001, 5.0),
        "not starved"
    );
}

#[test]
fn samples_a_real_process_tree() {
    // A shell with a busy child: both processes must be seen, each its own instance.
    let mut child = std::process::Command::new("/bin/sh")
        .args(["-c", "while :; do :; done & wait"])
        .process_group(0)
        .spawn()
        .unwrap();
    let s = Sampler::spawn(Path::new("/"), Duration::from_millis(20)).unwrap();
    s.track(child.id());
    std::thread::sleep(Duration::from_millis(300));
    let c = s.finish();
    let pg = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::killpg(pg, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    assert!(c.snapshots.len() >= 5, "{} snapshots", c.snapshots.len());
    let instances: std::collections::BTreeSet<u32> = c.samples.iter().map(|s| s.instance).collect();
    assert!(instances.len() >= 2, "{instances:?}");
    assert!(
        c.samples.iter().any(|s| s.running),
        "the busy child was never runnable"
    );
    assert!(c.cost > Duration::ZERO);
}

#[test]
fn a_process_that_starts_threads_counts_its_main_threads_wait_once() {
    let dir = fake_proc(&[(100, 1)]);
    let root = dir.path();
    write(root, "proc/100/schedstat", "5 1000000 1\n");
    write(root, "proc/100/task/100/schedstat", "5 1000000 1\n");
    let mut sweeper = Sweeper::new(root, 100);
    let mut out = Collected::default();
    sweeper.sample(0, usize::MAX, &mut out).unwrap();
    // The main thread waited 3 ms by now and a second thread 2 ms.
    write(root, "proc/100/stat", &stat_line(100, 'R', 20, 2, 0));
    write(
        root,
        "proc/100/task/100/stat",
        &stat_line(100, 'R', 10, 2, 0),
    );
    write(
        root,
        "proc/100/task/101/stat",
        &stat_line(101, 'R', 10, 2, 1),
    );
    write(root, "proc/100/task/100/schedstat", "9 3000000 3\n");
    write(root, "proc/100/task/101/schedstat", "4 2000000 2\n");
    sweeper.sample(100, usize::MAX, &mut out).unwrap();
    out.waits.finish();
    assert!(
        (out.waits.total_s() - 0.005).abs() < 1e-12,
        "{}",
        out.waits.total_s()
    );
    assert_eq!(out.waits.timeslices(), 3 + 2);
}
