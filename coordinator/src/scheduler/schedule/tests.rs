//! Schedules on the real scheduler and store, with the cron driver on
//! tokio's paused clock: days pass in microseconds, and exactly the
//! instants that are due run, once each, across a restart.

use std::time::Duration;

use tokio::sync::oneshot;

use super::super::{Event, Handle, Reply, ScheduleEvent, spawn};
use crate::cron::{self, Clock};
use crate::matrix;
use crate::store::{Backend, Sqlite};

const HOUR: u64 = 3_600_000;

/// Sends an event and waits for its reply blocking this thread, not only
/// this task: with tokio's clock paused, an idle runtime would jump to the
/// driver's next timer while the scheduler thread works.
fn call<T: Send + 'static>(h: &Handle, make: impl FnOnce(Reply<T>) -> Event) -> T {
    let (tx, rx) = oneshot::channel();
    h.try_send(make(tx)).unwrap();
    std::thread::spawn(move || rx.blocking_recv())
        .join()
        .unwrap()
        .unwrap()
        .unwrap()
}

const HOURLY: &str = r#"
name = "hourly"
[[workloads]]
name = "cpu-hog"
params = { seconds = 1 }
[schedule]
cron = "0 * * * *"
"#;

#[tokio::test(start_paused = true)]
async fn cron_instants_run_once_each_on_paused_time_and_once_after_downtime() {
    let dir = tempfile::tempdir().unwrap();
    let open = || Sqlite::open(&dir.path().join("db")).unwrap();
    let (h, thread) = spawn(
        open(),
        crate::archive::Location::Sqlite(dir.path().join("db")),
        Default::default(),
    )
    .unwrap();
    let clock = Clock::starting_at(crate::scheduler::now_ms());
    let driver = tokio::spawn(cron::drive(h.clone(), clock));

    let matrix = Box::new(matrix::parse("hourly.toml", HOURLY).unwrap());
    let made = call(&h, |reply| Event::Submit {
        matrix,
        file_name: "hourly.toml".into(),
        source: HOURLY.into(),
        traceparent: String::new(),
        reply,
    });
    assert!(made.matrix_id.is_empty(), "a schedule runs nothing at once");
    assert!(made.schedule_id.starts_with("s-"));
    let created = clock.now_ms();
    let first = made.next_unix_ms;
    assert!(first > created && first <= created + HOUR && first % HOUR == 0);

    // Sleeps until the wall clock of the driver reads `ms`.
    let until = |ms: u64| tokio::time::sleep(Duration::from_millis(ms - clock.now_ms()));

    // No agent: the first execution is still running at the next two
    // instants, which are skipped rather than queued behind it.
    until(first + 2 * HOUR + 60_000).await;
    let s = call(&h, |reply| Event::Schedule(ScheduleEvent::List { reply }));
    assert_eq!(s[0].executions, 1, "{s:?}");
    assert_eq!(s[0].last.as_ref().unwrap().at_unix_ms, first);
    assert_eq!(s[0].next_unix_ms, first + 3 * HOUR);
    // Once it is cancelled (ended), the next instant runs again.
    let running = s[0].last.clone().unwrap().matrix_id;
    call(&h, |reply| Event::Cancel {
        matrix_id: running.parse().unwrap(),
        reply,
    });
    until(first + 3 * HOUR + 60_000).await;
    let s = call(&h, |reply| Event::Schedule(ScheduleEvent::List { reply }));
    assert_eq!(s[0].executions, 2, "{s:?}");
    let last = s[0].last.clone().unwrap();
    assert_eq!(last.at_unix_ms, first + 3 * HOUR);
    assert!(last.kernel.is_empty());
    assert_eq!(s[0].next_unix_ms, first + 4 * HOUR);
    let status = call(&h, |reply| Event::Status {
        matrix_id: last.matrix_id.parse().unwrap(),
        reply,
    });
    assert_eq!(status.schedule_id, made.schedule_id);
    assert_eq!(
        status.counts.unwrap().queued,
        1,
        "an execution is a matrix of its own"
    );

    // The coordinator goes down for five hours and comes back: one
    // execution, for the latest instant missed, none repeated.
    call(&h, |reply| Event::Cancel {
        matrix_id: last.matrix_id.parse().unwrap(),
        reply,
    });
    driver.abort();
    let _ = driver.await;
    drop(h);
    thread.join().unwrap().unwrap();
    let (h, thread) = spawn(
        open(),
        crate::archive::Location::Sqlite(dir.path().join("db")),
        Default::default(),
    )
    .unwrap();
    let down_until = clock.now_ms() + 5 * HOUR;
    let driver = tokio::spawn(cron::drive(h.clone(), Clock::starting_at(down_until)));
    tokio::time::sleep(Duration::from_millis(1)).await;
    let s = call(&h, |reply| Event::Schedule(ScheduleEvent::List { reply }));
    assert_eq!(s[0].executions, 3, "{s:?}");
    let last = s[0].last.clone().unwrap();
    assert_eq!(last.at_unix_ms, down_until - down_until % HOUR);

    // Cancelled: the next instants pass without an execution.
    let id = made.schedule_id.clone();
    call(&h, |reply| {
        Event::Schedule(ScheduleEvent::Cancel {
            schedule_id: id.parse().unwrap(),
            reply,
        })
    });
    tokio::time::sleep(Duration::from_millis(5 * HOUR)).await;
    assert!(call(&h, |reply| Event::Schedule(ScheduleEvent::List { reply })).is_empty());
    driver.abort();
    // The driver's handle goes with its task; then the scheduler stops.
    let _ = driver.await;
    drop(h);
    thread.join().unwrap().unwrap();
    // On disk: the three executions, each naming its schedule and instant.
    let snap = open().load().unwrap();
    let ats: Vec<u64> = snap
        .matrices
        .iter()
        .map(|m| m.execution.as_ref().unwrap().at_ms)
        .collect();
    assert_eq!(ats, [first, first + 3 * HOUR, last.at_unix_ms]);
    assert!(snap.schedules[0].cancelled);
}
