//! `farmctl run`: the whole farm in one process, on this machine.
//!
//! An embedded coordinator listens on a loopback port with a private data
//! directory, a local agent dials it exactly as a remote one would, and the
//! matrix goes through the same gRPC path as `submit` + `watch` + `results`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use farm_proto::{GetResultsRequest, SubmitMatrixRequest};
use tokio::sync::oneshot;

use crate::{BadInput, client, outcome, print_results, read_matrix, watch};

/// `farmctl run --bisect`: each regressed cell whose kernel and baseline's
/// kernel are `git:` kernels of one repository is bisected over its git
/// range once the matrix is done, with these runs per round and per step.
#[derive(Debug, Clone, Copy)]
pub struct Bisect {
    pub runs: u32,
    pub max_runs: u32,
}

pub async fn run(
    file: &Path,
    json: bool,
    data_dir: Option<&Path>,
    report: Option<&Path>,
    bisect: Option<Bisect>,
) -> Result<ExitCode> {
    let toml = read_matrix(file)?;
    let file_name = file.display().to_string();
    // Refuse a bad file before starting anything.
    let matrix =
        farm_coordinator::matrix::parse(&file_name, &toml).map_err(|e| BadInput(e.to_string()))?;
    if matrix.schedule.is_some() {
        return Err(BadInput(format!(
            "{file_name}: a matrix with a [schedule] is continuous: `farmctl submit` it to a \
             coordinator that stays up; `farmctl run` runs a matrix once"
        ))
        .into());
    }

    let tmp;
    let dir = match data_dir {
        Some(d) => d.to_path_buf(),
        None => {
            tmp = tempfile::tempdir().context("creating a data directory")?;
            tmp.path().to_path_buf()
        }
    };
    let coordinator = farm_coordinator::Options {
        listen: "127.0.0.1:0".parse().context("loopback address")?,
        data_dir: dir.clone(),
        scheduler: Default::default(),
        tls: None,
        insecure_plaintext: false,
        ha: None,
        archive: None,
    }
    .build()
    .await?;
    let url = format!("http://{}", coordinator.local_addr());
    let tokens = coordinator.tokens().clone();
    let (stop_coordinator, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(coordinator.run(async {
        let _ = stopped.await;
    }));

    // The local agent runs workloads through this very binary (`farmctl
    // workload ...`), so `cargo run -p farmctl` is all a first run needs.
    let workload = farm_agent::run::WorkloadCommand {
        program: std::env::current_exe().context("locating farmctl")?,
        leading_args: vec!["workload".into()],
        externals: farm_agent::external::discover_installed(&[]),
        guest_cache: farm_agent::executor::guest::default_cache(),
        // As `farm-agent --kernel-dir`: where `file:` kernels may come from.
        kernel_dirs: std::env::var_os("FARM_KERNEL_DIRS")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default(),
        trees: local_trees()?,
        guest_cache_max_bytes: farm_agent::run::DEFAULT_GUEST_CACHE_MAX_BYTES,
    };
    let agent = farm_agent::Options {
        coordinators: farm_proto::coordinators::Urls::parse(&url)?,
        token: Some(tokens.agent.clone()),
        workload,
        root: "/".into(),
        state_dir: dir.join("agent"),
        tls: None,
    }
    .build()?;
    let (stop_agent, agent_stopped) = oneshot::channel::<()>();
    let agent_task = tokio::spawn(agent.run(async {
        let _ = agent_stopped.await;
    }));

    let mut c = client::connect(&url, &client::Access::token(&tokens.submit)).await?;
    // Submit once the local agent is in, so nothing waits for "no agent".
    let t = std::time::Instant::now();
    while c
        .list_agents(farm_proto::ListAgentsRequest {})
        .await?
        .into_inner()
        .agents
        .iter()
        .all(|a| !a.connected)
    {
        anyhow::ensure!(
            t.elapsed().as_secs() < 30,
            "the local agent did not connect within 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let submitted = c
        .submit_matrix(SubmitMatrixRequest {
            file_name: file_name.into_bytes(),
            toml: toml.into_bytes(),
        })
        .await?
        .into_inner();
    eprintln!(
        "matrix {}: {} cells, {} runs",
        submitted.matrix_id, submitted.cells, submitted.runs
    );
    watch::watch(&mut c, &submitted.matrix_id, None).await?;
    let results = c
        .get_results(GetResultsRequest {
            matrix_id: submitted.matrix_id,
        })
        .await?
        .into_inner();
    // With --bisect --json, one document: the results and the bisections.
    if !(json && bisect.is_some()) {
        print_results(&results, json)?;
    }
    if let Some(path) = report {
        std::fs::write(path, crate::report::render(&results))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("report: {}", path.display());
    }

    let mut code = outcome(&results);
    if let Some(opts) = bisect {
        let regressed: Vec<u32> = results
            .cells
            .iter()
            .filter(|c| c.verdict == farm_proto::Verdict::Regression as i32)
            .map(|c| c.cell_index)
            .collect();
        if regressed.is_empty() {
            eprintln!("no cell regressed: nothing to bisect");
        }
        let matrix_id = results.status.clone().unwrap_or_default().matrix_id;
        let mut bisections = Vec::new();
        for cell in regressed {
            eprintln!("bisecting cell {cell} over its git range");
            let req = farm_proto::StartBisectionRequest {
                matrix_id: matrix_id.clone(),
                cell,
                git_range: true,
                runs: opts.runs,
                max_runs: opts.max_runs,
                ..Default::default()
            };
            let id = crate::bisect::started(&mut c, req).await?;
            let f = crate::bisect::follow_quietly(&mut c, &id, !json).await?;
            if !f.confirmed {
                code = ExitCode::from(1);
            }
            bisections.push(f.json);
        }
        if json {
            let v = serde_json::json!({
                "results": crate::render::results_json(&results),
                "bisections": bisections,
            });
            println!(
                "{}",
                serde_json::to_string_pretty(&v).context("encoding JSON")?
            );
        }
    }

    let _ = stop_agent.send(());
    let _ = agent_task.await;
    let _ = stop_coordinator.send(());
    served.await.context("coordinator task")??;
    Ok(code)
}

/// As `farm-agent --kernel-repo`, `--build-user`, `--build-configs` and
/// `--build-patches`: the repositories `git:` kernels are built from
/// (`FARM_KERNEL_REPOS`, NAME=PATH, comma-separated), the user that builds
/// them (`FARM_BUILD_USER`, farm-build by default), and the operator's
/// base configurations and patches (`FARM_BUILD_CONFIGS`,
/// `FARM_BUILD_PATCHES`).
fn local_trees() -> anyhow::Result<Option<farm_agent::executor::guest::build::Trees>> {
    use farm_agent::executor::guest::build::{BuildUser, Repo, Trees};
    let Some(v) = std::env::var_os("FARM_KERNEL_REPOS") else {
        return Ok(None);
    };
    let repos = v
        .to_string_lossy()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(str::parse::<Repo>)
        .collect::<Result<Vec<_>, _>>()
        .context("FARM_KERNEL_REPOS")?;
    let user = std::env::var("FARM_BUILD_USER").unwrap_or_else(|_| "farm-build".into());
    let user = BuildUser::lookup(&user).context("FARM_BUILD_USER")?;
    // As --build-configs and --build-patches.
    let dir = |var: &str| std::env::var_os(var).map(std::path::PathBuf::from);
    let files = farm_agent::executor::guest::build::files::Files::new(
        dir("FARM_BUILD_CONFIGS"),
        dir("FARM_BUILD_PATCHES"),
    )?;
    Ok(Some(Trees::new(repos, user)?.with_files(files)))
}
