//! Telemetry checked against a known answer, on real processes.
//!
//! Each test builds a situation whose figure is known before it runs — a
//! thread kept runnable behind a real-time hog for a set time, a thread
//! pinned or moved on purpose N times, wakeups across CPUs, a load's tree
//! busy on both CPUs — and checks that the agent's reading gives that
//! figure. They need root (SCHED_FIFO, affinity), CPU 1 and python3, and
//! run one at a time in this binary of their own, so that nothing else of
//! the test suite competes for the CPUs they measure.
//!
//! A figure of CPU time is compared with a control measured in the same
//! test (the kernel's own count of the same processes), so a busy machine
//! changes both alike. A scheduling effect (a wait, a wasted core) needs
//! CPUs 0 and 1 to itself: those tests measure what else ran there
//! meanwhile ([`Others`]), and a failure says whether that condition held.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};

use farm_agent::telemetry::placement::NodeMap;
use farm_agent::telemetry::sampler::Sampler;
use farm_agent::telemetry::{procstat, waste};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn require_root_and_two_cpus() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "these tests need root: SCHED_FIFO for the hog"
    );
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_ne!(online.trim(), "0", "these tests need CPU 1 online");
    for tool in ["chrt", "taskset", "timeout"] {
        assert!(
            Command::new(tool).arg("--version").output().is_ok(),
            "`{tool}` is missing (util-linux, coreutils)"
        );
    }
}

/// The CPUs the tests measure.
const CPUS: [u32; 2] = [0, 1];

/// CPU time, in seconds, of this process (`RUSAGE_SELF`) or of its
/// children once reaped (`RUSAGE_CHILDREN`).
fn cpu_s(who: UsageWho) -> f64 {
    let u = getrusage(who).unwrap();
    let t = |v: nix::sys::time::TimeVal| v.tv_sec() as f64 + v.tv_usec() as f64 / 1e6;
    t(u.user_time()) + t(u.system_time())
}

/// CPU time of the tests' own processes: this one and its reaped children.
fn ours_s() -> f64 {
    cpu_s(UsageWho::RUSAGE_SELF) + cpu_s(UsageWho::RUSAGE_CHILDREN)
}

/// Watches what else uses CPUs 0 and 1 while a test measures there: the
/// condition a scheduling effect's figure holds under.
struct Watch {
    stat: procstat::ProcStat,
    ours_s: f64,
    t: Instant,
}

fn watch() -> Watch {
    Watch {
        stat: procstat::read(Path::new("/")).unwrap(),
        ours_s: ours_s(),
        t: Instant::now(),
    }
}

/// What ran on CPUs 0 and 1 that was not the test's, over its window.
struct Others {
    /// Busy time of the CPUs (all but idle, iowait and steal) less the CPU
    /// time of the test's own processes, reaped (an estimate: the test's
    /// unpinned processes may run on other CPUs of a larger machine).
    busy_s: f64,
    /// Time the hypervisor gave these (virtual) CPUs to someone else.
    steal_s: f64,
    window_s: f64,
}

impl Watch {
    /// Call once the test's processes are reaped.
    fn others(self) -> Others {
        let ours = ours_s() - self.ours_s;
        let d = procstat::delta(&self.stat, &procstat::read(Path::new("/")).unwrap());
        let hz = procstat::user_hz() as f64;
        let (mut busy, mut steal) = (0u64, 0u64);
        for cpu in CPUS {
            let c = d.per_cpu.get(&cpu).copied().unwrap_or_default();
            busy += c.total() - c.idle - c.iowait - c.steal;
            steal += c.steal;
        }
        Others {
            busy_s: (busy as f64 / hz - ours).max(0.0),
            steal_s: steal as f64 / hz,
            window_s: self.t.elapsed().as_secs_f64(),
        }
    }
}

impl Others {
    /// Whether CPUs 0 and 1 were the test's, give or take `spare_s` of
    /// CPU time to others (what the test's tolerance absorbs), said in
    /// words for a failure's message: a figure off on a busy machine says
    /// the machine was busy, and off on a quiet one, that the reading is.
    fn condition(&self, spare_s: f64) -> String {
        let figures = format!(
            "other work took {:.2} CPU-s of CPUs 0-1 in the test's {:.2} s and the \
             hypervisor stole {:.2} s",
            self.busy_s, self.window_s, self.steal_s
        );
        if self.busy_s + self.steal_s > spare_s {
            format!(
                "CONDITION NOT MET, the test needs CPUs 0-1 to itself: {figures} \
                 (at most {spare_s:.2} s in all)"
            )
        } else {
            format!("the machine was quiet ({figures}): the reading is off")
        }
    }
}

