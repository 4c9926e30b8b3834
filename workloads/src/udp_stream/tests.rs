use super::*;

#[test]
fn refuses_what_it_cannot_do() {
    let cases = [
        (1.0, 0),
        (1.0, MAX_MESSAGE_SIZE + 1),
        (-1.0, 1024),
        (f64::NAN, 1024),
        (f64::INFINITY, 1024),
    ];
    for (seconds, message_size) in cases {
        let error = run(seconds, message_size, None, None, &mut Vec::new()).expect_err("refused");
        assert_eq!(
            error.kind(),
            io::ErrorKind::InvalidInput,
            "{seconds} s of {message_size}-byte messages"
        );
    }
}

#[test]
fn reports_what_the_receiver_got() {
    let outcome = Outcome {
        sent: 100,
        received: 80,
        message_size: 1000,
        elapsed: Duration::from_secs(2),
    };
    let lines: Vec<String> = outcome.metrics().iter().map(Metric::to_line).collect();
    assert_eq!(
        lines,
        [
            "metric messages_per_s 40 msg/s higher",
            "metric mb_per_s 0.04 MB/s higher",
            "metric loss_pct 20 % lower",
        ]
    );
}

#[test]
fn reads_the_allowed_cpus() {
    let status = "Name:\tudp-stream-send\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n";
    assert_eq!(cpus_allowed_list(status), Some("0-1"));
    assert_eq!(cpus_allowed_list("Name:\tx\n"), None);
    // (Cpus_allowed_list, CPU, pinned to exactly that CPU)
    let cases = [
        ("0", 0, true),
        ("1", 0, false),
        ("15", 15, true),
        ("3-3", 3, true),
        ("0-1", 0, false),
        ("0,2", 0, false),
        ("", 0, false),
    ];
    for (list, cpu, only) in cases {
        assert_eq!(is_only(list, cpu), only, "{list:?} vs cpu {cpu}");
    }
}

#[test]
fn a_short_run_delivers_messages() {
    let mut log = Vec::new();
    let outcome = run(0.2, 1024, None, None, &mut log).expect("udp-stream runs");
    assert!(outcome.received > 0, "{outcome:?}");
    assert!(outcome.received <= outcome.sent, "{outcome:?}");
    let log = String::from_utf8(log).expect("text");
    let roles: Vec<&str> = log
        .lines()
        .map(|line| line.rsplit_once(' ').expect("tid line").0)
        .collect();
    assert_eq!(roles, ["tid receiver", "tid sender"], "{log}");
    let metrics = outcome.metrics();
    assert!(
        metrics[0].value > 0.0 && metrics[1].value > 0.0,
        "{metrics:?}"
    );
    assert!((0.0..=100.0).contains(&metrics[2].value), "{metrics:?}");
}

/// Takes [`PIN_WAIT`]: nobody pins the threads here, so the run waits for
/// that long and then measures unpinned.
#[test]
fn says_when_it_was_not_pinned() {
    let mut log = Vec::new();
    let outcome = run(0.05, 64, Some(4095), None, &mut log).expect("udp-stream runs");
    assert!(outcome.received > 0, "{outcome:?}");
    let log = String::from_utf8(log).expect("text");
    assert!(
        log.contains("udp-stream: sender pinned=false cpu=4095 allowed="),
        "{log}"
    );
    assert!(!log.contains("receiver pinned"), "{log}");
}
