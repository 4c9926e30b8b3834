//! Generated series with known change points, from fixed seeds.

use super::*;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The noises of the benchmark, all of standard deviation 3 around a level
/// of 100 (see `bench/changepoints/bench.py`).
#[derive(Debug, Clone, Copy)]
enum Noise {
    Normal,
    /// Student t with 3 degrees of freedom.
    Heavy,
    /// One of two levels ±2.83, plus a normal of standard deviation 1.
    Bimodal,
}

const NOISES: [Noise; 3] = [Noise::Normal, Noise::Heavy, Noise::Bimodal];

use crate::normal::draw as gauss;

fn noise(rng: &mut StdRng, kind: Noise) -> f64 {
    match kind {
        Noise::Normal => 3.0 * gauss(rng),
        Noise::Heavy => {
            // t₃ = Z / sqrt(χ²₃ / 3), variance 3.
            let z = gauss(rng);
            let chi2: f64 = (0..3).map(|_| gauss(rng).powi(2)).sum();
            3.0 * z / (chi2 / 3.0).sqrt() / 3f64.sqrt()
        }
        Noise::Bimodal => {
            let offset = (9.0f64 - 1.0).sqrt();
            let side = if rng.random::<bool>() {
                offset
            } else {
                -offset
            };
            side + gauss(rng)
        }
    }
}

/// `n` points around 100 whose level is multiplied by `1 + step` at each
/// `(index, step)`.
fn series(seed: u64, n: usize, kind: Noise, steps: &[(usize, f64)]) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut level = 100.0;
    (0..n)
        .map(|i| {
            for &(at, step) in steps {
                if at == i {
                    level *= 1.0 + step;
                }
            }
            level + noise(&mut rng, kind)
        })
        .collect()
}

fn indices(found: &[ChangePoint]) -> Vec<usize> {
    found.iter().map(|c| c.index).collect()
}

/// Whether `found` matches `truth` one to one, each within `tol`.
fn matches(found: &[usize], truth: &[usize], tol: usize) -> bool {
    found.len() == truth.len() && found.iter().zip(truth).all(|(&f, &t)| f.abs_diff(t) <= tol)
}

#[test]
fn tiny_and_constant_series_have_no_change_points() {
    let options = Options::default();
    let cases: Vec<Vec<f64>> = vec![
        vec![],
        vec![1.0],
        vec![1.0, 2.0],
        vec![5.0; 3],
        vec![7.0; 100],
        vec![-3.5; 10_000],
        (0..9).map(f64::from).collect(),
    ];
    for values in cases {
        assert_eq!(detect(&values, &options), vec![], "{values:?}");
    }
}

#[test]
fn a_clean_step_is_found_exactly() {
    let mut values = vec![10.0; 50];
    values.extend([20.0; 50]);
    let found = detect(&values, &Options::default());
    assert_eq!(indices(&found), vec![50]);
    assert_eq!(found[0].mean_before, 10.0);
    assert_eq!(found[0].mean_after, 20.0);
    assert!(found[0].p_value < 0.01);
}

#[test]
fn ties_and_discrete_values_are_handled() {
    // Integer counts with many ties, stepping from mostly 3 to mostly 5.
    let mut rng = StdRng::seed_from_u64(9);
    let values: Vec<f64> = (0..400)
        .map(|i| {
            let base = if i < 250 { 3.0 } else { 5.0 };
            base + f64::from(rng.random_range(0..3u8)) - 1.0
        })
        .collect();
    let found = detect(&values, &Options::default());
    assert!(
        matches(&indices(&found), &[250], 3),
        "{:?}",
        indices(&found)
    );
}

#[test]
fn single_ten_percent_step_in_ten_thousand_points() {
    // The case: Otava's defaults report a dozen change points here.
    for (i, kind) in NOISES.into_iter().enumerate() {
        let values = series(100 + i as u64, 10_000, kind, &[(6_180, 0.10)]);
        let found = detect(&values, &Options::default());
        assert!(
            matches(&indices(&found), &[6_180], 5),
            "{kind:?}: {:?}",
            indices(&found)
        );
        assert!(found[0].p_value < 1e-6, "{kind:?}: {found:?}");
        // The means are those of the two sides.
        assert!((found[0].mean_before - 100.0).abs() < 0.5, "{found:?}");
        assert!((found[0].mean_after - 110.0).abs() < 0.5, "{found:?}");
    }
}

