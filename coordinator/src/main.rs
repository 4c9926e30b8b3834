//! `farm-coordinator`: the gRPC coordinator as a daemon.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use farm_coordinator::identity::{Name, Principal};
use farm_coordinator::{Options, pki, scheduler::Config};

#[derive(Parser)]
#[command(
    version,
    about = "Coordinator of the scheduler regression farm",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: Args,
}

#[derive(Subcommand)]
enum Command {
    /// The farm's certificate authority: certificates for mutual TLS.
    Pki {
        #[command(subcommand)]
        command: PkiCommand,
    },
}

#[derive(Subcommand)]
enum PkiCommand {
    /// Creates the authority (ca.crt, ca.key) and the coordinator's
    /// certificate (coordinator.crt, coordinator.key) in DIR.
    Init {
        #[command(flatten)]
        at: PkiDir,
        /// A name or address agents and farmctl dial the coordinator by
        /// (repeatable); localhost, 127.0.0.1 and ::1 are always in.
        #[arg(long = "host", value_name = "HOST")]
        hosts: Vec<String>,
    },
    /// Issues an agent's client certificate (agents/NAME.crt, .key); the
    /// agent id it registers as stays bound to NAME while the coordinator
    /// knows the agent (until it expires, --agent-expiry-s).
    IssueAgent {
        name: String,
        #[command(flatten)]
        at: PkiDir,
    },
    /// Issues a submitter's client certificate (submitters/NAME.crt,
    /// .key), for farmctl.
    IssueClient {
        name: String,
        #[command(flatten)]
        at: PkiDir,
    },
}

#[derive(clap::Args)]
struct PkiDir {
    /// Where the authority and the certificates are.
    #[arg(long, default_value = "/etc/farm/pki", env = "FARM_PKI_DIR")]
    dir: PathBuf,
    /// How long the certificates issued now are valid.
    #[arg(long, default_value_t = pki::DEFAULT_DAYS)]
    days: u32,
}

#[derive(clap::Args)]
struct Args {
    /// Address to listen on; port 0 picks a free one (written to DATA_DIR/coordinator.addr).
    #[arg(long, default_value = "127.0.0.1:7700", env = "FARM_LISTEN")]
    listen: SocketAddr,
    /// Holds the store and the tokens (agent.token, submit.token, mode 0600).
    #[arg(long, default_value = "/var/lib/farm", env = "FARM_DATA_DIR")]
    data_dir: PathBuf,
    /// How often agents send heartbeats.
    #[arg(long, default_value_t = 1000)]
    heartbeat_ms: u32,
    /// An agent silent this long loses its run, which is re-queued.
    #[arg(long, default_value_t = 5000)]
    lease_ms: u32,
    /// Attempts after which a run whose agents keep vanishing fails.
    #[arg(long, default_value_t = 3)]
    max_attempts: u32,
    /// A registered agent without a stream or a run for this long is
    /// forgotten; it registers anew if it comes back.
    #[arg(long, default_value_t = farm_coordinator::scheduler::DEFAULT_AGENT_EXPIRY_MS / 1000,
          env = "FARM_AGENT_EXPIRY_S")]
    agent_expiry_s: u64,
    /// Serve Prometheus metrics at http://ADDR/metrics; port 0 picks a free
    /// one (written to DATA_DIR/metrics.addr). Off when unset.
    #[arg(long, env = "FARM_METRICS_LISTEN")]
    metrics_listen: Option<SocketAddr>,
    /// Let --metrics-listen bind an address other than loopback. The
    /// endpoint has no authentication and names runs and hosts, so exposing
    /// it is a choice to make, not a default.
    #[arg(long, env = "FARM_METRICS_PUBLIC")]
    metrics_public: bool,
    /// Most series each results metric family (medians, baselines,
    /// regression ratios) shows; the newest matrices' are kept.
    #[arg(long, default_value_t = farm_coordinator::metrics::DEFAULT_SERIES_LIMIT,
          env = "FARM_METRICS_SERIES_LIMIT")]
    metrics_series_limit: usize,
    /// Export traces over OTLP/gRPC to this collector (e.g.
    /// http://127.0.0.1:4317); no tracing cost when unset.
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL")]
    otlp_endpoint: Option<String>,
    #[command(flatten)]
    transport: farm_runtime::tls::TransportArgs,
    #[command(flatten)]
    store: StoreArgs,
}

