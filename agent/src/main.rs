//! `farm-agent`: the agent as a daemon.

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;

#[derive(Parser)]
#[command(
    version,
    about = "Agent of the scheduler regression farm: executes pushed runs on this host"
)]
struct Args {
    /// The coordinator's gRPC URL, or the URLs of a highly available
    /// farm's coordinators, comma-separated: the agent finds the leader.
    #[arg(
        long,
        default_value = "http://127.0.0.1:7700",
        env = "FARM_COORDINATOR"
    )]
    coordinator: farm_runtime::coordinators::Urls,
    /// File holding the agent token (the coordinator's DATA_DIR/agent.token,
    /// mode 0600), over plaintext. The token itself may come in the
    /// environment as FARM_AGENT_TOKEN; never on the command line, where
    /// every local user could read it. Not used with TLS.
    #[arg(long, env = "FARM_AGENT_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    transport: farm_runtime::tls::TransportArgs,
    /// Holds the restore journal of machine-state changes; it must survive reboots of the agent.
    #[arg(
        long,
        default_value = "/var/lib/farm-agent",
        env = "FARM_AGENT_STATE_DIR"
    )]
    state_dir: PathBuf,
    /// The farm-workload binary; by default the one beside this executable.
    #[arg(long, env = "FARM_WORKLOAD_BIN")]
    workload_bin: Option<PathBuf>,
    /// A directory of user-built benchmark programs: NPB's lu.<class>.x, STREAM's stream,
    /// netperf beside netserver. Repeatable (the environment variable takes a colon-separated
    /// list). Packaged tools (stress-ng, sysbench, hackbench, iperf3) are found in PATH, then here.
    #[arg(
        long = "tools-dir",
        value_name = "DIR",
        env = "FARM_AGENT_TOOLS_DIRS",
        value_delimiter = ':'
    )]
    tools_dirs: Vec<PathBuf>,
    /// Where Debian kernels and guest images are cached, for runs of
    /// `debian:<version>` kernels in QEMU guests (default
    /// ~/.cache/farm/guests). Guests need qemu-system-x86 and busybox-static.
    #[arg(long, env = "FARM_GUEST_CACHE", value_name = "DIR")]
    guest_cache: Option<PathBuf>,
    /// Directories of kernel images (x86 bzImage or s390x) that matrices may
    /// name as `file:<path>`; an image's modules, if any, in `<image>.modules/`.
    #[arg(
        long = "kernel-dir",
        value_name = "DIR",
        env = "FARM_KERNEL_DIRS",
        value_delimiter = ':'
    )]
    kernel_dirs: Vec<PathBuf>,
    /// A git repository that matrices may name as `git:NAME@REF` kernels,
    /// as NAME=PATH (a local clone; repeatable): the agent builds the ref's
    /// commit as --build-user, with no network, and boots it in an x86_64
    /// guest. Builds need make, gcc, flex, bison, bc, libelf-dev and ccache.
    #[arg(
        long = "kernel-repo",
        value_name = "NAME=PATH",
        env = "FARM_KERNEL_REPOS",
        value_delimiter = ','
    )]
    kernel_repos: Vec<farm_agent::kernel::Repo>,
    /// A directory of complete kernel configurations that a matrix's
    /// `[build] config = "NAME"` may name (a file's name, nothing else).
    #[arg(
        long,
        env = "FARM_BUILD_CONFIGS",
        value_name = "DIR",
        requires = "kernel_repos"
    )]
    build_configs: Option<PathBuf>,
    /// A directory of patches that a matrix's `[build] patches` may name,
    /// applied in its order to the tree before the build (`git apply`).
    #[arg(
        long,
        env = "FARM_BUILD_PATCHES",
        value_name = "DIR",
        requires = "kernel_repos"
    )]
    build_patches: Option<PathBuf>,
    /// The unprivileged user kernels are built as (it must be able to read
    /// every --kernel-repo).
    #[arg(
        long,
        env = "FARM_BUILD_USER",
        value_name = "USER",
        default_value = "farm-build"
    )]
    build_user: String,
    /// The most the guest cache keeps, in GiB (kernels, tool packages,
    /// images); the least recently used entries go after each guest run.
    #[arg(
        long,
        env = "FARM_GUEST_CACHE_MAX_GIB",
        value_name = "GIB",
        default_value_t = 10
    )]
    guest_cache_max_gib: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics (port 0: a free one,
    /// written to STATE_DIR/metrics.addr).
    #[arg(long, env = "FARM_AGENT_METRICS_LISTEN", value_name = "ADDR")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Let --metrics-listen bind an address other than loopback. The
    /// endpoint has no authentication and names runs and hosts, so exposing
    /// it is a choice to make, not a default.
    #[arg(long, env = "FARM_AGENT_METRICS_PUBLIC")]
    metrics_public: bool,
    /// How often to look for new kernels (cached Debian ones, images in a
    /// --kernel-dir) and send them to the coordinator, in seconds.
    #[arg(
        long,
        env = "FARM_AGENT_RESCAN_S",
        value_name = "SECONDS",
        default_value_t = 10
    )]
    rescan_s: u64,
    /// Boot no guests, even when QEMU is installed (so no --kernel-dir,
    /// --kernel-repo or --guest-cache, which are for guests).
    #[arg(
        long,
        conflicts_with_all = ["kernel_dirs", "kernel_repos", "guest_cache", "build_configs", "build_patches"]
    )]
    no_guests: bool,
    /// Export traces over OTLP/gRPC to this collector (e.g.
    /// http://127.0.0.1:4317); no tracing cost when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    otlp_endpoint: Option<String>,
}

