//! Boots Debian kernels under QEMU TCG with the agent's runner and checks
//! what it reports: the NUMA nodes, sched domains and hotplug of a 2-node
//! guest, a built-in workload's metrics and telemetry (and how much slower
//! than the host the guest ran its calibration loop), an s390x guest
//! running Debian's stress-ng; and that a guest that never powers off is
//! killed at the timeout, one that panics fails with its console, and none
//! leaves a QEMU behind.
//!
//! Needs the Debian packages qemu-system-x86 and busybox-static (and apt,
//! dpkg, gzip, coreutils, which every Debian has) plus access to Debian's
//! package archive. A missing prerequisite fails the test; it never skips.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use farm_agent::executor::guest::arch::{Accel, GuestArch};
use farm_agent::executor::guest::image::{self, initramfs, kernels, modules, sysroot};
use farm_agent::executor::guest::machine::{self, kvm, qemu};
use farm_agent::executor::guest::runner::{self as job, telemetry};

const KERNEL: &str = "debian:6.1.0-57-cloud-amd64";

/// The tests boot one guest at a time: TCG is CPU-bound and the timings
/// are reported.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn cache() -> PathBuf {
    // The agent's own default, as README's commands use it.
    farm_agent::executor::guest::default_cache().expect("no HOME for the default guest cache")
}

/// The agent's own check (the same one that decides whether it advertises
/// guests): a missing package fails the test, naming it.
fn require_prerequisites(arch: GuestArch) {
    if let Err(why) = machine::available(arch) {
        panic!("{arch} guests: run scripts/test.sh, which installs them: {why}");
    }
}

/// What every guest test starts with: the one-guest-at-a-time lock, the
/// prerequisites of `arch` checked, and the shared cache.
fn guest_test(arch: GuestArch) -> (std::sync::MutexGuard<'static, ()>, PathBuf) {
    let one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    require_prerequisites(arch);
    (one, cache())
}

/// QEMU processes that are children of this test process.
fn our_qemus() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid ...
        let Some((head, tail)) = stat.rsplit_once(") ") else {
            continue;
        };
        let ppid = tail.split_whitespace().nth(1).unwrap_or("");
        if ppid == me && head.contains("qemu-system") {
            found.push(stat.chars().take(80).collect());
        }
    }
    found
}

/// An `/init` that never powers off (for the host's timeout).
const HANG: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
echo "farm-guest: init hangs on purpose" > /dev/console
while :; do sleep 1; done
"#;

/// An `/init` that halts the guest, as `poweroff -f` does on a kernel that
/// cannot power off (no working ACPI): "reboot: System halted", and QEMU
/// would run on.
const HALT: &str = "#!/bin/sh\necho 'farm-guest: init halts on purpose' > /dev/console\nhalt -f\n";

/// An `/init` that writes a whole report on the channel and never powers off.
const REPORT_AND_HANG: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t devtmpfs devtmpfs /dev
echo "farm-guest: init reports and hangs on purpose" > /dev/console
stty -F /dev/ttyS1 raw -echo
printf 'farm-job 2\nrelease r-test\nexit 3\nwall_s 0.50\ndone\n' > /dev/ttyS1
while :; do sleep 1; done
"#;

/// An `/init` that exits, so that the kernel panics.
const EXIT: &str = "#!/bin/sh\necho 'farm-guest: init exits on purpose' > /dev/console\nexit 1\n";

