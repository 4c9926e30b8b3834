//! What running attempts report doing (their kernel's build): shown in
//! `ListAgents` and matrix statuses from the lease holder only, gone once
//! the build or the run is over, and kept out of the median run time.

use std::time::Duration;

use farm_proto::{
    AgentInfo, BuildProgress, BuildStep, MatrixStatus, RunActivity, RunProgress, RunRef, RunResult,
    agent_message,
};

use super::super::Event;
use super::{Farm, caps, drain, submit_text};

const NONE: [RunActivity; 0] = [];

fn progress(run_id: &str, build: Option<BuildProgress>) -> agent_message::Msg {
    agent_message::Msg::Progress(RunProgress {
        run: Some(RunRef {
            run_id: run_id.into(),
            attempt: 1,
        }),
        build,
    })
}

fn compiling(elapsed_s: u32) -> BuildProgress {
    BuildProgress {
        step: BuildStep::Compile as i32,
        elapsed_s,
        estimate_s: 420,
        warm: false,
    }
}

impl Farm {
    async fn builder(&self) -> String {
        self.register_caps(farm_proto::Capabilities {
            kernel_repos: vec!["linux".into()],
            guest_arches: vec!["x86_64".into()],
            executors: vec!["tcg".into()],
            ..caps()
        })
        .await
    }

    async fn agents(&self) -> Vec<AgentInfo> {
        self.h
            .call(|reply| Event::ListAgents { reply })
            .await
            .unwrap()
    }

    async fn activity_of(&self, agent_id: &str) -> Option<RunActivity> {
        self.agents()
            .await
            .into_iter()
            .find(|a| a.agent_id == agent_id)
            .unwrap()
            .activity
    }

    async fn status(&self, matrix_id: &str) -> MatrixStatus {
        let matrix_id = matrix_id.parse().unwrap();
        self.h
            .call(|reply| Event::Status { matrix_id, reply })
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn a_build_reported_by_the_lease_holder_shows_until_it_is_over() {
    let farm = Farm::new(60_000, 3);
    let holder = farm.builder().await;
    // Registered, no stream: it is given nothing, and says it builds anyway.
    let forger = farm.builder().await;
    let mut rx = farm.open(&holder, 1, None, Vec::new()).await;
    let m = submit_text(
        &farm,
        "name = \"pair\"\nrepetitions = 1\nkernels = [\"git:linux@v6.1\", \"git:linux@bisect-bad\"]\n\
         [[workloads]]\nname = \"stress-ng\"\n[baseline]\nkernel = \"git:linux@v6.1\"\n",
    )
    .await;
    farm.sync().await;
    let (r0, r1) = (format!("{m}.c0.r0"), format!("{m}.c1.r0"));
    assert_eq!(drain(&mut rx), [format!("assign {r0}@1")]);
    let mut watch = {
        let matrix_id = m.parse().unwrap();
        farm.h
            .call(|reply| Event::Watch { matrix_id, reply })
            .await
            .unwrap()
    };
    farm.sync().await;
    watch.borrow_and_update();
    // The second cell's build is ahead: nobody keeps it or builds it.
    let st = farm.status(&m).await;
    assert_eq!((st.builds_pending, st.median_build_seconds), (1, 0.0));
    assert_eq!(st.cells[0].activities, NONE);

    farm.send(&holder, progress(&r0, Some(compiling(192))));
    // Another agent's word about the holder's attempt, and the holder's
    // own with a step no build has: dropped, the first report stands.
    farm.send(&forger, progress(&r0, Some(compiling(999))));
    let unknown = BuildProgress {
        step: 0,
        ..compiling(200)
    };
    farm.send(&holder, progress(&r0, Some(unknown)));
    farm.h.try_send(Event::Tick).unwrap();
    farm.sync().await;
    let building = RunActivity {
        run_id: r0.clone(),
        agent_id: holder.clone(),
        kernel: "git:linux@v6.1".into(),
        build: Some(compiling(192)),
    };
    assert_eq!(farm.activity_of(&holder).await, Some(building.clone()));
    assert_eq!(farm.activity_of(&forger).await, None);
    let st = farm.status(&m).await;
    assert_eq!(st.cells[0].activities, std::slice::from_ref(&building));
    assert_eq!(st.cells[1].activities, NONE);
    assert_eq!(st.builds_pending, 1);
    // Watchers were told.
    tokio::time::timeout(Duration::from_secs(5), watch.changed())
        .await
        .expect("a status after the report")
        .unwrap();
    assert_eq!(watch.borrow().cells[0].activities, [building]);
    assert_eq!(
        farm.rejected(),
        [
            ("bad_progress".to_string(), 1),
            ("progress_not_leased".to_string(), 1)
        ]
    );

    // The run ends: 451.5 s, of which 420 s built its kernel.
    farm.send(
        &holder,
        agent_message::Msg::Result(RunResult {
            run: Some(RunRef {
                run_id: r0.clone(),
                attempt: 1,
            }),
            ok: true,
            metrics: vec![farm_proto::Metric {
                name: "wall_s".into(),
                value: 30.0,
                unit: "s".into(),
                direction: farm_proto::Direction::LowerIsBetter as i32,
            }],
            started_unix_ms: 1_000,
            finished_unix_ms: 452_500,
            kernel_build_ms: 420_000,
            kernel_built: true,
            ..Default::default()
        }),
    );
    farm.sync().await;
    assert_eq!(
        drain(&mut rx),
        [format!("ack {r0}@1"), format!("assign {r1}@1")]
    );
    let st = farm.status(&m).await;
    assert_eq!(st.median_run_seconds, 31.5);
    assert_eq!(st.median_build_seconds, 420.0);
    // Its last report is void with it; the other cell's build is under way.
    assert_eq!(st.cells[0].activities, NONE);
    assert_eq!(st.builds_pending, 0);
    assert_eq!(farm.activity_of(&holder).await, None);

    // The next run builds, then says the build is over.
    let linking = BuildProgress {
        step: BuildStep::Link as i32,
        elapsed_s: 101,
        estimate_s: 120,
        warm: true,
    };
    farm.send(&holder, progress(&r1, Some(linking)));
    farm.sync().await;
    assert_eq!(
        farm.activity_of(&holder).await,
        Some(RunActivity {
            run_id: r1.clone(),
            agent_id: holder.clone(),
            kernel: "git:linux@bisect-bad".into(),
            build: Some(linking),
        })
    );
    farm.send(&holder, progress(&r1, None));
    farm.sync().await;
    assert_eq!(farm.activity_of(&holder).await, None);
    assert_eq!(farm.status(&m).await.cells[1].activities, NONE);
}
