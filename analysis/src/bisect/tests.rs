use super::simulation::{Truth, bisect};
use super::*;

const POLICY: Policy = Policy {
    runs: 10,
    max_runs: 30,
};

fn one(kernels: usize, culprit: usize, effect: f64) -> Truth {
    Truth {
        kernels,
        culprits: vec![(culprit, effect)],
        noise: 0.05,
        failing: Vec::new(),
    }
}

fn culprit(o: &Outcome) -> Option<(usize, bool)> {
    match *o {
        Outcome::Culprit {
            first_bad,
            confirmation,
            ..
        } => Some((first_bad, confirmation.confirmed)),
        _ => None,
    }
}

#[test]
fn ranges_of_2_to_1000_kernels_end_at_the_culprit_confirmed() {
    let mut right = 0;
    for kernels in [2, 3, 5, 17, 100, 1000] {
        for c in [1, kernels / 2, kernels - 1] {
            let r = bisect(&one(kernels, c, 0.10), POLICY, 0.02, c as u64).unwrap();
            let (first_bad, confirmed) = culprit(&r.outcome).expect("a culprit");
            // A false call in some step (each at most alpha / looks) can
            // mislead the search; its confirmation then refuses it.
            if first_bad != c {
                assert!(
                    !confirmed,
                    "{kernels} kernels, culprit {c}: {:?}",
                    r.outcome
                );
                continue;
            }
            assert!(confirmed, "{kernels} kernels, culprit {c}: {:?}", r.outcome);
            right += 1;
            // Every step halves the range: at most ceil(log2(kernels - 1)).
            let most = (kernels as f64 - 1.0).log2().ceil() as usize;
            assert!(r.steps <= most, "{kernels} kernels: {} steps", r.steps);
        }
    }
    // One of the 18 (1,000 kernels, the culprit last) is refused so.
    assert_eq!(right, 17);
}

#[test]
fn a_wrong_culprit_is_never_named_with_confidence() {
    // 2%, 5% and 10% slowdowns under 5% noise, culprits all over ranges of
    // up to 1,000: a confirmed culprit is always the right one.
    let mut right = 0;
    for trial in 0..150u64 {
        let kernels = [2, 9, 64, 1000][(trial % 4) as usize];
        let effect = [0.02, 0.05, 0.10][(trial % 3) as usize];
        let c = 1 + (trial as usize * 7919) % (kernels - 1);
        let r = bisect(&one(kernels, c, effect), POLICY, 0.02, 1000 + trial).unwrap();
        match r.outcome {
            Outcome::Culprit { first_bad, .. } if r.outcome.confirmed() => {
                assert_eq!(first_bad, c, "trial {trial}: {kernels} kernels, {effect}");
                right += 1;
            }
            Outcome::Unresolved {
                last_good,
                first_bad,
                ..
            } if r.outcome.confirmed() => assert!(last_good < c && c <= first_bad, "trial {trial}"),
            _ => {}
        }
    }
    // Most are found: the 2% ones are the hard third.
    assert!(right >= 80, "{right} of 150 found");
}

#[test]
fn ends_that_do_not_differ_end_the_bisection_at_its_first_step() {
    let r = bisect(&one(100, 50, 0.0), POLICY, 0.02, 7).unwrap();
    assert!(
        matches!(r.outcome, Outcome::EndsDoNotDiffer { .. }),
        "{:?}",
        r.outcome
    );
    assert_eq!(r.steps, 0);
    // Rounds of 10 runs up to the cap of 30: three rounds.
    assert_eq!(r.rounds, 3);
}

#[test]
fn two_culprits_give_one_of_them_or_say_unknown() {
    for seed in 0..20 {
        let truth = Truth {
            kernels: 100,
            culprits: vec![(30, 0.05), (70, 0.05)],
            noise: 0.05,
            failing: Vec::new(),
        };
        let r = bisect(&truth, POLICY, 0.02, seed).unwrap();
        match r.outcome {
            Outcome::Culprit { first_bad, .. } if r.outcome.confirmed() => {
                assert!([30, 70].contains(&first_bad), "seed {seed}: {first_bad}")
            }
            Outcome::Unresolved {
                last_good,
                first_bad,
                ..
            } if r.outcome.confirmed() => assert!(
                (last_good < 30 && 30 <= first_bad) || (last_good < 70 && 70 <= first_bad),
                "seed {seed}: {last_good}..={first_bad}"
            ),
            ref o => assert!(
                matches!(o, Outcome::Culprit { .. } | Outcome::Unresolved { .. }),
                "seed {seed}: {o:?}"
            ),
        }
    }
}

