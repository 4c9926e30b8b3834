//! Parsers are checked on captured and hand-written outputs (testdata/README.md
//! says which is which) through one `check_parse` helper, command lines through
//! one `check_command` helper, discovery on a temporary tree.
//!
//! The last section is slow (about a second each): it runs every installed
//! Debian-packaged tool through `command` and parses what it printed. Those
//! tests fail when a tool is missing: scripts/test.sh installs the packages.

use std::fs;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use farm_workload::catalogue::{self, Direction, Value};
use tempfile::TempDir;

use super::{
    Command, EXTERNALS, ExternalSpec, Server, Source, command, discover, lookup, parse,
    server_command,
};

// ------------------------------------------------------------------ parsers

/// Metric names and values, in a spec's order.
type Metrics<'a> = &'a [(&'a str, f64)];

/// Parses `stdout`/`stderr` as the output of `spec` and compares with `expect`:
/// the metrics in the spec's order, or the error's text.
fn check_parse(spec: &str, stdout: &str, stderr: &str, expect: Result<Metrics<'_>, &str>) {
    let got = parse(spec, stdout, stderr);
    match (got, expect) {
        (Ok(metrics), Ok(want)) => {
            let got: Vec<(&str, f64)> =
                metrics.iter().map(|m| (m.name.as_str(), m.value)).collect();
            assert_eq!(got.len(), want.len(), "{spec}: got {got:?}, want {want:?}");
            for ((name, value), (want_name, want_value)) in got.iter().zip(want) {
                assert_eq!(name, want_name, "{spec}: got {got:?}");
                let tolerance = 1e-12 * want_value.abs().max(1.0);
                assert!(
                    (value - want_value).abs() <= tolerance,
                    "{spec}: {name} = {value}, want {want_value}"
                );
            }
            let spec = lookup(spec).expect("spec parsed, so it exists");
            for (m, s) in metrics.iter().zip(spec.workload.metrics) {
                assert_eq!((m.unit.as_str(), m.direction), (s.unit, s.direction));
            }
        }
        (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "{spec}"),
        (got, want) => panic!("{spec}: got {got:?}, want {want:?}"),
    }
}

macro_rules! testdata {
    ($file:literal) => {
        include_str!(concat!("testdata/", $file))
    };
}

#[test]
fn captured_outputs() {
    let cases: &[(&str, &str, &str, Metrics<'_>)] = &[
        (
            "stress-ng",
            testdata!("stress-ng-0.15.06-cpu.stdout"),
            "",
            &[
                ("stress_ng_bogo_ops", 806.0),
                ("stress_ng_bogo_ops_per_s", 802.76),
                ("stress_ng_bogo_ops_per_cpu_s", 1752.94),
            ],
        ),
        (
            "stress-ng",
            "",
            testdata!("stress-ng-0.15.06-cpu-log.stderr"),
            &[
                ("stress_ng_bogo_ops", 508.0),
                ("stress_ng_bogo_ops_per_s", 507.94),
                ("stress_ng_bogo_ops_per_cpu_s", 1760.01),
            ],
        ),
        (
            "sysbench-cpu",
            testdata!("sysbench-1.0.20-cpu.stdout"),
            "",
            &[
                ("sysbench_events", 2118.0),
                ("sysbench_events_per_s", 2114.00),
                ("sysbench_latency_avg_ms", 0.94),
                ("sysbench_latency_p95_ms", 5.37),
            ],
        ),
        (
            "sysbench-threads",
            testdata!("sysbench-1.0.20-threads.stdout"),
            "",
            &[
                ("sysbench_events", 394.0),
                ("sysbench_events_per_s", 394.0 / 1.0082),
                ("sysbench_latency_avg_ms", 5.11),
                ("sysbench_latency_p95_ms", 8.28),
            ],
        ),
        (
            "rt-hackbench",
            testdata!("hackbench-2.4-process.stdout"),
            "",
            &[("hackbench_time_s", 0.047)],
        ),
        (
            "rt-hackbench",
            testdata!("hackbench-2.4-threads-pipe.stdout"),
            "",
            &[("hackbench_time_s", 0.015)],
        ),
        (
            "iperf3",
            testdata!("iperf3-3.12-tcp.json"),
            "",
            &[
                ("iperf3_received_bit_per_s", 10528537709.770113),
                ("iperf3_sent_bit_per_s", 10613615828.184937),
                ("iperf3_retransmits", 9.0),
            ],
        ),
        (
            "iperf3-udp",
            testdata!("iperf3-3.12-udp.json"),
            "",
            &[
                ("iperf3_received_bit_per_s", 326510115.74161285),
                ("iperf3_sent_bit_per_s", 851678029.5444787),
                ("iperf3_lost_percent", 61.2065165309056),
                ("iperf3_jitter_ms", 0.0014843361292403755),
            ],
        ),
        (
            "npb-lu.C",
            testdata!("npb-lu.C.x-2threads.stdout"),
            "",
            &[("npb_lu_mops", 3833.71), ("npb_lu_time_s", 531.86)],
        ),
        (
            "stream-bin",
            testdata!("stream-5.10-2threads.stdout"),
            "",
            &[
                ("stream_copy_mb_per_s", 17520.8),
                ("stream_scale_mb_per_s", 16517.0),
                ("stream_add_mb_per_s", 18176.3),
                ("stream_triad_mb_per_s", 18020.7),
            ],
        ),
        (
            "netperf-udp-stream",
            testdata!("netperf-2.7-udp-stream.stdout"),
            "",
            &[
                ("netperf_received_mbit_per_s", 2353.94),
                ("netperf_received_msgs_per_s", 287345.7),
                ("netperf_sent_mbit_per_s", 2353.94),
            ],
        ),
        (
            "netperf-udp-stream",
            testdata!("netperf-2.7-udp-stream-seed002.stdout"),
            "",
            &[
                ("netperf_received_mbit_per_s", 1193.75),
                ("netperf_received_msgs_per_s", 145721.0),
                ("netperf_sent_mbit_per_s", 2385.37),
            ],
        ),
    ];
    for (spec, stdout, stderr, want) in cases {
        check_parse(spec, stdout, stderr, Ok(want));
    }
}

#[test]
fn failed_runs() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "sysbench-cpu",
            testdata!("sysbench-1.0.20-fatal.stdout"),
            "",
            "sysbench-cpu reports failure: FATAL: Invalid value of cpu-max-prime: 0.",
        ),
        (
            "rt-hackbench",
            testdata!("hackbench-2.4-bad-groups.stdout"),
            testdata!("hackbench-2.4-bad-groups.stderr"),
            "rt-hackbench: no `Time:` line in its output",
        ),
        (
            "iperf3",
            testdata!("iperf3-3.12-refused.json"),
            "",
            "iperf3 reports failure: unable to connect to server: Connection refused",
        ),
        (
            "npb-lu.C",
            testdata!("npb-lu.C.x-unsuccessful.stdout"),
            "",
            "npb-lu reports failure: Verification    =             UNSUCCESSFUL",
        ),
        (
            "stream-bin",
            testdata!("stream-5.10-failed-validation.stdout"),
            "",
            "stream-bin reports failure: Failed Validation on array a[], \
             AvgRelAbsErr > epsilon (1.000000e-13)",
        ),
    ];
    for (spec, stdout, stderr, want) in cases {
        check_parse(spec, stdout, stderr, Err(want));
    }
}