#[test]
fn single_steps_of_each_size_and_noise() {
    for (i, kind) in NOISES.into_iter().enumerate() {
        for (j, &step) in [0.05, -0.10, 0.20].iter().enumerate() {
            let seed = 200 + 10 * i as u64 + j as u64;
            let values = series(seed, 1_000, kind, &[(400, step)]);
            let found = indices(&detect(&values, &Options::default()));
            assert!(matches(&found, &[400], 10), "{kind:?} {step}: {found:?}");
        }
    }
}

#[test]
fn several_steps_under_each_noise() {
    let steps = [(150, 0.08), (420, -0.12), (600, 0.06), (810, -0.10)];
    let truth: Vec<usize> = steps.iter().map(|s| s.0).collect();
    for (i, kind) in NOISES.into_iter().enumerate() {
        let values = series(300 + i as u64, 1_000, kind, &steps);
        let found = indices(&detect(&values, &Options::default()));
        assert!(matches(&found, &truth, 10), "{kind:?}: {found:?}");
    }
}

#[test]
fn changes_that_cancel_out_are_found() {
    // Up then back down: the whole series' best split is weak, the
    // seeded intervals or the recursion must still find both edges.
    let steps = [(40, 0.08), (60, -0.08 / 1.08)];
    for (i, kind) in NOISES.into_iter().enumerate() {
        let values = series(400 + i as u64, 100, kind, &steps);
        let found = indices(&detect(&values, &Options::default()));
        assert!(matches(&found, &[40, 60], 3), "{kind:?}: {found:?}");
    }
}

#[test]
fn few_false_change_points_without_change() {
    // 40 series of each noise at each of the lengths 100 and 1,000. Each
    // segment left without change gets two tests at the default level of
    // 0.01 (whole segment, seeded intervals), so about 2% of such series may
    // show a false change (sometimes a short bump: two or three points).
    for (i, kind) in NOISES.into_iter().enumerate() {
        let mut with_false = 0;
        for j in 0..40u64 {
            for n in [100, 1_000] {
                let values = series(500 + 100 * i as u64 + j, n, kind, &[]);
                with_false += usize::from(!detect(&values, &Options::default()).is_empty());
            }
        }
        assert!(
            with_false <= 4,
            "{kind:?}: {with_false} of 80 series with false change points"
        );
    }
}

#[test]
fn no_change_in_a_long_series() {
    for (i, kind) in NOISES.into_iter().enumerate() {
        let values = series(600 + i as u64, 10_000, kind, &[]);
        let found = detect(&values, &Options::default());
        assert!(found.len() <= 1, "{kind:?}: {found:?}");
    }
}

#[test]
fn means_are_those_of_the_segments_between_change_points() {
    let values = series(700, 600, Noise::Normal, &[(200, 0.2), (400, -0.25)]);
    let found = detect(&values, &Options::default());
    let cut: Vec<usize> = indices(&found);
    assert!(matches(&cut, &[200, 400], 3), "{cut:?}");
    let mean = |a: usize, b: usize| values[a..b].iter().sum::<f64>() / (b - a) as f64;
    let bounds = [0, cut[0], cut[1], values.len()];
    for (k, c) in found.iter().enumerate() {
        assert_eq!(c.mean_before, mean(bounds[k], bounds[k + 1]));
        assert_eq!(c.mean_after, mean(bounds[k + 1], bounds[k + 2]));
    }
}

#[test]
fn detection_is_reproducible_and_seeded() {
    let values = series(800, 300, Noise::Heavy, &[(100, 0.04), (200, -0.04)]);
    let options = Options::default();
    assert_eq!(detect(&values, &options), detect(&values, &options));
    // Another seed may change a borderline p-value, not the clear changes.
    let other = Options {
        seed: 42,
        ..Options::default()
    };
    let a = indices(&detect(&values, &options));
    let b = indices(&detect(&values, &other));
    assert!(matches(&a, &[100, 200], 5), "{a:?}");
    assert!(matches(&b, &[100, 200], 5), "{b:?}");
}

