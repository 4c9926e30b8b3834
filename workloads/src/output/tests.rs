use super::*;

/// Parses `line` and renders the outcome as text, so that each case below is
/// one line of data.
fn check(line: &str, expect: &str) {
    let actual = match parse_metric_line(line) {
        Ok(None) => "none".to_string(),
        Ok(Some(m)) => format!("{} {} {} {:?}", m.name, m.value, m.unit, m.direction),
        Err(e) => format!("error: {e}"),
    };
    assert_eq!(actual, expect, "line {line:?}");
}

#[test]
fn parses_metric_lines() {
    let cases = [
        (
            "metric lu_mops 1234.5 Mop/s higher",
            "lu_mops 1234.5 Mop/s HigherIsBetter",
        ),
        ("metric wall 2 s lower", "wall 2 s LowerIsBetter"),
        ("metric x -0.5 ratio lower", "x -0.5 ratio LowerIsBetter"),
        ("metric x 1e3 ops/s higher", "x 1000 ops/s HigherIsBetter"),
        ("metric x 1 s higher\r", "x 1 s HigherIsBetter"),
        ("metric  x   1  s  higher", "x 1 s HigherIsBetter"),
    ];
    for (line, expect) in cases {
        check(line, expect);
    }
}

#[test]
fn ignores_other_lines() {
    for line in [
        "",
        "metric",
        "metrics x 1 s higher",
        " metric x 1 s higher",
        "lu: residual 1e-3",
    ] {
        check(line, "none");
    }
}

#[test]
fn names_what_is_wrong() {
    let cases = [
        (
            "metric ",
            "error: metric line has 0 fields after `metric`, expected 4 (name value unit lower|higher)",
        ),
        (
            "metric x 1 s",
            "error: metric line has 3 fields after `metric`, expected 4 (name value unit lower|higher)",
        ),
        (
            "metric x 1 s higher extra",
            "error: metric line has 5 fields after `metric`, expected 4 (name value unit lower|higher)",
        ),
        (
            "metric x one s higher",
            "error: metric `x` has value `one`, which is not a number",
        ),
        (
            "metric x 1,5 s higher",
            "error: metric `x` has value `1,5`, which is not a number",
        ),
        (
            "metric x NaN s higher",
            "error: metric `x` has value `NaN`, which is not finite",
        ),
        (
            "metric x inf s higher",
            "error: metric `x` has value `inf`, which is not finite",
        ),
        (
            "metric x -infinity s lower",
            "error: metric `x` has value `-infinity`, which is not finite",
        ),
        (
            "metric x 1e999 s lower",
            "error: metric `x` has value `1e999`, which is not finite",
        ),
        (
            "metric x 1 s better",
            "error: metric `x` has direction `better`, expected `lower` or `higher`",
        ),
        (
            "metric x 1 s Higher",
            "error: metric `x` has direction `Higher`, expected `lower` or `higher`",
        ),
    ];
    for (line, expect) in cases {
        check(line, expect);
    }
}

#[test]
fn formats_metric_lines() {
    let cases = [
        (
            ("lu_mops", 1234.5, "Mop/s", Direction::HigherIsBetter),
            "metric lu_mops 1234.5 Mop/s higher",
        ),
        (
            ("wall", 2.0, "s", Direction::LowerIsBetter),
            "metric wall 2 s lower",
        ),
        (
            ("tiny", 1e-7, "s", Direction::LowerIsBetter),
            "metric tiny 0.0000001 s lower",
        ),
    ];
    for ((name, value, unit, direction), expect) in cases {
        assert_eq!(format_metric(name, value, unit, direction), expect);
    }
}

#[test]
fn round_trips_every_finite_value_exactly() {
    let values = [
        0.0,
        -0.0,
        0.1,
        1.0 / 3.0,
        -2.5e-300,
        5e-324,
        1.7976931348623157e308,
        123456789.125,
    ];
    for value in values {
        for direction in [Direction::LowerIsBetter, Direction::HigherIsBetter] {
            let metric = Metric {
                name: "m".to_string(),
                value,
                unit: "u".to_string(),
                direction,
            };
            let parsed = parse_metric_line(&metric.to_line());
            assert_eq!(parsed, Ok(Some(metric.clone())), "value {value:e}");
            // `==` treats 0.0 and -0.0 as equal; the bits must survive too.
            let bits = parsed.ok().flatten().map(|m| m.value.to_bits());
            assert_eq!(bits, Some(value.to_bits()), "value {value:e}");
        }
    }
}
