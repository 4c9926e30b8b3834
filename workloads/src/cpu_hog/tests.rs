use super::*;

#[test]
fn reports_the_catalogue_metric() {
    let metrics = run(2, 0.05).expect("cpu-hog runs");
    assert_eq!(metrics.len(), 1);
    assert_eq!(metrics[0].name, "hog_ops_per_s");
    assert!(metrics[0].value > 0.0, "{metrics:?}");
}

#[test]
fn refuses_what_it_cannot_do() {
    let cases = [(0, 1.0), (1, -1.0), (1, f64::NAN), (1, f64::INFINITY)];
    for (threads, seconds) in cases {
        let error = run(threads, seconds).expect_err("refused");
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "{threads} threads, {seconds} s"
        );
    }
}
