use super::*;

#[test]
fn the_runner_does_not_evaluate_the_job() {
    assert!(RUNNER.contains("set -- \"$@\" \"$a\""));
    assert!(RUNNER.contains("exec \"$@\"' farm-job \"$@\" >"));
    assert!(!RUNNER.contains("eval"));
    assert!(!RUNNER.contains(". /job"));
}
