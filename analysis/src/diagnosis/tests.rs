//! Diagnoses of the seeds' regressions, from telemetry shaped like theirs.

use std::collections::BTreeMap;

use super::*;

fn moved(metric: &str, b: f64, c: f64, verdict: Verdict) -> Moved<'_> {
    Moved {
        metric,
        baseline_median: b,
        candidate_median: c,
        verdict,
    }
}

fn texts(lines: &[Line]) -> Vec<&str> {
    lines.iter().map(|l| l.text.as_str()).collect()
}

#[test]
fn seed_004_counters_ranked_by_how_far_they_moved() {
    let e = Evidence {
        metrics: vec![
            moved("cpus_utilised", 12.5, 7.2, Verdict::Improvement),
            moved("cpu_migrations", 4084.0, 56850.0, Verdict::Regression),
            moved("context_switches", 1000.0, 1010.0, Verdict::NoChange),
            moved("rescheduling_ipis", 1000.0, 6100.0, Verdict::Regression),
            moved("page_faults", 500.0, 900.0, Verdict::Inconclusive),
        ],
        ..Default::default()
    };
    assert_eq!(
        texts(&diagnose(&e)),
        [
            "cpu-migrations ×13.9 (4,084 → 56,850)",
            "rescheduling IPIs ×6.10 (1,000 → 6,100)",
            "CPUs utilised 12.5 → 7.2",
        ]
    );
}

#[test]
fn nothing_that_did_not_move() {
    let e = Evidence {
        metrics: vec![
            moved("cpu_migrations", 4084.0, 4100.0, Verdict::NoChange),
            moved("tlb_shootdowns", 10.0, 30.0, Verdict::Inconclusive),
        ],
        ..Default::default()
    };
    assert!(diagnose(&e).is_empty());
}

fn node(node: u32, cpus: u32, threads: f64, runnable: f64) -> NodeLoad {
    NodeLoad {
        node,
        cpus,
        avg_threads: threads,
        avg_runnable: runnable,
    }
}

#[test]
fn seed_003_overcommitted_nodes() {
    let even = Placement {
        nodes: (0..4).map(|n| node(n, 24, 22.0, 20.0)).collect(),
        instances: Vec::new(),
    };
    let skewed = Placement {
        nodes: vec![
            node(0, 24, 13.1, 12.0),
            node(1, 24, 13.5, 12.5),
            node(2, 24, 27.65, 26.0),
            node(3, 24, 25.76, 25.0),
        ],
        instances: Vec::new(),
    };
    let e = Evidence {
        baseline: Some(even),
        candidate: Some(skewed),
        ..Default::default()
    };
    assert_eq!(
        texts(&diagnose(&e)),
        ["nodes 2 and 3 hold 27.6 and 25.8 threads on 24 CPUs each"]
    );
}

fn instances(homes: &[u32]) -> Vec<(u32, BTreeMap<u32, f64>)> {
    homes
        .iter()
        .enumerate()
        .map(|(i, &n)| (i as u32 + 1, BTreeMap::from([(n, 1.0)])))
        .collect()
}

#[test]
fn seed_001_instances_crowding_a_node() {
    let nodes: Vec<NodeLoad> = (0..4).map(|n| node(n, 8, 1.0, 1.0)).collect();
    let spread = Placement {
        nodes: nodes.clone(),
        instances: instances(&[0, 1, 2, 3]),
    };
    let crowded = Placement {
        nodes,
        instances: instances(&[0, 2, 3, 3]),
    };
    let e = Evidence {
        baseline: Some(spread.clone()),
        candidate: Some(crowded.clone()),
        ..Default::default()
    };
    assert_eq!(
        texts(&diagnose(&e)),
        ["instances 3 and 4 both on NUMA node 3; node 1 idle"]
    );
    // Three on one node (as a 4-node guest with `isolcpus=3` showed).
    let three = Placement {
        nodes: spread.nodes.clone(),
        instances: instances(&[1, 1, 1, 2]),
    };
    let e = Evidence {
        baseline: Some(spread.clone()),
        candidate: Some(three),
        ..Default::default()
    };
    assert_eq!(
        texts(&diagnose(&e)),
        ["instances 1, 2 and 3 all on NUMA node 1; nodes 0 and 3 idle"]
    );
    // The same crowding in the baseline explains nothing.
    let e = Evidence {
        baseline: Some(crowded.clone()),
        candidate: Some(crowded),
        ..Default::default()
    };
    assert!(diagnose(&e).is_empty());
}

