//! Bisections over a git range: the coordinator asks an agent that has the
//! repository, takes the answer only from that agent, and passes the
//! agent's refusal to the caller.

use farm_proto::{Commits, StartBisectionRequest, agent_message, coordinator_message};

use super::super::{BisectionEvent, Error, Event, ScheduleEvent};
use super::{Farm, Rx, caps};

#[tokio::test]
async fn a_git_range_is_asked_of_the_agent_with_the_repository_and_taken_only_from_it() {
    let farm = Farm::new(60_000, 3);
    // Agent `with` has the repository `linux`; `without` has none.
    let with = farm
        .register_caps(farm_proto::Capabilities {
            kernel_repos: vec!["linux".into()],
            ..caps()
        })
        .await;
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
        .call(|reply| {
            Event::Bisection(BisectionEvent::Start {
                between: crate::bisection::between(&request.between).unwrap(),
                request: Box::new(request),
                reply,
            })
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
        h.call(|reply| {
            Event::Bisection(BisectionEvent::Start {
                between: crate::bisection::between(&request.between).unwrap(),
                request: Box::new(request),
                reply,
            })
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

/// `ListRange`: the range a git bisection would search, listed by the
/// agent with the repository before any run; ends that are no git range
/// are refused at once, a malformed listing is refused, a good one given
/// back as the agent listed it.
#[tokio::test]
async fn a_range_is_listed_for_its_caller_by_the_agent_with_the_repository() {
    let farm = Farm::new(60_000, 3);
    let agent = farm
        .register_caps(farm_proto::Capabilities {
            kernel_repos: vec!["linux".into()],
            ..caps()
        })
        .await;
    let mut rx = farm.open(&agent, 1, None, Vec::new()).await;
    let list = |good: &str, bad: &str| {
        let (h, good, bad) = (farm.h.clone(), good.parse().unwrap(), bad.parse().unwrap());
        tokio::spawn(async move {
            h.call(|reply| Event::Bisection(BisectionEvent::ListRange { good, bad, reply }))
                .await
        })
    };
    for (good, bad, why) in [
        (
            "debian:6.1.0-57-amd64",
            "git:linux@v6.2",
            "git range refused: a git range needs git:REPO@REF kernels at both ends; this one is \"debian:6.1.0-57-amd64\"",
        ),
        (
            "git:linux@v6.1",
            "git:tip@sched/core",
            "git range refused: the ends are in two repositories, `linux` and `tip`",
        ),
        (
            "git:tip@v6.1",
            "git:tip@sched/core",
            "git range refused: no connected agent has repository `tip` (--kernel-repo)",
        ),
    ] {
        let e = list(good, bad).await.unwrap().unwrap_err();
        assert_eq!(e.to_string(), why);
    }
    farm.sync().await;
    assert!(super::drain(&mut rx).is_empty());

    // The listing is asked once the spawned call reaches the scheduler.
    async fn asked(rx: &mut Rx) -> farm_proto::ListCommits {
        let m = tokio::time::timeout(std::time::Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        match m.msg {
            Some(coordinator_message::Msg::ListCommits(l)) => l,
            other => panic!("{other:?}"),
        }
    }
    let commit = |i: u64, subject: &str| farm_proto::CommitInfo {
        commit: format!("{:040x}", 0xc0de_0000 + i),
        subject: subject.into(),
    };
    // A listing whose commit is no commit id is refused, naming the agent.
    let pending = list("git:linux@v6.1", "git:linux@sched/core");
    let l = asked(&mut rx).await;
    assert_eq!((l.good.as_str(), l.bad.as_str()), ("v6.1", "sched/core"));
    let mut bad = commit(1, "sched: Slow");
    bad.commit = "HEAD~1".into();
    farm.send(
        &agent,
        agent_message::Msg::Commits(Commits {
            request_id: l.request_id,
            commits: vec![commit(0, "Linux 6.1"), bad],
            error: String::new(),
        }),
    );
    let e = pending.await.unwrap().unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("git range refused: agent {agent} listed a malformed commit")
    );

    let pending = list("git:linux@v6.1", "git:linux@sched/core");
    let l = asked(&mut rx).await;
    let commits = vec![
        commit(0, "Linux 6.1"),
        commit(1, "sched/fair: Tidy"),
        commit(2, "sched/core: Slow down on purpose"),
    ];
    farm.send(
        &agent,
        agent_message::Msg::Commits(Commits {
            request_id: l.request_id,
            commits: commits.clone(),
            error: String::new(),
        }),
    );
    let r = pending.await.unwrap().unwrap();
    assert_eq!(r.agent_id, agent);
    assert_eq!(r.commits, commits);
}

/// Three hosts, each running one kernel release: the matrix, then the
/// bisection's rounds, are served by the agent of each cell's release, with
/// wall times good (1 s) before 6.1.2 and bad (2 s) from it on.
struct Hosts {
    agents: Vec<(String, &'static str)>,
    rxs: Vec<Rx>,
}

const RELEASES: [&str; 3] = ["6.1.1", "6.1.2", "6.1.3"];

impl Hosts {
    async fn connect(farm: &Farm, resume: &[String]) -> Hosts {
        let mut agents = Vec::new();
        let mut rxs = Vec::new();
        for (i, release) in RELEASES.into_iter().enumerate() {
            let resume_agent_id = resume.get(i).and_then(|id| id.parse().ok());
            let id = farm
                .h
                .call(|reply| Event::Register {
                    capabilities: Box::new(farm_proto::Capabilities {
                        kernel_release: release.into(),
                        ..caps()
                    }),
                    resume_agent_id,
                    identity: None,
                    reply,
                })
                .await
                .unwrap()
                .to_string();
            rxs.push(farm.open(&id, 10 + i as u64, None, Vec::new()).await);
            agents.push((id, release));
        }
        Hosts { agents, rxs }
    }

    fn ids(&self) -> Vec<String> {
        self.agents.iter().map(|(id, _)| id.clone()).collect()
    }

    /// Answers every assignment so far; how many it answered.
    async fn serve(&mut self, farm: &Farm) -> usize {
        farm.sync().await;
        let mut n = 0;
        for ((id, release), rx) in self.agents.iter().zip(&mut self.rxs) {
            while let Ok(Ok(m)) = rx.try_recv() {
                if let Some(coordinator_message::Msg::Assign(a)) = m.msg {
                    let r = a.run.unwrap_or_default();
                    let wall = if *release == "6.1.1" { 1.0 } else { 2.0 };
                    // A little spread, no ties.
                    let jitter =
                        f64::from(r.run_id.bytes().map(u32::from).sum::<u32>() % 97) * 1e-4;
                    farm.result_of(id, &r.run_id, r.attempt, wall + jitter);
                    n += 1;
                }
            }
        }
        farm.sync().await;
        n
    }
}

/// The release matrix (6.1.1 good, 6.1.3 bad, 5 runs each) served to its
/// end, then a bisection of its cell 1 over 6.1.2, 5 runs a round.
async fn bisect_releases(farm: &Farm, hosts: &mut Hosts) -> farm_proto::Bisection {
    let text = "name = \"rel\"\nrepetitions = 5\nkernels = [\"6.1.1\", \"6.1.3\"]\n\
                [[workloads]]\nname = \"cpu-hog\"\n[baseline]\nkernel = \"6.1.1\"\n";
    let matrix = Box::new(crate::matrix::parse("r.toml", text).unwrap());
    let id = farm
        .h
        .call(|reply| Event::Submit {
            traceparent: String::new(),
            matrix,
            file_name: "r.toml".into(),
            source: text.into(),
            reply,
        })
        .await
        .unwrap()
        .matrix_id;
    // One run at a time per agent: serve until nothing is left.
    while hosts.serve(farm).await > 0 {}
    assert_eq!(farm.counts(&id).await.finished, 10);
    let request = StartBisectionRequest {
        matrix_id: id,
        cell: 1,
        between: vec!["6.1.2".into()],
        runs: 5,
        max_runs: 5,
        ..Default::default()
    };
    farm.h
        .call(|reply| {
            Event::Bisection(BisectionEvent::Start {
                between: crate::bisection::between(&request.between).unwrap(),
                request: Box::new(request),
                reply,
            })
        })
        .await
        .unwrap()
}

async fn bisection(farm: &Farm, id: &str) -> farm_proto::Bisection {
    let bisection_id = id.parse().unwrap();
    farm.h
        .call(|reply| {
            Event::Bisection(BisectionEvent::Get {
                bisection_id,
                reply,
            })
        })
        .await
        .unwrap()
}

/// Each round is a matrix the farm runs like any other; a coordinator
/// restarted between rounds finds the round it waits for and carries on to
/// the culprit, confirmed.
#[tokio::test]
async fn a_bisection_runs_its_rounds_as_matrices_and_survives_a_restart() {
    let farm = Farm::new(60_000, 3);
    let mut hosts = Hosts::connect(&farm, &[]).await;
    let b = bisect_releases(&farm, &mut hosts).await;
    assert_eq!(b.kernels, RELEASES);
    assert_eq!(b.metric, "wall_s");
    assert_eq!(b.pending_matrices.len(), 1);
    let round1 = b.pending_matrices[0].clone();

    // The coordinator restarts with the first round queued.
    let agents = hosts.ids();
    drop(hosts);
    let farm = farm.reopen().await;
    let mut hosts = Hosts::connect(&farm, &agents).await;
    let b = bisection(&farm, &b.bisection_id).await;
    assert_eq!(b.pending_matrices, std::slice::from_ref(&round1));
    while hosts.serve(&farm).await > 0 {}
    let b = bisection(&farm, &b.bisection_id).await;
    // 6.1.2 is bad; then the confirmation of 6.1.1 against 6.1.2.
    assert_eq!(b.steps.len(), 1);
    assert_eq!(
        (b.steps[0].kernel, b.steps[0].call.as_str()),
        (1, "same_as_bad")
    );
    assert_eq!(b.steps[0].matrix_ids, [round1]);
    // Ended: nothing pending, no round after the confirmation (its
    // matrix is the last one served).
    assert!(b.pending_matrices.is_empty(), "{b:?}");
    let o = b.outcome.expect("ended");
    assert_eq!(
        (o.kind.as_str(), o.last_good, o.first_bad, o.confirmed),
        ("culprit", 0, 1, true)
    );
    assert_eq!(o.matrix_ids.len(), 1);
    assert_eq!(hosts.serve(&farm).await, 0);
    // The confirmation compares first bad with last good, as any matrix.
    let r = super::results_of(&farm, &o.matrix_ids[0]).await;
    let compared: Vec<(u32, Option<u32>)> =
        r.cells.iter().map(|c| (c.cell_index, c.baseline)).collect();
    assert_eq!(compared, [(0, None), (1, Some(0)), (2, None)]);
}

/// Cancelling a bisection's round matrix ends the bisection `cancelled`
/// (it would otherwise wait for that round for ever, holding a place under
/// MAX_RUNNING_BISECTIONS); so it stays after a restart.
#[tokio::test]
async fn a_cancelled_round_ends_its_bisection() {
    let farm = Farm::new(60_000, 3);
    let mut hosts = Hosts::connect(&farm, &[]).await;
    let b = bisect_releases(&farm, &mut hosts).await;
    let round = b.pending_matrices[0].clone();
    let matrix_id = round.parse().unwrap();
    let cancelled = farm
        .h
        .call(|reply| Event::Cancel { matrix_id, reply })
        .await
        .unwrap();
    assert_eq!(cancelled, 15);
    let o = bisection(&farm, &b.bisection_id)
        .await
        .outcome
        .expect("ended");
    assert_eq!(o.kind, "cancelled");
    assert_eq!(o.matrix_ids, std::slice::from_ref(&round));
    // The runs already assigned answer late; no round follows, and a
    // restart keeps the end.
    while hosts.serve(&farm).await > 0 {}
    let after = bisection(&farm, &b.bisection_id).await;
    assert_eq!(after.pending_matrices, std::slice::from_ref(&round));
    assert_eq!(after.outcome.map(|o| o.kind).as_deref(), Some("cancelled"));
    drop(hosts);
    let farm = farm.reopen().await;
    let o = bisection(&farm, &b.bisection_id)
        .await
        .outcome
        .expect("ended");
    assert_eq!(o.kind, "cancelled");
}

/// `[schedule] bisect = true`: an execution that finds a regression between
/// two git kernels of one repository starts a git-range bisection of its
/// own; it runs to the culprit, `farmctl schedules` shows it, and
/// `farm_regression_culprit` names the commit for the regression's alert.
#[tokio::test]
async fn a_schedules_regression_between_git_kernels_is_bisected_by_itself() {
    let farm = Farm::new(60_000, 3);
    let agent = farm
        .register_caps(farm_proto::Capabilities {
            kernel_repos: vec!["linux".into()],
            guest_arches: vec!["x86_64".into()],
            executors: vec!["tcg".into()],
            ..caps()
        })
        .await;
    let mut rx = farm.open(&agent, 1, None, Vec::new()).await;
    let text = "name = \"nightly\"\nrepetitions = 5\n\
                kernels = [\"git:linux@v6.1\", \"git:linux@sched-core\"]\n\
                [[workloads]]\nname = \"stress-ng\"\n[baseline]\nkernel = \"git:linux@v6.1\"\n\
                [schedule]\ncron = \"0 3 * * *\"\nbisect = true\n";
    let matrix = Box::new(crate::matrix::parse("n.toml", text).unwrap());
    let schedule_id = farm
        .h
        .call(|reply| Event::Submit {
            traceparent: String::new(),
            matrix,
            file_name: "n.toml".into(),
            source: text.into(),
            reply,
        })
        .await
        .unwrap()
        .schedule_id;
    farm.h
        .send(Event::Schedule(ScheduleEvent::CronDue {
            schedule_id: schedule_id.parse().unwrap(),
            at_ms: super::super::now_ms() + 1,
        }))
        .await
        .unwrap();
    // Commits of the range, good first; the third is the culprit.
    let commits: Vec<String> = (0..6u64)
        .map(|i| format!("{:040x}", 0xc0de_0000 + i))
        .collect();
    let subjects = [
        "Linux 6.1",
        "sched/fair: Tidy",
        "sched/core: Slow down on purpose",
        "sched/fair: Comment",
        "sched/debug: Print more",
        "Merge branch sched-core",
    ];
    let wall = |kernel: &str| -> f64 {
        let bad = match kernel {
            "git:linux@v6.1" => false,
            "git:linux@sched-core" => true,
            k => {
                let i = commits
                    .iter()
                    .position(|c| k.ends_with(c.as_str()))
                    .unwrap();
                i >= 2
            }
        };
        if bad { 2.0 } else { 1.0 }
    };
    let mut listed = false;
    let mut bisection_id = String::new();
    for _ in 0..2000 {
        farm.sync().await;
        let mut answered = 0;
        while let Ok(Ok(m)) = rx.try_recv() {
            match m.msg {
                Some(coordinator_message::Msg::Assign(a)) => {
                    let r = a.run.unwrap_or_default();
                    let jitter =
                        f64::from(r.run_id.bytes().map(u32::from).sum::<u32>() % 97) * 1e-4;
                    farm.result_of(&agent, &r.run_id, r.attempt, wall(&a.kernel) + jitter);
                    answered += 1;
                }
                Some(coordinator_message::Msg::ListCommits(l)) => {
                    assert!(!listed, "listed twice");
                    assert_eq!(
                        (l.repo.as_str(), l.good.as_str(), l.bad.as_str()),
                        ("linux", "v6.1", "sched-core")
                    );
                    farm.send(
                        &agent,
                        agent_message::Msg::Commits(Commits {
                            request_id: l.request_id,
                            commits: commits
                                .iter()
                                .zip(subjects)
                                .map(|(c, s)| farm_proto::CommitInfo {
                                    commit: c.clone(),
                                    subject: s.into(),
                                })
                                .collect(),
                            error: String::new(),
                        }),
                    );
                    listed = true;
                    answered += 1;
                }
                _ => {}
            }
        }
        let schedules = farm
            .h
            .call(|reply| Event::Schedule(ScheduleEvent::List { reply }))
            .await
            .unwrap();
        let last = schedules[0].last.clone().unwrap_or_default();
        if let Some(b) = last.bisections.first() {
            bisection_id = b.bisection_id.clone();
            if b.status != "running" {
                break;
            }
        }
        if answered == 0 {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
    assert!(listed);
    let b = bisection(&farm, &bisection_id).await;
    let o = b.outcome.clone().expect("ended");
    assert_eq!(
        (o.kind.as_str(), o.last_good, o.first_bad, o.confirmed),
        ("culprit", 1, 2, true)
    );
    assert_eq!(b.kernels[2], format!("git:linux@{}", commits[2]));
    let schedules = farm
        .h
        .call(|reply| Event::Schedule(ScheduleEvent::List { reply }))
        .await
        .unwrap();
    assert!(schedules[0].bisect);
    let last = schedules[0].last.clone().unwrap();
    assert_eq!(last.regressions, 1);
    let culprit = format!("{} sched/core: Slow down on purpose", &commits[2][..12]);
    assert_eq!(
        last.bisections,
        [farm_proto::BisectionBrief {
            bisection_id: bisection_id.clone(),
            status: format!("culprit {culprit}"),
        }]
    );
    // The gauge the regression's alert joins: the cell's series, its
    // matrix, the bisection and the culprit.
    let mut shown = Vec::new();
    for f in farm.registry.gather() {
        if f.name() == "farm_regression_culprit" {
            for m in f.get_metric() {
                let mut labels: Vec<(String, String)> = m
                    .get_label()
                    .iter()
                    .map(|l| (l.name().to_owned(), l.value().to_owned()))
                    .collect();
                labels.sort();
                shown.push((labels, m.get_gauge().get_value()));
            }
        }
    }
    let label = |k: &str, v: &str| (k.to_owned(), v.to_owned());
    assert_eq!(
        shown,
        [(
            vec![
                label("bisection", &bisection_id),
                label("culprit", &culprit),
                label("host", "any"),
                label("kernel", "git:linux@sched-core"),
                label("matrix", &last.matrix_id),
                label("state", "default"),
                label(
                    "workload",
                    &crate::metrics::series::workload_label(
                        &crate::cell::Cell::try_from(b.template.as_ref().unwrap()).unwrap()
                    )
                ),
            ],
            1.0
        )]
    );
}

/// A patched kernel against the same commit unpatched is no range of
/// commits: every round would build both ends as the bad one is built.
#[tokio::test]
async fn ends_built_otherwise_are_not_bisected() {
    let farm = Farm::new(60_000, 3);
    let text = "name = \"patched\"\nkernels = [\"git:linux@v6.1\", \"git:linux@v6.2#fix\"]\n\
                [[workloads]]\nname = \"stress-ng\"\n[baseline]\nkernel = \"git:linux@v6.1\"\n\
                [builds.fix]\npatches = [\"fix.patch\"]\n";
    let id = super::submit_text(&farm, text).await;
    let request = StartBisectionRequest {
        matrix_id: id,
        cell: 1,
        between: vec!["git:linux@v6.2-rc1".into()],
        ..Default::default()
    };
    let e = farm
        .h
        .call(|reply| {
            Event::Bisection(BisectionEvent::Start {
                between: crate::bisection::between(&request.between).unwrap(),
                request: Box::new(request),
                reply,
            })
        })
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "bisection refused: `git:linux@v6.1` and `git:linux@v6.2#fix` are built otherwise \
         ([build] / [builds.<name>]): a bisection changes only the commit"
    );
}