/// How long the hog holds CPU 1: under the 0.95 s a real-time task may
/// take of each second (`kernel.sched_rt_runtime_us`). At 1.5 s the kernel
/// ran the victim for a moment about 1 s in, when the hog's budget ran out
/// (its fair server on 6.18), and 4 runs of 24 here measured a wait of
/// 1.0 s, not the hog's time; at 0.8 s, 0.800 ± 0.003 s in 28 of 28.
const HOG_S: f64 = 0.8;

/// How long the victim runs in all, by the clock: long enough after the
/// hog that a sweep sees it again before it exits, since the kernel books a
/// wait only when the thread gets the CPU back, and a thread's last wait is
/// lost if it exits between sweeps. When the overhead budget binds, the
/// sampler doubles its interval up to 2 s (`MAX_INTERVAL`): on a machine
/// whose sweeps cost more, a victim of a fixed 300,000 iterations (~0.3 s
/// of CPU) exited 0.24 s after the hog, before the sweep at 1.36 s, and the
/// test read a wait of 0.000 s (CI, 6.18.44, two runs of two).
const VICTIM_S: f64 = HOG_S + 2.5;

/// A shell whose victim, a plain loop pinned to CPU 1, is runnable for
/// VICTIM_S, while a SCHED_FIFO loop on CPU 1 holds the CPU for HOG_S:
/// the victim waits HOG_S on CPU 1's runqueue while CPU 0 idles (`timeout`
/// itself is not pinned: at the hog's priority it could never preempt it). The
/// victim then runs alone until its time is up.
fn victim_behind_a_hog() -> std::process::Child {
    let script = format!(
        "timeout {VICTIM_S} taskset -c 1 sh -c 'while :; do :; done' &
         sleep 0.05
         timeout {HOG_S} chrt -f 10 taskset -c 1 sh -c 'while :; do :; done'
         wait"
    );
    Command::new("/bin/sh")
        .args(["-c", &script])
        .spawn()
        .unwrap()
}

#[test]
fn a_thread_kept_behind_a_busy_cpu_shows_its_wait_and_the_wasted_core() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    let machine = watch();
    let mut child = victim_behind_a_hog();
    let sampler = Sampler::spawn(Path::new("/"), Duration::from_millis(20)).unwrap();
    sampler.track(child.id());
    assert!(child.wait().unwrap().success());
    let c = sampler.finish();
    // Work of others on CPU 1 adds to the victim's wait, and on CPU 0
    // leaves no core wasted: what the tolerances below absorb, at most.
    let others = machine.others().condition(0.1);

    // The victim waited the hog's whole time; the hog (FIFO) and the
    // shells next to nothing.
    let wait = c.waits.total_s();
    eprintln!("wait {wait:.3} s over {} sweeps", c.snapshots.len());
    assert!(
        (HOG_S - 0.05..HOG_S + 0.15).contains(&wait),
        "runqueue wait {wait:.3} s, expected about {HOG_S} s; {others}"
    );
    // Timeslices cut short by the hog waited ~HOG_S: the largest wait per
    // timeslice is of that order, far above a shared CPU's few ms.
    let max = c.waits.quantile_us(1.0).unwrap();
    assert!(
        max > 100_000.0,
        "longest wait per timeslice {max:.0} µs; {others}"
    );
    // The series of waiting threads adds up to the same wait over time.
    // The kernel books a wait when the thread gets the CPU, so the whole
    // wait shows at the first sweep after the hog, not spread over it.
    let series = &c.waits.series;
    let integral: f64 = series
        .windows(2)
        .map(|w| w[1].waiting * (w[1].t_ms - w[0].t_ms) as f64 / 1e3)
        .sum();
    assert!(
        (HOG_S - 0.1..HOG_S + 0.2).contains(&integral),
        "waiting threads over time add up to {integral:.3} s: {series:?}; {others}"
    );

    // CPU 0 idled while the victim waited on CPU 1: wasted-core time of
    // about the hog's time. The check counts a queue only when two sweeps
    // both see it, so up to an interval is lost at each end of the hog;
    // the sweeps are ~100 ms apart here, where the overhead budget (0.4% of
    // the workload's CPU) puts them.
    let map = NodeMap::single(&[0, 1]);
    let w = waste::check(&c.snapshots, &c.samples, &[0, 1], &map, procstat::user_hz());
    assert!(
        (HOG_S - 0.35..HOG_S + 0.1).contains(&w.wasted_cpu_s),
        "wasted-core time {:.3} CPU-s, expected about {HOG_S}; {others}",
        w.wasted_cpu_s
    );
}

