//! Connecting to a coordinator's FarmService with the submitter token.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use farm_proto::farm_service_client::FarmServiceClient;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};

pub type Client = FarmServiceClient<InterceptedService<Channel, Auth>>;

/// Adds the submitter token to every request.
#[derive(Clone)]
pub struct Auth(MetadataValue<Ascii>);

impl tonic::service::Interceptor for Auth {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        req.metadata_mut()
            .insert(farm_proto::AUTHORIZATION, self.0.clone());
        farm_proto::trace::inject_metadata(&mut req);
        Ok(req)
    }
}

/// Where the token comes from: `--token-file`, `FARM_TOKEN`, or the default
/// file of a coordinator on this machine.
pub fn load_token(token: Option<String>, file: Option<&Path>) -> Result<String> {
    if let Some(t) = token {
        return Ok(t.trim().to_string());
    }
    let path: PathBuf = match file {
        Some(f) => f.to_path_buf(),
        None => PathBuf::from("/var/lib/farm/submit.token"),
    };
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading the submitter token {} (pass --token-file or set FARM_TOKEN)",
            path.display()
        )
    })?;
    Ok(text.trim().to_string())
}

pub async fn connect(url: &str, token: &str) -> Result<Client> {
    let channel = Endpoint::from_shared(url.to_string())
        .with_context(|| format!("coordinator address {url}"))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("connecting to the coordinator at {url}"))?;
    let header: MetadataValue<Ascii> = format!("Bearer {token}")
        .parse()
        .context("the token is not printable ASCII")?;
    Ok(FarmServiceClient::with_interceptor(channel, Auth(header))
        .max_decoding_message_size(256 << 20))
}
