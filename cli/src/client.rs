//! Connecting to a coordinator's FarmService as a submitter: with a client
//! certificate (mutual TLS) or the submitter token (plaintext, loopback).

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use farm_proto::farm_service_client::FarmServiceClient;
use farm_runtime::coordinators::{self, MAX_COORDINATOR_URLS, Urls};
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
    /// The transport rules the URLs given were checked against: a leader
    /// a standby names is followed only if they admit it too.
    files: Option<farm_runtime::tls::TlsFiles>,
    insecure_plaintext: bool,
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
    let token = match (&tls, token_file, env_token) {
        (Some(_), _, _) => None,
        (None, Some(f), _) => Some(read_token(f)?),
        (None, None, Some(t)) if !t.trim().is_empty() => Some(t.trim().to_owned()),
        (None, None, _) => Some(read_token(Path::new("/var/lib/farm/submit.token"))?),
    };
    Ok(Access {
        token,
        tls,
        files,
        insecure_plaintext,
    })
}

fn read_token(path: &Path) -> Result<String> {
    farm_runtime::secret::read_token(path).with_context(|| {
        "reading the submitter token (pass --token-file, set FARM_TOKEN, or use TLS: --tls-ca, \
         --tls-cert, --tls-key)"
            .to_string()
    })
}

impl Access {
    /// A token over plaintext (the embedded farm of `farmctl run`).
    pub fn token(token: &str) -> Access {
        Access {
            token: Some(token.to_owned()),
            tls: None,
            files: None,
            insecure_plaintext: false,
        }
    }

    /// Whether a leader a standby named may be dialled: an http(s) URL
    /// that the rules of the URLs given admit (TLS with the same files, or
    /// plaintext only where it was allowed).
    fn admits(&self, url: &str) -> Result<()> {
        Urls::parse(url)?;
        farm_runtime::tls::client_config(url, self.files.as_ref(), self.insecure_plaintext)?;
        Ok(())
    }
}

/// How long farmctl waits for a leader while a coordinator names one it
/// cannot reach yet: a failover takes a leader's lease TTL and a few
/// seconds more.
pub const LEADER_WAIT: Duration = Duration::from_secs(30);

/// How long farmctl asks again while no coordinator leads or names a
/// leader before it says so: an election is over within it, an etcd
/// outage is not.
pub const NO_LEADER_WAIT: Duration = Duration::from_secs(3);

/// How long one coordinator may take to say whether it leads; a leader
/// committing through a moment of etcd's trouble may take a few seconds.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What a coordinator answered when asked whether it leads.
enum Probe {
    /// It leads, or refused for another reason than leading (the call
    /// itself will say why).
    Serves(Client),
    /// It does not lead: what it said, and the leader it named if any.
    Standby {
        said: String,
        leader: Option<String>,
    },
    /// It was not reached, or did not answer in time (`slow`: it may be
    /// a leader busy committing).
    Silent { said: String, slow: bool },
}

async fn probe(url: &str, access: &Access) -> Probe {
    let ask = async {
        let mut c = connect(url, access).await?;
        // Any call shows whether it leads; listing schedules is a cheap one.
        let r = c.list_schedules(farm_proto::ListSchedulesRequest {}).await;
        anyhow::Ok((c, r))
    };
    match tokio::time::timeout(PROBE_TIMEOUT, ask).await {
        Err(_) => Probe::Silent {
            said: format!("no answer in {} s", PROBE_TIMEOUT.as_secs()),
            slow: true,
        },
        Ok(Err(e)) => Probe::Silent {
            said: format!("{e:#}"),
            slow: false,
        },
        Ok(Ok((_, Err(status)))) if status.code() == tonic::Code::Unavailable => Probe::Standby {
            said: status.message().to_owned(),
            leader: coordinators::leader_named(&status).map(str::to_owned),
        },
        Ok(Ok((c, _))) => Probe::Serves(c),
    }
}

/// A client of the coordinator that leads among `urls`, found by asking
/// each: one that leads is taken; a standby's word for which one leads is
/// followed at once, to one of `urls` or to another URL that `access`
/// admits (`farm_runtime::coordinators`). While some coordinator names a
/// leader that does not answer as one (a failover), farmctl waits up to
/// [`LEADER_WAIT`]; once for [`NO_LEADER_WAIT`] none has led or named one
/// (etcd unreachable: no leader anywhere), it says so with each answer.
pub async fn connect_leader(urls: &Urls, access: &Access) -> Result<Client> {
    let same = |a: &str, b: &str| a.trim_end_matches('/') == b.trim_end_matches('/');
    // The URLs given, then the leaders named, at most as many as may be given.
    let mut known: Vec<String> = urls.as_slice().to_vec();
    let start = Instant::now();
    let mut leaderless_since: Option<Instant> = None;
    let mut told = false;
    loop {
        let mut said: Vec<String> = Vec::new();
        let mut waiting = false;
        let mut asked: Vec<String> = Vec::new();
        let mut queue: VecDeque<String> = known.iter().cloned().collect();
        while let Some(url) = queue.pop_front() {
            if asked.iter().any(|a| same(a, &url)) {
                continue;
            }
            asked.push(url.clone());
            match probe(&url, access).await {
                Probe::Serves(c) => return Ok(c),
                Probe::Silent { said: s, slow } => {
                    waiting |= slow;
                    said.push(format!("{url}: {s}"));
                }
                Probe::Standby { said: s, leader } => {
                    said.push(format!("{url}: {s}"));
                    let Some(leader) = leader else { continue };
                    if let Err(e) = access.admits(&leader) {
                        said.push(format!("{leader}: not followed: {e}"));
                        continue;
                    }
                    if !known.iter().any(|k| same(k, &leader)) {
                        if known.len() >= MAX_COORDINATOR_URLS {
                            said.push(format!(
                                "{leader}: not followed: {MAX_COORDINATOR_URLS} URLs asked already"
                            ));
                            continue;
                        }
                        known.push(leader.clone());
                    }
                    // A leader is named: a failover, if it does not answer.
                    waiting = true;
                    queue.push_front(leader);
                }
            }
        }
        said.dedup();
        let said = said.join("; ");
        if waiting {
            leaderless_since = None;
            if start.elapsed() >= LEADER_WAIT {
                anyhow::bail!(
                    "no coordinator of {urls} leads after {} s: {said}",
                    LEADER_WAIT.as_secs()
                );
            }
            if !std::mem::replace(&mut told, true) {
                tracing::warn!("no coordinator leads yet, waiting: {said}");
            }
        } else if leaderless_since.get_or_insert_with(Instant::now).elapsed() >= NO_LEADER_WAIT {
            anyhow::bail!(
                "no leader is known: no coordinator asked for {} s leads or names one: {said}",
                NO_LEADER_WAIT.as_secs()
            );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_leader_is_followed_only_where_the_urls_given_may_go() {
        let plaintext = Access::token("t");
        plaintext.admits("http://127.0.0.1:7000").unwrap();
        plaintext.admits("http://localhost:7000/").unwrap();
        // Plaintext leaves loopback only with --insecure-plaintext.
        assert!(plaintext.admits("http://10.0.0.5:7000").is_err());
        let insecure = Access {
            insecure_plaintext: true,
            ..Access::token("t")
        };
        insecure.admits("http://10.0.0.5:7000").unwrap();
        // No TLS files: an https leader cannot be checked, and is refused.
        assert!(plaintext.admits("https://127.0.0.1:7000").is_err());
        assert!(plaintext.admits("grpc://127.0.0.1:7000").is_err());
        assert!(plaintext.admits("").is_err());
    }
}