#[test]
fn a_thread_alone_on_its_cpu_hardly_waits() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    let machine = watch();
    let mut child = Command::new("taskset")
        .args([
            "-c",
            "1",
            "sh",
            "-c",
            "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done",
        ])
        .spawn()
        .unwrap();
    let sampler = Sampler::spawn(Path::new("/"), Duration::from_millis(20)).unwrap();
    sampler.track(child.id());
    assert!(child.wait().unwrap().success());
    let c = sampler.finish();
    // Alone means alone: others on CPU 1 make it wait, and on CPU 0 leave
    // it no core wasted, by as much as they take.
    let others = machine.others().condition(0.05);
    let wait = c.waits.total_s();
    assert!(
        wait < 0.05,
        "runqueue wait {wait:.3} s alone on a CPU; {others}"
    );
    assert!(c.waits.timeslices() >= 1);
    let w = waste::check(
        &c.snapshots,
        &c.samples,
        &[0, 1],
        &NodeMap::single(&[0, 1]),
        procstat::user_hz(),
    );
    assert!(
        w.wasted_cpu_s < 0.05,
        "wasted {:.3}; {others}",
        w.wasted_cpu_s
    );
}

/// Iterations of each busy child's shell loop: about 1.5 s of CPU here,
/// at least 0.3 s on any machine the farm runs on.
const BUSY_LOOPS: u32 = 1_000_000;

/// The CPU time process `pid` has run so far (its `schedstat`, in ns).
fn run_time_s(pid: u32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    let ns: u64 = text.split_whitespace().next().unwrap().parse().unwrap();
    ns as f64 / 1e9
}

#[test]
fn a_loads_cpu_time_is_its_whole_tree_live_and_reaped() {
    use farm_agent::telemetry::loads;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    // Two busy children, one per CPU, each a fixed count of a shell loop
    // (a busy machine makes them slower, not shorter), each saying its
    // pid; the shell says when it has reaped them and lives on.
    let busy = |cpu: u32| {
        format!(
            "timeout 60 taskset -c {cpu} sh -c \
             'echo $$; i=0; while [ $i -lt {BUSY_LOOPS} ]; do i=$((i+1)); done' &"
        )
    };
    let script = format!(
        "{}\n{}\nwait\nsleep 1 &\necho reaped\nwait",
        busy(0),
        busy(1)
    );
    let reaped_before = cpu_s(UsageWho::RUSAGE_CHILDREN);
    let mut child = Command::new("/bin/sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut line = || lines.next().unwrap().unwrap();
    let pids: Vec<u32> = (0..2).map(|_| line().trim().parse().unwrap()).collect();
    let hz = procstat::user_hz() as f64;
    let root = Path::new("/");
    // Live, once both have run a while: the tree's reading between two
    // readings of the busy children's own run time, the control.
    let ran = || pids.iter().map(|&p| run_time_s(p)).sum::<f64>();
    let t = Instant::now();
    while ran() < 0.6 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "CONDITION NOT MET: the busy children got {:.2} CPU-s in 20 s, \
             the machine is too busy to measure them live",
            ran()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let before = ran();
    let live_tree = loads::tree(root, child.id());
    let after = ran();
    let live = live_tree.ticks as f64 / hz;
    // Reaped: the children are gone, their time is the shell's cutime.
    assert_eq!(line(), "reaped");
    let reaped_tree = loads::tree(root, child.id());
    let reaped = reaped_tree.ticks as f64 / hz;
    assert!(child.wait().unwrap().success());
    // The control: the whole tree's CPU time as its reaping counted it.
    let whole = cpu_s(UsageWho::RUSAGE_CHILDREN) - reaped_before;
    // Where its threads were: the shell, two `timeout`s and the two busy
    // shells pinned to CPUs 0 and 1; then the shell and its `sleep`.
    let mut cpus = live_tree.cpus.clone();
    cpus.sort_unstable();
    assert_eq!(cpus.len(), 5, "{cpus:?}");
    assert!(cpus.contains(&0) && cpus.contains(&1), "{cpus:?}");
    assert_eq!(reaped_tree.cpus.len(), 2, "{:?}", reaped_tree.cpus);
    let two_nodes = |cpu: u32| Some(cpu % 2);
    let per_node = loads::threads_per_node(&[live_tree], &[reaped_tree], 0..2, two_nodes);
    assert_eq!(per_node.values().sum::<f64>(), 3.5, "{per_node:?}");
    eprintln!(
        "live {live:.3} CPU-s (busy children {before:.3}-{after:.3}), \
         reaped {reaped:.3} of {whole:.3}"
    );
    // Ticks are cut to 10 ms per process and field (up to 40 ms below for
    // the two busy shells); the shell and `timeout`s add a few ms.
    assert!(
        (before - 0.05..=after + 0.03).contains(&live),
        "live tree {live:.3} CPU-s, its busy children ran {before:.3}-{after:.3} s"
    );
    // The reaped reading misses only what the shell and `sleep` did after
    // it, and what ticks cut (10 ms in each of the shell's four fields).
    assert!(
        whole > 2.0 * 0.3 && (whole - 0.05..=whole + 0.01).contains(&reaped),
        "reaped tree {reaped:.3} CPU-s, the tree took {whole:.3} CPU-s"
    );
}

/// Runs `python3 -c script` from a thread pinned to CPU 1 with the
/// inherited migration counter open, as the host executor counts a
/// workload's tree; its migrations once reaped.
fn migrations_of(script: &str) -> u64 {
    let script = script.to_owned();
    std::thread::spawn(move || {
        let mut one = nix::sched::CpuSet::new();
        one.set(1).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &one).unwrap();
        let mut counters = farm_agent::telemetry::perf::Counters::open_inherited().unwrap();
        let status = Command::new("python3")
            .args(["-c", &script])
            .status()
            .expect("python3 (scripts/test.sh installs it)");
        assert!(status.success());
        counters.cpu_migrations().unwrap()
    })
    .join()
    .unwrap()
}