/// Output shapes other than the captured ones, and broken output. Each
/// input is a fixture with one change, or a few lines typed after the real
/// formats.
#[test]
fn edge_cases() {
    let stress = testdata!("stress-ng-0.15.06-cpu.stdout");
    // stress-ng before 0.15 prints the table at level `info`; --log-brief
    // prints no prefix at all.
    let info = stress.replace("metrc:", "info: ");
    let brief = "stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s\n\
                 \x20                         (secs)    (secs)    (secs)   (real time) (usr+sys time)\n\
                 cpu                1711      1.00      0.96      0.00      1710.53        1782.41\n";
    // --sn prints scientific notation.
    let sn = "stress-ng: metrc: [13035] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s\n\
              stress-ng: metrc: [13035] cpu                1405 1.005e+00 7.816e-01 7.777e-03  1.39783e+03    1.77982e+03\n";
    let stress_ok: &[(&str, &str, Metrics<'_>)] = &[
        (
            &info,
            "",
            &[
                ("stress_ng_bogo_ops", 806.0),
                ("stress_ng_bogo_ops_per_s", 802.76),
                ("stress_ng_bogo_ops_per_cpu_s", 1752.94),
            ],
        ),
        (
            "",
            brief,
            &[
                ("stress_ng_bogo_ops", 1711.0),
                ("stress_ng_bogo_ops_per_s", 1710.53),
                ("stress_ng_bogo_ops_per_cpu_s", 1782.41),
            ],
        ),
        (
            sn,
            "",
            &[
                ("stress_ng_bogo_ops", 1405.0),
                ("stress_ng_bogo_ops_per_s", 1397.83),
                ("stress_ng_bogo_ops_per_cpu_s", 1779.82),
            ],
        ),
    ];
    for (stdout, stderr, want) in stress_ok {
        check_parse("stress-ng", stdout, stderr, Ok(want));
    }

    let no_row: String = stress
        .lines()
        .filter(|l| !l.contains(" cpu "))
        .collect::<Vec<_>>()
        .join("\n");
    let unsuccessful = stress.replace("successful run", "unsuccessful run");
    let truncated = stress.replace("1752.94", "");
    let nan = stress.replace("1752.94", "nan");
    let sysbench = testdata!("sysbench-1.0.20-cpu.stdout");
    let no_rate = sysbench.replace("events per second", "events per minute");
    let no_unit = sysbench.replace("1.0014s", "1.0014");
    let us = sysbench.replace("Latency (ms):", "Latency (us):");
    let threads = testdata!("sysbench-1.0.20-threads.stdout");
    let zero_time = threads.replace("1.0082s", "0.0000s");
    let npb = testdata!("npb-lu.C.x-2threads.stdout");
    let npb_no_mops = npb.replace("Mop/s total", "Mop/s sum");
    let npb_cut = npb
        .split(" LU Benchmark Completed.")
        .next()
        .unwrap_or_default();
    let stream = testdata!("stream-5.10-2threads.stdout");
    let stream_no_add = stream.replace("Add:", "Sum:");
    let stream_unvalidated = stream.replace("Solution Validates", "Solution");
    let netperf = testdata!("netperf-2.7-udp-stream.stdout");
    let netperf_kbits = netperf.replace("10^6bits/sec", "10^3bits/sec");
    let netperf_one_line: String = netperf.lines().take(6).collect::<Vec<_>>().join("\n");
    let iperf = testdata!("iperf3-3.12-tcp.json");
    let iperf_no_received = iperf.replace("\"sum_received\"", "\"sum_other\"");

    let bad: &[(&str, &str, &str, &str)] = &[
        (
            "stress-ng",
            "",
            "",
            "stress-ng: no metrics table (`stressor bogo ops ...`) in its output",
        ),
        (
            "stress-ng",
            &no_row,
            "",
            "stress-ng: no `cpu` row in the metrics table in its output",
        ),
        (
            "stress-ng",
            &unsuccessful,
            "",
            "stress-ng reports failure: unsuccessful run completed in 1.01s",
        ),
        (
            "stress-ng",
            &truncated,
            "",
            "stress-ng: cannot read line \"cpu                 806      1.00      0.46      0.00       802.76\": \
             no field 7 (bogo ops/s (usr+sys time))",
        ),
        (
            "stress-ng",
            &nan,
            "",
            "stress-ng: cannot read line \"cpu                 806      1.00      0.46      0.00       802.76        nan\": \
             `nan` is not a number",
        ),
        (
            "sysbench-cpu",
            &no_rate,
            "",
            "sysbench-cpu: no `events per second:` line in its output",
        ),
        (
            "sysbench-cpu",
            &no_unit,
            "",
            "sysbench-cpu: cannot read line \"total time:                          1.0014\": no `s` after the time",
        ),
        (
            "sysbench-cpu",
            &us,
            "",
            "sysbench-cpu: no `Latency (ms):` section in its output",
        ),
        (
            "sysbench-threads",
            &zero_time,
            "",
            "sysbench-threads: cannot read line \"total time:                          0.0000s\": \
             total time is not positive",
        ),
        (
            "sysbench-threads",
            "",
            "",
            "sysbench-threads: no `total time:` line in its output",
        ),
        (
            "rt-hackbench",
            "Time: fast\n",
            "",
            "rt-hackbench: cannot read line \"Time: fast\": `fast` is not a number",
        ),
        (
            "iperf3",
            "",
            "",
            "iperf3: output is not JSON: EOF while parsing a value at line 1 column 0",
        ),
        (
            "iperf3",
            &iperf_no_received,
            "",
            "iperf3: no end.sum_received.bits_per_second in its output",
        ),
        (
            "iperf3-udp",
            "{\"end\": {}, \"error\": {\"code\": 1}}",
            "",
            "iperf3-udp reports failure: {\"code\":1}",
        ),
        (
            "npb-lu.C",
            &npb_no_mops,
            "",
            "npb-lu: no `Mop/s total =` line in its output",
        ),
        // Killed before the report: the `Verification being performed` line
        // must not pass for the report's `Verification =`.
        (
            "npb-lu.C",
            npb_cut,
            "",
            "npb-lu: no `Verification =` line in its output",
        ),
        (
            "stream-bin",
            &stream_no_add,
            "",
            "stream-bin: no `Add:` row after `Scale:` in its output",
        ),
        (
            "stream-bin",
            &stream_unvalidated,
            "",
            "stream-bin: no `Solution Validates` line in its output",
        ),
        (
            "stream-bin",
            "",
            "",
            "stream-bin: no `Function    Best Rate MB/s ...` table in its output",
        ),
        (
            "netperf-udp-stream",
            &netperf_kbits,
            "",
            "netperf-udp-stream: cannot read line \"bytes   bytes    secs            #      #   10^3bits/sec\": \
             throughput is not in 10^6bits/sec",
        ),
        (
            "netperf-udp-stream",
            &netperf_one_line,
            "",
            "netperf-udp-stream: no sender and receiver lines of the result table in its output",
        ),
        (
            "netperf-udp-stream",
            "",
            "establish_control could not establish the control connection from 0.0.0.0 port 0 \
             address family AF_UNSPEC to 127.0.0.1 port 12865 address family AF_INET\n",
            "netperf-udp-stream: no UDP_STREAM result table (`... Okay Errors   Throughput`) in its output",
        ),
        (
            "lmbench",
            "",
            "",
            "unknown external workload `lmbench` (known: stress-ng, sysbench-cpu, \
             sysbench-threads, rt-hackbench, iperf3, iperf3-udp, npb-lu.S, npb-lu.W, npb-lu.A, \
             npb-lu.B, npb-lu.C, npb-lu.D, npb-lu.E, npb-lu.F, stream-bin, netperf-udp-stream)",
        ),
    ];
    for (spec, stdout, stderr, want) in bad {
        check_parse(spec, stdout, stderr, Err(want));
    }

    // STREAM 5.9's table header.
    let stream59 = "Function      Rate (MB/s)   Avg time     Min time     Max time\n\
                    Copy:        4421.7059       0.0363       0.0362       0.0364\n\
                    Scale:       4383.1263       0.0366       0.0365       0.0367\n\
                    Add:         4877.4424       0.0493       0.0492       0.0494\n\
                    Triad:       4866.8853       0.0494       0.0493       0.0495\n\
                    -------------------------------------------------------------\n\
                    Solution Validates\n";
    check_parse(
        "stream-bin",
        stream59,
        "",
        Ok(&[
            ("stream_copy_mb_per_s", 4421.7059),
            ("stream_scale_mb_per_s", 4383.1263),
            ("stream_add_mb_per_s", 4877.4424),
            ("stream_triad_mb_per_s", 4866.8853),
        ]),
    );
}

// ------------------------------------------------------------ command lines

type Params<'a> = &'a [(&'a str, Value)];
type Env<'a> = &'a [(&'a str, &'a str)];

/// Builds `spec`'s command for the program at `/opt/bin/<program>` and
/// compares it with `expect`: the argv after the program and the
/// environment, or the error's text.
fn check_command(spec: &str, params: Params<'_>, expect: Result<(&[&str], Env<'_>), &str>) {
    let spec = lookup(spec).expect("known spec");
    let program = PathBuf::from("/opt/bin").join(spec.program());
    match (command(spec, &program, params), expect) {
        (Ok(got), Ok((argv, env))) => {
            let mut want_argv = vec![program.to_str().unwrap_or_default()];
            want_argv.extend_from_slice(argv);
            assert_eq!(got.argv, want_argv, "{}", spec.name());
            let env: Vec<(String, String)> = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            assert_eq!(got.env, env, "{}", spec.name());
        }
        (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "{}", spec.name()),
        (got, want) => panic!("{}: got {got:?}, want {want:?}", spec.name()),
    }
}

#[test]
fn command_lines() {
    let ok: &[(&str, Params<'_>, &[&str], Env<'_>)] = &[
        (
            "stress-ng",
            &[],
            &[
                "--cpu",
                "1",
                "--cpu-load",
                "100",
                "--timeout",
                "2s",
                "--metrics-brief",
                "--stdout",
            ],
            &[],
        ),
        (
            "stress-ng",
            &[
                ("workers", Value::Int(2)),
                ("seconds", Value::Int(30)),
                ("load", Value::Int(50)),
            ],
            &[
                "--cpu",
                "2",
                "--cpu-load",
                "50",
                "--timeout",
                "30s",
                "--metrics-brief",
                "--stdout",
            ],
            &[],
        ),
        (
            "sysbench-cpu",
            &[("threads", Value::Int(16))],
            &[
                "cpu",
                "--threads=16",
                "--time=2",
                "--cpu-max-prime=10000",
                "run",
            ],
            &[],
        ),
        (
            "sysbench-threads",
            &[("seconds", Value::Int(5)), ("yields", Value::Int(0))],
            &[
                "threads",
                "--threads=2",
                "--time=5",
                "--thread-yields=0",
                "--thread-locks=8",
                "run",
            ],
            &[],
        ),
        (
            "rt-hackbench",
            &[],
            &["-g", "10", "-f", "20", "-l", "100", "-s", "100"],
            &[],
        ),
        (
            "rt-hackbench",
            &[
                ("threads", Value::Int(1)),
                ("pipe", Value::Int(1)),
                ("loops", Value::Int(2000)),
            ],
            &[
                "-g", "10", "-f", "20", "-l", "2000", "-s", "100", "-T", "-p",
            ],
            &[],
        ),
        (
            "iperf3",
            &[("streams", Value::Int(4))],
            &["-c", "127.0.0.1", "-p", "5201", "-t", "2", "-P", "4", "-J"],
            &[],
        ),
        (
            "iperf3-udp",
            &[
                ("port", Value::Int(7000)),
                ("bitrate", Value::Int(1_000_000_000)),
            ],
            &[
                "-c",
                "127.0.0.1",
                "-p",
                "7000",
                "-t",
                "2",
                "-u",
                "-b",
                "1000000000",
                "-l",
                "1024",
                "-J",
            ],
            &[],
        ),
        (
            "npb-lu.C",
            &[("threads", Value::Int(80))],
            &[],
            &[("OMP_NUM_THREADS", "80")],
        ),
        ("stream-bin", &[], &[], &[("OMP_NUM_THREADS", "1")]),
        (
            "netperf-udp-stream",
            &[],
            &[
                "-H",
                "127.0.0.1",
                "-p",
                "12865",
                "-t",
                "UDP_STREAM",
                "-l",
                "10",
                "--",
                "-m",
                "1024",
            ],
            &[],
        ),
        // Seed 002's test options.
        (
            "netperf-udp-stream",
            &[
                ("socket_buffer", Value::Int(32768)),
                ("seconds", Value::Int(60)),
            ],
            &[
                "-H",
                "127.0.0.1",
                "-p",
                "12865",
                "-t",
                "UDP_STREAM",
                "-l",
                "60",
                "--",
                "-m",
                "1024",
                "-s",
                "32768",
                "-S",
                "32768",
            ],
            &[],
        ),
    ];
    for (spec, params, argv, env) in ok {
        check_command(spec, params, Ok((argv, env)));
    }

    let bad: &[(&str, Params<'_>, &str)] = &[
        (
            "stress-ng",
            &[("cpus", Value::Int(2))],
            "stress-ng: unknown parameter `cpus` (known: workers, load, seconds)",
        ),
        (
            "stress-ng",
            &[("workers", Value::Int(2)), ("workers", Value::Int(3))],
            "stress-ng: parameter `workers` is given twice",
        ),
        (
            "stress-ng",
            &[("workers", Value::Int(0))],
            "stress-ng: parameter `workers` = 0 is out of range 1..=4096",
        ),
        (
            "sysbench-cpu",
            &[("seconds", Value::Float(1.5))],
            "sysbench-cpu: parameter `seconds` must be an integer",
        ),
        (
            "rt-hackbench",
            &[("pipe", Value::Int(2))],
            "rt-hackbench: parameter `pipe` = 2 is out of range 0..=1",
        ),
        (
            "iperf3",
            &[("port", Value::Int(80))],
            "iperf3: parameter `port` = 80 is out of range 1024..=65535",
        ),
        (
            "netperf-udp-stream",
            &[("message_size", Value::Int(65508))],
            "netperf-udp-stream: parameter `message_size` = 65508 is out of range 1..=65507",
        ),
        (
            "npb-lu.C",
            &[("threads", Value::Float(f64::NAN))],
            "npb-lu.C: parameter `threads` must be an integer",
        ),
    ];
    for (spec, params, want) in bad {
        check_command(spec, params, Err(want));
    }
}

#[test]
fn server_commands() {
    let server = |spec: &str, client: &str, params: Params<'_>| {
        let spec = lookup(spec).expect("known spec");
        server_command(spec, Path::new(client), params).expect("valid parameters")
    };
    assert_eq!(
        server(
            "iperf3-udp",
            "/usr/bin/iperf3",
            &[("port", Value::Int(7000))]
        ),
        Some(Server {
            command: Command {
                argv: [
                    "/usr/bin/iperf3",
                    "-s",
                    "-1",
                    "-B",
                    "127.0.0.1",
                    "-p",
                    "7000"
                ]
                .map(String::from)
                .to_vec(),
                env: vec![],
            },
            port: 7000,
        })
    );
    assert_eq!(
        server("netperf-udp-stream", "/opt/netperf/bin/netperf", &[]),
        Some(Server {
            command: Command {
                argv: [
                    "/opt/netperf/bin/netserver",
                    "-D",
                    "-f",
                    "-L",
                    "127.0.0.1",
                    "-p",
                    "12865"
                ]
                .map(String::from)
                .to_vec(),
                env: vec![],
            },
            port: 12865,
        })
    );
    assert_eq!(server("sysbench-cpu", "/usr/bin/sysbench", &[]), None);
    let spec = lookup("iperf3").expect("known spec");
    let err = server_command(
        spec,
        Path::new("/usr/bin/iperf3"),
        &[("port", Value::Int(1))],
    );
    assert_eq!(
        err.map_err(|e| e.to_string()),
        Err("iperf3: parameter `port` = 1 is out of range 1024..=65535".to_string())
    );
}

/// What every spec must satisfy for the rest of the farm to rely on it. The
/// data (parameters, defaults, metrics) is the catalogue's, tested there.
#[test]
fn table_invariants() {
    // One spec per external entry of the catalogue, in its order: every
    // workload a matrix may name, this agent can run.
    let names: Vec<&str> = EXTERNALS.iter().map(ExternalSpec::name).collect();
    let catalogued: Vec<&str> = catalogue::EXTERNAL.iter().map(|w| w.name).collect();
    assert_eq!(names, catalogued);
    for spec in EXTERNALS {
        let name = spec.name();
        assert!(!spec.program().is_empty(), "{name}");
        assert_eq!(spec.server.is_some(), spec.build_server.is_some(), "{name}");
        let cmd = command(spec, Path::new("/bin/true"), &[]).expect("defaults are valid");
        assert_eq!(cmd.argv[0], "/bin/true", "{name}");
        let server = server_command(spec, Path::new("/bin/true"), &[]).expect("defaults");
        assert_eq!(server.is_some(), spec.server.is_some(), "{name}");
    }
    let packages: Vec<&str> = EXTERNALS
        .iter()
        .filter_map(|s| match s.source {
            Source::Debian { package } => Some(package),
            Source::UserBuilt => None,
        })
        .collect();
    assert_eq!(
        packages,
        [
            "stress-ng",
            "sysbench",
            "sysbench",
            "rt-tests",
            "iperf3",
            "iperf3"
        ]
    );
}

// ---------------------------------------------------------------- discovery

fn touch(dir: &Path, name: &str, mode: u32) {
    let path = dir.join(name);
    fs::write(&path, "#!/bin/sh\n").expect("write fake program");
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod fake program");
}

#[test]
fn discovery() {
    let tmp = TempDir::new().expect("temp dir");
    let dir = |name: &str| {
        let d = tmp.path().join(name);
        fs::create_dir_all(&d).expect("mkdir");
        d
    };
    let (usr_bin, local_bin, npb, stream, netperf_half, netperf) = (
        dir("usr/bin"),
        dir("usr/local/bin"),
        dir("npb/bin"),
        dir("stream"),
        dir("netperf-half"),
        dir("netperf/bin"),
    );
    touch(&usr_bin, "stress-ng", 0o755);
    touch(&local_bin, "stress-ng", 0o755); // later in PATH: loses
    touch(&usr_bin, "sysbench", 0o755);
    touch(&usr_bin, "hackbench", 0o644); // not executable
    touch(&local_bin, "iperf3", 0o700);
    touch(&usr_bin, "stream", 0o755); // user-built programs are not taken from PATH
    touch(&npb, "lu.C.x", 0o755);
    touch(&npb, "lu.A.x", 0o755);
    touch(&npb, "lu.S.x", 0o644); // not executable
    touch(&npb, "lu.Z.x", 0o755); // no such class
    touch(&npb, "lu.C.x.log", 0o755);
    touch(&npb, "bt.B.x", 0o755);
    touch(&stream, "lu.C.x", 0o755); // a second class C: the first directory wins
    touch(&stream, "stream", 0o755);
    touch(&netperf_half, "netperf", 0o755); // no netserver beside it
    touch(&netperf, "netperf", 0o755);
    touch(&netperf, "netserver", 0o755);
    fs::create_dir(npb.join("lu.B.x")).expect("mkdir"); // a directory, not a program

    let path_env = format!(
        "{}::relative/bin:{}:{}",
        usr_bin.display(),
        local_bin.display(),
        tmp.path().join("missing").display()
    );
    let extra = vec![
        npb.clone(),
        stream.clone(),
        netperf_half.clone(),
        netperf.clone(),
        tmp.path().join("absent"),
    ];
    let found = discover(&path_env, &extra);
    let want: Vec<(&str, PathBuf)> = vec![
        ("stress-ng", usr_bin.join("stress-ng")),
        ("sysbench-cpu", usr_bin.join("sysbench")),
        ("sysbench-threads", usr_bin.join("sysbench")),
        ("iperf3", local_bin.join("iperf3")),
        ("iperf3-udp", local_bin.join("iperf3")),
        ("npb-lu.A", npb.join("lu.A.x")),
        ("npb-lu.C", npb.join("lu.C.x")),
        ("stream-bin", stream.join("stream")),
        ("netperf-udp-stream", netperf.join("netperf")),
    ];
    assert_eq!(found, want);

    // Debian programs are found in the configured directories too.
    touch(&stream, "hackbench", 0o755);
    let found = discover("", &extra);
    let names: Vec<&str> = found.iter().map(|(n, _)| *n).collect();
    assert_eq!(
        names,
        [
            "rt-hackbench",
            "npb-lu.A",
            "npb-lu.C",
            "stream-bin",
            "netperf-udp-stream"
        ]
    );
    assert!(discover("", &[]).is_empty());
}

// ------------------------------------------- slow: the installed tools, run

/// The installed program of `spec`, from this process's `PATH`.
fn installed(spec: &str) -> (&'static ExternalSpec, PathBuf) {
    let spec = lookup(spec).expect("known spec");
    let path = std::env::var("PATH").unwrap_or_default();
    let found = discover(&path, &[])
        .into_iter()
        .find(|(name, _)| *name == spec.name());
    match (found, spec.source) {
        (Some((_, program)), _) => (spec, program),
        (None, Source::Debian { package }) => panic!(
            "{} not installed: scripts/test.sh installs it (Debian package {package})",
            spec.program()
        ),
        (None, Source::UserBuilt) => panic!("{} is not a packaged tool", spec.name()),
    }
}

/// Kills and reaps a child when the test ends, however it ends.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(cmd: &Command, stdout: Stdio, stderr: Stdio) -> Reaper {
    let child = std::process::Command::new(&cmd.argv[0])
        .args(&cmd.argv[1..])
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.argv));
    Reaper(child)
}

