//! Assignments checked and workloads launched through one `check_launch`
//! helper; the /proc parsers on data tables.
//!
//! The last section is slow (a second or two each): it executes whole runs
//! through [`execute`] with the external tools installed here (stress-ng,
//! iperf3: scripts/test.sh installs them) and with the `farm-workload`
//! binary (`cargo build --workspace` builds it; `FARM_WORKLOAD_BIN` points
//! elsewhere). They fail, never skip, when one is missing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use farm_proto::{Capabilities, MachineState, Param, RunAssignment, RunRef, Workload, param};
use farm_workload::catalogue;
use tempfile::TempDir;

use super::background::listening_ports;
use super::launch::{Launch, Output, Pin, launch, wanted};
use super::*;
use crate::executor::Killer;
use crate::run::{Context, Run, WorkloadCommand, check, execute};
use crate::state::Journal;

fn int(name: &str, v: i64) -> Param {
    Param {
        name: name.into(),
        value: Some(param::Value::Int(v)),
    }
}

fn float(name: &str, v: f64) -> Param {
    Param {
        name: name.into(),
        value: Some(param::Value::Float(v)),
    }
}

fn workload(name: &str, params: Vec<Param>) -> Workload {
    Workload {
        name: name.into(),
        params,
    }
}

/// How a launch is expected to look: program, arguments, environment, the
/// server's argv and port, the output, the pins.
struct Want<'a> {
    program: &'a str,
    args: &'a [&'a str],
    env: &'a [(&'a str, &'a str)],
    server: Option<(&'a [&'a str], u16)>,
    output: Output,
    pins: &'a [Pin],
}

/// The agent of these tests: `farmctl workload` for built-in workloads,
/// stress-ng and iperf3 in /usr/bin.
fn command() -> WorkloadCommand {
    WorkloadCommand {
        program: "/opt/farm/farmctl".into(),
        leading_args: vec!["workload".into()],
        externals: vec![
            ("stress-ng", "/usr/bin/stress-ng".into()),
            ("iperf3", "/usr/bin/iperf3".into()),
            ("npb-lu.C", "/opt/npb/lu.C.x".into()),
        ],
        guest_cache: None,
        kernel_dirs: Vec::new(),
        trees: None,
        guest_cache_max_bytes: crate::run::DEFAULT_GUEST_CACHE_MAX_BYTES,
    }
}

/// Launches `w` on [`command`]'s agent and compares with `expect`, or with
/// the error's text.
fn check_launch(w: &Workload, expect: Result<Want<'_>, &str>) {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match (launch(w, &command()), expect) {
        (Ok(got), Ok(want)) => {
            let Launch {
                name,
                program,
                server,
                output,
                pins,
            } = got;
            assert_eq!(name, w.name);
            assert_eq!(program.path, Path::new(want.program), "{}", w.name);
            assert_eq!(program.args, strings(want.args), "{}", w.name);
            let env: Vec<(String, String)> = want
                .env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(program.env, env, "{}", w.name);
            let server = server.map(|s| {
                let mut argv = vec![s.program.path.display().to_string()];
                argv.extend(s.program.args);
                (argv, s.port)
            });
            assert_eq!(
                server,
                want.server.map(|(argv, port)| (strings(argv), port)),
                "{}",
                w.name
            );
            assert_eq!(output, want.output, "{}", w.name);
            assert_eq!(pins, want.pins, "{}", w.name);
        }
        (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "{}", w.name),
        (got, want) => panic!(
            "{}: got {:?}, want {:?}",
            w.name,
            got.map(|l| l.program),
            want.map(|w| w.args)
        ),
    }
}

