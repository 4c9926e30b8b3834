//! A scheduler stopped by a failed commit tells every caller why: the one
//! whose batch failed, and every later one. A failure that ends a leader's
//! term says "leadership lost" with its cause; any other says the
//! scheduler stopped (`scheduler::Handle::stopping_because`).

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used)]

use farm_coordinator::scheduler::{self, Config, Event};
use farm_coordinator::store::{self, Backend, Op, Snapshot};

/// A store that loads nothing and fails every write with `fail()`.
struct Failing(fn() -> store::Error);

impl Backend for Failing {
    fn apply(&mut self, _: &[Op]) -> store::Result<()> {
        Err((self.0)())
    }
    fn load(&mut self) -> store::Result<Snapshot> {
        Ok(Snapshot::default())
    }
}

const MATRIX: &str = r#"
name = "m"
[[workloads]]
name = "lu"
params = { size = 16 }
"#;

/// Submits a matrix to a scheduler on `Failing(fail)` (its commit fails),
/// then asks for the agents: both refusals, as gRPC statuses.
async fn refusals(fail: fn() -> store::Error) -> [tonic::Status; 2] {
    let dir = tempfile::tempdir().unwrap();
    let archive = farm_coordinator::archive::Location::Sqlite(dir.path().join("archive.db"));
    let (h, thread) = scheduler::spawn(Failing(fail), archive, Config::default()).unwrap();
    let matrix = farm_coordinator::matrix::parse("m.toml", MATRIX).unwrap();
    let in_flight = h
        .call(|reply| Event::Submit {
            matrix: Box::new(matrix),
            file_name: "m.toml".into(),
            source: MATRIX.into(),
            traceparent: String::new(),
            reply,
        })
        .await
        .expect_err("a submission whose commit failed");
    assert!(thread.join().unwrap().is_err());
    let later = h
        .call(|reply| Event::ListAgents { reply })
        .await
        .expect_err("an answer from a stopped scheduler");
    [in_flight.into(), later.into()]
}

#[tokio::test]
async fn a_term_ended_by_a_failed_commit_is_told_to_every_caller() {
    for s in refusals(|| store::Error::Unreachable("writing a batch: no answer".into())).await {
        assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}");
        assert_eq!(
            s.message(),
            "leadership lost: etcd unreachable (writing a batch: no answer)"
        );
    }
    for s in refusals(|| store::Error::NotLeader).await {
        assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}");
        assert_eq!(
            s.message(),
            "leadership lost: the leader key is gone or another coordinator's"
        );
    }
}

#[tokio::test]
async fn a_scheduler_stopped_by_another_failure_says_which() {
    for s in refusals(|| store::Error::BadState(7)).await {
        assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}");
        assert_eq!(
            s.message(),
            "the scheduler stopped: store: unknown run state 7 in the database"
        );
    }
}