#[test]
fn min_segment_len_is_respected() {
    // Three outliers in a row are shorter than the minimum of five.
    let mut values = vec![0.0; 30];
    values.extend([50.0; 3]);
    values.extend([0.0; 30]);
    assert_eq!(detect(&values, &Options::default()), vec![]);
    // Change points every 12 points: none closer than the minimum, to each
    // other or to the ends, whatever it is.
    let steps: Vec<(usize, f64)> = (1..20)
        .map(|k| (12 * k, if k % 2 == 1 { 0.2 } else { -0.2 / 1.2 }))
        .collect();
    let values = series(1_000, 240, Noise::Normal, &steps);
    for min_len in [1, 3, 5, 8, 20] {
        let options = Options {
            min_segment_len: min_len,
            ..Options::default()
        };
        let mut bounds = vec![0];
        bounds.extend(indices(&detect(&values, &options)));
        bounds.push(values.len());
        assert!(
            bounds.windows(2).all(|w| w[1] - w[0] >= min_len),
            "min {min_len}: {bounds:?}"
        );
    }
}

#[test]
fn invalid_input_is_an_error() {
    let options = Options::default();
    // NaN is not equal to itself: compare the shape, then the message.
    let err = try_detect(&[1.0, f64::NAN], &options).unwrap_err();
    assert!(matches!(err, Error::NotFinite { index: 1, .. }), "{err:?}");
    assert_eq!(err.to_string(), "value NaN at index 1 is not finite");
    assert!(matches!(
        try_detect(&[1.0, f64::INFINITY], &options),
        Err(Error::NotFinite { index: 1, .. })
    ));
    for bad in [0.0, -0.1, 1.5, f64::NAN] {
        let options = Options {
            max_p_value: bad,
            ..Options::default()
        };
        assert!(matches!(
            try_detect(&[1.0], &options),
            Err(Error::MaxPValue(_))
        ));
    }
    let options = Options {
        min_segment_len: 0,
        ..Options::default()
    };
    assert_eq!(try_detect(&[1.0], &options), Err(Error::MinSegmentLen));
}

#[test]
#[should_panic(expected = "not finite")]
fn detect_panics_on_non_finite_values() {
    detect(&[1.0, f64::NEG_INFINITY], &Options::default());
}

#[test]
fn serfling_bound_decides_clear_steps_only() {
    // A clean step of 40 + 40 is decided without permutations; on noise the
    // bound says nothing (1).
    let mut order = Vec::new();
    let mut c = Vec::new();
    let step: Vec<f64> = (0..80)
        .map(|i| f64::from(u8::from(i >= 40)) + f64::from(i) * 1e-3)
        .collect();
    ranks::centred_ranks(&step, &mut order, &mut c);
    let split = ranks::best_split(&c, 5).unwrap();
    let bound = significance::serfling_bound(&c, split.stat, 5);
    assert!(bound < 0.01, "{bound}");
    let noise = series(900, 80, Noise::Normal, &[]);
    ranks::centred_ranks(&noise, &mut order, &mut c);
    let split = ranks::best_split(&c, 5).unwrap();
    assert_eq!(significance::serfling_bound(&c, split.stat, 5), 1.0);
}

#[test]
fn centred_ranks_use_mid_ranks() {
    let mut order = Vec::new();
    let mut c = Vec::new();
    ranks::centred_ranks(&[3.0, 1.0, 3.0, 2.0], &mut order, &mut c);
    // Ranks 3.5, 1, 3.5, 2 doubled minus 5.
    assert_eq!(c, vec![2.0, -3.0, 2.0, -1.0]);
    assert_eq!(c.iter().sum::<f64>(), 0.0);
}