#[test]
fn workloads_are_checked_and_launched() {
    const NONE: &[(&str, &str)] = &[];
    let farmctl = "/opt/farm/farmctl";
    let ok: Vec<(Workload, Want<'_>)> = vec![
        // Defaults are filled in, so the run is fully described by its args.
        (
            workload("lu", vec![int("threads", 3)]),
            Want {
                program: farmctl,
                args: &[
                    "workload",
                    "lu",
                    "--param",
                    "iterations=125",
                    "--param",
                    "size=162",
                    "--param",
                    "threads=3",
                ],
                env: NONE,
                server: None,
                output: Output::MetricLines,
                pins: &[],
            },
        ),
        (
            workload(
                "udp-stream",
                vec![
                    int("sender_cpu", 0),
                    int("receiver_cpu", 1),
                    float("seconds", 0.5),
                ],
            ),
            Want {
                program: farmctl,
                args: &[
                    "workload",
                    "udp-stream",
                    "--param",
                    "message_size=1024",
                    "--param",
                    "receiver_cpu=1",
                    "--param",
                    "seconds=0.5",
                    "--param",
                    "sender_cpu=0",
                ],
                env: NONE,
                server: None,
                output: Output::MetricLines,
                pins: &[
                    Pin {
                        thread: "udp-sender",
                        cpu: 0,
                    },
                    Pin {
                        thread: "udp-receiver",
                        cpu: 1,
                    },
                ],
            },
        ),
        (
            workload("stress-ng", vec![int("workers", 2)]),
            Want {
                program: "/usr/bin/stress-ng",
                args: &[
                    "--cpu",
                    "2",
                    "--cpu-load",
                    "100",
                    "--timeout",
                    "2s",
                    "--metrics-brief",
                    "--stdout",
                ],
                env: NONE,
                server: None,
                output: Output::External("stress-ng"),
                pins: &[],
            },
        ),
        (
            workload("iperf3", vec![int("port", 7000), int("seconds", 1)]),
            Want {
                program: "/usr/bin/iperf3",
                args: &["-c", "127.0.0.1", "-p", "7000", "-t", "1", "-P", "1", "-J"],
                env: NONE,
                server: Some((
                    &[
                        "/usr/bin/iperf3",
                        "-s",
                        "-1",
                        "-B",
                        "127.0.0.1",
                        "-p",
                        "7000",
                    ],
                    7000,
                )),
                output: Output::External("iperf3"),
                pins: &[],
            },
        ),
        (
            workload("npb-lu.C", vec![int("threads", 4)]),
            Want {
                program: "/opt/npb/lu.C.x",
                args: &[],
                env: &[("OMP_NUM_THREADS", "4")],
                server: None,
                output: Output::External("npb-lu.C"),
                pins: &[],
            },
        ),
    ];
    for (w, want) in ok {
        check_launch(&w, Ok(want));
    }

    let bad: &[(Workload, &str)] = &[
        (
            workload("lu", vec![int("threads", 0)]),
            "parameter `threads` = 0 is out of range 1..=4096",
        ),
        (
            workload("lu", vec![int("bogus", 1)]),
            "unknown parameter `bogus` of workload `lu` (known: threads, size, iterations)",
        ),
        (
            workload(
                "lu",
                vec![Param {
                    name: "threads".into(),
                    value: Some(param::Value::Text("2; reboot".into())),
                }],
            ),
            "parameter `threads` of `lu` must be a number",
        ),
        (
            workload("stress-ng", vec![float("seconds", 1.5)]),
            "parameter `seconds` must be an integer",
        ),
        (
            workload("sysbench-cpu", vec![]),
            "external workload `sysbench-cpu` needs sysbench, which this agent did not find \
             (PATH and its tools directories)",
        ),
        (
            workload("npb-lu.A", vec![]),
            "external workload `npb-lu.A` needs lu.A.x, which this agent did not find \
             (PATH and its tools directories)",
        ),
    ];
    for (w, want) in bad {
        check_launch(w, Err(want));
    }
    let unknown = launch(&workload("rm -rf /", vec![]), &command()).map(|l| l.name);
    assert!(
        unknown.as_ref().is_err_and(|e| e
            .to_string()
            .starts_with("unknown workload `rm -rf /` (known: ")),
        "{unknown:?}"
    );
}