/// Where live state is: the embedded SQLite file, or etcd.
#[derive(clap::Args)]
struct StoreArgs {
    /// `sqlite` (DATA_DIR/farm.db, one coordinator), or
    /// `etcd://HOST:PORT,HOST:PORT,…`: live state on an etcd cluster, and
    /// one leader elected among the coordinators that share it.
    #[arg(long, default_value = "sqlite", env = "FARM_STORE")]
    store: farm_coordinator::store::Location,
    /// The farm's keys in etcd are under this prefix.
    #[arg(long, default_value = "/farm", env = "FARM_STORE_PREFIX")]
    store_prefix: farm_coordinator::store::Prefix,
    /// etcd's certificate authority (PEM), when its endpoints are TLS.
    #[arg(long, requires_all = ["store_tls_cert", "store_tls_key"], value_name = "FILE")]
    store_tls_ca: Option<PathBuf>,
    /// This coordinator's client certificate for etcd (PEM).
    #[arg(long, requires = "store_tls_ca", value_name = "FILE")]
    store_tls_cert: Option<PathBuf>,
    /// Its private key (PEM; mode 0600).
    #[arg(long, requires = "store_tls_ca", value_name = "FILE")]
    store_tls_key: Option<PathBuf>,
    /// The URL agents and farmctl reach this coordinator at, which
    /// standbys tell them (default: the address bound, http or https).
    #[arg(long, env = "FARM_ADVERTISE", value_name = "URL")]
    advertise: Option<String>,
    /// Seconds a leader's lease outlives its last keep-alive: how long a
    /// standby waits to take over from a leader that died.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(2..=60))]
    leader_ttl_s: u64,
    /// Where ended matrices go: `postgres://USER@HOST:PORT/DB` (needed with
    /// etcd; by default the embedded store's file, DATA_DIR/farm.db).
    #[arg(long, env = "FARM_ARCHIVE", value_name = "URL",
          value_parser = farm_coordinator::archive::Location::parse_url)]
    archive: Option<farm_coordinator::archive::Location>,
    /// The etcd cluster's --max-txn-ops.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u64).range(4..))]
    etcd_max_txn_ops: u64,
    /// The etcd cluster's --max-request-bytes; batches are cut to fit.
    #[arg(long, default_value_t = 1_572_864,
          value_parser = clap::value_parser!(u64).range(65_536..))]
    etcd_max_request_bytes: u64,
}

impl StoreArgs {
    fn ha(&self) -> anyhow::Result<Option<farm_coordinator::server::Ha>> {
        use farm_coordinator::store::Location;
        let Location::Etcd(endpoints) = &self.store else {
            return Ok(None);
        };
        let tls = match (
            &self.store_tls_ca,
            &self.store_tls_cert,
            &self.store_tls_key,
        ) {
            (Some(ca), Some(cert), Some(key)) => Some(farm_runtime::tls::TlsFiles {
                ca: ca.clone(),
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        };
        Ok(Some(farm_coordinator::server::Ha {
            endpoints: endpoints.clone(),
            prefix: self.store_prefix.clone(),
            tls,
            advertise: self.advertise.clone(),
            leader_ttl: std::time::Duration::from_secs(self.leader_ttl_s),
            max_txn_ops: self.etcd_max_txn_ops as usize,
            max_request_bytes: self.etcd_max_request_bytes as usize,
        }))
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Pki { command }) = cli.command {
        return pki_command(command);
    }
    let args = cli.serve;
    let tls = args.transport.files()?;
    let ha = args.store.ha()?;
    if let Some(addr) = args.metrics_listen {
        farm_runtime::metrics_http::check_listen(addr, args.metrics_public)?;
    }
    let rt = tokio::runtime::Runtime::new().context("starting the tokio runtime")?;
    // Dropped before the runtime: flushing traces needs its tonic channel.
    let _traces = {
        let _rt = rt.enter();
        farm_runtime::trace::init("farm-coordinator", "info", args.otlp_endpoint.as_deref())?
    };
    if args.lease_ms <= args.heartbeat_ms {
        anyhow::bail!(
            "--lease-ms ({}) must exceed --heartbeat-ms ({})",
            args.lease_ms,
            args.heartbeat_ms
        );
    }
    rt.block_on(async {
        let mut coordinator = Options {
            listen: args.listen,
            data_dir: args.data_dir,
            scheduler: Config {
                heartbeat_ms: args.heartbeat_ms,
                lease_ms: args.lease_ms,
                max_attempts: args.max_attempts,
                metrics_series_limit: args.metrics_series_limit,
                agent_expiry_ms: args.agent_expiry_s.saturating_mul(1000),
            },
            tls,
            insecure_plaintext: args.transport.insecure_plaintext,
            ha,
            archive: args.store.archive,
        }
        .build()
        .await?;
        if let Some(addr) = args.metrics_listen {
            coordinator = coordinator.listen_metrics(addr).await?;
        }
        coordinator.run(shutdown_signal()).await?;
        Ok(())
    })
}

// Printing allowed here only: `pki` is a one-shot command that tells the
// operator which files it wrote; the server itself logs with tracing.
#[allow(clippy::print_stderr)]
fn pki_command(command: PkiCommand) -> anyhow::Result<()> {
    let show = |what: &str, i: &pki::Issued| {
        eprintln!("{what}: {} (key {})", i.cert.display(), i.key.display());
    };
    match command {
        PkiCommand::Init { at, hosts } => {
            let (ca, server) = pki::init(&at.dir, &hosts, at.days)?;
            show("authority", &ca);
            show("coordinator", &server);
        }
        PkiCommand::IssueAgent { name, at } => {
            let issued = pki::issue(&at.dir, &Principal::Agent(Name::parse(&name)?), at.days)?;
            show(&format!("agent {name}"), &issued);
        }
        PkiCommand::IssueClient { name, at } => {
            let p = Principal::Submitter(Name::parse(&name)?);
            let issued = pki::issue(&at.dir, &p, at.days)?;
            show(&format!("submitter {name}"), &issued);
        }
    }
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
