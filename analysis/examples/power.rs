//! Power and false alarms of `compare`'s verdicts on generated data with a
//! known truth, beside the one-sided t-test on the same samples.
//!
//! ```text
//! cargo run --release -p farm-analysis --example power [-- TRIALS NULL_TRIALS [NOISE]]
//! ```
//!
//! Every sample has a coefficient of variation of 5% around 100, in one of
//! four noises:
//!
//! - `normal`: 100 · (1 + 0.05 z);
//! - `log-normal`: 100 · exp(σ z) with σ = √ln(1 + 0.05²), so CV 5%;
//! - `bimodal`: 80% of runs at 100 and 20% at 110 (two levels 10% apart),
//!   each times (1 + 0.03 z): overall CV 4.9%;
//! - `outliers`: `normal`, then one run in ten (at random) multiplied by a
//!   factor uniform in [1.5, 3], as when a neighbour lands on the node.
//!
//! The candidate is the same noise times (1 + slowdown), so its CV is 5% too
//! (a slowdown scales the noise with the run time). Each cell runs TRIALS
//! pairs (default 4,000), and NULL_TRIALS (default 20,000) when the slowdown
//! is 0, where the false-alarm rate near 1% needs the precision; NOISE keeps
//! one noise only. Cells are seeded: the table is the same on every run.
//!
//! Columns: the share of each verdict; "test alone", the verdict's one-sided
//! adaptive rank test (normal scores or Mann-Whitney, as chosen from the
//! pooled sample) at α = 0.01 without the minimum-effect gate (so the gate's
//! cost is the difference); the t-test; and the share of comparisons
//! with a spread or a bimodality finding.
//!
//! The reference is the pooled two-sample t-test, one-sided towards "slower"
//! at α = 0.01 on the raw values: under normal noise with equal variances it
//! is the most powerful unbiased test there is. (With equal sizes its
//! statistic is Welch's; pooled degrees of freedom, 2n − 2, give it the
//! slightly smaller critical value, so the upper bound is the generous one.)
//!
//! The bootstrap interval is skipped (`resamples: 0`): it does not enter the
//! verdict (a unit test checks that the verdict is the same without it), and
//! skipping it makes the 432,000 comparisons take half a minute on two
//! cores rather than about six (a comparison with the default 2,000
//! resamples takes 0.6 ms at 10 runs a side, 1.3 ms at 30, 3 ms at 100).

// An example is a program: it prints its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::thread;

use farm_analysis::Direction;
use farm_analysis::compare::{Finding, Options, Verdict, compare};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};
use statrs::distribution::{ContinuousCDF as _, StudentsT};

const CV: f64 = 0.05;
/// 10 and 30 are the targets' sizes; 100 shows where `no_change` becomes
/// reachable at this noise.
const SIZES: [usize; 3] = [10, 30, 100];
const SLOWDOWNS: [f64; 5] = [0.0, 0.02, 0.05, 0.10, 0.20];
const ALPHA: f64 = 0.01;

#[derive(Debug, Clone, Copy)]
enum Noise {
    Normal,
    LogNormal,
    Bimodal,
    Outliers,
}

impl Noise {
    const ALL: [Noise; 4] = [
        Noise::Normal,
        Noise::LogNormal,
        Noise::Bimodal,
        Noise::Outliers,
    ];

    fn name(self) -> &'static str {
        match self {
            Noise::Normal => "normal",
            Noise::LogNormal => "log-normal",
            Noise::Bimodal => "bimodal",
            Noise::Outliers => "outliers",
        }
    }

    fn sample(self, rng: &mut StdRng, n: usize, centre: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let z = gauss(rng);
                centre
                    * match self {
                        Noise::Normal => 1.0 + CV * z,
                        Noise::LogNormal => ((1.0 + CV * CV).ln().sqrt() * z).exp(),
                        Noise::Bimodal => {
                            let level = if rng.random::<f64>() < 0.2 { 1.1 } else { 1.0 };
                            level * (1.0 + 0.03 * z)
                        }
                        Noise::Outliers => {
                            let hit = if rng.random::<f64>() < 0.1 {
                                rng.random_range(1.5..3.0)
                            } else {
                                1.0
                            };
                            (1.0 + CV * z) * hit
                        }
                    }
            })
            .collect()
    }
}

