//! The tables' invariants, and `resolve` over built-in and external entries
//! through one `check_resolve` helper.

use super::*;

/// Parameters by name, given or resolved.
type Params<'a> = &'a [(&'a str, Value)];

/// Resolves `given` for `workload` and compares with `expect`: the full
/// parameter set, or the error's text.
fn check_resolve(workload: &str, given: Params<'_>, expect: Result<Params<'_>, &str>) {
    let given: Vec<(String, Value)> = given.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    match (resolve(workload, &given), expect) {
        (Ok(got), Ok(want)) => assert_eq!(got, want, "{workload}"),
        (Err(e), Err(want)) => assert_eq!(e.to_string(), want, "{workload}"),
        (got, want) => panic!("{workload}: got {got:?}, want {want:?}"),
    }
}

#[test]
fn resolves_built_in_and_external_workloads() {
    let ok: &[(&str, Params<'_>, Params<'_>)] = &[
        (
            "cpu-hog",
            &[("threads", Value::Int(3))],
            &[("seconds", Value::Float(2.0)), ("threads", Value::Int(3))],
        ),
        (
            "stress-ng",
            &[("workers", Value::Int(2))],
            &[
                ("load", Value::Int(100)),
                ("seconds", Value::Int(2)),
                ("workers", Value::Int(2)),
            ],
        ),
        (
            "iperf3-udp",
            &[("port", Value::Int(7000))],
            &[
                ("bitrate", Value::Int(0)),
                ("length", Value::Int(1024)),
                ("port", Value::Int(7000)),
                ("seconds", Value::Int(2)),
            ],
        ),
        ("npb-lu.C", &[], &[("threads", Value::Int(2))]),
    ];
    for (workload, given, want) in ok {
        check_resolve(workload, given, Ok(want));
    }
    let bad: &[(&str, Params<'_>, &str)] = &[
        (
            "stress-ng",
            &[("cpus", Value::Int(2))],
            "unknown parameter `cpus` of workload `stress-ng` (known: workers, load, seconds)",
        ),
        (
            "sysbench-cpu",
            &[("seconds", Value::Float(1.5))],
            "parameter `seconds` must be an integer",
        ),
        (
            "rt-hackbench",
            &[("pipe", Value::Int(2))],
            "parameter `pipe` = 2 is out of range 0..=1",
        ),
        (
            "iperf3",
            &[("port", Value::Int(80))],
            "parameter `port` = 80 is out of range 1024..=65535",
        ),
        (
            "npb-lu",
            &[],
            "unknown workload `npb-lu` (known: cpu-hog, lu, stream, udp-stream, oltp, \
             hackbench) (external: stress-ng, sysbench-cpu, sysbench-threads, rt-hackbench, \
             iperf3, iperf3-udp, npb-lu.S, npb-lu.W, npb-lu.A, npb-lu.B, npb-lu.C, npb-lu.D, \
             npb-lu.E, npb-lu.F, stream-bin, netperf-udp-stream)",
        ),
    ];
    for (workload, given, want) in bad {
        check_resolve(workload, given, Err(want));
    }
}

#[test]
fn origins() {
    let cases: &[(&str, Option<&str>)] = &[
        ("lu", None),
        ("hackbench", None),
        ("stream", None),
        ("stress-ng", Some("stress-ng")),
        ("sysbench-threads", Some("sysbench")),
        ("rt-hackbench", Some("hackbench")),
        ("iperf3-udp", Some("iperf3")),
        ("npb-lu.S", Some("lu.S.x")),
        ("npb-lu.F", Some("lu.F.x")),
        ("stream-bin", Some("stream")),
        ("netperf-udp-stream", Some("netperf")),
    ];
    for (name, program) in cases {
        let spec = lookup(name).expect("in the catalogue");
        assert_eq!(spec.external_program(), *program, "{name}");
    }
    assert!(CATALOGUE.iter().all(|w| w.origin == Origin::BuiltIn));
    assert!(EXTERNAL.iter().all(|w| w.external_program().is_some()));
    // The agent's compile-time lookup finds the same entry as `find`.
    assert_eq!(Some(external("stress-ng")), find("stress-ng"));
    assert_eq!(external("netperf-udp-stream").name, "netperf-udp-stream");
}

/// What every entry must satisfy for the coordinator, the agent and the
/// metric line protocol to rely on it.
#[test]
fn table_invariants() {
    let all: Vec<&WorkloadSpec> = all().collect();
    assert_eq!(all.len(), CATALOGUE.len() + EXTERNAL.len());
    let word = |w: &str| !w.is_empty() && !w.contains(char::is_whitespace);
    let builtin_metrics: Vec<&str> = CATALOGUE
        .iter()
        .flat_map(|w| w.metrics.iter().map(|m| m.name))
        .collect();
    for (i, spec) in all.iter().enumerate() {
        let name = spec.name;
        assert!(word(name), "{name:?}");
        assert!(
            all[..i].iter().all(|o| o.name != name),
            "{name} is in the catalogue twice"
        );
        assert!(!spec.doc.is_empty(), "{name}");
        if let Some(program) = spec.external_program() {
            assert!(
                word(program) && !program.contains('/'),
                "{name}: {program:?}"
            );
        }
        for (j, p) in spec.params.iter().enumerate() {
            assert!(word(p.name), "{name}: {:?}", p.name);
            assert!(
                spec.params[..j].iter().all(|o| o.name != p.name),
                "{name}: {} twice",
                p.name
            );
            let default = match p.default {
                Value::Int(v) => p.check_int(v),
                Value::Float(v) => p.check_float(v),
            };
            assert_eq!(default, Ok(p.default), "{name}: default of {}", p.name);
        }
        for (j, m) in spec.metrics.iter().enumerate() {
            assert!(word(m.name) && word(m.unit), "{name}: {m:?}");
            assert!(
                spec.metrics[..j].iter().all(|o| o.name != m.name),
                "{name}: {} twice",
                m.name
            );
            // Results are keyed by metric name: an external tool's figure
            // must not pass for a built-in workload's.
            if spec.origin != Origin::BuiltIn {
                assert!(!builtin_metrics.contains(&m.name), "{name}: {}", m.name);
            }
        }
    }
}