#[test]
fn a_kernel_that_fails_is_set_aside_and_a_failed_culprit_leaves_a_range() {
    // The kernel before the culprit does not build: the culprit is still found.
    let mut t = one(16, 9, 0.10);
    t.failing = vec![8];
    let r = bisect(&t, POLICY, 0.02, 3).unwrap();
    // 8 failed, so the last good kernel is 7 and the range 8..=9 is left,
    // confirmed by 7 and 9's own comparison.
    let range = |o: &Outcome| match *o {
        Outcome::Unresolved {
            last_good,
            first_bad,
            confirmation,
        } => Some((last_good, first_bad, confirmation.confirmed)),
        _ => None,
    };
    assert_eq!(range(&r.outcome), Some((7, 9, true)), "{:?}", r.outcome);
    assert_eq!(r.steps, 4);
    // The culprit itself does not build: the outcome is the range around it.
    t.failing = vec![9];
    let r = bisect(&t, POLICY, 0.02, 3).unwrap();
    assert_eq!(range(&r.outcome), Some((8, 10, true)), "{:?}", r.outcome);
    // An end that fails ends it.
    t.failing = vec![15];
    let r = bisect(&t, POLICY, 0.02, 3).unwrap();
    assert_eq!(r.outcome, Outcome::Failed { kernel: 15 });
}

#[test]
fn a_search_that_sets_aside_step_after_step_stops_at_max_steps() {
    // Nothing between the ends builds: each step sets one kernel aside,
    // until MAX_STEPS, then the bounds (the ends) are confirmed.
    let mut t = one(200, 100, 0.10);
    t.failing = (1..199).collect();
    let r = bisect(&t, POLICY, 0.02, 5).unwrap();
    assert_eq!(r.steps, MAX_STEPS);
    let Outcome::Unresolved {
        last_good,
        first_bad,
        confirmation,
    } = r.outcome
    else {
        panic!("{:?}", r.outcome);
    };
    assert_eq!(
        (last_good, first_bad, confirmation.confirmed),
        (0, 199, true)
    );
}

#[test]
fn the_plan_measures_the_middle_beside_both_ends_then_the_neighbours() {
    let mut b = Bisector::new(9, POLICY, Direction::LowerIsBetter, Options::default()).unwrap();
    let at = |v: f64| (0..10).map(|i| v + f64::from(i) * 0.01).collect::<Vec<_>>();
    assert_eq!(
        b.plan(),
        Action::Measure {
            kernels: vec![0, 4, 8],
            runs: 10
        }
    );
    assert_eq!(b.focus(), Some((0, 1)));
    b.observe(vec![at(1.0), at(1.0), at(2.0)]).unwrap();
    assert_eq!(b.steps[0].call, Call::SameAsGood);
    assert_eq!(b.bounds(), (4, 8));
    assert_eq!(
        b.plan(),
        Action::Measure {
            kernels: vec![0, 6, 8],
            runs: 10
        }
    );
    b.observe(vec![at(1.0), at(2.0), at(2.0)]).unwrap();
    assert_eq!(b.steps[1].call, Call::SameAsBad);
    b.observe(vec![at(1.0), at(1.0), at(2.0)]).unwrap();
    assert_eq!(b.bounds(), (5, 6));
    // The neighbours, beside both ends: the comparison is 6 against 5.
    assert_eq!(b.focus(), Some((1, 2)));
    assert_eq!(
        b.plan(),
        Action::Measure {
            kernels: vec![0, 5, 6, 8],
            runs: 10
        }
    );
    b.observe(vec![at(1.0), at(1.0), at(2.0), at(2.0)]).unwrap();
    let Action::Done(Outcome::Culprit {
        last_good,
        first_bad,
        confirmation,
    }) = b.plan()
    else {
        panic!("{:?}", b.plan());
    };
    assert_eq!((last_good, first_bad, confirmation.confirmed), (5, 6, true));
    let ratio = confirmation.ratio;
    // The Hodges-Lehmann ratio of 2.00..2.09 to 1.00..1.09, by hand: the
    // median of the 100 ratios (2 + i/100) / (1 + j/100).
    let mut r: Vec<f64> = (0..10)
        .flat_map(|i| {
            (0..10).map(move |j| (2.0 + f64::from(i) * 0.01) / (1.0 + f64::from(j) * 0.01))
        })
        .collect();
    r.sort_by(f64::total_cmp);
    let hl = (r[49] * r[50]).sqrt();
    assert!((ratio - hl).abs() < 1e-9, "{ratio} against {hl}");
    assert_eq!(b.observe(vec![]), Err(Error::Ended));
}