/// A standard normal draw (Box-Muller).
fn gauss(rng: &mut StdRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>();
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// The pooled t statistic of `c` against `b` (positive when `c` is larger).
fn t_statistic(b: &[f64], c: &[f64]) -> f64 {
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let ss = |v: &[f64], m: f64| v.iter().map(|x| (x - m).powi(2)).sum::<f64>();
    let (mb, mc) = (mean(b), mean(c));
    let (nb, nc) = (b.len() as f64, c.len() as f64);
    let pooled = (ss(b, mb) + ss(c, mc)) / (nb + nc - 2.0);
    (mc - mb) / (pooled * (1.0 / nb + 1.0 / nc)).sqrt()
}

struct Cell {
    noise: Noise,
    n: usize,
    slowdown: f64,
    trials: usize,
    /// Regression, improvement, no change, inconclusive.
    verdicts: [usize; 4],
    t_rejects: usize,
    /// The verdict's one-sided rank test alone rejects towards "slower".
    u_rejects: usize,
    spread: usize,
    bimodal: usize,
}

fn run(noise: Noise, n: usize, slowdown: f64, trials: usize, seed: u64) -> Cell {
    let mut rng = StdRng::seed_from_u64(seed);
    let critical = StudentsT::new(0.0, 1.0, (2 * n - 2) as f64)
        .expect("valid degrees of freedom")
        .inverse_cdf(1.0 - ALPHA);
    let options = Options {
        resamples: 0,
        ..Options::default()
    };
    let mut cell = Cell {
        noise,
        n,
        slowdown,
        trials,
        verdicts: [0; 4],
        t_rejects: 0,
        u_rejects: 0,
        spread: 0,
        bimodal: 0,
    };
    for _ in 0..trials {
        let b = noise.sample(&mut rng, n, 100.0);
        let c = noise.sample(&mut rng, n, 100.0 * (1.0 + slowdown));
        let r = compare(&b, &c, Direction::LowerIsBetter, &options).expect("valid samples");
        cell.verdicts[match r.verdict {
            Verdict::Regression => 0,
            Verdict::Improvement => 1,
            Verdict::NoChange => 2,
            Verdict::Inconclusive => 3,
        }] += 1;
        cell.t_rejects += usize::from(t_statistic(&b, &c) > critical);
        cell.u_rejects += usize::from(r.p_value < 2.0 * ALPHA && r.shift > 1.0);
        cell.spread += usize::from(
            r.findings
                .iter()
                .any(|f| matches!(f, Finding::Spread { .. })),
        );
        cell.bimodal += usize::from(
            r.findings
                .iter()
                .any(|f| matches!(f, Finding::Bimodal { .. })),
        );
    }
    cell
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default| {
        args.get(i)
            .map_or(default, |a| a.parse::<usize>().expect("a number of trials"))
    };
    let trials = number(0, 4000);
    let null_trials = number(1, 20_000);
    let only = args.get(2).map(String::as_str);

    let mut jobs = Vec::new();
    for (i, noise) in Noise::ALL.into_iter().enumerate() {
        if only.is_some_and(|name| name != noise.name()) {
            continue;
        }
        for n in SIZES {
            for (j, slowdown) in SLOWDOWNS.into_iter().enumerate() {
                let t = if slowdown == 0.0 { null_trials } else { trials };
                let seed = 1000 * i as u64 + 100 * n as u64 + j as u64;
                jobs.push((noise, n, slowdown, t, seed));
            }
        }
    }
    let started = std::time::Instant::now();
    let workers = thread::available_parallelism().map_or(2, |p| p.get());
    let mut cells: Vec<(usize, Cell)> = thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let jobs = &jobs;
                s.spawn(move || {
                    jobs.iter()
                        .enumerate()
                        .skip(w)
                        .step_by(workers)
                        .map(|(k, &(noise, n, slowdown, t, seed))| {
                            (k, run(noise, n, slowdown, t, seed))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("worker"))
            .collect()
    });
    cells.sort_by_key(|c| c.0);

    // Rates under no change are near 1%: two decimals there.
    let rate = |k: usize, c: &Cell| {
        let digits = if c.slowdown == 0.0 { 2 } else { 1 };
        format!("{:.*}%", digits, 100.0 * k as f64 / c.trials as f64)
    };
    println!(
        "| noise | runs a side | slowdown | trials | regression | improvement | no_change | inconclusive | test alone | t-test | spread / bimodal findings |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (_, c) in &cells {
        let [reg, imp, same, unsure] = c.verdicts;
        println!(
            "| {} | {} | {:.0}% | {} | **{}** | {} | {} | {} | {} | {} | {} / {} |",
            c.noise.name(),
            c.n,
            100.0 * c.slowdown,
            c.trials,
            rate(reg, c),
            rate(imp, c),
            rate(same, c),
            rate(unsure, c),
            rate(c.u_rejects, c),
            rate(c.t_rejects, c),
            rate(c.spread, c),
            rate(c.bimodal, c),
        );
    }
    eprintln!(
        "{} comparisons in {:.1} s on {workers} threads",
        cells.iter().map(|c| c.1.trials).sum::<usize>(),
        started.elapsed().as_secs_f64()
    );
}
