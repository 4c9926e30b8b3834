//! Issue 35's inconclusive verdict, through the real scheduler: a cell
//! whose runs spread tenfold (a 2-vCPU TCG guest on a busy 2-CPU host)
//! says why its comparison could not decide, with the figures; a cell
//! whose runs are tight, equally inconclusive (its effect sits on the
//! minimum), says nothing of the kind.

use farm_proto::{Metric, RunResult};

use super::{Farm, play_with, results_of, submit_text};

/// Two cells of 15 runs, no runs added: threads = 1 is the baseline.
const PAIR: &str = "name = \"x\"\nrepetitions = 15\n[[workloads]]\nname = \"cpu-hog\"\n\
    params = { seconds = 1, threads = [1, 2] }\n[baseline]\nthreads = 1\n[verdict]\nmax_runs = 15\n";

fn metric(name: &str, value: f64, unit: &str) -> Metric {
    let m = farm_spec::metric::telemetry(name).map(|m| m.direction);
    Metric {
        name: name.into(),
        value,
        unit: unit.into(),
        direction: farm_proto::Direction::from(m.unwrap_or(farm_spec::Direction::LowerIsBetter))
            as i32,
    }
}

/// Plays one agent through a matrix as a TCG guest agent would report:
/// `wall_s` is `wall(cell, repetition)`, beside the host's load (5.1 to
/// 7.0 in turn), its 2 CPUs, the guest's 2 vCPUs, no steal (TCG accounts
/// none) and the guest's slowdown (×4.6 to ×7.9 in turn).
async fn play(farm: &Farm, agent: &str, wall: impl Fn(u32, u32) -> f64) {
    play_with(farm, agent, |cell, rep| RunResult {
        executor: "tcg".into(),
        arch: "x86_64".into(),
        metrics: vec![
            metric("wall_s", wall(cell, rep), "s"),
            metric("host_load", 5.1 + 1.9 * f64::from(rep % 5) / 4.0, "threads"),
            metric("host_cpus", 2.0, "CPUs"),
            metric("guest_cpus", 2.0, "vCPUs"),
            metric("steal_pct", 0.0, "%"),
            metric("guest_slowdown", 4.6 + 3.3 * f64::from(rep % 5) / 4.0, "×"),
        ],
        ..Default::default()
    })
    .await;
}

/// The 15 repetitions' order: each position of 0..15 once.
fn shuffled(rep: u32) -> f64 {
    f64::from((rep * 7) % 15)
}

async fn why_lines(wall: impl Fn(u32, u32) -> f64) -> (i32, Vec<String>) {
    let farm = Farm::new(60_000, 3);
    let a = farm.register().await;
    let m = submit_text(&farm, PAIR).await;
    play(&farm, &a, wall).await;
    let r = results_of(&farm, &m).await;
    let cand = &r.cells[1];
    let wall = cand.metrics.iter().find(|m| m.name == "wall_s").unwrap();
    assert_eq!((wall.n, wall.baseline_n), (15, 15));
    (wall.verdict, wall.findings.clone())
}

#[tokio::test]
async fn runs_that_spread_tenfold_say_why_the_verdict_could_not_decide() {
    // Issue 35's hackbench: 0.68 to 6.56 s on the good kernel, 0.93 to
    // 13.3 s on the bad one, log-spaced.
    let (verdict, findings) = why_lines(|cell, rep| {
        let (low, high) = if cell == 0 {
            (0.68, 6.56)
        } else {
            (0.93, 13.3)
        };
        low * f64::powf(high / low, shuffled(rep) / 14.0)
    })
    .await;
    assert_eq!(verdict, farm_proto::Verdict::Inconclusive as i32);
    // The 90% Moses interval is the 73rd and the 153rd of the 225 ratios
    // (Mann-Whitney's critical U of 72 at 15 and 15): 0.989 to 2.80, whose
    // log-width is 26.0 times the ±2% band's, so 15 · 26.0² = 10,163 runs.
    assert_eq!(
        findings,
        [
            "runs vary ×9.65 (0.680–6.56 s) in the baseline, ×14.3 (0.930–13.3 s) in the \
             candidate: too much to resolve ±2% with 15 runs a side (about 10,163 would, \
             beyond the 1,000 a cell may have); the host's load average was 5.1–7.0 on 2 \
             CPUs during the runs; the guest ran ×4.6–7.9 slower than the host under tcg; \
             might help: a guest with fewer vCPUs than the host's 2 CPUs (it had 2, under \
             tcg), a quieter host"
        ]
    );
}

#[tokio::test]
async fn tight_runs_with_an_effect_on_the_minimum_say_nothing_of_spread() {
    // ±0.5% around 1 s and 1.019 s: the shift is within a hair of the 2%
    // minimum, so the verdict cannot decide, but not for the spread.
    let (verdict, findings) = why_lines(|cell, rep| {
        let median = if cell == 0 { 1.0 } else { 1.019 };
        median * (1.0 + 0.005 * (shuffled(rep) / 7.0 - 1.0))
    })
    .await;
    assert_eq!(verdict, farm_proto::Verdict::Inconclusive as i32);
    assert_eq!(findings, Vec::<String>::new());
}
