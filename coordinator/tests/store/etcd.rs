//! The store suite on a real 3-member etcd cluster, and what only etcd's
//! backend must show: batches split over many transactions are all or
//! nothing whatever transaction a crash stops at, and a deposed leader
//! writes nothing.

use std::time::Duration;

use farm_coordinator::etcd_client::{Client, GetOptions};
use farm_coordinator::ids::CellIndex;
use farm_coordinator::leader::{Elector, Standing, Term};
use farm_coordinator::store::etcd::{Fence, Limits};
use farm_coordinator::store::{Backend, Error, Etcd, Op, RunRecord, RunState};
use prost::Message;

use super::cluster::Cluster;
use super::{
    CASES, agent_id, big_matrix, loads_the_unreadable_apart, matrix_id, unreadable_cell,
    unreadable_matrix,
};

struct Etcds {
    /// Its members live as long as the store's tests.
    _cluster: Cluster,
    rt: tokio::runtime::Runtime,
    client: Client,
}

impl Etcds {
    fn start() -> Etcds {
        let cluster = Cluster::start(3);
        let rt = tokio::runtime::Runtime::new().unwrap();
        let client = rt.block_on(Client::connect(cluster.urls(), None)).unwrap();
        Etcds {
            _cluster: cluster,
            rt,
            client,
        }
    }

    fn elector(&self, prefix: &str, url: &str) -> Elector {
        Elector::new(
            self.client.clone(),
            prefix,
            url.into(),
            Duration::from_secs(3),
        )
    }

    fn campaign(&self, e: &Elector) -> Term {
        self.rt.block_on(e.campaign(&|_: Standing| {}))
    }

    fn store(&self, prefix: &str, fence: &Fence, limits: Limits) -> Etcd {
        Etcd::new(
            &self.client,
            self.rt.handle().clone(),
            prefix,
            fence.clone(),
            limits,
        )
    }
}

/// Transactions of at most 8 operations and 64 KiB: every batch of more
/// than a few records goes through the write-ahead record.
const TINY: Limits = Limits {
    max_ops: 8,
    max_request_bytes: 64 << 10,
};

#[test]
fn etcd_passes_the_store_suite_with_etcds_limits_and_with_tiny_transactions() {
    let e = Etcds::start();
    for (limits, label) in [(Limits::default(), "default"), (TINY, "tiny")] {
        for (i, (name, case)) in CASES.iter().enumerate() {
            eprintln!("case {name}, {label} transactions");
            let prefix = format!("/suite-{label}/{i}");
            let term = e.campaign(&e.elector(&prefix, "http://a"));
            case(&|| Box::new(e.store(&prefix, &term.fence, limits)));
        }
    }
}

#[test]
fn etcd_loads_a_matrix_whose_cell_does_not_convert_apart() {
    let e = Etcds::start();
    let prefix = "/unreadable";
    let term = e.campaign(&e.elector(prefix, "http://a"));
    loads_the_unreadable_apart(
        &|| Box::new(e.store(prefix, &term.fence, Limits::default())),
        &|| {
            let key = format!("{prefix}/c/{}/{:010}", unreadable_matrix(), 0);
            let mut client = e.client.clone();
            e.rt.block_on(client.put(key, unreadable_cell(), None))
                .unwrap();
        },
    );
}

