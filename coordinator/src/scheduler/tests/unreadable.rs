//! A stored matrix whose cell no longer converts (a damaged store, or a
//! value a later build wrote): the coordinator still starts and serves
//! every other matrix; that one answers, to every caller, that it failed
//! and which cell and field could not be read; and the store keeps it as
//! it was, so a later restart says the same.

use std::time::Duration;

use prost::Message;

use super::{Error, Event, Farm, ResultsEvent};

/// The cell as the wire would carry it, with a hotplug plan no build reads.
fn unreadable_cell() -> Vec<u8> {
    farm_proto::Cell {
        index: 0,
        name: "cpu-hog".into(),
        kernel: "running".into(),
        state: Some(farm_proto::MachineState {
            name: "s".into(),
            hotplug: "sideways:1".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stored_matrix_whose_cell_does_not_convert_fails_alone() {
    let farm = Farm::new(60_000, 3);
    let ok = farm.submit(1).await;
    let bad = farm.submit(2).await;
    let Farm { h, _dir: dir, .. } = farm;
    drop(h);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let db = rusqlite::Connection::open(dir.path().join("db")).unwrap();
    let n = db
        .execute(
            "UPDATE cells SET cell = ?1 WHERE matrix_id = ?2",
            rusqlite::params![unreadable_cell(), bad],
        )
        .unwrap();
    assert_eq!(n, 1);
    drop(db);

    let mut farm = Farm::on(dir, 60_000, 3, crate::metrics::DEFAULT_SERIES_LIMIT);
    for restart in 0..2 {
        // The other matrix is served as before.
        let counts = farm.counts(&ok).await;
        assert_eq!((counts.total, counts.queued), (1, 1), "restart {restart}");
        let want = format!(
            "matrix {bad} failed: the store holds it, but cell 0: state: unknown hotplug \
             mode `sideways` (known: cycle, offline); it is left there as it is"
        );
        let status = farm
            .h
            .call(|reply| Event::Status {
                matrix_id: bad.parse().unwrap(),
                reply,
            })
            .await;
        match status {
            Err(e @ Error::Unreadable { .. }) => assert_eq!(e.to_string(), want),
            other => panic!("{other:?}"),
        }
        let watch = farm
            .h
            .call(|reply| Event::Watch {
                matrix_id: bad.parse().unwrap(),
                reply,
            })
            .await;
        assert!(matches!(watch, Err(Error::Unreadable { .. })), "{watch:?}");
        let results = farm
            .h
            .call(|reply| {
                Event::Results(ResultsEvent::Get {
                    matrix_id: bad.parse().unwrap(),
                    reply,
                })
            })
            .await;
        assert!(
            matches!(results, Err(Error::Unreadable { .. })),
            "{:?}",
            results.map(|_| ())
        );
        farm = farm.reopen().await;
    }
}
