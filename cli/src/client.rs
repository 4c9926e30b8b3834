//! Connecting to a coordinator's FarmService as a submitter: with a client
//! certificate (mutual TLS) or the submitter token (plaintext, loopback).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use farm_proto::ListAgentsRequest;
use farm_proto::farm_service_client::FarmServiceClient;
use farm_runtime::coordinators::Urls;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, ClientTlsConfig, Endpoint};

pub type Client = FarmServiceClient<InterceptedService<Channel, Auth>>;

/// Adds the submitter token, if any, to every request.
#[derive(Clone)]
pub struct Auth(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(h) = &self.0 {
            req.metadata_mut()
                .insert(farm_proto::AUTHORIZATION, h.clone());
        }
        farm_runtime::trace::inject_metadata(&mut req);
        Ok(req)
    }
}

/// How farmctl proves it is a submitter: its client certificate (mutual
/// TLS), or a token over plaintext.
pub struct Access {
    token: Option<String>,
    tls: Option<ClientTlsConfig>,
}

/// The access for `url`: TLS when the three files are given (the URL must
/// then be https://); otherwise plaintext, which only a loopback URL or
/// `insecure_plaintext` allows, with the token from `--token-file` (or
/// `FARM_TOKEN_FILE`), else `env_token` (`FARM_TOKEN`), else the default
/// file of a coordinator on this machine. The token is never an argument:
/// argv is readable by every local user.
pub fn access(
    urls: &Urls,
    token_file: Option<&Path>,
    env_token: Option<String>,
    files: Option<farm_runtime::tls::TlsFiles>,
    insecure_plaintext: bool,
) -> Result<Access> {
    // One configuration serves every URL; each is checked against it.
    let mut tls = None;
    for url in urls.as_slice() {
        tls = farm_runtime::tls::client_config(url, files.as_ref(), insecure_plaintext)?;
    }
    if tls.is_some() {
        return Ok(Access { token: None, tls });
    }
    let path: PathBuf = match (token_file, env_token) {
        (Some(f), _) => f.to_path_buf(),
        (None, Some(t)) if !t.trim().is_empty() => {
            return Ok(Access {
                token: Some(t.trim().to_owned()),
                tls,
            });
        }
        (None, _) => PathBuf::from("/var/lib/farm/submit.token"),
    };
    let token = farm_runtime::secret::read_token(&path).with_context(|| {
        "reading the submitter token (pass --token-file, set FARM_TOKEN, or use TLS: --tls-ca, \
         --tls-cert, --tls-key)"
            .to_string()
    })?;
    Ok(Access {
        token: Some(token),
        tls,
    })
}

impl Access {
    /// A token over plaintext (the embedded farm of `farmctl run`).
    pub fn token(token: &str) -> Access {
        Access {
            token: Some(token.to_owned()),
            tls: None,
        }
    }
}

/// How long farmctl waits for a farm of several coordinators to have a
/// leader: a failover takes a leader's lease TTL and a few seconds more.
pub const LEADER_WAIT: Duration = Duration::from_secs(30);

/// A client of the coordinator that leads among `urls`: with one URL, that
/// one; with several, the first that answers as the leader, following a
/// standby's word for which one leads (`farm_runtime::coordinators`), and
/// waiting up to [`LEADER_WAIT`] while none does (a failover).
pub async fn connect_leader(urls: &Urls, access: &Access) -> Result<Client> {
    let all = urls.as_slice();
    if all.len() == 1 {
        return connect(&all[0], access).await;
    }
    let start = std::time::Instant::now();
    let mut at = 0;
    let mut told = false;
    loop {
        let mut failures = Vec::new();
        for _ in 0..2 * all.len() {
            let url = &all[at];
            let next = (at + 1) % all.len();
            let mut c = match connect(url, access).await {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!("{url}: {e:#}"));
                    at = next;
                    continue;
                }
            };
            // Any call shows whether it leads; listing agents is a cheap one.
            match c.list_agents(ListAgentsRequest {}).await {
                Ok(_) => return Ok(c),
                Err(status) if status.code() == tonic::Code::Unavailable => {
                    failures.push(format!("{url}: {}", status.message()));
                    at = match urls.leader_in(&status) {
                        Some(leader) if leader != at => leader,
                        _ => next,
                    };
                }
                // Refused for another reason: the call itself will say why.
                Err(_) => return Ok(c),
            }
        }
        failures.dedup();
        let failures = failures.join("; ");
        if start.elapsed() >= LEADER_WAIT {
            anyhow::bail!(
                "no coordinator of {urls} leads after {} s: {failures}",
                LEADER_WAIT.as_secs()
            );
        }
        if !std::mem::replace(&mut told, true) {
            tracing::warn!("no coordinator leads yet, waiting: {failures}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub async fn connect(url: &str, access: &Access) -> Result<Client> {
    let mut endpoint = Endpoint::from_shared(url.to_string())
        .with_context(|| format!("coordinator address {url}"))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true);
    if let Some(tls) = &access.tls {
        endpoint = endpoint
            .tls_config(tls.clone())
            .with_context(|| format!("TLS to {url}"))?;
    }
    let channel = endpoint
        .connect()
        .await
        .with_context(|| format!("connecting to the coordinator at {url}"))?;
    let header: Option<MetadataValue<Ascii>> = match &access.token {
        Some(t) => Some(
            format!("Bearer {t}")
                .parse()
                .context("the token is not printable ASCII")?,
        ),
        None => None,
    };
    Ok(FarmServiceClient::with_interceptor(channel, Auth(header))
        .max_decoding_message_size(256 << 20))
}
