//! `GET /metrics` over HTTP/1.1 (hyper, the version tonic already brings):
//! a registry in the Prometheus text format 0.0.4. Anything else is 404.
//! Here because the coordinator and the agents both serve one.

use std::convert::Infallible;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::net::TcpListener;
use tracing::{debug, warn};

/// A `/metrics` address off loopback that was not asked for by
/// `--metrics-public`: the endpoint has no authentication.
#[derive(Debug, thiserror::Error)]
#[error(
    "--metrics-listen {0} is not a loopback address: /metrics has no authentication; \
     pass --metrics-public to expose it"
)]
pub struct NotLoopback(pub std::net::SocketAddr);

/// Checks `--metrics-listen` against `--metrics-public`, for the
/// coordinator and the agent alike.
pub fn check_listen(addr: std::net::SocketAddr, public: bool) -> Result<(), NotLoopback> {
    if addr.ip().is_loopback() || public {
        Ok(())
    } else {
        Err(NotLoopback(addr))
    }
}

/// What `/metrics` shows: a registry, or one that changes while the
/// endpoint serves ([`Layers`]).
pub trait Gather: Clone + Send + Sync + 'static {
    fn gather(&self) -> Vec<prometheus::proto::MetricFamily>;
}

impl Gather for Registry {
    fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        Registry::gather(self)
    }
}

/// A registry that stays, and one that is replaced: a coordinator's own
/// gauges (its leadership), and its current term's scheduler metrics.
#[derive(Clone, Default)]
pub struct Layers {
    pub base: Registry,
    pub current: std::sync::Arc<std::sync::Mutex<Option<Registry>>>,
}

impl Layers {
    pub fn set_current(&self, registry: Option<Registry>) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = registry;
    }
}

impl Gather for Layers {
    fn gather(&self) -> Vec<prometheus::proto::MetricFamily> {
        let mut families = self.base.gather();
        let current = self
            .current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(r) = current {
            families.extend(r.gather());
        }
        families
    }
}

/// Serves `registry` on `listener` until the task is dropped or aborted.
pub async fn serve(listener: TcpListener, registry: impl Gather) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                // Out of file descriptors, typically: let some close rather
                // than spin on the error.
                warn!("metrics endpoint: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let registry = registry.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let response = respond(&req, &registry);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, "metrics connection: {e}");
            }
        });
    }
}

fn respond(req: &Request<Incoming>, registry: &impl Gather) -> Response<Full<Bytes>> {
    let status = |code: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = code;
        r
    };
    if req.uri().path() != "/metrics" {
        return status(
            StatusCode::NOT_FOUND,
            "not found: metrics are at /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return status(StatusCode::METHOD_NOT_ALLOWED, "GET /metrics\n");
    }
    let encoder = TextEncoder::new();
    let mut body = Vec::new();
    if let Err(e) = encoder.encode(&registry.gather(), &mut body) {
        warn!("encoding metrics: {e}");
        return status(
            StatusCode::INTERNAL_SERVER_ERROR,
            "encoding metrics failed\n",
        );
    }
    let mut r = Response::new(Full::new(Bytes::from(body)));
    r.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(prometheus::TEXT_FORMAT),
    );
    r
}
