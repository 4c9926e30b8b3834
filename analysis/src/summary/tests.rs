use super::*;
use proptest::prelude::*;

#[test]
fn median_table() {
    let cases: &[(&[f64], Option<f64>)] = &[
        (&[], None),
        (&[f64::NAN], None),
        (&[3.0], Some(3.0)),
        (&[3.0, 1.0], Some(2.0)),
        (&[5.0, 1.0, 3.0], Some(3.0)),
        (&[1.0, f64::NAN, 9.0, 4.0], Some(4.0)),
        (&[-1.0, -3.0, -2.0, -4.0], Some(-2.5)),
    ];
    for (input, want) in cases {
        assert_eq!(median(input), *want, "median of {input:?}");
    }
}

#[test]
fn ratio_table() {
    let cases = [
        (2.0, 1.0, Some(2.0)),
        (1.0, 4.0, Some(0.25)),
        (1.0, 0.0, None),
        (f64::INFINITY, 1.0, None),
        (1.0, f64::NAN, None),
    ];
    for (c, b, want) in cases {
        assert_eq!(ratio(c, b), want, "ratio {c}/{b}");
    }
}

proptest! {
    #[test]
    fn median_is_order_free_and_within_range(mut v in proptest::collection::vec(-1e9f64..1e9, 1..50)) {
        let m = median(&v).unwrap();
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        prop_assert!(lo <= m && m <= hi);
        v.reverse();
        prop_assert_eq!(median(&v), Some(m));
    }
}