/// An image whose `/init` is `init` instead of the runner.
fn image_with_init(cache: &Path, init: &str) -> initramfs::Initramfs {
    initramfs::build_with(
        cache,
        Path::new(initramfs::BUSYBOX),
        initramfs::Applets::Listed,
        init,
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The runner's image for `job` in `state`, with nothing but busybox
/// besides: for jobs that are busybox applets.
fn busybox_image(
    cache: &Path,
    job: &job::Job,
    state: &job::GuestState,
) -> Result<initramfs::Initramfs, image::Error> {
    image::build(
        &cache.join("images"),
        &image::Image {
            busybox: Path::new(initramfs::BUSYBOX),
            busybox_native: true,
            files: Vec::new(),
            modules: Vec::new(),
            init: job::RUNNER,
            job: &job.file(),
            state: &state.file(),
        },
    )
}

#[test]
fn debian_kernel_boots_with_two_numa_nodes_and_cycles_hotplug() {
    let (_one, cache) = guest_test(GuestArch::X86_64);

    let t = Instant::now();
    let kernel = kernels::resolve(KERNEL, &cache).unwrap_or_else(|e| panic!("{e}"));
    // The workload is busybox's `true`: what is checked is the state and
    // what the runner reports around it. cpu2 goes offline and comes back
    // (a cycle), cpu1 stays offline for the run.
    let job = job::Job::new("/bin/true", Vec::new()).unwrap();
    let state = job::GuestState {
        cycle: vec![2],
        offline: vec![1],
        ..Default::default()
    };
    let initrd = busybox_image(&cache, &job, &state).unwrap_or_else(|e| panic!("{e}"));
    let prepare = t.elapsed();
    eprintln!(
        "prepare (kernel downloaded: {}, initramfs built: {}): {prepare:.1?}",
        kernel.downloaded, initrd.built
    );
    // The second resolution comes from the cache, and so does the image.
    let again = kernels::resolve(KERNEL, &cache).unwrap();
    assert!(!again.downloaded);
    assert_eq!(again.deb_sha256, kernel.deb_sha256);
    let image_again = busybox_image(&cache, &job, &state).unwrap();
    assert!(!image_again.built);
    assert_eq!(image_again.path, initrd.path);

    let dir = tempfile::tempdir().unwrap();
    let r = job::run(
        &qemu::Machine::default(),
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("boot to report: {:.1?}", r.elapsed);
    eprintln!("{r:#?}");
    assert_eq!(r.exit_code, 0, "console:\n{}", r.console_tail);
    assert_eq!(r.release, "6.1.0-57-cloud-amd64");
    let nodes: Vec<(u32, Vec<u32>)> = r
        .observed
        .nodes()
        .iter()
        .map(|n| (n.id, n.cpus.clone()))
        .collect();
    assert_eq!(nodes, [(0, vec![0, 1]), (1, vec![2, 3])]);
    // Every CPU had its domains before the state; cpu1, offline, has none
    // after it, and cpu2 is back.
    assert_eq!(
        r.domains_before.keys().copied().collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(
        r.domains_after.keys().copied().collect::<Vec<_>>(),
        [0, 2, 3]
    );
    for domains in [&r.domains_before, &r.domains_after] {
        assert!(
            domains
                .values()
                .all(|d| d.iter().any(|n| n == "MC" || n == "NUMA")),
            "{domains:?}"
        );
    }
    // The cycle brought cpu2 back (a failed one is an `error` line, which
    // fails the run), and cpu1 was offline while the workload ran.
    assert_eq!(r.online, "0,2-3");
    assert!(our_qemus().is_empty());
}

#[test]
fn a_guest_that_never_powers_off_is_killed_at_the_timeout() {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    let t = Instant::now();
    let kernel = kernels::resolve(KERNEL, &cache).unwrap_or_else(|e| panic!("{e}"));
    let initrd = image_with_init(&cache, HANG);
    eprintln!(
        "prepare (kernel downloaded: {}, initramfs built: {}): {:.1?}",
        kernel.downloaded,
        initrd.built,
        t.elapsed()
    );
    let dir = tempfile::tempdir().unwrap();
    let machine = qemu::Machine {
        timeout: Duration::from_secs(20),
        ..Default::default()
    };
    let t = Instant::now();
    let err = job::run(
        &machine,
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_err();
    let elapsed = t.elapsed();
    let msg = err.to_string();
    assert!(
        matches!(err, job::Error::Guest(qemu::Error::Timeout { .. })),
        "{msg}"
    );
    assert!(msg.contains("timeout"), "{msg}");
    assert!(
        msg.contains("init hangs on purpose"),
        "the console tail is missing: {msg}"
    );
    assert!(elapsed < Duration::from_secs(25), "{elapsed:?}");
    assert!(our_qemus().is_empty(), "{:?}", our_qemus());
}

/// The `farm-workload` binary of this build: `target/<profile>/farm-workload`,
/// beside the `deps` directory of this test binary, unless `FARM_WORKLOAD_BIN`
/// says otherwise.
/// `files` and the in-guest sampler for `arch`, as the executor gives
/// every image (built by gcc, or Debian's s390x cross gcc).
fn with_sampler(
    mut files: Vec<(PathBuf, String)>,
    cache: &Path,
    arch: GuestArch,
) -> Vec<(PathBuf, String)> {
    let bin = image::sampler::build(cache, arch).unwrap_or_else(|e| panic!("{e}"));
    files.push((bin, image::sampler::GUEST_PATH.to_string()));
    files
}

fn workload_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("FARM_WORKLOAD_BIN") {
        return bin.into();
    }
    built(
        "farm-workload",
        "cargo build --workspace --bins (or set FARM_WORKLOAD_BIN)",
    )
}

/// A program cargo built beside this test's directory (`rel` under the
/// profile's directory: `farm-workload`, `examples/sched_state`); `how`
/// says how to build it when it is not there.
fn built(rel: &str, how: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("this test's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(rel))
        .unwrap_or_default();
    assert!(bin.is_file(), "{} not found: {how}", bin.display());
    bin
}

#[test]
fn a_guest_runs_cpu_hog_and_returns_its_metrics() {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    let bin = workload_bin();
    let job = job::Job::built_in("cpu-hog", &[("threads", "2"), ("seconds", "2")]).unwrap();

    let t = Instant::now();
    let kernel = kernels::resolve(KERNEL, &cache).unwrap_or_else(|e| panic!("{e}"));
    // Seed 000's state: cpu1 offline and online again before the run; and
    // the workload in a cgroup of its own, on cpus 0-2.
    let state = job::GuestState {
        cycle: vec![1],
        autogroup: Some(false),
        cgroup: true,
        cpuset: vec![0, 1, 2],
        ..Default::default()
    };
    let initrd = image::build(
        &cache.join("images"),
        &image::Image {
            busybox: Path::new(initramfs::BUSYBOX),
            busybox_native: true,
            files: with_sampler(
                image::native_files(&bin).unwrap_or_else(|e| panic!("{e}")),
                &cache,
                GuestArch::X86_64,
            ),
            modules: Vec::new(),
            init: job::RUNNER,
            job: &job.file(),
            state: &state.file(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "prepare (kernel downloaded: {}, initramfs built: {}): {:.1?}",
        kernel.downloaded,
        initrd.built,
        t.elapsed()
    );

    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let mut spawned = None;
    let r = job::run(
        &qemu::Machine::default(),
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |pid| spawned = Some(pid),
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(spawned.is_some());
    eprintln!(
        "guest job: QEMU exit after {:.1?} (call: {:.1?}), wall_s {}",
        r.elapsed,
        t.elapsed(),
        r.wall_s
    );
    assert_eq!(r.exit_code, 0, "console:\n{}", r.console_tail);
    assert_eq!(r.release, "6.1.0-57-cloud-amd64");
    let metrics: Vec<_> = r
        .stdout
        .lines()
        .filter_map(|l| farm_workload::output::parse_metric_line(l).unwrap())
        .collect();
    let hog: Vec<_> = metrics
        .iter()
        .filter(|m| m.name == "hog_ops_per_s")
        .collect();
    assert_eq!(hog.len(), 1, "{}", r.stdout);
    assert!(hog[0].value > 0.0, "{:?}", hog[0]);
    assert!(r.wall_s >= 2.0, "{}", r.wall_s);
    let begin = r.begin_after.expect("the runner's begin line was seen");
    eprintln!("QEMU start → workload start (begin): {begin:.1?}");
    // The state was applied (cpu1 back online) and the domains were read
    // before and after it, on every CPU.
    assert_eq!(r.online, "0-3");
    for domains in [&r.domains_before, &r.domains_after] {
        assert_eq!(domains.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(
            domains.values().all(|d| d.iter().any(|n| n == "NUMA")),
            "{domains:?}"
        );
    }
    // The guest's telemetry: two busy threads for two seconds, confined to
    // the cgroup's cpus 0-2 (node 0 has 0-1, node 1 has 2-3).
    let (metrics, t) =
        telemetry::build(&r.observed, r.wall_s, &[0, 1, 2, 3], 100, &r.domains_after)
            .unwrap_or_else(|e| panic!("{e}"));
    let get = |name: &str| {
        metrics
            .iter()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("no {name} in {metrics:?}"))
            .value
    };
    eprintln!("{metrics:#?}");
    let cpu_s = get("user_s") + get("sys_s");
    assert!(
        (3.0..6.0).contains(&cpu_s),
        "two threads for 2 s: {cpu_s} CPU-s"
    );
    assert!(get("context_switches") > 0.0);
    assert!(get("rescheduling_ipis") > 0.0);
    // Counted by the sampler's perf counters on the workload: its task
    // clock agrees with `times`' user and system time.
    let clock = get("task_clock_s");
    assert!(
        (clock - cpu_s).abs() < 0.15 * clock,
        "task clock {clock} s, times {cpu_s} s"
    );
    assert_eq!(get("cpu_migrations").fract(), 0.0);
    // Two threads on three CPUs hardly wait for one.
    assert!(get("runqueue_wait_s") < 0.5, "{}", get("runqueue_wait_s"));
    // Balancing at both levels of the 2-node guest, from /proc/schedstat.
    let mut lb: Vec<&str> = metrics
        .iter()
        .map(|m| m.name.as_str())
        .filter(|n| n.starts_with("lb_"))
        .collect();
    lb.sort_unstable();
    assert_eq!(lb.len(), 28, "{lb:?}");
    assert_eq!((lb[0], lb[27]), ("lb_mc_busy", "lb_numa_wake_affine"));
    assert!(
        (1.2..3.5).contains(&get("cpus_utilised")),
        "{}",
        get("cpus_utilised")
    );
    // The runner timed the calibration loop before the workload, and the
    // host times the same program natively: under TCG the guest ran it
    // slower (×2.3 on a quiet 2-CPU host; more as its load preempts).
    let guest = r
        .observed
        .calibration()
        .unwrap_or_else(|| panic!("no calibrate line; console:\n{}", r.console_tail));
    let host = image::sampler::calibrate_host(&cache).unwrap_or_else(|e| panic!("{e}"));
    let slowdown = farm_agent::executor::guest::slowdown::metric(Some(guest), Some(&host))
        .unwrap_or_else(|| panic!("no guest_slowdown: guest {guest:?}, host {host:?}"));
    eprintln!(
        "guest_slowdown ×{:.1} (guest {} ns, host {} ns a repetition)",
        slowdown.value, guest.median_ns, host.median_ns
    );
    assert_eq!(
        (slowdown.name.as_str(), slowdown.unit.as_str()),
        ("guest_slowdown", "×")
    );
    assert!(
        slowdown.value > 1.0 && slowdown.value < 1000.0,
        "×{}",
        slowdown.value
    );
    eprintln!("{:#?}", t.nodes);
    assert_eq!(t.nodes.len(), 2, "{:?}", t.nodes);
    let threads: f64 = t.nodes.iter().map(|n| n.avg_threads).sum();
    assert!((1.5..=3.5).contains(&threads), "{:?}", t.nodes);
    assert!(!t.series.is_empty());
    assert!(our_qemus().is_empty(), "{:?}", our_qemus());
}

#[test]
fn a_job_with_shell_in_an_argument_is_refused() {
    for bad in ["x;reboot", "$(id)"] {
        let e = job::Job::built_in("cpu-hog", &[("threads", bad)]).unwrap_err();
        assert!(e.to_string().contains(&format!("`threads={bad}`")), "{e}");
        let e = job::Job::new("/usr/bin/stress-ng", vec![bad.to_string()]).unwrap_err();
        assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
    }
}

#[test]
fn an_s390x_guest_runs_stress_ng_from_debian_packages() {
    let (_one, cache) = guest_test(GuestArch::S390x);
    let t = Instant::now();
    let kernel =
        kernels::resolve("debian:6.1.0-50-s390x", &cache).unwrap_or_else(|e| panic!("{e}"));
    let tools = sysroot::fetch(&cache, "s390x", &["stress-ng"]).unwrap_or_else(|e| panic!("{e}"));
    let busybox =
        sysroot::fetch(&cache, "s390x", &["busybox-static"]).unwrap_or_else(|e| panic!("{e}"));
    let files = with_sampler(
        sysroot::closure(&tools.root, "usr/bin/stress-ng").unwrap_or_else(|e| panic!("{e}")),
        &cache,
        GuestArch::S390x,
    );
    let modules =
        modules::load_order(&kernel.modules, "virtio_console").unwrap_or_else(|e| panic!("{e}"));
    let job = job::Job::new(
        "/usr/bin/stress-ng",
        ["--cpu", "2", "--timeout", "2s", "--metrics-brief"]
            .map(String::from)
            .to_vec(),
    )
    .unwrap();
    let state = job::GuestState {
        cycle: vec![1],
        ..Default::default()
    };
    let initrd = image::build(
        &cache.join("images"),
        &image::Image {
            busybox: &busybox.root.join("bin/busybox"),
            busybox_native: false,
            files,
            modules,
            init: job::RUNNER,
            job: &job.file(),
            state: &state.file(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "prepare (kernel downloaded: {}, tools downloaded: {}, image built: {}): {:.1?}",
        kernel.downloaded,
        tools.downloaded,
        initrd.built,
        t.elapsed()
    );
    let machine = qemu::Machine {
        arch: GuestArch::S390x,
        cpus: 2,
        nodes: 1,
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let r = job::run(
        &machine,
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "s390x guest: QEMU exit after {:.1?}, begin after {:?}, wall_s {}\nstdout:\n{}\nstderr:\n{}",
        r.elapsed, r.begin_after, r.wall_s, r.stdout, r.stderr
    );
    assert_eq!(r.exit_code, 0, "console:\n{}", r.console_tail);
    assert_eq!(r.release, "6.1.0-50-s390x");
    assert_eq!(r.online, "0-1");
    let (metrics, t) = telemetry::build(&r.observed, r.wall_s, &[0, 1], 100, &r.domains_after)
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{metrics:#?}\n{:#?}", t.nodes);
    let cpu_s: f64 = metrics
        .iter()
        .filter(|m| m.name == "user_s" || m.name == "sys_s")
        .map(|m| m.value)
        .sum();
    assert!(cpu_s > 2.0, "two workers for 2 s: {cpu_s} CPU-s");
    // The static sampler's figures, which the shell loop never gave.
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    for name in [
        "runqueue_wait_s",
        "runqueue_wait_p99_us",
        "telemetry_overhead_pct",
        "cpu_migrations",
    ] {
        assert!(names.contains(&name), "no {name} in {names:?}");
    }
    // One node: s390x has no NUMA in sysfs.
    assert_eq!(t.nodes.len(), 1, "{:?}", t.nodes);
    assert!(!t.irqs.is_empty(), "no interrupt deltas");
    assert!(our_qemus().is_empty(), "{:?}", our_qemus());
}

/// The KVM probe boots a cached kernel once under KVM and keeps what it saw.
/// The farm's hosts are KVM guests themselves: `/dev/kvm` is there, but
/// nested KVM aborts or hangs, so the verdict is "fails", whatever the
/// `/dev/kvm` check says. It comes within the probe's timeout, leaves no
/// QEMU behind, a second call reads the kept verdict without booting, and
/// guests of every arch get TCG. (A host where KVM does boot guests fails
/// here, saying so: this test asserts what holds on the farm's machines.)
#[test]
fn the_kvm_probe_decides_within_its_timeout_and_keeps_its_verdict() {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    kernels::resolve(KERNEL, &cache).unwrap_or_else(|e| panic!("{e}"));
    // A cache of its own, sharing the kernels, so that no kept verdict from
    // an earlier run answers for the probe.
    let fresh = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(cache.join("kernels"), fresh.path().join("kernels")).unwrap();
    assert_eq!(kvm::kept_verdict(fresh.path()), None);
    let t = Instant::now();
    let v = kvm::verdict(fresh.path()).expect("a kernel is cached, so the probe runs");
    let took = t.elapsed();
    eprintln!("KVM probe: {v:?} after {took:.1?}");
    assert!(took < Duration::from_secs(25), "{took:?}");
    assert!(our_qemus().is_empty(), "{:?}", our_qemus());
    // Booted and failed, not "could not start a guest" (which is not kept).
    let kvm::Verdict::Fails(why) = &v else {
        panic!("KVM booted a guest here: this test expects a farm host, where nested KVM fails");
    };
    assert!(
        why.starts_with("a KVM guest did not boot within 15s")
            || why.starts_with("QEMU with KVM exited with"),
        "{why}"
    );
    assert_eq!(kvm::kept_verdict(fresh.path()), Some(v.clone()));
    let t = Instant::now();
    assert_eq!(kvm::verdict(fresh.path()), Some(v));
    assert!(t.elapsed() < Duration::from_secs(2));
    // The accelerator follows the verdict; s390x is never this host's arch.
    for arch in [GuestArch::X86_64, GuestArch::S390x] {
        assert_eq!(kvm::accel_for(arch, fresh.path()), Accel::Tcg, "{arch}");
    }
}

/// The accelerator decision on every input, whatever this machine has: the
/// probe is asked only for a guest of the host's arch with `/dev/kvm`, and
/// only a probe that saw KVM boot a guest gives KVM.
#[test]
fn the_accelerator_is_kvm_only_where_the_probe_saw_kvm_boot() {
    use kvm::Verdict::{Fails, Works};
    let fails = || Some(Fails("hung".into()));
    // (host arch, /dev/kvm, probe's verdict, accelerator, probe asked)
    let cases: [(bool, bool, Option<kvm::Verdict>, Accel, bool); 8] = [
        (true, true, Some(Works), Accel::Kvm, true),
        (true, true, fails(), Accel::Tcg, true),
        (true, true, None, Accel::Tcg, true),
        (true, false, Some(Works), Accel::Tcg, false),
        (true, false, fails(), Accel::Tcg, false),
        (false, true, Some(Works), Accel::Tcg, false),
        (false, false, Some(Works), Accel::Tcg, false),
        (false, true, None, Accel::Tcg, false),
    ];
    for (host_arch, dev_kvm, verdict, accel, asked) in cases {
        let mut was_asked = false;
        let got = kvm::decide_accel(host_arch, dev_kvm, || {
            was_asked = true;
            verdict.clone()
        });
        assert_eq!(
            (got, was_asked),
            (accel, asked),
            "host arch {host_arch}, /dev/kvm {dev_kvm}, {verdict:?}"
        );
    }
}

/// A guest whose kernel panics (its init exits) ends at once (`panic=-1`
/// resets it, `-no-reboot` makes that QEMU's exit); the run fails with the
/// panic's line and the console tail, and no QEMU is left.
#[test]
fn a_guest_that_panics_fails_with_its_console() {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    let kernel = kernels::resolve(KERNEL, &cache).unwrap_or_else(|e| panic!("{e}"));
    let initrd = image_with_init(&cache, EXIT);
    let dir = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let err = job::run(
        &qemu::Machine::default(),
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_err();
    let msg = err.to_string();
    eprintln!("{:.1?}: {msg}", t.elapsed());
    assert!(
        matches!(err, job::Error::Guest(qemu::Error::Panicked { .. })),
        "{msg}"
    );
    assert!(
        msg.contains("the kernel panicked: Kernel panic - not syncing: Attempted to kill init!"),
        "{msg}"
    );
    assert!(
        msg.contains("init exits on purpose"),
        "the console tail is missing: {msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(60));
    assert!(our_qemus().is_empty(), "{:?}", our_qemus());
}

/// Boots the Debian kernel with an image whose `/init` is `init`, with a
/// timeout (120 s) the run must end well before; returns what the runner
/// made of it and how long it took.
fn boot_with_init(init: &str) -> (Result<job::GuestRun, job::Error>, Duration) {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    let kernel = kernels::resolve(KERNEL, &cache).unwrap_or_else(|e| panic!("{e}"));
    let initrd = image_with_init(&cache, init);
    let dir = tempfile::tempdir().unwrap();
    let machine = qemu::Machine {
        timeout: Duration::from_secs(120),
        ..Default::default()
    };
    let t = Instant::now();
    let r = job::run(
        &machine,
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    );
    let elapsed = t.elapsed();
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
    assert!(our_qemus().is_empty(), "{:?}", our_qemus());
    (r, elapsed)
}

/// A guest that halts before its report is complete ends when its console
/// says so, not at the timeout, and fails saying it halted.
#[test]
fn a_guest_that_halts_ends_at_once_and_says_so() {
    let (r, elapsed) = boot_with_init(HALT);
    let err = r.unwrap_err();
    let msg = err.to_string();
    eprintln!("{elapsed:.1?}: {msg}");
    assert!(
        matches!(err, job::Error::Guest(qemu::Error::Halted { .. })),
        "{msg}"
    );
    assert!(
        msg.contains("halted before its report was complete"),
        "{msg}"
    );
    assert!(msg.contains("reboot: System halted"), "{msg}");
    assert!(msg.contains("init halts on purpose"), "{msg}");
}

/// A guest that never powers off ends at its report's last line: the run
/// is what it reported, long before the timeout.
#[test]
fn a_guest_that_never_powers_off_ends_when_its_report_is_complete() {
    let (r, elapsed) = boot_with_init(REPORT_AND_HANG);
    let run = r.unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{elapsed:.1?}");
    assert_eq!(
        (run.release.as_str(), run.exit_code, run.wall_s),
        ("r-test", 3, 0.5)
    );
}

/// Boots `kernel` (a Debian 6.12 one, whose debugfs is writable) with the
/// agent's `example` as `/bin/<example>` and `init` as the guest's init,
/// and returns what it reported.
fn example_in_guest(cache: &Path, example: &str, init: &str) -> job::GuestRun {
    let kernel = kernels::resolve("debian:6.12.107+deb12-cloud-amd64", cache)
        .unwrap_or_else(|e| panic!("{e}"));
    let bin = built(
        &format!("examples/{example}"),
        &format!("run `cargo build -p farm-agent --example {example}` (cargo test builds it)"),
    );
    let mut files = image::native_files(&bin).unwrap_or_else(|e| panic!("{e}"));
    files[0].1 = format!("/bin/{example}");
    let initrd = image::build(
        &cache.join("images"),
        &image::Image {
            busybox: Path::new(initramfs::BUSYBOX),
            busybox_native: true,
            files,
            modules: Vec::new(),
            init,
            job: &job::Job::new("/bin/true", Vec::new()).unwrap().file(),
            state: &job::GuestState::default().file(),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap();
    let r = job::run(
        &qemu::Machine::default(),
        &kernel.vmlinuz,
        &initrd.path,
        dir.path(),
        &mut |_| {},
        &|| false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}\nstderr:\n{}", r.stdout, r.stderr);
    r
}

/// The `/init` of the knob crash test: the agent's own code for the
/// scheduler-knob state (`examples/sched_state.rs`: `state::sched` and the
/// journal) applied in a guest whose debugfs is writable, killed at its
/// N-th step (`FARM_AGENT_CRASH_AT`) for N = 1, 2, … until a run goes
/// through, each time restored from the journal by a new process; then
/// applied whole and its restoring killed at each step in turn. After each,
/// the knobs must read as before. One `out` line per case on the report
/// channel, in the runner's protocol.
const KNOB_CRASHES: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
stty -F /dev/ttyS1 raw -echo
exec 3>/dev/ttyS1
r() { printf '%s\n' "$*" >&3; }
sd=/sys/kernel/debug/sched
knobs() { cat $sd/features $sd/base_slice_ns $sd/migration_cost_ns /proc/sys/kernel/numa_balancing /proc/sys/kernel/sched_schedstats; }
# The tunables and the sysctl on one line.
values() { echo $(cat $sd/base_slice_ns $sd/migration_cost_ns /proc/sys/kernel/numa_balancing /proc/sys/kernel/sched_schedstats); }
r "farm-job 2"
r "release $(uname -r)"
knobs > /tmp/before
r "out before $(values)"
set -- NO_RUN_TO_PARITY HRTICK base_slice_ns=3000000 migration_cost_ns=1000000 numa_balancing=0 schedstats
j=/tmp/journal
verdict() {
  knobs > /tmp/now
  if cmp -s /tmp/before /tmp/now; then echo restored; else echo DIFFERS; fi
}
n=1
while [ $n -lt 30 ]; do
  FARM_AGENT_CRASH_AT=$n /bin/sched_state apply $j "$@" 2>> /tmp/err
  rc=$?
  if [ $rc -eq 0 ]; then
    r "out applied at $n: $(values) $(echo $(tr ' ' '\n' < $sd/features | grep -x -e NO_RUN_TO_PARITY -e RUN_TO_PARITY -e NO_HRTICK -e HRTICK))"
    /bin/sched_state restore $j 2>> /tmp/err
    r "out apply whole: $(verdict)"
    break
  fi
  knobs > /tmp/crashed
  if cmp -s /tmp/before /tmp/crashed; then left=unchanged; else left=changed; fi
  /bin/sched_state restore $j 2>> /tmp/err || r "out restore failed after apply crash $n"
  r "out apply crash $n $left: $(verdict)"
  n=$((n + 1))
done
m=1
while [ $m -lt 30 ]; do
  /bin/sched_state apply $j "$@" 2>> /tmp/err || r "out apply failed before restore crash $m"
  FARM_AGENT_CRASH_AT=$m /bin/sched_state restore $j 2>> /tmp/err
  rc=$?
  /bin/sched_state restore $j 2>> /tmp/err || r "out restore failed after restore crash $m"
  if [ $rc -eq 0 ]; then
    r "out restore whole: $(verdict)"
    break
  fi
  r "out restore crash $m: $(verdict)"
  m=$((m + 1))
done
sed 's/^/err /' /tmp/err >&3
r "exit 0"
r "wall_s 0.01"
r "done"
exec 3>&-
poweroff -f
"#;

/// The sched knobs' journal in a real kernel's debugfs: a crash at any
/// step of applying or restoring leaves the knobs as they were once the
/// journal is replayed. The farm's hosts refuse debugfs writes (EPERM), so
/// this runs the agent's code in a 6.12 guest (EEVDF: RUN_TO_PARITY and
/// base_slice_ns), as root there.
#[test]
fn sched_knobs_are_restored_after_a_crash_at_any_step_in_a_guest() {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    let r = example_in_guest(&cache, "sched_state", KNOB_CRASHES);
    let lines: Vec<&str> = r.stdout.lines().collect();
    // Defaults of 6.12 on a 2-node guest of 4 CPUs: base_slice_ns 0.7 ms
    // scaled by 1 + log2(4) = 3, migration_cost_ns 0.5 ms, NUMA balancing
    // on, schedstats off.
    assert_eq!(lines[0], "before 2100000 500000 1 0", "{lines:?}");
    // Six changes (two features, two tunables, NUMA balancing, then
    // schedstats as the host executor turns them on for a run), each two
    // steps: its journal entry, then its write; restoring undoes six.
    let crashes = |prefix: &str| lines.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(crashes("apply crash "), 12, "{lines:?}");
    assert!(
        lines.contains(&"applied at 13: 3000000 1000000 0 1 NO_RUN_TO_PARITY HRTICK"),
        "{lines:?}"
    );
    assert!(lines.contains(&"apply whole: restored"), "{lines:?}");
    assert_eq!(crashes("restore crash "), 6, "{lines:?}");
    assert!(lines.contains(&"restore whole: restored"), "{lines:?}");
    // Every crash left the knobs as they were once restored, and some left
    // a change behind for the journal to undo.
    let differs: Vec<&&str> = lines.iter().filter(|l| l.contains("DIFFERS")).collect();
    assert!(differs.is_empty(), "{differs:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("apply crash ") && l.contains(" changed:")),
        "no crash left a change behind: {lines:?}"
    );
    // Nothing failed but the 18 processes killed on purpose.
    let stderr: Vec<&str> = r.stderr.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(stderr, ["Killed"; 18], "{}", r.stderr);
}

/// The init of the host-balancing test: the host executor's schedstat path
/// (`examples/host_balancing.rs`) run once, its lines reported as `out`.
const HOST_BALANCING: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
stty -F /dev/ttyS1 raw -echo
exec 3>/dev/ttyS1
r() { printf '%s\n' "$*" >&3; }
r "farm-job 2"
r "release $(uname -r)"
r "out initially $(cat /proc/sys/kernel/sched_schedstats)"
/bin/host_balancing /tmp/journal 8 1.5 > /tmp/out 2> /tmp/err
rc=$?
sed 's/^/out /' /tmp/out >&3
sed 's/^/err /' /tmp/err >&3
r "exit $rc"
r "wall_s 0.01"
r "done"
exec 3>&-
poweroff -f
"#;

/// Load balancing as the host executor measures it (kernel.sched_schedstats
/// on through the journal, /proc/schedstat around the workload, levels
/// named from the kernel's domains), on a kernel that has the counters:
/// this machine's own kernel lacks CONFIG_SCHEDSTATS, so the host path runs
/// in a 6.12 guest of 4 CPUs on 2 nodes. Threads that sleep between spins
/// keep CPUs going idle: newly idle balancing is counted at both levels,
/// and the sysctl is off again after the journal's restore.
#[test]
fn the_host_paths_load_balancing_counts_on_a_kernel_with_schedstats() {
    let (_one, cache) = guest_test(GuestArch::X86_64);
    let r = example_in_guest(&cache, "host_balancing", HOST_BALANCING);
    assert_eq!(r.exit_code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[..2], ["initially 0", "schedstats 1"], "{lines:?}");
    assert_eq!(lines.last(), Some(&"restored 0"), "{lines:?}");
    let metrics: BTreeMap<&str, u64> = lines[2..lines.len() - 1]
        .iter()
        .map(|l| {
            let (k, v) = l.split_once(' ').unwrap();
            (k, v.parse().unwrap())
        })
        .collect();
    // Per level: each idle type's attempts, failures, imbalance found and
    // tasks pulled; tasks pushed; wake-affine moves.
    let mut want: Vec<String> = Vec::new();
    for level in ["mc", "numa"] {
        for t in ["busy", "idle", "newidle"] {
            want.push(format!("lb_{level}_{t}"));
            for o in ["failed", "imbalance", "gained"] {
                want.push(format!("lb_{level}_{t}_{o}"));
            }
        }
        want.push(format!("lb_{level}_pushed"));
        want.push(format!("lb_{level}_wake_affine"));
    }
    want.sort();
    let names: Vec<&str> = metrics.keys().copied().collect();
    assert_eq!(names, want);
    assert!(metrics["lb_mc_newidle"] > 0, "{metrics:?}");
    assert!(metrics["lb_numa_newidle"] > 0, "{metrics:?}");
}