#[test]
fn seeded_intervals_cover_the_segment() {
    let family = multiscale::intervals(100, 5);
    assert!(
        family
            .iter()
            .all(|&(a, b)| a < b && b <= 100 && b - a >= 10)
    );
    assert!(!family.contains(&(0, 100)));
    // Every point lies in an interval of each length.
    let mut lengths: Vec<usize> = family.iter().map(|&(a, b)| b - a).collect();
    lengths.dedup();
    for len in lengths {
        for i in 0..100 {
            assert!(family.iter().any(|&(a, b)| b - a == len && a <= i && i < b));
        }
    }
    assert!(multiscale::intervals(15, 5).is_empty());
}

/// What a history looks like besides its steps: each no-change family of
/// `bench/changepoints/bench.py` (standard deviation 3 around 100).
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// A line moving the level by this much over the series.
    Trend(f64),
    /// A random walk of steps of this standard deviation.
    Walk(f64),
    /// AR(1) noise with this coefficient, of standard deviation 3, alone.
    Ar(f64),
    /// A sine of this period (points) and amplitude.
    Seasonal(f64, f64),
}

/// `n` points around 100 with `shape` and the steps `(index, step)`,
/// which multiply the level as in [`series`].
fn shaped(seed: u64, n: usize, shape: Shape, steps: &[(usize, f64)]) -> Vec<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut level = 100.0;
    let mut walk = 0.0;
    let mut ar = 3.0 * gauss(&mut rng);
    (0..n)
        .map(|i| {
            for &(at, step) in steps {
                if at == i {
                    level *= 1.0 + step;
                }
            }
            match shape {
                Shape::Trend(total) => {
                    level + total * i as f64 / (n - 1) as f64 + 3.0 * gauss(&mut rng)
                }
                Shape::Walk(sd) => {
                    walk += sd * gauss(&mut rng);
                    level + walk + 3.0 * gauss(&mut rng)
                }
                Shape::Ar(phi) => {
                    let v = level + ar;
                    ar = phi * ar + 3.0 * (1.0 - phi * phi).sqrt() * gauss(&mut rng);
                    v
                }
                Shape::Seasonal(period, amplitude) => {
                    let angle = 2.0 * std::f64::consts::PI * i as f64 / period;
                    level + amplitude * angle.sin() + 3.0 * gauss(&mut rng)
                }
            }
        })
        .collect()
}

#[test]
fn a_trend_is_not_cut_into_a_staircase() {
    // Twenty series of 1,000 points each way, moving the level by 10 to 30:
    // binary segmentation alone cut each into a staircase (6.45 false
    // change points per 1,000 points in the benchmark).
    let mut false_points = 0;
    for j in 0..20u64 {
        let total = (if j % 2 == 0 { 1.0 } else { -1.0 }) * (10.0 + j as f64);
        let values = shaped(1_000 + j, 1_000, Shape::Trend(total), &[]);
        false_points += detect(&values, &Options::default()).len();
    }
    assert_eq!(false_points, 0);
}

#[test]
fn short_trends_are_not_cut_into_a_staircase() {
    // A thousand histories of 100 points, lines moving the level by 10 to
    // 30 up or down under noise of 3: the trend stage judges each run of
    // steps by sums of squares over the noise variance, and where that
    // variance read low the staircase stood. 73 in 100,000 points when
    // written; 105 with half the squared MAD as the variance.
    let false_points = short_false_points(2_100, |j| {
        let sign = if j % 2 == 0 { 1.0 } else { -1.0 };
        Shape::Trend(sign * (10.0 + 20.0 * (j / 2 % 100) as f64 / 100.0))
    });
    assert!(false_points <= 90, "{false_points} in 100,000 points");
}

#[test]
fn ar1_noise_does_not_make_change_points() {
    // φ = 0.8 makes a mean over n points vary as if over n / 9: the
    // permutation test alone, which assumes exchangeable values, found
    // 11.85 false change points per 1,000 points in the benchmark.
    let mut false_points = 0;
    for j in 0..20u64 {
        let values = shaped(1_100 + j, 1_000, Shape::Ar(0.8), &[]);
        false_points += detect(&values, &Options::default()).len();
    }
    // 2 in 20,000 points when written.
    assert!(false_points <= 20, "{false_points} in 20,000 points");
}

