//! Load generator: N simulated agents, each on its own connection and
//! stream, complete trivial runs as fast as the coordinator pushes them.
//!
//! It starts the coordinator binary as a child (so it can read its peak RSS
//! from /proc) on a fresh data directory, connects N agents, submits one
//! matrix of `--runs` runs, and reports throughput, the latency from a
//! result's acknowledgement to the agent's next assignment, and the
//! coordinator's peak RSS. With `--results-cells` it first runs a large
//! matrix of that many cells to its end, and with `--get-results-per-s`
//! asks for that matrix's results at that rate while the measured matrix
//! runs: what a `farmctl results` of a large matrix costs everyone else.
//! See docs/BENCHMARKS.md for the commands.

// An example is a program: it prints its report.
#![allow(clippy::print_stdout)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use farm_proto::{
    AgentMessage, Capabilities, CoordinatorMessage, Hello, Metric, RegisterRequest, RunResult,
    SubmitMatrixRequest, WatchMatrixRequest, agent_message,
    agent_service_client::AgentServiceClient, coordinator_message,
    farm_service_client::FarmServiceClient,
};
use tokio::sync::{Mutex, Semaphore, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::{Channel, Endpoint};

#[derive(Parser)]
struct Args {
    /// Simulated agents, each with its own TCP connection.
    #[arg(long, default_value_t = 1000)]
    agents: usize,
    /// Runs in the matrix (rounded to cells × repetitions).
    #[arg(long, default_value_t = 20_000)]
    runs: usize,
    /// The coordinator binary to start.
    #[arg(long, default_value = "target/release/farm-coordinator")]
    coordinator: PathBuf,
    /// Mean simulated run time (uniformly ±50%): 0 saturates the coordinator
    /// (throughput); a pause below saturation measures assignment latency
    /// as users see it.
    #[arg(long, default_value_t = 0)]
    work_ms: u64,
    /// Connections opened at once while the agents come up.
    #[arg(long, default_value_t = 256)]
    connect_concurrency: usize,
    /// Have the coordinator export traces (`--otlp-endpoint`) to an OTLP
    /// receiver in this process that counts the spans: what tracing costs.
    #[arg(long)]
    otlp: bool,
    /// Submit the matrix this many times, one after the other: every cell's
    /// history grows by a point each time, and the time the scheduler
    /// thread spends when each one ends (summaries, histories, change
    /// points, gauges: `farm_results_refresh_seconds`) is reported.
    #[arg(long, default_value_t = 1)]
    matrices: usize,
    /// With `--matrices`: each matrix on series of its own (its workload's
    /// `seconds` differs), so that every one is the latest of its series
    /// and no history grows.
    #[arg(long)]
    new_series: bool,
    /// Before the measured matrix, run one of this many cells (cpu-hog,
    /// one cell per thread count, 5 runs each, compared with the first
    /// cell) to its end; 0 runs none.
    #[arg(long, default_value_t = 0)]
    results_cells: usize,
    /// Calls of GetResults a second on the `--results-cells` matrix, each
    /// in its own task (a slow answer does not slow the rate), while the
    /// measured matrix runs.
    #[arg(long, default_value_t = 0.0)]
    get_results_per_s: f64,
    /// Mutual TLS: a fresh authority (`farm_coordinator::pki`), a
    /// certificate per simulated agent, and the coordinator on
    /// --tls-ca/--tls-cert/--tls-key; each agent handshakes with its own.
    #[arg(long)]
    tls: bool,
    /// More flags for the coordinator, one per use (e.g.
    /// `--coordinator-arg=--store --coordinator-arg=etcd://127.0.0.1:2379`).
    #[arg(long = "coordinator-arg", allow_hyphen_values = true)]
    coordinator_args: Vec<String>,
}

/// The large matrix `--results-cells` runs: every cell compared with the
/// first (so every cell has a verdict with its bootstrap interval), and no
/// reruns (`max_runs` = repetitions), so that it ends after 5 runs a cell.
fn results_matrix(cells: usize) -> String {
    let threads: Vec<String> = (1..=cells).map(|t| t.to_string()).collect();
    format!(
        "name = \"results\"\nrepetitions = 5\n[[workloads]]\nname = \"cpu-hog\"\n\
         params = {{ threads = [{}], seconds = 0.02 }}\n[baseline]\nthreads = 1\n\
         [verdict]\nmax_runs = 5\n",
        threads.join(", ")
    )
}

/// Submits `toml` and waits for the matrix to end.
async fn run_matrix(
    farm: &mut FarmServiceClient<
        tonic::service::interceptor::InterceptedService<Channel, Interceptor>,
    >,
    file_name: &str,
    toml: &str,
) -> Result<farm_proto::SubmitMatrixResponse> {
    let submitted = farm
        .submit_matrix(SubmitMatrixRequest {
            file_name: file_name.as_bytes().to_vec(),
            toml: toml.as_bytes().to_vec(),
        })
        .await?
        .into_inner();
    let mut watch = farm
        .watch_matrix(WatchMatrixRequest {
            matrix_id: submitted.matrix_id.clone(),
        })
        .await?
        .into_inner();
    while let Some(st) = watch.message().await? {
        if st.state != farm_proto::MatrixState::Running as i32 {
            break;
        }
    }
    Ok(submitted)
}

/// `farm_results_refresh_seconds` sum and count from the coordinator's /metrics.
fn results_refresh(addr: &str) -> Result<(f64, u64)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let value = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    Ok((
        value("farm_results_refresh_seconds_sum").unwrap_or(0.0),
        value("farm_results_refresh_seconds_count").unwrap_or(0.0) as u64,
    ))
}

