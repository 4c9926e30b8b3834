//! `farmctl`: submit, watch and inspect benchmark matrices, or run one on
//! this machine with an embedded coordinator and a local agent.
//!
//! Exit codes: 0 success, 1 runs failed (or the farm could not be reached),
//! 2 bad input (a matrix file, an id, a flag).

// farmctl is a command-line tool: its modules print results to stdout, and
// progress and errors to stderr, for the user, by design.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod analyze;
mod bisect;
mod client;
mod dates;
mod input;
mod local;
mod render;
mod report;
mod results;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use farm_proto::{CancelMatrixRequest, GetResultsRequest, ListAgentsRequest, SubmitMatrixRequest};
use tracing::Instrument;

use input::{BadInput, read_matrix};
use results::{outcome, print_results};

#[derive(Parser)]
#[command(
    version,
    about = "Scheduler regression farm: submit, watch and run benchmark matrices"
)]
struct Cli {
    /// The coordinator's gRPC URL, or the URLs of a highly available
    /// farm's coordinators, comma-separated: farmctl finds the leader.
    #[arg(
        long,
        global = true,
        default_value = "http://127.0.0.1:7700",
        env = "FARM_COORDINATOR"
    )]
    coordinator: farm_runtime::coordinators::Urls,
    /// File holding the submitter token (the coordinator's DATA_DIR/submit.token,
    /// mode 0600), over plaintext. The token itself may come in the
    /// environment as FARM_TOKEN, never on the command line.
    #[arg(long, global = true, env = "FARM_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    transport: farm_runtime::tls::TransportArgs,
    /// Export traces over OTLP/gRPC to this collector (e.g.
    /// http://127.0.0.1:4317); the coordinator's spans of a submitted
    /// matrix then join farmctl's trace.
    #[arg(
        long,
        global = true,
        env = "OTEL_EXPORTER_OTLP_ENDPOINT",
        value_name = "URL"
    )]
    otlp_endpoint: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Submit a matrix file; prints the matrix id (a schedule's id when
    /// the file has a [schedule]).
    Submit { file: PathBuf },
    /// List the continuous matrices: when they run, their executions, and
    /// what the latest one found.
    Schedules {
        #[arg(long)]
        json: bool,
    },
    /// Stop a schedule; executions already submitted run on.
    Unschedule { id: String },
    /// Follow a matrix until it ends (or a bisection, `b-…`, as `farmctl
    /// bisection`).
    Watch { id: String },
    /// List the agents the coordinator knows.
    Agents,
    /// Show a matrix's results.
    Results {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Cancel a matrix's remaining runs.
    Cancel { id: String },
    /// Bisect a regressed cell of a matrix (`bisect m-… --cell N`): its
    /// baseline's kernel is good, its own kernel bad, and the kernels
    /// between (in order) are searched for the first bad one, each step a
    /// matrix of its own. Or bisect explicitly (`bisect --good K --bad K
    /// --workload W`, with --param, --state, --guest): the ends are
    /// measured by a matrix first, then bisected; for loads, builds or
    /// several hosts, write a matrix file and bisect its cell. Follows it to
    /// its outcome; exits 0 when the culprit is confirmed.
    Bisect {
        /// The matrix whose cell regressed.
        #[arg(required_unless_present = "good", conflicts_with = "good")]
        matrix: Option<String>,
        /// The regressed cell (`farmctl results` numbers them).
        #[arg(long, required_unless_present = "good", conflicts_with = "good")]
        cell: Option<u32>,
        #[command(flatten)]
        ends: Box<EndsArgs>,
        /// Kernels between good and bad, in order (comma-separated, as the
        /// kernels axis writes them).
        #[arg(long, value_delimiter = ',')]
        between: Vec<String>,
        /// A file of kernels between good and bad, one per line, in order
        /// (e.g. `git rev-list --first-parent --reverse GOOD..BAD~` with
        /// `git:REPO@` before each).
        #[arg(long, value_name = "FILE")]
        between_file: Option<PathBuf>,
        /// The kernels between are the first-parent commits from good to
        /// bad, listed by an agent with their repository (both ends
        /// `git:REPO@REF`; good must be an ancestor of bad).
        #[arg(long, conflicts_with_all = ["between", "between_file"])]
        git_range: bool,
        /// The metric (default: the cell's primary metric).
        #[arg(long)]
        metric: Option<String>,
        /// Runs of each kernel per round (default 10).
        #[arg(long)]
        runs: Option<u32>,
        /// The most runs of each kernel in one step (default 30).
        #[arg(long)]
        max_runs: Option<u32>,
        #[arg(long)]
        json: bool,
    },
    /// Follow a bisection (or show it, once ended).
    Bisection {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Run one catalogued workload here, in the foreground, as agents do
    /// (`farmctl workload --list`; `farmctl workload lu --param threads=2`).
    #[command(disable_help_flag = true)]
    Workload {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Write a matrix's report: one self-contained HTML file with plots (or
    /// a bisection's, `b-…`: its steps drawn over the kernels).
    Report {
        id: String,
        /// Where to write it (default: `<ID>.html`).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Read it from the store `farmctl run --data-dir DIR` kept, with
        /// a coordinator of its own (none needs to be running).
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// The farm's statistics on files of numbers, one per line.
    Analyze {
        #[command(subcommand)]
        what: Analyze,
    },
    /// Run a matrix on this machine: embedded coordinator plus a local agent.
    Run {
        file: PathBuf,
        /// The results as JSON (with --bisect, one document: `results` and
        /// `bisections`).
        #[arg(long)]
        json: bool,
        /// Keep the store (matrices, results, bisections) here instead of a
        /// temporary directory; `farmctl report --data-dir DIR ID` reads
        /// it again.
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
        /// Also write the HTML report (as `farmctl report`) to this file.
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
        /// Then bisect each regressed cell whose kernels are `git:` kernels
        /// of one repository over its git range (as `farmctl bisect
        /// --git-range`); exits 0 only when every culprit is confirmed.
        #[arg(long)]
        bisect: bool,
        /// With --bisect: runs of each kernel per round (default 10).
        #[arg(long, requires = "bisect")]
        runs: Option<u32>,
        /// With --bisect: the most runs of each kernel in a step (default 30).
        #[arg(long, requires = "bisect")]
        max_runs: Option<u32>,
        /// With --bisect: the metric each step is judged by (default: the
        /// regressed cell's primary metric that moved the most).
        #[arg(long, requires = "bisect")]
        metric: Option<String>,
        #[command(flatten)]
        machine: local::MachineArgs,
    },
}

/// `farmctl bisect --good K --bad K`: the cell to bisect, named by flags.
#[derive(clap::Args)]
struct EndsArgs {
    /// The good kernel, as the kernels axis writes it.
    #[arg(long, requires_all = ["bad", "workload"])]
    good: Option<String>,
    /// The bad kernel.
    #[arg(long, requires = "good")]
    bad: Option<String>,
    /// The workload of the catalogue (`farmctl workload --list`).
    #[arg(long, requires = "good")]
    workload: Option<String>,
    /// A workload parameter, KEY=VALUE (repeated).
    #[arg(long = "param", value_name = "KEY=VALUE", requires = "good")]
    params: Vec<String>,
    /// A key of the machine state, as a matrix's [[states]] writes it,
    /// KEY=VALUE (repeated): hotplug=cycle:1, autogroup=0, cgroup=separate.
    #[arg(long = "state", value_name = "KEY=VALUE", requires = "good")]
    state: Vec<String>,
    /// A key of the guest, as a matrix's [guest] writes it, KEY=VALUE
    /// (repeated): cpus=4, numa_nodes=2, memory_mib=512.
    #[arg(long = "guest", value_name = "KEY=VALUE", requires = "good")]
    guest: Vec<String>,
    /// Runs of each end before the bisection (default 5).
    #[arg(long, requires = "good")]
    repetitions: Option<u32>,
    /// Each run's timeout in seconds (a matrix's `timeout_s`).
    #[arg(long, requires = "good")]
    timeout_s: Option<u32>,
    /// The smallest change called a regression (a matrix's
    /// `[verdict] min_effect_pct`).
    #[arg(long, requires = "good")]
    min_effect_pct: Option<f64>,
}

#[derive(Subcommand)]
enum Analyze {
    /// Compare a candidate's runs with a baseline's: verdict, ratio of
    /// medians with its confidence interval, Mann-Whitney p-value.
    Compare {
        #[arg(long)]
        baseline: PathBuf,
        #[arg(long)]
        candidate: PathBuf,
        /// Larger numbers are better (throughputs); by default they are worse (times).
        #[arg(long)]
        higher_is_better: bool,
        /// The smallest change, in percent, called a regression or an improvement.
        #[arg(long, value_name = "PCT")]
        min_effect: Option<f64>,
        #[arg(long)]
        json: bool,
    },
    /// Find the change points of a series, in order, and its drift over its
    /// last points since the last change point, if it drifts.
    Changepoints {
        #[arg(long)]
        series: PathBuf,
        /// The last points over which a drift is judged (10 to 1,000, as a
        /// matrix's `[verdict] drift_window`).
        #[arg(long, value_name = "POINTS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(10..=1000))]
        drift_window: u64,
        #[arg(long)]
        json: bool,
    },
}

impl Command {
    /// The subcommand's name, for its trace span.
    fn name(&self) -> &'static str {
        match self {
            Command::Submit { .. } => "submit",
            Command::Schedules { .. } => "schedules",
            Command::Unschedule { .. } => "unschedule",
            Command::Watch { .. } => "watch",
            Command::Agents => "agents",
            Command::Results { .. } => "results",
            Command::Cancel { .. } => "cancel",
            Command::Bisect { .. } => "bisect",
            Command::Bisection { .. } => "bisection",
            Command::Workload { .. } => "workload",
            Command::Report { .. } => "report",
            Command::Analyze { .. } => "analyze",
            Command::Run { .. } => "run",
        }
    }
}

fn main() -> ExitCode {
    // Out of the environment first: `farmctl run` starts an agent whose
    // workloads inherit it, and they may not hold the submitter's token.
    let env_token = std::env::var("FARM_TOKEN").ok();
    // Unsafe allowed here only: since edition 2024 removing a variable is
    // unsafe, and the token must not reach the children.
    // SAFETY: no other thread exists yet (no runtime, no tracing), so
    // nothing reads the environment while it changes.
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("FARM_TOKEN")
    };
    let cli = Cli::parse();
    if let Command::Workload { args } = cli.command {
        // Before any runtime exists: the workload's process must hold only
        // the workload's threads, since agents sample them.
        let code = farm_workload::cli::main(args);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    if let Command::Analyze { what } = &cli.command {
        // Plain files, no farm: no runtime, no token, no traces.
        let _logs = farm_runtime::trace::init("farmctl", "warn", None);
        let done = match what {
            Analyze::Compare {
                baseline,
                candidate,
                higher_is_better,
                min_effect,
                json,
            } => analyze::compare(&analyze::CompareArgs {
                baseline,
                candidate,
                higher_is_better: *higher_is_better,
                min_effect: *min_effect,
                json: *json,
            }),
            Analyze::Changepoints {
                series,
                drift_window,
                json,
            } => analyze::changepoints(series, *drift_window as usize, *json),
        };
        return match done {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                let bad = e.chain().any(|c| c.is::<BadInput>());
                ExitCode::from(if bad { 2 } else { 1 })
            }
        };
    }
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    // Dropped before the runtime: flushing traces needs its tonic channel.
    let traces = {
        let _rt = rt.enter();
        farm_runtime::trace::init("farmctl", "warn", cli.otlp_endpoint.as_deref())
    };
    let _traces = match traces {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let span = tracing::info_span!(target: farm_runtime::trace::TARGET, "farmctl",
        command = cli.command.name());
    match rt.block_on(dispatch(cli, env_token).instrument(span)) {
        Ok(code) => code,
        Err(e) => {
            let bad = e.chain().any(|c| c.is::<BadInput>())
                || e.chain().any(|c| {
                    c.is::<farm_runtime::tls::Error>() || c.is::<farm_runtime::secret::Error>()
                })
                || e.chain()
                    .filter_map(|c| c.downcast_ref::<tonic::Status>())
                    .any(|s| {
                        matches!(
                            s.code(),
                            tonic::Code::InvalidArgument | tonic::Code::NotFound
                        )
                    });
            let msg = match e.downcast_ref::<tonic::Status>() {
                Some(s) => s.message().to_string(),
                None => format!("{e:#}"),
            };
            eprintln!("error: {msg}");
            ExitCode::from(if bad { 2 } else { 1 })
        }
    }
}

/// `farmctl report ID`: a matrix's report, or a bisection's (`b-…`).
async fn write_report(c: &mut client::Client, id: &str, output: Option<PathBuf>) -> Result<()> {
    let path = output.unwrap_or_else(|| PathBuf::from(format!("{id}.html")));
    if id.starts_with("b-") {
        bisect::write_report(c, id, &path).await?;
    } else {
        let r = c
            .get_results(GetResultsRequest {
                matrix_id: id.to_owned(),
            })
            .await?
            .into_inner();
        std::fs::write(&path, report::render(&r))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    eprintln!("wrote {}", path.display());
    Ok(())
}

async fn dispatch(cli: Cli, env_token: Option<String>) -> Result<ExitCode> {
    if let Command::Run {
        file,
        json,
        data_dir,
        report,
        bisect,
        runs,
        max_runs,
        metric,
        machine,
    } = &cli.command
    {
        let bisect = bisect.then(|| local::Bisect {
            runs: runs.unwrap_or(0),
            max_runs: max_runs.unwrap_or(0),
            metric: metric.clone().unwrap_or_default(),
        });
        return local::run(
            file,
            *json,
            data_dir.as_deref(),
            report.as_deref(),
            bisect,
            machine,
        )
        .await;
    }
    if let Command::Report {
        id,
        output,
        data_dir: Some(dir),
    } = &cli.command
    {
        // A store farmctl run kept: no coordinator serves it, so one of
        // farmctl's own does, and only for this. A directory that holds no
        // store is refused rather than made into an empty one.
        if !dir.join(farm_coordinator::server::DB_FILE).is_file() {
            return Err(BadInput(format!(
                "--data-dir {}: no farm store there (a directory `farmctl run --data-dir` kept)",
                dir.display()
            ))
            .into());
        }
        let embedded = local::Embedded::start(dir).await?;
        let mut c = embedded.client().await?;
        let written = write_report(&mut c, id, output.clone()).await;
        embedded.stop().await?;
        written?;
        return Ok(ExitCode::SUCCESS);
    }
    let files = cli.transport.files()?;
    let access = client::access(
        &cli.coordinator,
        cli.token_file.as_deref(),
        env_token,
        files,
        cli.transport.insecure_plaintext,
    )?;
    let mut c = client::connect_leader(&cli.coordinator, &access).await?;
    match cli.command {
        Command::Submit { file } => {
            let toml = read_matrix(&file)?;
            let r = c
                .submit_matrix(SubmitMatrixRequest {
                    file_name: file.display().to_string().into_bytes(),
                    toml: toml.into_bytes(),
                })
                .await?
                .into_inner();
            if r.schedule_id.is_empty() {
                eprintln!("submitted {} cells, {} runs", r.cells, r.runs);
                println!("{}", r.matrix_id);
            } else {
                let next = if r.next_unix_ms > 0 {
                    format!("; next execution {}", render::utc(r.next_unix_ms))
                } else {
                    String::new()
                };
                eprintln!(
                    "schedule made: {} cells, {} runs an execution{next}",
                    r.cells, r.runs
                );
                println!("{}", r.schedule_id);
            }
        }
        Command::Watch { id } if id.starts_with("b-") => {
            let confirmed = bisect::follow(&mut c, &id, false).await?;
            return Ok(if confirmed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        Command::Watch { id } => {
            watch::watch(&mut c, &id, Some((&cli.coordinator, &access))).await?;
            let r = c
                .get_results(GetResultsRequest { matrix_id: id })
                .await?
                .into_inner();
            return Ok(outcome(&r));
        }
        Command::Agents => {
            let r = c.list_agents(ListAgentsRequest {}).await?.into_inner();
            print!("{}", render::agents_table(&r.agents));
        }
        Command::Results { id, json } => {
            let r = c
                .get_results(GetResultsRequest { matrix_id: id })
                .await?
                .into_inner();
            print_results(&r, json)?;
            return Ok(outcome(&r));
        }
        Command::Report { id, output, .. } => write_report(&mut c, &id, output).await?,
        Command::Schedules { json } => {
            let r = c
                .list_schedules(farm_proto::ListSchedulesRequest {})
                .await?
                .into_inner();
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&render::schedules_json(&r.schedules))
                        .context("encoding JSON")?
                );
            } else {
                print!("{}", render::schedules_table(&r.schedules));
            }
        }
        Command::Unschedule { id } => {
            c.cancel_schedule(farm_proto::CancelScheduleRequest {
                schedule_id: id.clone(),
            })
            .await?;
            // The coordinator stops only future executions: say so, since
            // one may be running now.
            println!(
                "unscheduled {id}: no new executions; one running goes on (farmctl cancel m-…)"
            );
        }
        Command::Bisect {
            matrix,
            cell,
            ends,
            between,
            between_file,
            git_range,
            metric,
            runs,
            max_runs,
            json,
        } => {
            let between = bisect::between(&between, between_file.as_deref())?;
            let EndsArgs {
                good,
                bad,
                workload,
                params,
                state,
                guest,
                repetitions,
                timeout_s,
                min_effect_pct,
            } = *ends;
            let (matrix_id, cell) = match (matrix, cell, good) {
                (Some(m), Some(cell), _) => (m, cell),
                (_, _, Some(good)) => {
                    let ends = bisect::ends::Ends {
                        good,
                        bad: bad.unwrap_or_default(),
                        workload: workload.unwrap_or_default(),
                        params,
                        state,
                        guest,
                        repetitions: repetitions.unwrap_or(bisect::ends::DEFAULT_REPETITIONS),
                        timeout_s,
                        min_effect_pct,
                    };
                    let leaders = Some((&cli.coordinator, &access));
                    bisect::ends::measure(&mut c, &ends, git_range, leaders).await?
                }
                _ => {
                    return Err(
                        BadInput("give a matrix and --cell, or --good and --bad".into()).into(),
                    );
                }
            };
            let req = farm_proto::StartBisectionRequest {
                matrix_id,
                cell,
                between,
                metric: metric.unwrap_or_default(),
                runs: runs.unwrap_or(0),
                max_runs: max_runs.unwrap_or(0),
                git_range,
            };
            let confirmed = bisect::start(&mut c, req, json).await?;
            return Ok(if confirmed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        Command::Bisection { id, json } => {
            let confirmed = bisect::follow(&mut c, &id, json).await?;
            return Ok(if confirmed {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        Command::Cancel { id } => {
            let r = c
                .cancel_matrix(CancelMatrixRequest { matrix_id: id })
                .await?
                .into_inner();
            println!("cancelled {} runs", r.cancelled_runs);
        }
        Command::Run { .. } | Command::Workload { .. } | Command::Analyze { .. } => {
            unreachable!("handled above")
        }
    }
    Ok(ExitCode::SUCCESS)
}