#[test]
fn short_histories_of_persistent_noise_are_not_cut_into_steps() {
    // A thousand histories of 100 points, AR(1) noise with φ from 0.3 to
    // 0.8: the dependence stage's gate, on the residuals around segments
    // that follow the noise's runs, stays shut on most of them; judged
    // whole against AR(1) noise, most of the steps go. 120 in 100,000
    // points when written; 244 without AR(1) noise as an alternative.
    let false_points =
        short_false_points(1_700, |j| Shape::Ar(0.3 + 0.5 * (j % 100) as f64 / 100.0));
    assert!(false_points <= 150, "{false_points} in 100,000 points");
}

/// Change points found in a thousand histories of 100 points without
/// change, the `j`-th of shape `shape(j)` and seed `seed + j`.
fn short_false_points(seed: u64, shape: impl Fn(u64) -> Shape) -> usize {
    (0..1_000u64)
        .map(|j| detect(&shaped(seed + j, 100, shape(j), &[]), &Options::default()).len())
        .sum()
}

#[test]
fn steps_in_persistent_noise_are_still_found() {
    // AR(1) noise of φ = 0.5 looks to the local-level model like a level
    // that moves 0.8 noise deviations a point; under it, steps of 8% and
    // 10% were not abrupt, and both went in one series of ten until
    // persistent noise was an alternative of its own.
    let extra = extra_beside_steps(1_800, 10, Shape::Ar(0.5), &[(300, 0.08), (650, -0.10)]);
    assert_eq!(extra, 0);
}

/// Over `series` series of 1,000 points with `shape` and `steps` (seeds
/// from `seed`), asserts that every step is found within 5 points in each,
/// and returns how many other change points were found in all.
fn extra_beside_steps(seed: u64, series: u64, shape: Shape, steps: &[(usize, f64)]) -> usize {
    let mut extra = 0;
    for j in 0..series {
        let values = shaped(seed + j, 1_000, shape, steps);
        let found = indices(&detect(&values, &Options::default()));
        for &(truth, _) in steps {
            assert!(
                found.iter().any(|&f| f.abs_diff(truth) <= 5),
                "{j}: {found:?}"
            );
        }
        extra += found.len() - steps.len();
    }
    extra
}

#[test]
fn steps_on_a_trend_are_still_found() {
    // A rise of 20 over the series and steps of 8% and −10% on top: each
    // found within 5 points in every series. A stretch of the trend between
    // a step and the end may keep one stair (a run of one is not judged:
    // see `trend::MIN_RUN`).
    let extra = extra_beside_steps(1_200, 5, Shape::Trend(20.0), &[(300, 0.08), (700, -0.10)]);
    // 2 when written.
    assert!(extra <= 2, "{extra} false change points");
}

#[test]
fn a_wandering_level_is_not_cut_into_steps() {
    // A random walk of 0.3 a point under noise of 3: over 1,000 points it
    // wanders by ±10. Binary segmentation alone kept 7.75 per 1,000 in the
    // benchmark, with the trend and dependence stages 6.66; the local-level
    // stage ([`level`]) takes it to 0.4 there.
    let mut found = 0;
    for j in 0..20u64 {
        let values = shaped(1_300 + j, 1_000, Shape::Walk(0.3), &[]);
        found += detect(&values, &Options::default()).len();
    }
    // The goal of one per 1,000 points; 12 when written.
    assert!(found <= 20, "{found} in 20,000 points");
}

#[test]
fn a_seasonal_swing_is_not_cut_into_steps() {
    // Sines of periods 20 to 96 and amplitudes 3 to 6 under noise of 3: the
    // stages before the local level kept 16 false change points per 1,000
    // points at this length.
    let mut found = 0;
    for j in 0..20u64 {
        let shape = Shape::Seasonal(20.0 + 4.0 * j as f64, 3.0 + 0.15 * j as f64);
        let values = shaped(1_400 + j, 1_000, shape, &[]);
        found += detect(&values, &Options::default()).len();
    }
    // The goal of one per 1,000 points; none when written.
    assert!(found <= 20, "{found} in 20,000 points");
}