/// An OTLP/gRPC trace receiver that only counts what it is sent.
#[derive(Clone, Default)]
struct SpanCounter(Arc<std::sync::atomic::AtomicU64>);

#[tonic::async_trait]
impl opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceService
    for SpanCounter
{
    async fn export(
        &self,
        req: tonic::Request<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest,
        >,
    ) -> Result<
        tonic::Response<
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse,
        >,
        tonic::Status,
    > {
        let n: usize = req
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(tonic::Response::new(Default::default()))
    }
}

/// Starts the receiver; its URL.
async fn span_counter(counter: SpanCounter) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(
                opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::TraceServiceServer::new(counter),
            )
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    Ok(format!("http://{addr}"))
}

struct Coord {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Coord {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn peak_rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmHWM:")
}

/// The coordinator's resident memory now (not its peak).
fn rss_mib(pid: u32) -> f64 {
    status_mib(pid, "VmRSS:")
}

fn status_mib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

/// Adds the bearer token to every request; a type that can be named, so
/// that a client can be passed around.
#[derive(Clone)]
struct Interceptor(tonic::metadata::MetadataValue<tonic::metadata::Ascii>);

impl tonic::service::Interceptor for Interceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut()
            .insert(farm_proto::AUTHORIZATION, self.0.clone());
        Ok(req)
    }
}

fn with_token(token: &str) -> Interceptor {
    Interceptor(format!("Bearer {token}").parse().expect("hex token"))
}

fn capabilities(i: usize) -> Capabilities {
    Capabilities {
        hostname: format!("sim-{i}"),
        arch: "x86_64".into(),
        kernel_release: "6.1.0-sim".into(),
        cpus_online: 2,
        cpus_possible: 2,
        executors: vec!["host".into()],
        workloads: vec!["cpu-hog".into(), "lu".into()],
        ..Default::default()
    }
}

/// Latencies in ms seen by one agent.
#[derive(Default)]
struct Samples {
    ack_to_assign: Vec<f64>,
    result_to_assign: Vec<f64>,
    completed: usize,
}

