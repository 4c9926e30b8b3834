use super::*;
use crate::catalogue::CATALOGUE;
use crate::output::parse_metric_line;

struct Outcome {
    status: i32,
    stdout: String,
    stderr: String,
}

fn run_with(args: &[&str]) -> Outcome {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let status = run(&args, &mut stdout, &mut stderr);
    Outcome {
        status,
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// A refused command line: status 2, nothing on stdout, exactly one line on
/// stderr.
fn check_refused(args: &[&str], expect: &str) {
    let outcome = run_with(args);
    assert_eq!(outcome.status, 2, "{args:?}");
    assert_eq!(outcome.stdout, "", "{args:?}");
    assert_eq!(
        outcome.stderr,
        format!("farm-workload: {expect}\n"),
        "{args:?}"
    );
}

#[test]
fn refuses_bad_command_lines() {
    let usage = USAGE;
    let cases: &[(&[&str], String)] = &[
        (&[], format!("no workload given ({usage})")),
        (&["--bogus"], format!("unknown option `--bogus` ({usage})")),
        (
            &["--list", "lu"],
            format!("`--list` takes no arguments ({usage})"),
        ),
        (
            &["lu", "threads=3"],
            format!("unexpected argument `threads=3` ({usage})"),
        ),
        (
            &["lu", "--param"],
            format!("`--param` needs NAME=VALUE ({usage})"),
        ),
        (
            &["lu", "--param", "threads"],
            format!("`--param threads` is not NAME=VALUE ({usage})"),
        ),
        (
            &["lu", "--param", "=3"],
            format!("`--param =3` has no parameter name ({usage})"),
        ),
    ];
    for (args, expect) in cases {
        check_refused(args, expect);
    }
}

#[test]
fn refuses_what_the_catalogue_refuses() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["nope"],
            "unknown workload `nope` (known: cpu-hog, lu, stream, udp-stream, oltp, hackbench) \
             (external: stress-ng, sysbench-cpu, sysbench-threads, rt-hackbench, iperf3, \
             iperf3-udp, npb-lu.S, npb-lu.W, npb-lu.A, npb-lu.B, npb-lu.C, npb-lu.D, npb-lu.E, \
             npb-lu.F, stream-bin, netperf-udp-stream)",
        ),
        (
            &["stress-ng", "--param", "workers=2"],
            "`stress-ng` is an external workload: run by agents where stress-ng is installed, \
             not by this binary",
        ),
        (
            &["lu", "--param", "bogus=1"],
            "unknown parameter `bogus` of workload `lu` (known: threads, size, iterations)",
        ),
        (
            &["lu", "--param", "threads=abc"],
            "parameter `threads` must be an integer, got `abc`",
        ),
        (
            &["lu", "--param", "threads="],
            "parameter `threads` must be an integer, got ``",
        ),
        (
            &["lu", "--param", "threads=2.5"],
            "parameter `threads` must be an integer",
        ),
        (
            &["lu", "--param", "threads=0"],
            "parameter `threads` = 0 is out of range 1..=4096",
        ),
        (
            &["lu", "--param", "size=99999999999999999999"],
            "parameter `size` = 99999999999999999999 does not fit in 64 bits",
        ),
        (
            &["lu", "--param", "size=16", "--param", "size=8"],
            "parameter `size` is given twice",
        ),
        (
            &["cpu-hog", "--param", "seconds=x"],
            "parameter `seconds` must be a number, got `x`",
        ),
        (
            &["cpu-hog", "--param", "seconds=nan"],
            "parameter `seconds` = NaN is out of range 0.01..=86400",
        ),
        (
            &["cpu-hog", "--param", "seconds=inf"],
            "parameter `seconds` = inf is out of range 0.01..=86400",
        ),
        (
            &["udp-stream", "--param", "message_size=65508"],
            "parameter `message_size` = 65508 is out of range 1..=65507",
        ),
        (
            &["udp-stream", "--param", "sender_cpu=-2"],
            "parameter `sender_cpu` = -2 is out of range -1..=8191",
        ),
        (
            &["hackbench", "--param", "mode=2"],
            "parameter `mode` = 2 is out of range 0..=1",
        ),
        (
            &["hackbench", "--param", "fds=33"],
            "parameter `fds` = 33 is out of range 1..=32",
        ),
        (
            &["stream", "--param", "instances=0"],
            "parameter `instances` = 0 is out of range 1..=4096",
        ),
        (
            &["oltp", "--param", "tables=257"],
            "parameter `tables` = 257 is out of range 1..=256",
        ),
    ];
    for (args, expect) in cases {
        check_refused(args, expect);
    }
}