fn main() -> anyhow::Result<()> {
    // Out of the environment first: every workload, QEMU and apt the agent
    // starts inherits it, and none of them may hold the agent's credential.
    let env_token = std::env::var("FARM_AGENT_TOKEN").ok();
    // Unsafe allowed here only: since edition 2024 removing a variable is
    // unsafe, and the token must not reach the children.
    // SAFETY: no other thread exists yet (no runtime, no tracing), so
    // nothing reads the environment while it changes.
    #[allow(unsafe_code)]
    unsafe {
        std::env::remove_var("FARM_AGENT_TOKEN")
    };
    let args = Args::parse();
    // Refused before anything starts: a coordinator off loopback in
    // plaintext, or TLS files that do not go together or do not read.
    let files = args.transport.files()?;
    // One configuration serves every URL; each is checked against it.
    let mut tls = None;
    for url in args.coordinator.as_slice() {
        tls = farm_runtime::tls::client_config(
            url,
            files.as_ref(),
            args.transport.insecure_plaintext,
        )?;
    }
    if let Some(addr) = args.metrics_listen {
        farm_runtime::metrics_http::check_listen(addr, args.metrics_public)?;
    }
    let rt = tokio::runtime::Runtime::new().context("starting the tokio runtime")?;
    // Dropped before the runtime: flushing traces needs its tonic channel.
    let _traces = {
        let _rt = rt.enter();
        farm_runtime::trace::init("farm-agent", "info", args.otlp_endpoint.as_deref())?
    };
    let token = match (&tls, args.token_file) {
        (Some(_), _) => None,
        (None, Some(f)) => Some(
            farm_runtime::secret::read_token(&f)
                .context("reading the agent token (--token-file)")?,
        ),
        (None, None) => match env_token {
            Some(t) if !t.trim().is_empty() => Some(t.trim().to_owned()),
            _ => anyhow::bail!(
                "no agent token: pass --token-file or set FARM_AGENT_TOKEN (or use TLS: \
                 --tls-ca, --tls-cert, --tls-key)"
            ),
        },
    };
    let workload_bin = match args.workload_bin {
        Some(p) => p,
        None => std::env::current_exe()
            .context("locating this executable")?
            .with_file_name("farm-workload"),
    };
    for dir in &args.tools_dirs {
        if !dir.is_dir() {
            tracing::warn!(dir = %dir.display(), "tools directory not found");
        }
    }
    let mut workload = farm_agent::run::WorkloadCommand::binary(workload_bin);
    workload.externals = farm_agent::external::discover_installed(&args.tools_dirs);
    if !args.no_guests {
        workload.guest_cache = args
            .guest_cache
            .or_else(farm_agent::executor::guest::default_cache);
        workload.kernel_dirs = args.kernel_dirs;
        if !args.kernel_repos.is_empty() {
            use farm_agent::kernel::{BuildUser, Trees};
            let user = BuildUser::lookup(&args.build_user)?;
            let files =
                farm_agent::kernel::files::Files::new(args.build_configs, args.build_patches)?;
            workload.trees = Some(Trees::new(args.kernel_repos, user)?.with_files(files));
        }
        workload.guest_cache_max_bytes = args.guest_cache_max_gib.saturating_mul(1 << 30);
    }
    let state_dir = args.state_dir.clone();
    let mut agent = farm_agent::Options {
        coordinators: args.coordinator,
        token,
        workload,
        root: "/".into(),
        state_dir: args.state_dir,
        tls,
    }
    .build()?
    .rescan_every(std::time::Duration::from_secs(args.rescan_s.max(1)));
    if let Some(addr) = args.metrics_listen {
        let bound = agent
            .listen_metrics(addr)
            .with_context(|| format!("binding the metrics endpoint {addr}"))?;
        // Written whole, then renamed: a reader never sees half an address.
        let file = state_dir.join("metrics.addr");
        let tmp = state_dir.join("metrics.addr.tmp");
        std::fs::write(&tmp, format!("{bound}\n"))
            .and_then(|()| std::fs::rename(&tmp, &file))
            .with_context(|| format!("writing {}", file.display()))?;
        tracing::info!(%bound, "serving metrics");
    }
    rt.block_on(agent.run(shutdown_signal()));
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