async fn agent(
    i: usize,
    channel: Channel,
    token: String,
    work: Duration,
    samples: Arc<Mutex<Samples>>,
    measuring: Arc<AtomicBool>,
) -> Result<()> {
    let mut client = AgentServiceClient::with_interceptor(channel, with_token(&token));
    let reg = client
        .register(RegisterRequest {
            capabilities: Some(capabilities(i)),
            resume_agent_id: String::new(),
        })
        .await?
        .into_inner();
    let (tx, rx) = mpsc::channel::<AgentMessage>(16);
    tx.send(AgentMessage {
        msg: Some(agent_message::Msg::Hello(Hello {
            agent_id: reg.agent_id.clone(),
            ..Default::default()
        })),
    })
    .await?;
    let mut inbound = client.session(ReceiverStream::new(rx)).await?.into_inner();
    let heartbeat = {
        let tx = tx.clone();
        let every = Duration::from_millis(u64::from(reg.heartbeat_interval_ms));
        tokio::spawn(async move {
            let mut seq = 0;
            loop {
                tokio::time::sleep(every).await;
                seq += 1;
                let hb = agent_message::Msg::Heartbeat(farm_proto::Heartbeat { seq });
                if tx.send(AgentMessage { msg: Some(hb) }).await.is_err() {
                    break;
                }
            }
        })
    };
    let mut last_ack: Option<Instant> = None;
    let mut last_result: Option<Instant> = None;
    let mut local = Samples::default();
    // The stream ends with an error when the benchmark stops the coordinator.
    while let Ok(Some(msg)) = inbound.message().await {
        match msg {
            CoordinatorMessage {
                msg: Some(coordinator_message::Msg::Assign(a)),
            } => {
                let now = Instant::now();
                if let Some(t) = last_ack.take() {
                    local
                        .ack_to_assign
                        .push(now.duration_since(t).as_secs_f64() * 1e3);
                }
                if let Some(t) = last_result.take() {
                    local
                        .result_to_assign
                        .push(now.duration_since(t).as_secs_f64() * 1e3);
                }
                if !work.is_zero() {
                    // Uniform in [0.5, 1.5) × work, so agents do not finish in lockstep.
                    tokio::time::sleep(work.mul_f64(0.5 + rand::random::<f64>())).await;
                }
                let result = RunResult {
                    run: a.run,
                    ok: true,
                    metrics: vec![Metric {
                        name: "wall_s".into(),
                        // Noisy, as real figures are: analysis (bootstraps,
                        // change points) does its real amount of work.
                        value: 1.0 + 0.05 * rand::random::<f64>(),
                        unit: "s".into(),
                        direction: 1,
                    }],
                    executor: "host".into(),
                    ..Default::default()
                };
                // Runs of the `--results-cells` matrix are not measured.
                last_result = measuring.load(Ordering::Relaxed).then(Instant::now);
                tx.send(AgentMessage {
                    msg: Some(agent_message::Msg::Result(result)),
                })
                .await?;
                local.completed += 1;
            }
            CoordinatorMessage {
                msg: Some(coordinator_message::Msg::Ack(_)),
            } => last_ack = measuring.load(Ordering::Relaxed).then(Instant::now),
            _ => {}
        }
    }
    heartbeat.abort();
    let mut s = samples.lock().await;
    s.ack_to_assign.append(&mut local.ack_to_assign);
    s.result_to_assign.append(&mut local.result_to_assign);
    s.completed += local.completed;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let dir = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let spans = SpanCounter::default();
    let mut cmd = Command::new(&args.coordinator);
    if args.otlp {
        cmd.args(["--otlp-endpoint", &span_counter(spans.clone()).await?]);
    }
    let pki = dir.path().join("pki");
    let client_tls = |who: &str| -> Result<tonic::transport::ClientTlsConfig> {
        Ok(farm_runtime::tls::TlsFiles {
            ca: pki.join("ca.crt"),
            cert: pki.join(format!("{who}.crt")),
            key: pki.join(format!("{who}.key")),
        }
        .client()?)
    };
    let mut agent_tls = Vec::new();
    let mut farm_tls = None;
    if args.tls {
        use farm_coordinator::identity::{Name, Principal};
        farm_coordinator::pki::init(&pki, &[], 30)?;
        for i in 0..args.agents {
            let name = Name::parse(&format!("lg-{i}"))?;
            farm_coordinator::pki::issue(&pki, &Principal::Agent(name), 30)?;
            agent_tls.push(client_tls(&format!("agents/lg-{i}"))?);
        }
        let me = Principal::Submitter(Name::parse("loadgen")?);
        farm_coordinator::pki::issue(&pki, &me, 30)?;
        farm_tls = Some(client_tls("submitters/loadgen")?);
        cmd.arg("--tls-ca")
            .arg(pki.join("ca.crt"))
            .arg("--tls-cert")
            .arg(pki.join("coordinator.crt"))
            .arg("--tls-key")
            .arg(pki.join("coordinator.key"));
    }
    let child = cmd
        .args(&args.coordinator_args)
        .args(["--metrics-listen", "127.0.0.1:0"])
        .args(["--listen", &format!("127.0.0.1:{port}"), "--data-dir"])
        .arg(dir.path())
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {}", args.coordinator.display()))?;
    let pid = child.id();
    let coord = Coord { child, _dir: dir };
    let url = format!(
        "{}://127.0.0.1:{port}",
        if args.tls { "https" } else { "http" }
    );
    let token_path = coord._dir.path().join("agent.token");
    let t0 = Instant::now();
    while !(token_path.is_file() && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()) {
        if t0.elapsed() > Duration::from_secs(30) {
            bail!("coordinator did not come up");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let agent_token = std::fs::read_to_string(&token_path)?.trim().to_string();
    let submit_token = std::fs::read_to_string(coord._dir.path().join("submit.token"))?
        .trim()
        .to_string();
    // A coordinator on etcd answers once it leads.
    {
        let mut endpoint = Endpoint::from_shared(url.clone())?;
        if let Some(tls) = &farm_tls {
            endpoint = endpoint.tls_config(tls.clone())?;
        }
        let mut probe = FarmServiceClient::with_interceptor(
            endpoint.connect().await?,
            with_token(&submit_token),
        );
        let t0 = Instant::now();
        while let Err(e) = probe.list_agents(farm_proto::ListAgentsRequest {}).await {
            if t0.elapsed() > Duration::from_secs(30) {
                bail!("the coordinator does not lead: {e}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let rss_idle = peak_rss_mib(pid);

    let samples = Arc::new(Mutex::new(Samples::default()));
    let measuring = Arc::new(AtomicBool::new(false));
    let work = Duration::from_millis(args.work_ms);
    let gate = Arc::new(Semaphore::new(args.connect_concurrency));
    let t_connect = Instant::now();
    let mut tasks = Vec::with_capacity(args.agents);
    let (up_tx, mut up_rx) = mpsc::channel::<()>(args.agents);
    for i in 0..args.agents {
        let tls = agent_tls.get(i).cloned();
        let (url, token, samples, gate, up, measuring) = (
            url.clone(),
            agent_token.clone(),
            samples.clone(),
            gate.clone(),
            up_tx.clone(),
            measuring.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let permit = gate.acquire_owned().await?;
            let mut endpoint = Endpoint::from_shared(url)?.tcp_nodelay(true);
            if let Some(tls) = tls {
                endpoint = endpoint.tls_config(tls)?;
            }
            let channel = endpoint.connect().await?;
            drop(permit);
            let _ = up.send(()).await;
            agent(i, channel, token, work, samples, measuring).await
        }));
    }
    for _ in 0..args.agents {
        up_rx.recv().await.context("an agent failed to connect")?;
    }
    // Registration follows the connection; give the last ones a moment.
    let mut farm_endpoint = Endpoint::from_shared(url.clone())?;
    if let Some(tls) = farm_tls {
        farm_endpoint = farm_endpoint.tls_config(tls)?;
    }
    let farm_channel = farm_endpoint.connect().await?;
    // A large matrix's results are a few MiB.
    let mut farm = FarmServiceClient::with_interceptor(farm_channel, with_token(&submit_token))
        .max_decoding_message_size(256 << 20);
    loop {
        let n = farm
            .list_agents(farm_proto::ListAgentsRequest {})
            .await?
            .into_inner()
            .agents
            .len();
        if n >= args.agents {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let connect_s = t_connect.elapsed().as_secs_f64();
    let rss_connected = peak_rss_mib(pid);

    let cells = 100usize;
    let reps = args.runs.div_ceil(cells).clamp(1, 1000);
    let threads: Vec<String> = (1..=cells).map(|t| t.to_string()).collect();
    let toml = format!(
        "name = \"loadgen\"\nrepetitions = {reps}\n[[workloads]]\nname = \"cpu-hog\"\nparams = {{ threads = [{}], seconds = 0.01 }}\n",
        threads.join(", ")
    );
    let metrics_addr = std::fs::read_to_string(coord._dir.path().join("metrics.addr"))?
        .trim()
        .to_string();
    // The large matrix runs to its end first; its first GetResults is timed.
    let mut results_first_ms = None;
    let mut results_id = String::new();
    if args.results_cells > 0 {
        let r = run_matrix(
            &mut farm,
            "results.toml",
            &results_matrix(args.results_cells),
        )
        .await?;
        results_id = r.matrix_id;
        let t = Instant::now();
        farm.get_results(farm_proto::GetResultsRequest {
            matrix_id: results_id.clone(),
        })
        .await?;
        results_first_ms = Some(t.elapsed().as_secs_f64() * 1e3);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(Mutex::new(Vec::<f64>::new()));
    let asker = (args.get_results_per_s > 0.0 && !results_id.is_empty()).then(|| {
        let (farm, stop, asked, id) = (
            farm.clone(),
            stop.clone(),
            asked.clone(),
            results_id.clone(),
        );
        let every = Duration::from_secs_f64(1.0 / args.get_results_per_s);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            let mut calls = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                let (mut farm, asked, id) = (farm.clone(), asked.clone(), id.clone());
                calls.push(tokio::spawn(async move {
                    let t = Instant::now();
                    let r = farm
                        .get_results(farm_proto::GetResultsRequest { matrix_id: id })
                        .await;
                    if r.is_ok() {
                        asked.lock().await.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                }));
            }
            for c in calls {
                let _ = c.await;
            }
        })
    });
    measuring.store(true, Ordering::Relaxed);
    let t_run = Instant::now();
    let mut submitted = farm_proto::SubmitMatrixResponse::default();
    let mut walls = Vec::with_capacity(args.matrices);
    let mut refreshes = Vec::with_capacity(args.matrices);
    let mut refreshed = results_refresh(&metrics_addr)?;
    // Resident memory every 100 ended matrices: flat once ended matrices
    // leave memory for the archive.
    let mut rss_by_matrices: Vec<(usize, f64)> = Vec::new();
    for i in 0..args.matrices.max(1) {
        if i > 0 && i % 100 == 0 {
            rss_by_matrices.push((i, rss_mib(pid)));
        }
        let t = Instant::now();
        let toml = if args.new_series {
            toml.replace("seconds = 0.01", &format!("seconds = {}", 1 + i))
        } else {
            toml.clone()
        };
        submitted = run_matrix(&mut farm, "loadgen.toml", &toml).await?;
        walls.push(t.elapsed().as_secs_f64());
        // The gauges are redone right after the final status is published.
        let t = Instant::now();
        loop {
            let now = results_refresh(&metrics_addr)?;
            if now.1 > refreshed.1 || t.elapsed() > Duration::from_secs(60) {
                refreshes.push((now.0 - refreshed.0) * 1e3);
                refreshed = now;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let run_s = t_run.elapsed().as_secs_f64();
    if args.matrices >= 100 {
        rss_by_matrices.push((args.matrices, rss_mib(pid)));
    }
    stop.store(true, Ordering::Relaxed);
    if let Some(a) = asker {
        a.await?;
    }
    let rss_peak = peak_rss_mib(pid);
    let mut coord = coord;
    if args.otlp {
        // Stopped as a service manager would, so that it flushes its spans.
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        let t = Instant::now();
        while coord.child.try_wait()?.is_none() && t.elapsed() < Duration::from_secs(30) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    drop(coord);
    for t in tasks {
        let _ = t.await;
    }
    let s = samples.lock().await;
    let mut ack: Vec<f64> = s.ack_to_assign.clone();
    let mut res: Vec<f64> = s.result_to_assign.clone();
    ack.sort_by(f64::total_cmp);
    res.sort_by(f64::total_cmp);
    println!("agents                         {}", args.agents);
    if args.otlp {
        println!(
            "spans received over OTLP       {}",
            spans.0.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
    println!("runs                           {}", submitted.runs);
    println!("simulated run time             {} ms", args.work_ms);
    println!("connect + register all agents  {connect_s:.2} s");
    println!("matrices                       {}", walls.len());
    println!("matrix wall time               {run_s:.2} s");
    println!(
        "throughput                     {:.0} runs/s",
        f64::from(submitted.runs) * walls.len() as f64 / run_s
    );
    if walls.len() > 1 {
        let mut sorted = refreshes.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "matrix end (histories, gauges) first {:.1} ms  median {:.1} ms  last {:.1} ms",
            refreshes[0],
            percentile(&sorted, 0.5),
            refreshes[refreshes.len() - 1]
        );
        println!(
            "matrix wall                    first {:.2} s  last {:.2} s",
            walls[0],
            walls[walls.len() - 1]
        );
    }
    println!(
        "ack -> next assignment         p50 {:.2} ms  p99 {:.2} ms  (n={})",
        percentile(&ack, 0.5),
        percentile(&ack, 0.99),
        ack.len()
    );
    println!(
        "result -> next assignment      p50 {:.2} ms  p99 {:.2} ms  (n={})",
        percentile(&res, 0.5),
        percentile(&res, 0.99),
        res.len()
    );
    if let Some(ms) = results_first_ms {
        println!(
            "results matrix                 {} cells, first GetResults {ms:.1} ms",
            args.results_cells
        );
    }
    if args.get_results_per_s > 0.0 {
        let mut a = asked.lock().await.clone();
        a.sort_by(f64::total_cmp);
        println!(
            "GetResults while measured      {:.1}/s  p50 {:.1} ms  p99 {:.1} ms  (n={})",
            a.len() as f64 / run_s,
            percentile(&a, 0.5),
            percentile(&a, 0.99),
            a.len()
        );
    }
    println!("coordinator RSS idle           {rss_idle:.0} MiB");
    println!("coordinator RSS agents up      {rss_connected:.0} MiB");
    println!("coordinator peak RSS           {rss_peak:.0} MiB");
    for (n, mib) in &rss_by_matrices {
        println!("coordinator RSS after {n:>5} matrices {mib:.0} MiB");
    }
    Ok(())
}