#[test]
fn parses_values_as_integers_first() {
    let args: Vec<String> = ["cpu-hog", "--param", "seconds=3", "--param", "threads=+4"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let Ok(Command::Run { workload, params }) = parse(&args) else {
        panic!("not a run: {:?}", parse(&args));
    };
    assert_eq!(workload.name, "cpu-hog");
    // `seconds` is a float parameter, so the integer 3 is taken as 3.0.
    assert_eq!(
        params,
        vec![("seconds", Value::Float(3.0)), ("threads", Value::Int(4))]
    );
}

#[test]
fn lists_the_catalogue() {
    let outcome = run_with(&["--list"]);
    assert_eq!((outcome.status, outcome.stderr.as_str()), (0, ""));
    for workload in catalogue::all() {
        assert!(outcome.stdout.contains(workload.name), "{}", outcome.stdout);
        for p in workload.params {
            assert!(
                outcome.stdout.contains(&format!("--param {}=", p.name)),
                "{}",
                outcome.stdout
            );
        }
    }
    assert!(
        outcome.stdout.contains("--param size=<integer 8..=512>"),
        "{}",
        outcome.stdout
    );
    assert!(
        outcome.stdout.contains(
            "npb-lu.C\n    NPB LU (OpenMP), class C (162^3 grid, the seeds' lu.C.x), a \
             user-built lu.C.x: Mop/s and the benchmark's own time\n    external workload: \
             run by agents where lu.C.x is installed\n"
        ),
        "{}",
        outcome.stdout
    );
}

/// Whether a reported metric name is what a declared one stands for: the
/// same, or with `<N>` standing for an index (`instance<N>_runtime_s`).
fn declares(declared: &str, reported: &str) -> bool {
    match declared.split_once("<N>") {
        None => declared == reported,
        Some((prefix, suffix)) => reported
            .strip_prefix(prefix)
            .and_then(|rest| rest.strip_suffix(suffix))
            .is_some_and(|index| !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit())),
    }
}

#[test]
fn matches_indexed_metric_names() {
    let cases = [
        ("tps", "tps", true),
        ("tps", "tps2", false),
        ("instance<N>_runtime_s", "instance0_runtime_s", true),
        ("instance<N>_runtime_s", "instance12_runtime_s", true),
        ("instance<N>_runtime_s", "instance_runtime_s", false),
        ("instance<N>_runtime_s", "instancex_runtime_s", false),
        ("instance<N>_runtime_s", "instance1_triad_mbs", false),
    ];
    for (declared, reported, expected) in cases {
        assert_eq!(
            declares(declared, reported),
            expected,
            "{declared} vs {reported}"
        );
    }
}

#[test]
fn every_workload_runs_and_reports_what_the_catalogue_declares() {
    // Small parameters: this checks the plumbing, not the performance.
    let cases: &[(&str, &[&str])] = &[
        (
            "cpu-hog",
            &["--param", "seconds=0.02", "--param", "threads=2"],
        ),
        (
            "lu",
            &[
                "--param",
                "size=8",
                "--param",
                "iterations=2",
                "--param",
                "threads=3",
            ],
        ),
        (
            "stream",
            &[
                "--param",
                "instances=2",
                "--param",
                "size_mb=1",
                "--param",
                "ntimes=2",
            ],
        ),
        ("udp-stream", &["--param", "seconds=0.05"]),
        ("oltp", &["--param", "seconds=0.05", "--param", "threads=2"]),
        (
            "hackbench",
            &[
                "--param", "groups=2", "--param", "fds=2", "--param", "loops=3",
            ],
        ),
    ];
    assert_eq!(
        cases.len(),
        CATALOGUE.len(),
        "a catalogue workload is not covered here"
    );
    for (name, params) in cases {
        let args: Vec<&str> = std::iter::once(*name)
            .chain(params.iter().copied())
            .collect();
        let outcome = run_with(&args);
        assert_eq!(outcome.status, 0, "{args:?}: {}", outcome.stderr);
        let metrics: Vec<Metric> = outcome
            .stdout
            .lines()
            .map(|line| {
                parse_metric_line(line)
                    .expect("well-formed")
                    .expect("a metric line")
            })
            .collect();
        let spec = catalogue::find(name).expect("in the catalogue");
        for m in &metrics {
            let matching: Vec<_> = spec
                .metrics
                .iter()
                .filter(|d| declares(d.name, &m.name))
                .collect();
            assert_eq!(matching.len(), 1, "{name}: {} is declared once", m.name);
            assert_eq!(
                (matching[0].unit, matching[0].direction),
                (m.unit.as_str(), m.direction),
                "{name}: {}",
                m.name
            );
            // A loss, say, may be 0; a rate or a time may not.
            assert!(m.value.is_finite() && m.value >= 0.0, "{name}: {m:?}");
            if m.direction == catalogue::Direction::HigherIsBetter || m.unit == "s" {
                assert!(m.value > 0.0, "{name}: {m:?}");
            }
        }
        for d in spec.metrics {
            assert!(
                metrics.iter().any(|m| declares(d.name, &m.name)),
                "{name}: {} is not reported",
                d.name
            );
        }
    }
}

#[test]
fn udp_stream_prints_its_thread_ids_for_pinning() {
    let outcome = run_with(&["udp-stream", "--param", "seconds=0.05"]);
    assert_eq!(outcome.status, 0, "{}", outcome.stderr);
    let lines: Vec<&str> = outcome.stderr.lines().collect();
    assert_eq!(lines.len(), 3, "{}", outcome.stderr);
    assert!(lines[0].starts_with("tid receiver "), "{}", outcome.stderr);
    assert!(lines[1].starts_with("tid sender "), "{}", outcome.stderr);
    assert!(
        lines[2].starts_with("udp-stream: sent "),
        "{}",
        outcome.stderr
    );
}

#[test]
fn lu_reports_its_residual_on_stderr() {
    let outcome = run_with(&["lu", "--param", "size=8", "--param", "iterations=3"]);
    assert_eq!(outcome.status, 0, "{}", outcome.stderr);
    assert!(
        outcome.stderr.starts_with("lu: residual "),
        "{}",
        outcome.stderr
    );
    assert_eq!(outcome.stderr.lines().count(), 1, "{}", outcome.stderr);
}
