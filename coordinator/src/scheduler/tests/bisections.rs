//! Bisections over a git range: the coordinator asks an agent that has the
//! repository, takes the answer only from that agent, and passes the
//! agent's refusal to the caller.

use farm_proto::{Commits, StartBisectionRequest, agent_message, coordinator_message};

use super::super::{Error, Event};
use super::{Farm, caps};

#[tokio::test]
async fn a_git_range_is_asked_of_the_agent_with_the_repository_and_taken_only_from_it() {
    let farm = Farm::new(60_000, 3);
    // Agent `with` has the repository `linux`; `without` has none.
    let with = farm
        .h
        .call(|reply| Event::Register {
            capabilities: Box::new(farm_proto::Capabilities {
                kernel_repos: vec!["linux".into()],
                ..caps()
            }),
            resume_agent_id: String::new(),
            identity: None,
            reply,
        })
        .await
        .unwrap();
    let without = farm.register().await;
    let mut rx_without = farm.open(&without, 2, None, Vec::new()).await;

    let text = "name = \"git\"\nkernels = [\"git:linux@v6.1\", \"git:linux@bisect-bad\"]\n\
                [[workloads]]\nname = \"cpu-hog\"\n[baseline]\nkernel = \"git:linux@v6.1\"\n";
    let matrix = Box::new(crate::matrix::parse("g.toml", text).unwrap());
    let id = farm
        .h
        .call(|reply| Event::Submit {
            traceparent: String::new(),
            matrix,
            file_name: "g.toml".into(),
            source: text.into(),
            reply,
        })
        .await
        .unwrap()
        .matrix_id;

    // Until `with` has a session, no connected agent has the repository.
    let request = StartBisectionRequest {
        matrix_id: id.clone(),
        cell: 1,
        git_range: true,
        ..Default::default()
    };
    let e = farm
        .h
        .call(|reply| Event::StartBisection {
            request: Box::new(request),
            reply,
        })
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "bisection refused: no connected agent has repository `linux` (--kernel-repo)"
    );
    let mut rx_with = farm.open(&with, 1, None, Vec::new()).await;

    let h = farm.h.clone();
    let request = StartBisectionRequest {
        matrix_id: id.clone(),
        cell: 1,
        git_range: true,
        ..Default::default()
    };
    let started = tokio::spawn(async move {
        h.call(|reply| Event::StartBisection {
            request: Box::new(request),
            reply,
        })
        .await
    });
    // The listing goes to `with`, the one agent with the repository.
    let asked = tokio::time::timeout(std::time::Duration::from_secs(10), rx_with.recv())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let Some(coordinator_message::Msg::ListCommits(l)) = asked.msg else {
        panic!("{asked:?}");
    };
    assert_eq!(
        (l.repo.as_str(), l.good.as_str(), l.bad.as_str()),
        ("linux", "v6.1", "bisect-bad")
    );
    farm.sync().await;
    assert!(super::drain(&mut rx_without).is_empty());

    // Another agent cannot answer for it: refused, counted, still waiting.
    farm.send(
        &without,
        agent_message::Msg::Commits(Commits {
            request_id: l.request_id.clone(),
            commits: Vec::new(),
            error: "forged".into(),
        }),
    );
    farm.sync().await;
    assert_eq!(farm.rejected(), [("unasked_commits".to_owned(), 1)]);
    assert!(!started.is_finished());

    // The asked agent's refusal reaches the caller, naming it.
    let why = "`bisect-bad` (f1aaa7a0c0de) is not an ancestor of `v6.1` (308fdf5a5036) in repository `linux`";
    farm.send(
        &with,
        agent_message::Msg::Commits(Commits {
            request_id: l.request_id.clone(),
            commits: Vec::new(),
            error: why.into(),
        }),
    );
    let e = started.await.unwrap().unwrap_err();
    assert!(
        matches!(&e, Error::Bisection(m) if m == &format!("agent {with}: {why}")),
        "{e}"
    );
}