#[test]
fn pins_come_from_udp_stream_cpus() {
    use farm_workload::catalogue::Value::Int;
    let sender = Pin {
        thread: "udp-sender",
        cpu: 3,
    };
    let receiver = Pin {
        thread: "udp-receiver",
        cpu: 0,
    };
    type Params = &'static [(&'static str, catalogue::Value)];
    let cases: &[(&str, Params, &[Pin])] = &[
        (
            "udp-stream",
            &[("sender_cpu", Int(-1)), ("receiver_cpu", Int(-1))],
            &[],
        ),
        (
            "udp-stream",
            &[("sender_cpu", Int(3)), ("receiver_cpu", Int(-1))],
            &[sender],
        ),
        (
            "udp-stream",
            &[("receiver_cpu", Int(0)), ("sender_cpu", Int(3))],
            &[sender, receiver],
        ),
        ("udp-stream", &[("receiver_cpu", Int(0))], &[receiver]),
        ("lu", &[("sender_cpu", Int(3))], &[]),
    ];
    for (name, params, want) in cases {
        assert_eq!(wanted(name, params), *want, "{name} {params:?}");
    }
}

#[test]
fn listening_ports_of_proc_net_tcp() {
    let cases: &[(&str, &[u16])] = &[
        (
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             \x20  0: 0100007F:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 30 1 0 100 0 0 10 0\n\
             \x20  1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 28 1 0 100 0 0 10 0\n\
             \x20  2: 0100007F:1451 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 31 1 0 20 4 30 10 -1\n",
            &[5201, 22],
        ),
        (
            "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             \x20  0: 00000000000000000000000000000000:1451 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 40 1 0 100 0 0 10 0\n",
            &[5201],
        ),
        // The header alone, a cut line, a bad port: nothing.
        ("  sl  local_address rem_address   st\n", &[]),
        (
            "header\n   0: 0100007F:1451\n   1: 0100007F:XYZ 00000000:0000 0A\n",
            &[],
        ),
    ];
    for (table, want) in cases {
        let got: Vec<u16> = listening_ports(table).collect();
        assert_eq!(got, *want, "{table}");
    }
}

#[test]
fn assignments_this_agent_cannot_serve_are_refused() {
    let caps = Capabilities {
        kernel_release: "6.1.0".into(),
        ..Default::default()
    };
    let ok = RunAssignment {
        kernel: "running".into(),
        ..Default::default()
    };
    assert!(check(&Run::of(&ok).unwrap(), &caps).is_ok());
    let cases = [
        RunAssignment {
            kernel: "6.12".into(),
            ..Default::default()
        },
        RunAssignment {
            kernel: "running".into(),
            executor: "kvm".into(),
            ..Default::default()
        },
        RunAssignment {
            kernel: "running".into(),
            state: Some(MachineState {
                name: "c".into(),
                hotplug: "cycle:1".into(),
                ..Default::default()
            }),
            ..Default::default()
        },
    ];
    for a in cases {
        assert!(check(&Run::of(&a).unwrap(), &caps).is_err(), "{a:?}");
    }
}

// ------------------------------------------ slow: whole runs through execute

/// An agent's run context on this machine, with a journal of its own.
struct Agent {
    caps: Capabilities,
    command: WorkloadCommand,
    journal: Arc<Mutex<Journal>>,
    _state: TempDir,
}

impl Agent {
    /// This machine's capabilities, the `farm-workload` binary of this build
    /// and the external tools installed here.
    fn new() -> Agent {
        let state = TempDir::new().expect("temp dir");
        let journal =
            Journal::open(&state.path().join("journal"), Path::new("/")).expect("open the journal");
        let mut command = WorkloadCommand::binary(workload_bin());
        command.externals = crate::external::discover_installed(&[]);
        Agent {
            caps: crate::capabilities::discover(Path::new("/")).expect("capabilities"),
            command,
            journal: Arc::new(Mutex::new(journal)),
            _state: state,
        }
    }

    /// Runs `w`, and `loads` beside it, to the end.
    fn execute(&self, w: Workload, loads: Vec<Workload>) -> RunResult {
        let a = RunAssignment {
            run: Some(RunRef {
                run_id: format!("test-{}", w.name),
                attempt: 1,
            }),
            kernel: "running".into(),
            executor: farm_spec::Executor::Host.to_string(),
            timeout_s: 60,
            workload: Some(w),
            loads,
            ..Default::default()
        };
        let killer = Killer::default();
        let ctx = Context {
            caps: &self.caps,
            workload: &self.command,
            journal: &self.journal,
            killer: &killer,
            progress: &|_| {},
        };
        let result = execute(&a, &ctx);
        assert!(
            lock(&self.journal).is_empty().expect("read the journal"),
            "the run left journal entries behind"
        );
        result
    }