#[test]
fn steps_on_a_wandering_level_are_still_found() {
    // The same walk with steps of 10% and −8%: a wander moves by 0.3 a
    // point, a step by ten at once; each is found within 5 points.
    let extra = extra_beside_steps(1_500, 10, Shape::Walk(0.3), &[(400, 0.10), (750, -0.08)]);
    // One per 1,000 points at most; 2 when written.
    assert!(extra <= 10, "{extra} false change points");
}

#[test]
fn a_short_steady_drift_has_no_change_points() {
    // 24 matrices losing 0.4% each, ±0.25% of noise: too few points for
    // the variogram, not too few for the noise level the trend is judged by.
    let wobble = [
        0.002, -0.0015, 0.0, 0.001, -0.002, 0.0025, -0.001, 0.0005, -0.0025, 0.0015, -0.0005, 0.001,
    ];
    let values: Vec<f64> = (0..24)
        .map(|i| 10_000.0 * (1.0 - 0.004 * f64::from(i)) * (1.0 + wobble[i as usize % 12]))
        .collect();
    assert_eq!(detect(&values, &Options::default()), vec![]);
    // The same noise with a 20% step in the middle: one change point.
    let step: Vec<f64> = (0..24)
        .map(|i| if i < 12 { 10_000.0 } else { 8_000.0 } * (1.0 + wobble[i as usize % 12]))
        .collect();
    assert_eq!(indices(&detect(&step, &Options::default())), vec![12]);
}

#[test]
fn a_step_on_a_steep_slope_is_not_taken_for_a_wander() {
    // A slope of 0.1 a point, a step of 5 at 60, and noise from a tenth of
    // the slope to half of it: the stages before the wander place the step
    // a few points off on either side; the staircase must still beat the
    // wander (it once lost, and the step with it).
    for sd in [0.01, 0.1, 0.5] {
        let mut rng = StdRng::seed_from_u64(1_600);
        let values: Vec<f64> = (0..300)
            .map(|i| {
                100.0 + 0.1 * i as f64 + if i >= 60 { 5.0 } else { 0.0 } + sd * gauss(&mut rng)
            })
            .collect();
        let found = indices(&detect(&values, &Options::default()));
        assert!(
            found.iter().any(|&f| f.abs_diff(60) <= 5),
            "noise {sd}: {found:?}"
        );
    }
}

#[test]
fn short_seasonal_swings_are_not_cut_into_steps() {
    // A thousand histories of 100 points, sines of periods 20 to 100 and
    // amplitudes 3 to 6 under noise of 3: at this length the local level
    // that follows a swing follows the noise as well, and the staircase
    // stood. 1,770 in 100,000 points without the swing as an alternative
    // of its own, 552 with it, when written.
    let false_points = short_false_points(1_900, |j| {
        let period = 20.0 + 80.0 * (j % 100) as f64 / 100.0;
        let amplitude = 3.0 + 3.0 * (j / 100) as f64 / 10.0;
        Shape::Seasonal(period, amplitude)
    });
    assert!(false_points <= 700, "{false_points} in 100,000 points");
}

#[test]
fn a_regression_and_its_fix_are_not_taken_for_a_swing() {
    // Up by 8% at 30 and back at 65 in 100 points is half a period of a
    // sine of 70: both steps are found within 5 points in every series.
    // With the swing costing only its amplitude and phase (no
    // `SWING_EXTRA`), three of these hundred steps went.
    let mut missed = 0;
    for j in 0..50u64 {
        let values = shaped(
            2_000 + j,
            100,
            Shape::Trend(0.0),
            &[(30, 0.08), (65, -0.08 / 1.08)],
        );
        let found = indices(&detect(&values, &Options::default()));
        missed += [30, 65]
            .iter()
            .filter(|&&t| !found.iter().any(|&f| f.abs_diff(t) <= 5))
            .count();
    }
    assert_eq!(missed, 0);
}
