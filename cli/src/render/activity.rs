//! What running attempts are doing, in words: a kernel build in the
//! progress line of `farmctl run` and `farmctl watch`, and in `farmctl
//! agents`; and durations as those lines write them.

use farm_proto::{AgentInfo, MatrixStatus, RunActivity};
use farm_spec::progress::{BuildProgress, BuildStep};
use farm_spec::{CommitId, Kernel};

/// `3m12s`, `1h05m`, `45s`: a duration as the progress line writes it.
pub fn duration(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// `7m`, `1h05m`, `45s`: an estimate, to the minute once it is minutes.
fn rough(secs: u32) -> String {
    let s = u64::from(secs);
    if s >= 3600 {
        let m = (s + 30) / 60;
        format!("{}h{:02}m", m / 60, m % 60)
    } else if s >= 60 {
        format!("{}m", (s + 30) / 60)
    } else {
        format!("{s}s")
    }
}

/// A kernel as a line has room for: a full commit cut to 12 digits
/// (`git:linux@85068c1e4f2a`), anything else as it is.
fn short_kernel(kernel: &str) -> String {
    match kernel.parse::<Kernel>() {
        Ok(Kernel::Git(g)) => match g.rev().parse::<CommitId>() {
            Ok(c) => format!("git:{}@{}", g.repo(), c.short()),
            Err(_) => kernel.to_owned(),
        },
        _ => kernel.to_owned(),
    }
}

/// `building git:linux@v6.1 (compile, 3m12s of ~7m cold)`; `None` for an
/// activity without a build this client can read.
pub fn building(a: &RunActivity) -> Option<String> {
    let b = BuildProgress::try_from(a.build.as_ref()?).ok()?;
    let step = match b.step {
        BuildStep::Waiting => "waiting for the same build",
        s => s.as_str(),
    };
    let expected = match b.estimate {
        Some(e) => format!(" of ~{} {}", rough(e.seconds), e.temperature()),
        None => String::new(),
    };
    Some(format!(
        "building {} ({step}, {}{expected})",
        short_kernel(&a.kernel),
        duration(f64::from(b.elapsed_s))
    ))
}

/// ` · building …` for the matrix's builds under way (the first, and how
/// many more), or nothing.
pub fn builds_part(s: &MatrixStatus) -> String {
    let mut lines = s
        .cells
        .iter()
        .flat_map(|c| &c.activities)
        .filter_map(building);
    let Some(first) = lines.next() else {
        return String::new();
    };
    match lines.count() {
        0 => format!(" · {first}"),
        more => format!(" · {first} and {more} more"),
    }
}

/// The seconds of building still ahead of a matrix: what each build under
/// way is expected to take yet, and the builds not begun at the median
/// build's time (before any: the longest estimate under way, else the
/// documented cold build).
pub fn build_seconds_left(s: &MatrixStatus) -> f64 {
    let under_way: Vec<BuildProgress> = s
        .cells
        .iter()
        .flat_map(|c| &c.activities)
        .filter_map(|a| BuildProgress::try_from(a.build.as_ref()?).ok())
        .collect();
    let ahead: u32 = under_way
        .iter()
        .filter_map(|b| Some(b.estimate?.seconds.saturating_sub(b.elapsed_s)))
        .sum();
    let per_build = if s.median_build_seconds > 0.0 {
        s.median_build_seconds
    } else {
        under_way
            .iter()
            .filter_map(|b| b.estimate.map(|e| f64::from(e.seconds)))
            .reduce(f64::max)
            .unwrap_or(farm_spec::progress::DEFAULT_COLD_BUILD.as_secs_f64())
    };
    f64::from(ahead) + f64::from(s.builds_pending) * per_build
}

/// `farmctl agents`: one row per agent; one building its run's kernel says
/// so in STATE and what the build is at after its run.
pub fn agents_table(agents: &[AgentInfo]) -> String {
    let mut out = format!(
        "{:<16} {:<10} {:<8} {:<24} {:>4} {:>5}  {:<16} CURRENT\n",
        "AGENT", "STATE", "ARCH", "KERNEL", "CPUS", "NODES", "IDENTITY"
    );
    for a in agents {
        let caps = a.capabilities.clone().unwrap_or_default();
        let build = a.activity.as_ref().and_then(building);
        let state = match (a.connected, &build) {
            (false, _) => "gone",
            (true, Some(_)) => "building",
            (true, None) => "connected",
        };
        let mut current = if a.current_run.is_empty() {
            "-".to_owned()
        } else {
            a.current_run.clone()
        };
        if let Some(b) = build {
            current = format!("{current} · {b}");
        }
        out.push_str(&format!(
            "{:<16} {:<10} {:<8} {:<24} {:>4} {:>5}  {:<16} {}\n",
            a.agent_id,
            state,
            caps.arch,
            caps.kernel_release,
            caps.cpus_online,
            caps.numa_nodes.len().max(1),
            if a.identity.is_empty() {
                "-"
            } else {
                &a.identity
            },
            current,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_proto::{BuildStep as Step, CellStatus, RunCounts};

    fn activity(kernel: &str, step: Step, elapsed_s: u32, estimate_s: u32) -> RunActivity {
        RunActivity {
            run_id: "m-1.c0.r0".into(),
            agent_id: "a-1".into(),
            kernel: kernel.into(),
            build: Some(farm_proto::BuildProgress {
                step: step as i32,
                elapsed_s,
                estimate_s,
                warm: false,
            }),
        }
    }

    fn status(activities: Vec<RunActivity>) -> MatrixStatus {
        MatrixStatus {
            counts: Some(RunCounts {
                total: 10,
                running: 1,
                queued: 9,
                ..Default::default()
            }),
            cells: vec![CellStatus {
                activities,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn a_build_says_its_kernel_step_elapsed_and_estimate() {
        let commit = "git:linux@85068c1e4f2a9b3c7d6e5f4a3b2c1d0e9f8a7b6c";
        assert_eq!(
            building(&activity(commit, Step::Compile, 192, 420)).unwrap(),
            "building git:linux@85068c1e4f2a (compile, 3m12s of ~7m cold)"
        );
        let mut warm = activity("git:linux@v6.1", Step::Link, 45, 131);
        warm.build.as_mut().unwrap().warm = true;
        assert_eq!(
            building(&warm).unwrap(),
            "building git:linux@v6.1 (link, 45s of ~2m warm)"
        );
        assert_eq!(
            building(&activity("git:linux@v6.1", Step::Waiting, 3725, 0)).unwrap(),
            "building git:linux@v6.1 (waiting for the same build, 1h02m)"
        );
        assert_eq!(
            building(&activity("git:linux@v6.1", Step::Unspecified, 1, 1)),
            None
        );
        assert_eq!(
            crate::render::progress_line(&status(vec![activity(commit, Step::Compile, 192, 420)])),
            "0/10 done · 1 running · 9 queued · 0 failed · building git:linux@85068c1e4f2a \
             (compile, 3m12s of ~7m cold)"
        );
        assert_eq!(
            builds_part(&status(vec![
                activity("git:linux@v6.1", Step::Configure, 8, 4000),
                activity("git:linux@v6.2", Step::Source, 2, 420),
            ])),
            " · building git:linux@v6.1 (configure, 8s of ~1h07m cold) and 1 more"
        );
        assert_eq!(builds_part(&status(Vec::new())), "");
    }

    #[test]
    fn builds_ahead_count_what_is_under_way_and_what_is_pending() {
        let mut st = status(vec![activity("git:linux@v6.1", Step::Compile, 192, 420)]);
        // Nothing pending: the rest of the build under way.
        assert_eq!(build_seconds_left(&st), 228.0);
        // Two more at the estimate under way, before any build ended.
        st.builds_pending = 2;
        assert_eq!(build_seconds_left(&st), 228.0 + 840.0);
        // At the median of the builds done once there is one.
        st.median_build_seconds = 130.0;
        assert_eq!(build_seconds_left(&st), 228.0 + 260.0);
        // Past its estimate, a build is about to end.
        st.cells[0].activities = vec![activity("git:linux@v6.1", Step::Link, 500, 420)];
        assert_eq!(build_seconds_left(&st), 260.0);
        // No build under way nor done: the documented cold build.
        st.cells[0].activities.clear();
        st.median_build_seconds = 0.0;
        assert_eq!(build_seconds_left(&st), 840.0);
    }

    #[test]
    fn agents_show_a_build_in_state_and_current() {
        let agent =
            |id: &str, connected: bool, run: &str, activity: Option<RunActivity>| AgentInfo {
                agent_id: id.into(),
                capabilities: Some(farm_proto::Capabilities {
                    arch: "x86_64".into(),
                    kernel_release: "6.1.0-18-amd64".into(),
                    cpus_online: 2,
                    ..Default::default()
                }),
                connected,
                current_run: run.into(),
                activity,
                ..Default::default()
            };
        let t = agents_table(&[
            agent(
                "a-3f2c9e1d0b7a",
                true,
                "m-1.c0.r0",
                Some(activity("git:linux@v6.1", Step::Compile, 192, 420)),
            ),
            agent("a-77c0ffee0001", true, "m-1.c1.r0", None),
            agent("a-0000deadbeef", false, "", None),
        ]);
        assert_eq!(
            t,
            "AGENT            STATE      ARCH     KERNEL                   CPUS NODES  IDENTITY         CURRENT\n\
             a-3f2c9e1d0b7a   building   x86_64   6.1.0-18-amd64              2     1  -                m-1.c0.r0 · building git:linux@v6.1 (compile, 3m12s of ~7m cold)\n\
             a-77c0ffee0001   connected  x86_64   6.1.0-18-amd64              2     1  -                m-1.c1.r0\n\
             a-0000deadbeef   gone       x86_64   6.1.0-18-amd64              2     1  -                -\n"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(duration(45.4), "45s");
        assert_eq!(duration(192.0), "3m12s");
        assert_eq!(duration(12_660.0), "3h31m");
        assert_eq!(rough(420), "7m");
        assert_eq!(rough(449), "7m");
        assert_eq!(rough(450), "8m");
        assert_eq!(rough(3_900), "1h05m");
    }
}
