use super::*;

/// The same SSOR written as plain loops over flat arrays on one thread, with
/// the same row kernels: the threaded solver must match it bit for bit, which
/// proves that its pipeline honours every dependency of the sweeps.
fn reference(n: usize, iterations: usize) -> Vec<f64> {
    let c = Coeffs::new();
    let plane = n * n;
    let zeros = vec![0.0; n];
    let f: Vec<f64> = (0..n * plane)
        .map(|p| forcing(p % n, p / n % n, p / plane))
        .collect();
    let mut u = vec![0.0; n * plane];
    let mut r = vec![0.0; n * plane];
    let mut residuals = Vec::new();
    for iteration in 0..=iterations {
        let mut plane_squares = Vec::new();
        for k in 0..n {
            let mut squares = 0.0;
            for j in 0..n {
                let p = (k * n + j) * n;
                let at = |q: usize| &u[q..q + n];
                let stencil = Stencil {
                    centre: at(p),
                    south: if j > 0 { at(p - n) } else { &zeros },
                    north: if j + 1 < n { at(p + n) } else { &zeros },
                    down: if k > 0 { at(p - plane) } else { &zeros },
                    up: if k + 1 < n { at(p + plane) } else { &zeros },
                };
                squares += rhs_row(&mut r[p..p + n], &f[p..p + n], &stencil, c.diag);
            }
            plane_squares.push(squares);
        }
        let sum: f64 = plane_squares.iter().sum();
        residuals.push((sum / (n as f64).powi(3)).sqrt());
        if iteration == iterations {
            break;
        }
        for k in 0..n {
            for j in 0..n {
                let p = (k * n + j) * n;
                let (before, rest) = r.split_at_mut(p);
                let south = if j > 0 { &before[p - n..] } else { &zeros };
                let down = if k > 0 {
                    &before[p - plane..p - plane + n]
                } else {
                    &zeros
                };
                lower_row(&mut rest[..n], south, down, &c);
            }
        }
        for k in (0..n).rev() {
            for j in (0..n).rev() {
                let p = (k * n + j) * n;
                let (head, after) = r.split_at_mut(p + n);
                let north = if j + 1 < n { &after[..n] } else { &zeros };
                let up = if k + 1 < n {
                    &after[plane - n..plane]
                } else {
                    &zeros
                };
                upper_row(&mut head[p..], north, up, &c);
            }
        }
        for (u, z) in u.iter_mut().zip(&r) {
            *u += c.relax * z;
        }
    }
    residuals
}

fn residuals(threads: usize, size: usize, iterations: usize) -> Vec<f64> {
    let solution = run(threads, size, iterations).expect("lu runs");
    assert_eq!(solution.residuals.len(), iterations + 1);
    solution.residuals
}

/// Bit patterns, so that `assert_eq!` compares exactly and prints readably.
fn bits(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn matches_the_sequential_reference_bit_for_bit() {
    let (size, iterations) = (9, 5);
    let expected = bits(&reference(size, iterations));
    for threads in [1, 2, 3, 7] {
        assert_eq!(
            bits(&residuals(threads, size, iterations)),
            expected,
            "{threads} threads"
        );
    }
}

#[test]
fn more_threads_than_rows_still_finish() {
    // Threads 8.. own no rows and no planes but still relay the pipeline.
    let (size, iterations) = (8, 3);
    let expected = bits(&reference(size, iterations));
    for threads in [8, 9, 13, 20] {
        assert_eq!(
            bits(&residuals(threads, size, iterations)),
            expected,
            "{threads} threads"
        );
    }
}

#[test]
fn sleeping_waits_match_the_reference_and_never_miss_a_wake_up() {
    // No polling at all: every pipeline wait registers and parks unless the
    // step is already published, so a lost wake-up would hang this test and
    // a missed dependency would change the bits. Repeated, to give the race
    // between registering and publishing many chances to go wrong.
    let (size, iterations) = (8, 3);
    let expected = bits(&reference(size, iterations));
    for threads in [2, 3, 8, 13] {
        for _ in 0..20 {
            let solution = solve(threads, size, iterations, 0).expect("lu runs");
            assert_eq!(bits(&solution.residuals), expected, "{threads} threads");
        }
    }
}

#[test]
fn converges() {
    let r = residuals(2, 12, 30);
    assert!(
        r[30] < r[0] * 1e-6,
        "residual went from {:e} to {:e}",
        r[0],
        r[30]
    );
}

#[test]
fn zero_iterations_report_the_initial_residual() {
    let r = residuals(2, 8, 0);
    assert_eq!(r.len(), 1);
    assert!(
        r[0] > 1.0,
        "f is at least 1 everywhere and u is zero, got {:e}",
        r[0]
    );
}

#[test]
fn counts_ops_and_reports_the_catalogue_metric() {
    let solution = Solution {
        size: 10,
        iterations: 2,
        elapsed: Duration::from_millis(500),
        residuals: vec![1.0, 0.5, 0.25],
    };
    assert_eq!(solution.ops(), 1000.0 * (2.0 * 21.0 + 10.0));
    let metrics = solution.metrics();
    assert_eq!(metrics.len(), 1);
    assert_eq!(metrics[0].name, "lu_mops");
    assert_eq!(metrics[0].value, 52_000.0 / 0.5 / 1e6);
    assert_eq!(
        (solution.initial_residual(), solution.final_residual()),
        (1.0, 0.25)
    );
}

#[test]
fn refuses_zero_threads_or_size() {
    for (threads, size) in [(0, 8), (2, 0)] {
        let error = run(threads, size, 1).expect_err("refused");
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    }
}

#[test]
fn splits_into_contiguous_near_equal_ranges() {
    let cases = [
        ((8, 1), "0..8"),
        ((8, 3), "0..2 2..5 5..8"),
        ((3, 5), "0..0 0..1 1..1 1..2 2..3"),
    ];
    for ((len, parts), expect) in cases {
        let ranges: Vec<String> = (0..parts)
            .map(|t| format!("{:?}", split(len, parts, t)))
            .collect();
        assert_eq!(ranges.join(" "), expect, "{len} into {parts}");
    }
}