/// Runs `cmd` to its end (at most 60 s) and returns its stdout and stderr;
/// it must exit with status 0.
fn run(cmd: &Command) -> (String, String) {
    let dir = TempDir::new().expect("temp dir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let file = |p: &Path| Stdio::from(fs::File::create(p).expect("create output file"));
    let mut child = spawn(cmd, file(&out), file(&err));
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.0.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "{:?} still runs after 60 s",
            cmd.argv
        );
        sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| fs::read_to_string(p).expect("read output file");
    let (stdout, stderr) = (read(&out), read(&err));
    assert!(
        status.success(),
        "{:?}: {status}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        cmd.argv
    );
    (stdout, stderr)
}

/// The local addresses of the sockets in LISTEN state on TCP `port`, v4 or
/// v6, as `/proc/net/tcp{,6}` print them (127.0.0.1 is `0100007F`).
fn listening_on(port: u16) -> Vec<String> {
    let needle = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .flat_map(|table| {
            let text = fs::read_to_string(table).unwrap_or_default();
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    // local_address is field 1, st is field 3; 0A is LISTEN.
                    let address = fields.get(1)?.strip_suffix(&needle)?;
                    (fields.get(3) == Some(&"0A")).then(|| address.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A loopback port nobody uses now.
fn free_port() -> i64 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    i64::from(listener.local_addr().expect("local address").port())
}

/// Runs `spec` with `params` (plus a server, if it has one), parses the
/// output and checks the metrics are the spec's, finite, and positive where
/// they measure throughput.
fn run_installed(spec: &str, params: Params<'_>) {
    let (spec, program) = installed(spec);
    let _server = server_command(spec, &program, params)
        .expect("valid parameters")
        .map(|server| {
            let child = spawn(&server.command, Stdio::null(), Stdio::null());
            let deadline = Instant::now() + Duration::from_secs(10);
            while listening_on(server.port).is_empty() {
                assert!(
                    Instant::now() < deadline,
                    "{:?} does not listen",
                    server.command.argv
                );
                sleep(Duration::from_millis(10));
            }
            // The agent starts servers as root: loopback only, never the
            // network.
            assert_eq!(
                listening_on(server.port),
                ["0100007F"],
                "{:?}",
                server.command.argv
            );
            child
        });
    let cmd = command(spec, &program, params).expect("valid parameters");
    let (stdout, stderr) = run(&cmd);
    let metrics = parse(spec.name(), &stdout, &stderr)
        .unwrap_or_else(|e| panic!("{e}\nstdout:\n{stdout}\nstderr:\n{stderr}"));
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    let want: Vec<&str> = spec.workload.metrics.iter().map(|m| m.name).collect();
    assert_eq!(names, want);
    for m in &metrics {
        assert!(m.value.is_finite() && m.value >= 0.0, "{m:?}");
        if m.direction == Direction::HigherIsBetter {
            assert!(m.value > 0.0, "{m:?}\nstdout:\n{stdout}");
        }
    }
}

#[test]
fn runs_stress_ng() {
    run_installed(
        "stress-ng",
        &[("workers", Value::Int(1)), ("seconds", Value::Int(1))],
    );
}

#[test]
fn runs_sysbench_cpu() {
    run_installed(
        "sysbench-cpu",
        &[("threads", Value::Int(2)), ("seconds", Value::Int(1))],
    );
}

#[test]
fn runs_sysbench_threads() {
    run_installed(
        "sysbench-threads",
        &[("threads", Value::Int(2)), ("seconds", Value::Int(1))],
    );
}

#[test]
fn runs_hackbench() {
    let small = [
        ("groups", Value::Int(2)),
        ("fds", Value::Int(5)),
        ("loops", Value::Int(200)),
    ];
    run_installed("rt-hackbench", &small);
    let threads_pipe = [
        small[0],
        small[1],
        small[2],
        ("threads", Value::Int(1)),
        ("pipe", Value::Int(1)),
    ];
    run_installed("rt-hackbench", &threads_pipe);
}

#[test]
fn runs_iperf3() {
    run_installed(
        "iperf3",
        &[
            ("seconds", Value::Int(1)),
            ("port", Value::Int(free_port())),
        ],
    );
}

#[test]
fn runs_iperf3_udp() {
    run_installed(
        "iperf3-udp",
        &[
            ("seconds", Value::Int(1)),
            ("port", Value::Int(free_port())),
        ],
    );
}
