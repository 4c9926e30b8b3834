//! How often a bisection names the right culprit, says "unknown", or is
//! wrong, on simulated kernels with a known truth (`bisect::simulation`:
//! the real `Bisector` and comparison, log-normal noise).
//!
//! ```text
//! cargo run --release -p farm-analysis --example bisect [-- TRIALS]
//! ```
//!
//! Each row is TRIALS bisections (default 400) of a range of N kernels with
//! one culprit at a random place adding a slowdown of EFFECT, under 5%
//! noise, 10 runs per kernel per round and at most CAP (30, then 100) per
//! step, minimum effect 2%. Columns: the share of outcomes (right and confirmed, right
//! but unconfirmed, wrong and confirmed, wrong and unconfirmed, a range
//! left unresolved, ends that did not differ), then the mean decided steps
//! beside log2(N − 1), rounds (a matrix each) and runs of all kernels.
//! Seeded: the table is the same on every run.

// An example is a program: it prints its report, and unwraps what it
// cannot go on without.
#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::thread;

use farm_analysis::bisect::simulation::{Truth, bisect};
use farm_analysis::bisect::{Outcome, Policy};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};

const EFFECTS: [f64; 3] = [0.02, 0.05, 0.10];
const KERNELS: [usize; 4] = [2, 10, 100, 1000];
/// Runs per kernel per step: the default cap (30), and the most a step may
/// take (100), which a 2% effect under 5% noise needs.
const CAPS: [u32; 2] = [30, 100];

#[derive(Default, Clone, Copy)]
struct Row {
    right: u32,
    right_unconfirmed: u32,
    wrong: u32,
    wrong_unconfirmed: u32,
    unresolved: u32,
    no_difference: u32,
    steps: u64,
    rounds: u64,
    runs: u64,
}

fn row(kernels: usize, effect: f64, max_runs: u32, trials: u32) -> Row {
    let mut r = Row::default();
    let mut rng = StdRng::seed_from_u64(kernels as u64 * 1000 + (effect * 1000.0) as u64);
    for t in 0..trials {
        let culprit = rng.random_range(1..kernels);
        let truth = Truth {
            kernels,
            culprits: vec![(culprit, effect)],
            noise: 0.05,
            failing: Vec::new(),
        };
        let policy = Policy { runs: 10, max_runs };
        let run = bisect(&truth, policy, 0.02, u64::from(t)).expect("valid policy");
        r.steps += run.steps as u64;
        r.rounds += u64::from(run.rounds);
        r.runs += run.runs;
        match run.outcome {
            Outcome::Culprit {
                first_bad,
                confirmation,
                ..
            } => match (first_bad == culprit, confirmation.confirmed) {
                (true, true) => r.right += 1,
                (true, false) => r.right_unconfirmed += 1,
                (false, true) => r.wrong += 1,
                (false, false) => r.wrong_unconfirmed += 1,
            },
            Outcome::Unresolved { .. } => r.unresolved += 1,
            Outcome::EndsDoNotDiffer { .. } => r.no_difference += 1,
            Outcome::Failed { .. } => unreachable!("no kernel fails here"),
        }
    }
    r
}

fn main() {
    let trials: u32 = std::env::args()
        .nth(1)
        .map_or(400, |a| a.parse().expect("TRIALS is a number"));
    let cases: Vec<(usize, f64, u32)> = CAPS
        .iter()
        .flat_map(|&c| EFFECTS.iter().map(move |&e| (e, c)))
        .flat_map(|(e, c)| KERNELS.iter().map(move |&k| (k, e, c)))
        .collect();
    let rows: Vec<Row> = thread::scope(|s| {
        let handles: Vec<_> = cases
            .iter()
            .map(|&(k, e, c)| s.spawn(move || row(k, e, c, trials)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    println!(
        "| cap | effect | N | right | right, unconfirmed | wrong, confirmed | wrong, unconfirmed \
         | unresolved | ends equal | steps | log2(N-1) | rounds | runs |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let pct = |n: u32| format!("{:.1}%", 100.0 * f64::from(n) / f64::from(trials));
    let mean = |n: u64| n as f64 / f64::from(trials);
    for (&(k, e, c), r) in cases.iter().zip(&rows) {
        println!(
            "| {c} | {:.0}% | {k} | {} | {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.0} |",
            e * 100.0,
            pct(r.right),
            pct(r.right_unconfirmed),
            pct(r.wrong),
            pct(r.wrong_unconfirmed),
            pct(r.unresolved),
            pct(r.no_difference),
            mean(r.steps),
            (k as f64 - 1.0).log2(),
            mean(r.rounds),
            mean(r.runs),
        );
    }
}
