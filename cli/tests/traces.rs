//! Distributed traces: farmctl, a real coordinator and a real agent export
//! their spans over OTLP/gRPC to a receiver in this test, and one run's
//! spans from every side share a trace id and nest: farmctl → matrix → run
//! (coordinator) → placement and store, and → run (agent) → state_apply,
//! workload, telemetry, restore.
//!
//! Needs root (the run applies a machine state: autogroup).

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Farm, serial};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value;

/// A received span, flattened: the service that sent it and its attributes.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    name: String,
    trace_id: Vec<u8>,
    span_id: Vec<u8>,
    parent: Vec<u8>,
    start: u64,
    end: u64,
    attrs: HashMap<String, String>,
}

#[derive(Default, Clone)]
struct Receiver(Arc<Mutex<Vec<Span>>>);

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(Value::StringValue(s)) => s.clone(),
        Some(Value::IntValue(i)) => i.to_string(),
        Some(Value::BoolValue(b)) => b.to_string(),
        Some(Value::DoubleValue(d)) => d.to_string(),
        _ => String::new(),
    }
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut got = self.0.lock().unwrap();
        for rs in req.into_inner().resource_spans {
            let service = rs
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|a| a.key == "service.name")
                .map(|a| text(&a.value))
                .unwrap_or_default();
            for s in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                got.push(Span {
                    service: service.clone(),
                    name: s.name,
                    trace_id: s.trace_id,
                    span_id: s.span_id,
                    parent: s.parent_span_id,
                    start: s.start_time_unix_nano,
                    end: s.end_time_unix_nano,
                    attrs: s
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text(&a.value)))
                        .collect(),
                });
            }
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

const MATRIX: &str = r#"
name = "traced"
repetitions = 2
timeout_s = 60

[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = 0.2 }

[[states]]
name = "autogroup-off"
autogroup = 0
"#;

/// Stops a process the way systemd does, so that it flushes its spans.
fn terminate(p: &mut common::Proc) {
    let pid = nix::unistd::Pid::from_raw(p.child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let t = std::time::Instant::now();
    while p.child.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{} ignored SIGTERM",
            p.name
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn one_runs_spans_from_farmctl_coordinator_and_agent_share_a_trace_and_nest() {
    let _serial = serial();
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "this test applies a machine state and needs root"
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let receiver = Receiver::default();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let service = TraceServiceServer::new(receiver.clone());
    rt.spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let endpoint = format!("http://{addr}");
    // Every process of the farm exports; a short batch delay keeps the test quick.
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200".to_string()),
    ];
    let mut farm = Farm::start(&["--otlp-endpoint", &endpoint]);
    let state = farm.dir.path().join("agent-state");
    farm.start_agent_with(&state, &env);
    farm.wait_agents(1);
    let file = farm.write("traced.toml", MATRIX);
    let out = farm.farmctl_env(&["submit", file.to_str().unwrap()], &env);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let w = farm.farmctl(&["watch", &id]);
    assert!(w.status.success(), "{}", String::from_utf8_lossy(&w.stderr));
    // Shut down like a service manager: both flush what is left.
    for p in farm.agents.iter_mut() {
        terminate(p);
    }
    terminate(farm.coordinator.as_mut().unwrap());

    // Each process flushed its spans before it exited.
    let spans = receiver.0.lock().unwrap().clone();
    let one = |service: &str, name: &str, f: &dyn Fn(&Span) -> bool| -> Span {
        let found: Vec<&Span> = spans
            .iter()
            .filter(|s| s.service == service && s.name == name && f(s))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "one {service} span `{name}` expected; all spans: {:#?}",
            spans
                .iter()
                .map(|s| (&s.service, &s.name, &s.attrs))
                .collect::<Vec<_>>()
        );
        found[0].clone()
    };
    let child_of = |child: &Span, parent: &Span| {
        assert_eq!(
            child.trace_id, parent.trace_id,
            "{} vs {}",
            child.name, parent.name
        );
        assert_eq!(
            child.parent, parent.span_id,
            "{} is not a child of {}",
            child.name, parent.name
        );
        assert!(
            child.start >= parent.start && child.end <= parent.end,
            "{} [{}, {}] is not within {} [{}, {}]",
            child.name,
            child.start,
            child.end,
            parent.name,
            parent.start,
            parent.end
        );
    };

    let submit = one("farmctl", "farmctl", &|s| s.attrs["command"] == "submit");
    assert!(submit.parent.is_empty(), "farmctl's span is the root");
    // The matrix outlives the submit call: it is the call's child in the
    // trace, but not within its time.
    let matrix = one("farm-coordinator", "matrix", &|s| s.attrs["matrix"] == id);
    assert_eq!(matrix.trace_id, submit.trace_id);
    assert_eq!(matrix.parent, submit.span_id);
    assert_eq!(matrix.attrs["state"], "done");

    for rep in 0..2 {
        let run_id = format!("{id}.c0.r{rep}");
        let run = one("farm-coordinator", "run", &|s| s.attrs["run"] == run_id);
        child_of(&run, &matrix);
        assert_eq!(run.attrs["outcome"], "ok");
        for phase in ["placement", "store"] {
            child_of(
                &one("farm-coordinator", phase, &|s| s.parent == run.span_id),
                &run,
            );
        }
        let agent_run = one("farm-agent", "run", &|s| s.attrs["run"] == run_id);
        child_of(&agent_run, &run);
        let mut last_end = agent_run.start;
        for phase in ["state_apply", "workload", "telemetry", "restore"] {
            let p = one("farm-agent", phase, &|s| s.parent == agent_run.span_id);
            child_of(&p, &agent_run);
            assert!(
                p.start >= last_end,
                "{phase} starts before the phase before it ends"
            );
            last_end = p.end;
        }
    }
}
