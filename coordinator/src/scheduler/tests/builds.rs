//! Placement of `git:` kernels: an agent that keeps a cell's build (its
//! catalogue's `built_kernels`) gets that cell's runs before the others'.

use farm_proto::coordinator_message;

use super::super::Event;
use super::{Farm, caps};

#[tokio::test]
async fn each_agent_goes_on_with_the_builds_it_keeps() {
    let farm = Farm::new(60_000, 3);
    let register = |built: &str| {
        let capabilities = Box::new(farm_proto::Capabilities {
            kernel_repos: vec!["linux".into()],
            guest_arches: vec!["x86_64".into()],
            executors: vec!["tcg".into()],
            built_kernels: vec![built.into()],
            ..caps()
        });
        farm.h.call(|reply| Event::Register {
            capabilities,
            resume_agent_id: None,
            identity: None,
            reply,
        })
    };
    // `a` built the bad kernel, `b` the good one: the opposite of the
    // order in which the matrix queues its runs.
    let a = register("git:linux@bisect-bad tinyconfig")
        .await
        .unwrap()
        .to_string();
    let b = register("git:linux@v6.1 tinyconfig")
        .await
        .unwrap()
        .to_string();
    let mut rx_a = farm.open(&a, 1, None, Vec::new()).await;
    let mut rx_b = farm.open(&b, 2, None, Vec::new()).await;
    let text = "name = \"pair\"\nrepetitions = 4\n\
                kernels = [\"git:linux@v6.1\", \"git:linux@bisect-bad\"]\n\
                [[workloads]]\nname = \"stress-ng\"\n[baseline]\nkernel = \"git:linux@v6.1\"\n";
    super::submit_text(&farm, text).await;
    // Each agent runs one at a time; every run it got is answered, and it
    // picks again.
    let mut got: Vec<(String, String)> = Vec::new();
    for _ in 0..20 {
        farm.sync().await;
        let mut answered = 0;
        for (id, rx) in [(&a, &mut rx_a), (&b, &mut rx_b)] {
            while let Ok(Ok(m)) = rx.try_recv() {
                if let Some(coordinator_message::Msg::Assign(x)) = m.msg {
                    let r = x.run.unwrap_or_default();
                    got.push((id.clone(), x.kernel.clone()));
                    farm.result_of(id, &r.run_id, r.attempt, 1.0);
                    answered += 1;
                }
            }
        }
        if answered == 0 {
            break;
        }
    }
    let of = |id: &str| -> Vec<&str> {
        got.iter()
            .filter(|(a, _)| a == id)
            .map(|(_, k)| k.as_str())
            .collect()
    };
    assert_eq!(of(&a), ["git:linux@bisect-bad"; 4]);
    assert_eq!(of(&b), ["git:linux@v6.1"; 4]);
}