    /// Fails the test, naming the Debian package, if `name` is not installed.
    fn require(&self, name: &str, package: &str) {
        assert!(
            self.command.external(name).is_some(),
            "{name} is not installed: scripts/test.sh installs it (Debian package {package})"
        );
    }
}

/// The `farm-workload` binary of this build: `target/<profile>/farm-workload`,
/// beside the `deps` directory of this test binary, unless `FARM_WORKLOAD_BIN`
/// says otherwise.
fn workload_bin() -> PathBuf {
    if let Some(bin) = std::env::var_os("FARM_WORKLOAD_BIN") {
        return bin.into();
    }
    let exe = std::env::current_exe().expect("this test's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("farm-workload"))
        .unwrap_or_default();
    assert!(
        bin.is_file(),
        "{} not found: build it with `cargo build --workspace` (or set FARM_WORKLOAD_BIN)",
        bin.display()
    );
    bin
}

/// The metric called `name`, which must be there once.
fn metric<'a>(r: &'a RunResult, name: &str) -> &'a Metric {
    let found: Vec<&Metric> = r.metrics.iter().filter(|m| m.name == name).collect();
    assert_eq!(found.len(), 1, "{name} in {:?}", r.metrics);
    found[0]
}

/// Checks a successful run: the workload's own metrics are the catalogue's,
/// in its units and directions, finite and positive where higher is better;
/// and telemetry measured it as it measures every workload.
fn check_ok(r: &RunResult, workload: &str) {
    assert!(r.ok, "{workload}: {}\nlog:\n{}", r.error, r.log_tail);
    let spec = catalogue::lookup(workload).expect("catalogued");
    for m in spec.metrics {
        let got = metric(r, m.name);
        let direction = farm_proto::Direction::from(m.direction);
        assert_eq!(
            (got.unit.as_str(), got.direction),
            (m.unit, direction as i32)
        );
        assert!(got.value.is_finite() && got.value >= 0.0, "{got:?}");
        if m.direction == catalogue::Direction::HigherIsBetter {
            assert!(got.value > 0.0, "{got:?}");
        }
    }
    for name in [
        "wall_s",
        "task_clock_s",
        "context_switches",
        "cpus_utilised",
    ] {
        assert!(metric(r, name).value.is_finite(), "{name}");
    }
    assert!(metric(r, "task_clock_s").value > 0.0);
    assert!(r.telemetry.is_some());
}

#[test]
fn executes_stress_ng() {
    let agent = Agent::new();
    agent.require("stress-ng", "stress-ng");
    let r = agent.execute(
        workload("stress-ng", vec![int("workers", 1), int("seconds", 1)]),
        vec![],
    );
    check_ok(&r, "stress-ng");
    // One busy worker for a second of wall time gets what CPU the machine
    // spares it (0.48 s once, beside other work), so the control is the
    // worker's own CPU time as stress-ng accounts it: its bogo ops over
    // its ops per CPU-second. The task clock counts the whole tree, the
    // worker (a child of stress-ng) and its parent's start-up besides:
    // that time and little more, never the parent's alone.
    let task_clock = metric(&r, "task_clock_s").value;
    let ops = metric(&r, "stress_ng_bogo_ops").value;
    let worker_cpu_s = ops / metric(&r, "stress_ng_bogo_ops_per_cpu_s").value;
    assert!(
        worker_cpu_s > 0.05,
        "the worker got {worker_cpu_s:.3} s of CPU in its second ({ops} bogo ops):          the machine spared it too little to compare with"
    );
    assert!(
        task_clock >= 0.9 * worker_cpu_s && task_clock <= worker_cpu_s + 0.5,
        "task_clock_s = {task_clock}, the worker's own CPU time {worker_cpu_s:.3} s"
    );
    assert!(task_clock < 3.0, "task_clock_s = {task_clock}");
}

/// A loopback port nobody uses now.
fn free_port() -> i64 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    i64::from(listener.local_addr().expect("local address").port())
}

