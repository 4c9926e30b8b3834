use super::*;

#[test]
fn refuses_what_it_cannot_do() {
    let cases = [
        (0, 1, 1),
        (1, 0, 1),
        (1, 1, 0),
        (usize::MAX, usize::MAX, usize::MAX),
        (1 << 22, 1 << 21, 1 << 21),
    ];
    for (groups, fds, loops) in cases {
        let error = run(groups, fds, loops, Mode::Pipe).expect_err("refused");
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "{groups} groups of {fds} fds, {loops} loops"
        );
    }
}

#[test]
fn reads_the_mode_parameter() {
    let cases = [
        (-1, None),
        (0, Some(Mode::Pipe)),
        (1, Some(Mode::Socket)),
        (2, None),
    ];
    for (value, mode) in cases {
        assert_eq!(Mode::from_param(value), mode, "mode = {value}");
    }
}

#[test]
fn small_runs_deliver_every_message() {
    // (groups, fds, loops, mode, messages)
    let cases = [
        (1, 2, 10, Mode::Pipe, 40),
        (1, 2, 10, Mode::Socket, 40),
        (2, 3, 5, Mode::Pipe, 90),
        (2, 3, 5, Mode::Socket, 90),
        (1, 1, 1, Mode::Socket, 1),
    ];
    for (groups, fds, loops, mode, messages) in cases {
        let outcome = run(groups, fds, loops, mode).expect("hackbench runs");
        assert_eq!(
            outcome.messages, messages,
            "{groups} × {fds} × {loops} {mode:?}"
        );
        let metrics = outcome.metrics();
        assert!(
            metrics.iter().all(|m| m.value.is_finite() && m.value > 0.0),
            "{metrics:?}"
        );
    }
}

#[test]
fn a_receiver_whose_senders_stopped_early_fails() {
    for mode in [Mode::Pipe, Mode::Socket] {
        let (reader, writer) = channel(mode).expect("channel");
        // Two messages expected, one sent, then the senders are gone.
        send(&[writer], 1).expect("sent");
        let error = receive(reader, 2).expect_err("short");
        assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{mode:?}");
    }
}

#[test]
fn reports_causes_before_consequences() {
    let error = |kind| Err(io::Error::from(kind));
    let cases = [
        (vec![Ok(()), Ok(())], None),
        (
            vec![
                error(io::ErrorKind::BrokenPipe),
                error(io::ErrorKind::UnexpectedEof),
            ],
            Some(io::ErrorKind::UnexpectedEof),
        ),
        (
            vec![Ok(()), error(io::ErrorKind::BrokenPipe)],
            Some(io::ErrorKind::BrokenPipe),
        ),
    ];
    for (results, expected) in cases {
        let outcome = first_error(results).err().map(|e| e.kind());
        assert_eq!(outcome, expected);
    }
}

#[test]
fn reports_time_and_rate() {
    let outcome = Outcome {
        messages: 400_000,
        elapsed: Duration::from_millis(500),
    };
    let lines: Vec<String> = outcome.metrics().iter().map(Metric::to_line).collect();
    assert_eq!(
        lines,
        [
            "metric time_s 0.5 s lower",
            "metric messages_per_s 800000 msg/s higher",
        ]
    );
}