const SPIN: &str =
    "def spin():\n    t = time.monotonic()\n    while time.monotonic() - t < 0.01: pass\n";

#[test]
fn a_pinned_thread_never_migrates_and_a_moved_one_migrates_each_time() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    // Born on CPU 1 and kept there.
    let pinned = migrations_of(&format!("import time\n{SPIN}for _ in range(30): spin()\n"));
    assert_eq!(pinned, 0, "a thread pinned to CPU 1 migrated");
    // Moved on purpose: CPU 0, 1, 0, ... 20 times, each away from where it is.
    let moved = migrations_of(&format!(
        "import os, time\n{SPIN}for i in range(20):\n    os.sched_setaffinity(0, {{i % 2}})\n    spin()\n"
    ));
    assert_eq!(moved, 20, "moved 20 times");
}

/// Rescheduling IPIs while two processes pinned to CPUs `a` and `b` wake
/// each other `n` times each way through pipes, by the agent's reading of
/// /proc/interrupts. Each CPU runs a SCHED_IDLE hog meanwhile: an idle CPU
/// may be polling (cpuidle's poll state, haltpoll in KVM guests) and is then
/// woken without an IPI, where a busy one must be told to reschedule.
fn ping_pong_ipis(a: u32, b: u32, n: u32) -> u64 {
    use farm_agent::telemetry::interrupts;
    let script = format!(
        "import os\nr1, w1 = os.pipe(); r2, w2 = os.pipe()\nif os.fork() == 0:\n    \
         os.sched_setaffinity(0, {{{b}}})\n    for _ in range({n}):\n        \
         os.read(r1, 1); os.write(w2, b'x')\n    os._exit(0)\n\
         os.sched_setaffinity(0, {{{a}}})\nfor _ in range({n}):\n    \
         os.write(w1, b'x'); os.read(r2, 1)\nos.wait()\n"
    );
    let hogs: Vec<std::process::Child> = [0, 1]
        .iter()
        .map(|cpu| {
            Command::new("chrt")
                .args(["-i", "0", "taskset", "-c", &cpu.to_string()])
                .args(["sh", "-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    std::thread::sleep(Duration::from_millis(100));
    let root = Path::new("/");
    let before = interrupts::read(root).unwrap();
    let status = Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    let after = interrupts::read(root).unwrap();
    for mut h in hogs {
        let _ = h.kill();
        let _ = h.wait();
    }
    assert!(status.success());
    interrupts::ipi_totals(&interrupts::delta(&before, &after).unwrap()).rescheduling
}

#[test]
fn wakeups_across_cpus_raise_rescheduling_ipis() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_root_and_two_cpus();
    let n = 2000;
    // Every wakeup lands on the other CPU, busy with its hog: one IPI each,
    // 2n in all (the rest is the machine's own; 10% either way allowed).
    let across = ping_pong_ipis(0, 1, n);
    let wakeups = 2 * u64::from(n);
    assert!(
        (wakeups * 90 / 100..=wakeups * 115 / 100).contains(&across),
        "{across} rescheduling IPIs for {wakeups} cross-CPU wakeups"
    );
    // On one CPU a wakeup needs no IPI.
    let same = ping_pong_ipis(1, 1, n);
    eprintln!("rescheduling IPIs: {across} across CPUs, {same} on one, for {wakeups} wakeups");
    assert!(same < wakeups / 10, "{same} rescheduling IPIs on one CPU");
}