#[test]
fn executes_iperf3_with_its_server() {
    let agent = Agent::new();
    agent.require("iperf3", "iperf3");
    let port = free_port();
    let r = agent.execute(
        workload("iperf3", vec![int("seconds", 1), int("port", port)]),
        vec![],
    );
    check_ok(&r, "iperf3");
    let port = u16::try_from(port).expect("a port");
    assert!(
        !background::listening(Path::new("/"), port),
        "the server still listens on {port}"
    );

    // A port already taken is refused, not shared with someone else's server.
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = taken.local_addr().expect("local address").port();
    let r = agent.execute(
        workload("iperf3-udp", vec![int("port", i64::from(port))]),
        vec![],
    );
    assert_eq!(
        r.error,
        format!(
            "server /usr/bin/iperf3: port {port} is already in use on this machine; give the \
             workload another `port`"
        )
    );
    // A server only for the measured workload.
    let r = agent.execute(
        workload("stress-ng", vec![int("seconds", 1)]),
        vec![workload("iperf3", vec![])],
    );
    assert_eq!(
        r.error,
        "load `iperf3` needs a server of its own; only the measured workload may have one"
    );
}

/// The process groups in /proc: `(pid, pgrp)` of every process, zombies
/// included (a zombie is not gone).
fn process_groups() -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: fields resume after the last ')'.
        let pgrp = stat
            .rfind(')')
            .and_then(|i| stat[i + 1..].split_whitespace().nth(2))
            .and_then(|g| g.parse().ok());
        if let Some(pgrp) = pgrp {
            out.push((pid, pgrp));
        }
    }
    out
}

#[test]
fn executes_an_external_load_beside_a_built_in_workload() {
    let agent = Agent::new();
    agent.require("stress-ng", "stress-ng");
    // The load's pid, from the journal while the run goes on: each
    // background process is journalled as soon as it starts, and leads a
    // process group of its own (stress-ng's workers are in it).
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (journal, done) = (agent.journal.clone(), done.clone());
        std::thread::spawn(move || {
            let mut pids = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                for e in lock(&journal).entries().expect("read the journal") {
                    if let crate::state::journal::Entry::Process { pid, .. } = e
                        && !pids.contains(&pid)
                    {
                        pids.push(pid);
                    }
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            pids
        })
    };
    let r = agent.execute(
        workload("cpu-hog", vec![float("seconds", 0.5)]),
        vec![workload("stress-ng", vec![int("seconds", 60)])],
    );
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let pids = watcher.join().expect("the journal watcher");
    check_ok(&r, "cpu-hog");
    assert_eq!(pids.len(), 1, "the load was journalled once: {pids:?}");
    // The 60 s load was stopped with the 0.5 s workload: none of its
    // processes is left, not even a zombie. Its leader is reaped before the
    // run ends; the workers, killed with it, may take a moment to die and
    // be reaped by init, far less than the load's 60 s.
    let of_the_load = || -> Vec<(i32, i32)> {
        process_groups()
            .into_iter()
            .filter(|&(pid, pgrp)| pid == pids[0] || pgrp == pids[0])
            .collect()
    };
    assert!(
        !of_the_load().iter().any(|&(pid, _)| pid == pids[0]),
        "the load's leader {} is left",
        pids[0]
    );
    let t = std::time::Instant::now();
    while !of_the_load().is_empty() && t.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(
        of_the_load(),
        [],
        "processes of the load {} are left",
        pids[0]
    );
}

#[test]
fn pins_udp_stream_threads() {
    let agent = Agent::new();
    assert!(
        agent.caps.online_cpus.contains(&0) && agent.caps.online_cpus.contains(&1),
        "needs CPUs 0 and 1 online: {:?}",
        agent.caps.online_cpus
    );
    let r = agent.execute(
        workload(
            "udp-stream",
            vec![
                float("seconds", 0.3),
                int("sender_cpu", 0),
                int("receiver_cpu", 1),
            ],
        ),
        vec![],
    );
    check_ok(&r, "udp-stream");
    for line in [
        "udp-stream: sender pinned=true cpu=0",
        "udp-stream: receiver pinned=true cpu=1",
    ] {
        assert!(r.log_tail.contains(line), "{line}\nlog:\n{}", r.log_tail);
    }
}
