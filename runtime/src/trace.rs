//! Logging and distributed traces for every binary of the farm.
//!
//! Each binary installs one subscriber with [`init`]: human-readable logs on
//! stderr, and — only when an OTLP endpoint is configured — an OpenTelemetry
//! layer exporting the farm's spans over OTLP/gRPC. The spans of the farm's
//! own structure (matrix → run → phase) use the target [`TARGET`]. Without an
//! endpoint no layer is interested in that target, so their callsites are
//! disabled once and cost a branch each: tracing is off with no cost.
//!
//! Trace context crosses process boundaries as a W3C `traceparent`: in gRPC
//! metadata for unary calls ([`inject_metadata`], [`extract_metadata`]), and in
//! the run assignment itself for runs pushed down an agent's long-lived
//! stream, whose metadata is fixed when the stream opens.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::prelude::*;

/// The target of the farm's structural spans (matrix, run, phases).
pub const TARGET: &str = "farm_trace";

/// The W3C header (and metadata key) carrying a span's context.
pub const TRACEPARENT: &str = "traceparent";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("OTLP endpoint {endpoint}: {source}")]
    Exporter {
        endpoint: String,
        source: opentelemetry_otlp::ExporterBuildError,
    },
    #[error("installing the tracing subscriber: {0}")]
    Subscriber(#[from] tracing_subscriber::util::TryInitError),
}

/// Keeps the exporter alive; dropping it flushes the spans not yet sent.
#[must_use = "dropping the guard stops the export of traces"]
pub struct Guard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            // The subscriber may be the only place to say it; it still works.
            tracing::warn!("flushing traces: {e}");
        }
    }
}

/// Installs the process's subscriber: logs on stderr filtered by `RUST_LOG`
/// (else `default_filter`, e.g. `info`), and with `otlp_endpoint` (e.g. `http://collector:4317`)
/// the farm's spans and every warning, exported as service `service`.
///
/// With an endpoint, it must be called inside a tokio runtime: the OTLP
/// client is a tonic channel.
pub fn init(
    service: &'static str,
    default_filter: &str,
    otlp_endpoint: Option<&str>,
) -> Result<Guard, Error> {
    // The farm's structural spans are never logged: they are for traces.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(
            EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| EnvFilter::new(default_filter))
                .add_directive(format!("{TARGET}=off").parse().expect("a valid directive")),
        );
    let Some(endpoint) = otlp_endpoint.filter(|e| !e.is_empty()) else {
        tracing_subscriber::registry().with(logs).try_init()?;
        return Ok(Guard { provider: None });
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .map_err(|source| Error::Exporter {
            endpoint: endpoint.to_string(),
            source,
        })?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            opentelemetry_sdk::Resource::builder()
                .with_service_name(service)
                .build(),
        )
        .build();
    let otel = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("farm"))
        // Warnings anywhere become events of the span they happen in.
        .with_filter(
            Targets::new()
                .with_target(TARGET, LevelFilter::INFO)
                .with_default(LevelFilter::WARN),
        );
    tracing_subscriber::registry()
        .with(logs)
        .with(otel)
        .try_init()?;
    tracing::info!(%endpoint, service, "exporting traces over OTLP");
    Ok(Guard {
        provider: Some(provider),
    })
}

/// The span's context as a W3C `traceparent`; empty when the span is not
/// traced (tracing off, or the span disabled).
pub fn traceparent(span: &Span) -> String {
    if span.is_disabled() {
        // Tracing off: not even a map is made.
        return String::new();
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&span.context(), &mut carrier);
    carrier.remove(TRACEPARENT).unwrap_or_default()
}

/// Makes the remote span named by `traceparent` the parent of `span`.
/// An empty or malformed value leaves `span` a root: a caller that does not
/// trace must not break the call.
pub fn set_parent(span: &Span, traceparent: &str) {
    if traceparent.is_empty() || span.is_disabled() {
        return;
    }
    let carrier = HashMap::from([(TRACEPARENT.to_string(), traceparent.to_string())]);
    let cx = TraceContextPropagator::new().extract(&carrier);
    // Fails only when the span has already started exporting; ours are fresh.
    let _ = span.set_parent(cx);
}

/// Adds the current span's context to an outgoing request's metadata.
pub fn inject_metadata<T>(request: &mut tonic::Request<T>) {
    let tp = traceparent(&Span::current());
    if !tp.is_empty()
        && let Ok(v) = tp.parse()
    {
        request.metadata_mut().insert(TRACEPARENT, v);
    }
}

/// The `traceparent` of an incoming request, or empty.
pub fn extract_metadata<T>(request: &tonic::Request<T>) -> String {
    request
        .metadata()
        .get(TRACEPARENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untraced_spans_carry_no_context_and_accept_any_parent() {
        let span = tracing::info_span!(target: TARGET, "run");
        assert_eq!(traceparent(&span), "");
        set_parent(&span, "garbage");
        set_parent(&span, "");
        let mut req = tonic::Request::new(());
        inject_metadata(&mut req);
        assert_eq!(extract_metadata(&req), "");
    }
}