#[test]
fn seed_000_a_domain_level_missing_after_a_hotplug_cycle() {
    let candidate: Vec<String> = (0..4)
        .map(|c| format!("cpu{c}: sched domain level NUMA missing after (was MC NUMA, now MC)"))
        .collect();
    let e = Evidence {
        metrics: vec![moved("cpu_migrations", 100.0, 1000.0, Verdict::Regression)],
        candidate_topology: candidate,
        ..Default::default()
    };
    assert_eq!(
        texts(&diagnose(&e)),
        [
            "sched domain level NUMA missing after the state was applied (was MC NUMA, now MC) \
             on cpus 0-3",
            "cpu-migrations ×10.0 (100 → 1,000)",
        ]
    );
    // Changes the baseline's state made too are no explanation.
    let e = Evidence {
        baseline_topology: vec![
            "cpu0: sched domain level NUMA missing after (was MC NUMA, now MC)".into(),
        ],
        candidate_topology: vec![
            "cpu1: sched domain level NUMA missing after (was MC NUMA, now MC)".into(),
        ],
        ..Default::default()
    };
    assert!(diagnose(&e).is_empty());
}

#[test]
fn amounts_read_like_the_seeds() {
    for (v, want) in [
        (56850.0, "56,850"),
        (4084.0, "4,084"),
        (1234567.0, "1,234,567"),
        (12.0, "12"),
        (0.25, "0.250"),
        (3.14259, "3.14"),
        (27.65, "27.6"),
        (-4084.0, "-4,084"),
    ] {
        assert_eq!(amount(v), want, "{v}");
    }
    assert_eq!(factor(13.92), "×13.9");
    assert_eq!(factor(1.354), "×1.35");
    assert_eq!(cpu_list(&[3, 0, 1, 2, 6]), "0-3,6");
}

#[test]
fn findings_in_words() {
    assert_eq!(
        finding_text(
            &Finding::Spread {
                ratio: 8.0,
                p_value: 0.001
            },
            "s"
        ),
        "spread ×8.00 the baseline's (p = 1.00e-3): the runs vary more than before, a change \
         of its own"
    );
    assert_eq!(
        finding_text(
            &Finding::Spread {
                ratio: f64::INFINITY,
                p_value: 0.004
            },
            "migrations"
        ),
        "spread: the baseline's runs all gave the same value, the candidate's vary (p = 4.00e-3)"
    );
    assert_eq!(
        finding_text(
            &Finding::Bimodal {
                candidate: true,
                low: 20.0,
                high: 31.5,
                low_share: 0.4
            },
            "s"
        ),
        "two modes in the candidate: 20 s and 31.5 s, 40% of the runs in the lower"
    );
}

/// Seed 003's lu beside two CPU hogs, autogroup off against on: lu lost
/// CPUs, and the loads' share says who took them.
#[test]
fn what_the_competing_loads_took_of_the_machine() {
    let e = Evidence {
        metrics: vec![
            moved("cpus_utilised", 0.9, 0.6, Verdict::Regression),
            moved("loads_cpus", 1.0, 1.4, Verdict::Regression),
        ],
        candidate: Some(Placement {
            nodes: vec![node(0, 2, 3.0, 3.0)],
            instances: Vec::new(),
        }),
        ..Default::default()
    };
    assert_eq!(
        texts(&diagnose(&e)),
        [
            "CPUs utilised 0.9 → 0.6",
            "node 0 holds 3.0 threads (3.0 runnable) on 2 CPUs",
            "the competing loads took 1.4 of 2 CPUs (1.0 in the baseline)",
        ]
    );
    // Without a placement the machine's CPUs are not known.
    let e = Evidence {
        candidate: None,
        ..e
    };
    assert_eq!(
        texts(&diagnose(&e))[1],
        "the competing loads took 1.4 CPUs (1.0 in the baseline)"
    );
}
