//! `farmctl run`: the whole farm in one process, on this machine.
//!
//! An embedded coordinator listens on a loopback port with a private data
//! directory, a local agent dials it exactly as a remote one would, and the
//! matrix goes through the same gRPC path as `submit` + `watch` + `results`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use farm_proto::{GetResultsRequest, SubmitMatrixRequest};
use tokio::sync::oneshot;

use crate::input::{BadInput, read_matrix};
use crate::results::{outcome, print_results};
use crate::{client, watch};

/// `farmctl run --bisect`: each regressed cell whose kernel and baseline's
/// kernel are `git:` kernels of one repository is bisected over its git
/// range once the matrix is done, with these runs per round and per step.
#[derive(Debug, Clone)]
pub struct Bisect {
    pub runs: u32,
    pub max_runs: u32,
    /// Empty: the cell's primary metric that moved the most.
    pub metric: String,
}

/// Where `farmctl run`'s agent keeps things and what it may build from:
/// `farm-agent`'s flags of the same names, also read from the same
/// environment variables.
#[derive(clap::Args, Debug, Clone)]
pub struct MachineArgs {
    /// Where Debian kernels, guest images and kernels built from trees are
    /// cached, kept across runs (default: /var/cache/farm/guests for root,
    /// else ~/.cache/farm/guests). The build user must be able to reach
    /// it: a directory on the way it cannot search is refused at start.
    #[arg(long, env = "FARM_GUEST_CACHE", value_name = "DIR")]
    pub guest_cache: Option<PathBuf>,
    /// A repository `git:NAME@REF` kernels are built from, NAME=PATH
    /// (repeated, or comma-separated).
    #[arg(
        long = "kernel-repo",
        env = "FARM_KERNEL_REPOS",
        value_name = "NAME=PATH",
        value_delimiter = ','
    )]
    pub kernel_repos: Vec<String>,
    /// The unprivileged user kernels are built as (`nobody` will do; it
    /// must read the repositories).
    #[arg(
        long,
        env = "FARM_BUILD_USER",
        value_name = "USER",
        default_value = "farm-build"
    )]
    pub build_user: String,
}

/// A coordinator in this process on a loopback port, over `dir`: for a
/// local run, or to read what one left there (`farmctl report
/// --data-dir`).
pub struct Embedded {
    pub url: String,
    pub tokens: farm_coordinator::auth::Tokens,
    stop: oneshot::Sender<()>,
    served: tokio::task::JoinHandle<Result<(), farm_coordinator::server::Error>>,
}