#[test]
fn an_unknown_step_gets_more_runs_up_to_the_cap_then_is_set_aside() {
    let mut b = Bisector::new(3, POLICY, Direction::LowerIsBetter, Options::default()).unwrap();
    let at = |v: f64, n: u32| (0..n).map(|i| v + f64::from(i) * 0.001).collect::<Vec<_>>();
    // Half its runs like good and half like bad (a kernel that is slow one
    // boot in two): in neither half, so more rounds, up to the cap of 30.
    let mid = || {
        (0..10)
            .map(|i| [1.0, 2.0][i % 2] + i as f64 * 0.001)
            .collect::<Vec<_>>()
    };
    b.observe(vec![at(1.0, 10), mid(), at(2.0, 10)]).unwrap();
    assert!(b.steps.is_empty());
    assert_eq!(
        b.plan(),
        Action::Measure {
            kernels: vec![0, 1, 2],
            runs: 10
        }
    );
    b.observe(vec![at(1.0, 10), mid(), at(2.0, 10)]).unwrap();
    b.observe(vec![at(1.0, 10), mid(), at(2.0, 10)]).unwrap();
    assert_eq!(b.steps.len(), 1);
    // It differs from both ends (p = 0.014 two-sided at 20 runs a side).
    assert_eq!(b.steps[0].call, Call::Unknown(Unknown::Between));
    assert_eq!(b.steps[0].runs, 30);
    // Nothing is left to try between the ends: their own comparison ends it.
    assert_eq!(
        b.plan(),
        Action::Measure {
            kernels: vec![0, 2],
            runs: 10
        }
    );
    b.observe(vec![at(1.0, 10), at(2.0, 10)]).unwrap();
    let Action::Done(o @ Outcome::Unresolved { .. }) = b.plan() else {
        panic!("{:?}", b.plan());
    };
    assert!(o.confirmed());
    assert!(matches!(
        o,
        Outcome::Unresolved {
            last_good: 0,
            first_bad: 2,
            ..
        }
    ));
}

#[test]
fn bad_shapes_and_policies_are_refused() {
    let d = Direction::LowerIsBetter;
    let o = Options::default();
    assert_eq!(
        Bisector::new(1, POLICY, d, o.clone()).unwrap_err(),
        Error::Kernels(1)
    );
    let p = Policy {
        runs: 1,
        max_runs: 10,
    };
    assert_eq!(
        Bisector::new(5, p, d, o.clone()).unwrap_err(),
        Error::Runs {
            runs: 1,
            max_runs: 10
        }
    );
    let mut b = Bisector::new(5, POLICY, d, o).unwrap();
    assert_eq!(
        b.observe(vec![vec![1.0; 10]]),
        Err(Error::Shape { got: 1, want: 3 })
    );
}

#[test]
fn call_names_round_trip() {
    for c in [
        Call::SameAsGood,
        Call::SameAsBad,
        Call::Unknown(Unknown::EndsDoNotDiffer),
        Call::Unknown(Unknown::Between),
        Call::Unknown(Unknown::Inconclusive),
        Call::Unknown(Unknown::Failed),
    ] {
        assert_eq!(Call::from_name(c.as_str()), Some(c));
    }
    assert_eq!(Call::from_name("good"), None);
}