/// A batch of many transactions, cut short after each of them in turn (a
/// SIGKILL between two transactions): the next leader's load sees all of
/// the batch or none of it, never part, and the store works on after it.
#[test]
fn a_batch_cut_short_at_any_transaction_is_all_or_nothing() {
    let e = Etcds::start();
    let batch = || {
        vec![
            // About 100 KiB: three write-ahead pieces, a dozen chunks.
            big_matrix(matrix_id(1), 1, 20, 40, 5000),
            Op::PutRun(Box::new(RunRecord {
                run_id: farm_coordinator::ids::RunId::new(matrix_id(0), CellIndex::new(0), 0),
                matrix_id: matrix_id(0),
                cell: CellIndex::new(0),
                repetition: 0,
                seq: 0,
                state: RunState::Finished,
                attempt: 1,
                agent_id: Some(agent_id(1)),
                result: None,
            })),
        ]
    };
    let mut whole = 0;
    let mut none = 0;
    for crash_at in 0.. {
        let prefix = format!("/crash/{crash_at}");
        let term = e.campaign(&e.elector(&prefix, "http://a"));
        let mut s = e.store(&prefix, &term.fence, TINY);
        s.load().unwrap();
        s.crash_after(crash_at);
        let r = s.apply(&batch());
        drop(s);
        // The next leader (here: the same term, a new process).
        let mut next = e.store(&prefix, &term.fence, TINY);
        let snap = next.load().unwrap();
        let (matrices, runs) = (snap.matrices.len(), snap.runs.len());
        match (matrices, runs) {
            (1, 41) => {
                assert_eq!(snap.matrices[0].cells.len(), 20);
                whole += 1;
            }
            (0, 0) => none += 1,
            other => panic!("crash after {crash_at} transactions left {other:?}"),
        }
        // The store goes on: a new batch after the replay.
        next.apply(&[big_matrix(matrix_id(2), 2, 1, 1, 1)]).unwrap();
        assert_eq!(next.load().unwrap().matrices.len(), matrices + 1);
        e.rt.block_on(e.elector(&prefix, "http://a").resign(term));
        if r.is_ok() {
            assert_eq!((matrices, runs), (1, 41));
            break;
        }
    }
    // Crashes before the record was whole lose the batch (its writer was
    // told of no success); from then on the replay finishes it.
    assert!(none >= 2 && whole >= 2, "none {none}, whole {whole}");
}

/// Once another coordinator leads, the deposed one's writes fail whole,
/// one transaction or many, and the new leader sees none of them.
#[test]
fn a_deposed_leader_writes_nothing() {
    let e = Etcds::start();
    let prefix = "/deposed";
    let old = e.elector(prefix, "http://old");
    let term = e.campaign(&old);
    let mut deposed = e.store(prefix, &term.fence, TINY);
    deposed.load().unwrap();
    deposed
        .apply(&[big_matrix(matrix_id(1), 1, 1, 1, 1)])
        .unwrap();
    // The old leader's lease is gone (as after a pause longer than its TTL).
    e.rt.block_on(old.resign(term));
    let new = e.elector(prefix, "http://new");
    let term = e.campaign(&new);
    for batch in [
        vec![Op::CancelMatrix(matrix_id(1))],
        vec![big_matrix(matrix_id(2), 2, 30, 30, 1000)],
    ] {
        let err = deposed.apply(&batch).unwrap_err();
        assert!(matches!(err, Error::NotLeader), "{err}");
    }
    let snap = e.store(prefix, &term.fence, TINY).load().unwrap();
    assert_eq!(snap.matrices.len(), 1);
    assert!(!snap.matrices[0].cancelled);
    // Nor did it leave a write-ahead record behind.
    let left =
        e.rt.block_on(e.client.kv_client().get(
            format!("{prefix}/wal/"),
            Some(GetOptions::new().with_prefix().with_count_only()),
        ))
        .unwrap()
        .count();
    assert_eq!(left, 0);
}

/// A record no transaction can hold is refused before anything is sent.
#[test]
fn a_record_larger_than_a_request_is_refused_whole() {
    let e = Etcds::start();
    let prefix = "/large";
    let term = e.campaign(&e.elector(prefix, "http://a"));
    let mut s = e.store(prefix, &term.fence, TINY);
    s.load().unwrap();
    let err = s
        .apply(&[
            Op::CancelMatrix(matrix_id(0)),
            big_matrix(matrix_id(1), 1, 1, 1, 70_000),
        ])
        .unwrap_err();
    let key = format!("/large/c/{}/0000000000", matrix_id(1));
    // As `big_matrix` writes it: on the running kernel.
    let cell = farm_proto::Cell {
        index: 0,
        name: super::cell_name(0, 70_000),
        kernel: "running".into(),
        ..Default::default()
    };
    let cost = key.len() + cell.encoded_len() + 32;
    assert_eq!(
        err.to_string(),
        format!(
            "store: {key} is {cost} bytes; one etcd request holds at most {}",
            (64 << 10) - (16 << 10)
        )
    );
    drop(s);
    assert_eq!(
        e.store(prefix, &term.fence, TINY)
            .load()
            .unwrap()
            .matrices
            .len(),
        0
    );
}