impl Embedded {
    pub async fn start(dir: &Path) -> Result<Embedded> {
        let coordinator = farm_coordinator::Options {
            listen: "127.0.0.1:0".parse().context("loopback address")?,
            data_dir: dir.to_path_buf(),
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
        let (stop, stopped) = oneshot::channel::<()>();
        let served = tokio::spawn(coordinator.run(async {
            let _ = stopped.await;
        }));
        Ok(Embedded {
            url,
            tokens,
            stop,
            served,
        })
    }

    /// A submitter's client of it.
    pub async fn client(&self) -> Result<client::Client> {
        client::connect(&self.url, &client::Access::token(&self.tokens.submit)).await
    }

    pub async fn stop(self) -> Result<()> {
        let _ = self.stop.send(());
        self.served.await.context("coordinator task")??;
        Ok(())
    }
}

pub async fn run(
    file: &Path,
    json: bool,
    data_dir: Option<&Path>,
    report: Option<&Path>,
    bisect: Option<Bisect>,
    machine: &MachineArgs,
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
    let trees = local_trees(machine)?;

    let tmp;
    let dir = match data_dir {
        Some(d) => d.to_path_buf(),
        None => {
            tmp = tempfile::tempdir().context("creating a data directory")?;
            tmp.path().to_path_buf()
        }
    };
    let coordinator = Embedded::start(&dir).await?;
    let url = coordinator.url.clone();

    // The local agent runs workloads through this very binary (`farmctl
    // workload ...`), so `cargo run -p farmctl` is all a first run needs.
    let workload = farm_agent::run::WorkloadCommand {
        program: std::env::current_exe().context("locating farmctl")?,
        leading_args: vec!["workload".into()],
        externals: farm_agent::external::discover_installed(&[]),
        guest_cache: machine
            .guest_cache
            .clone()
            .or_else(farm_agent::executor::guest::default_cache),
        // As `farm-agent --kernel-dir`: where `file:` kernels may come from.
        kernel_dirs: std::env::var_os("FARM_KERNEL_DIRS")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default(),
        trees,
        guest_cache_max_bytes: farm_agent::run::DEFAULT_GUEST_CACHE_MAX_BYTES,
    };
    let agent = farm_agent::Options {
        coordinators: farm_runtime::coordinators::Urls::parse(&url)?,
        token: Some(coordinator.tokens.agent.clone()),
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

    let mut c = coordinator.client().await?;
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
        let (bisect_code, bisections) =
            bisect_regressed(&mut c, &results, &opts, json, report).await?;
        // Only a confirmed culprit for every regressed cell is a success.
        if bisect_code != ExitCode::SUCCESS {
            code = bisect_code;
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
    if data_dir.is_some() {
        eprintln!(
            "kept in {}: `farmctl report --data-dir {} ID` writes any of its reports again",
            dir.display(),
            dir.display()
        );
    }

    let _ = stop_agent.send(());
    let _ = agent_task.await;
    coordinator.stop().await?;
    Ok(code)
}

/// `farmctl run --bisect` after the matrix: bisects each regressed cell
/// over its git range. 0 only when there was something to bisect and
/// every culprit was confirmed; 1 when nothing regressed, a cell could not
/// be bisected, or a culprit was not confirmed. With `report`, each
/// bisection's report is written beside the matrix's.
async fn bisect_regressed(
    c: &mut client::Client,
    results: &farm_proto::GetResultsResponse,
    opts: &Bisect,
    json: bool,
    report: Option<&Path>,
) -> Result<(ExitCode, Vec<serde_json::Value>)> {
    let regressed: Vec<u32> = results
        .cells
        .iter()
        .filter(|c| c.verdict == farm_proto::Verdict::Regression as i32)
        .map(|c| c.cell_index)
        .collect();
    let mut code = ExitCode::SUCCESS;
    if regressed.is_empty() {
        eprintln!("no cell regressed: nothing to bisect");
        // An undecided cell is not a kernel without a regression: say which
        // could not decide, and what its comparison found (with --json the
        // table was not printed).
        for c in results
            .cells
            .iter()
            .filter(|c| c.verdict == farm_proto::Verdict::Inconclusive as i32)
        {
            eprintln!("cell {} ({}) is inconclusive", c.cell_index, c.cell_name);
            for m in c
                .metrics
                .iter()
                .filter(|m| m.primary && m.verdict == farm_proto::Verdict::Inconclusive as i32)
            {
                eprintln!(
                    "  {}: ×{:.2} [{:.2}, {:.2}], {} vs {} runs",
                    m.name,
                    m.ratio.unwrap_or(f64::NAN),
                    m.ci_low,
                    m.ci_high,
                    m.n,
                    m.baseline_n
                );
                for f in &m.findings {
                    eprintln!("    {f}");
                }
            }
        }
        code = ExitCode::from(1);
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
            metric: opts.metric.clone(),
            ..Default::default()
        };
        // A cell the farm cannot bisect (kernels that are not commits of
        // one repository) is not bad input to `run`: the matrix was fine.
        let id = match crate::bisect::started(c, req).await {
            Ok(id) => id,
            Err(e) => match e.downcast_ref::<tonic::Status>() {
                Some(s)
                    if matches!(
                        s.code(),
                        tonic::Code::InvalidArgument | tonic::Code::FailedPrecondition
                    ) =>
                {
                    eprintln!("cell {cell}: cannot be bisected: {}", s.message());
                    code = ExitCode::from(1);
                    continue;
                }
                _ => return Err(e),
            },
        };
        let f = crate::bisect::follow_quietly(c, &id, !json).await?;
        if !f.confirmed {
            code = ExitCode::from(1);
        }
        if let Some(path) = report {
            let beside = beside(path, &id);
            crate::bisect::write_report(c, &id, &beside).await?;
            eprintln!("bisection report: {}", beside.display());
        }
        bisections.push(f.json);
    }
    Ok((code, bisections))
}

/// `quick.html` and `b-1234` → `quick.b-1234.html`, in the same directory.
fn beside(report: &Path, id: &str) -> PathBuf {
    let stem = report
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "report".into());
    let ext = report
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    report.with_file_name(format!("{stem}.{id}{ext}"))
}

/// As `farm-agent --kernel-repo`, `--build-user`, `--build-configs` and
/// `--build-patches`: the repositories `git:` kernels are built from, the
/// user that builds them, and the operator's base configurations and
/// patches (`FARM_BUILD_CONFIGS`, `FARM_BUILD_PATCHES`).
fn local_trees(machine: &MachineArgs) -> anyhow::Result<Option<farm_agent::kernel::Trees>> {
    use farm_agent::kernel::{BuildUser, Repo, Trees};
    if machine.kernel_repos.is_empty() {
        return Ok(None);
    }
    let repos = machine
        .kernel_repos
        .iter()
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<Repo>())
        .collect::<Result<Vec<_>, _>>()
        // The error names the flag (`--kernel-repo `…``).
        .map_err(|e| BadInput(format!("{e} (or FARM_KERNEL_REPOS)")))?;
    let user = BuildUser::lookup(&machine.build_user)
        .map_err(|e| BadInput(format!("--build-user (FARM_BUILD_USER): {e}")))?;
    // As --build-configs and --build-patches.
    let dir = |var: &str| std::env::var_os(var).map(std::path::PathBuf::from);
    let files = farm_agent::kernel::files::Files::new(
        dir("FARM_BUILD_CONFIGS"),
        dir("FARM_BUILD_PATCHES"),
    )?;
    Ok(Some(Trees::new(repos, user)?.with_files(files)))
}
