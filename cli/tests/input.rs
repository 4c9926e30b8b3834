//! Bad input and bad credentials: refused with a clear message, exit code 2
//! (or the gRPC code), and nothing stored.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use common::{Farm, serial};
use farm_proto::{
    Capabilities, ListAgentsRequest, RegisterRequest, agent_service_client::AgentServiceClient,
    farm_service_client::FarmServiceClient,
};
use tonic::Code;

/// (what, matrix text, the error after the file name: exactly
/// `LINE:COLUMN: KEY: ` and then the beginning of the message).
const BAD: &[(&str, &str, &str)] = &[
    (
        "unknown key",
        "name = \"x\"\nbogus = 1\n[[workloads]]\nname = \"lu\"\n",
        "2:1: bogus: unknown field `bogus`, expected one of `name`, ",
    ),
    (
        "wrong type",
        "name = \"x\"\nrepetitions = \"three\"\n[[workloads]]\nname = \"lu\"\n",
        "2:15: repetitions: invalid type: string \"three\", expected an integer",
    ),
    (
        "empty axis",
        "name = \"x\"\nkernels = []\n[[workloads]]\nname = \"lu\"\n",
        "2:11: kernels: empty axis",
    ),
    (
        "unknown workload",
        "name = \"x\"\n[[workloads]]\nname = \"netperf\"\n",
        "3:8: workloads[0].name: unknown workload `netperf` (known: ",
    ),
    (
        "unknown parameter",
        "name = \"x\"\n[[workloads]]\nname = \"lu\"\nparams = { thread = 2 }\n",
        "4:12: workloads[0].params.thread: unknown parameter `thread` of workload `lu` (known: ",
    ),
    (
        "out of range",
        "name = \"x\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = 0 }\n",
        "4:22: workloads[0].params.threads: parameter `threads` = 0 is out of range 1..=",
    ),
    (
        "too many cells",
        "name = \"x\"\nmax_cells = 3\n[[workloads]]\nname = \"lu\"\nparams = { threads = [1, 2, 3, 4] }\n",
        "2:13: max_cells: the matrix has 4 cells, more than the limit of 3",
    ),
];

fn count_rows(db: &std::path::Path, table: &str) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
        .unwrap()
}

#[test]
fn bad_matrices_are_refused_with_position_and_nothing_is_stored() {
    let _g = serial();
    let farm = Farm::start(&[]);
    for (what, text, expect) in BAD {
        let file = farm.write("bad.toml", text);
        // The file as farmctl was given it, then the position and key.
        let expected = format!("error: {}:{expect}", file.display());
        for cmd in ["submit", "run"] {
            let out = farm.farmctl(&[cmd, file.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{what} via {cmd}: {err}");
            assert!(
                err.starts_with(&expected),
                "{what} via {cmd}:\ngot      {err}expected {expected}..."
            );
            assert_eq!(
                err.trim().lines().count(),
                1,
                "{what} via {cmd}: one line expected: {err}"
            );
        }
    }
    let missing = farm.farmctl(&["submit", "/nonexistent/matrix.toml"]);
    assert_eq!(missing.status.code(), Some(2));
    let db = farm.data_dir().join("farm.db");
    assert_eq!(count_rows(&db, "matrices"), 0);
    assert_eq!(count_rows(&db, "runs"), 0);
}

#[test]
fn rpcs_without_the_right_token_are_refused() {
    let _g = serial();
    let farm = Farm::start(&[]);
    let read = |f: &str| {
        std::fs::read_to_string(farm.data_dir().join(f))
            .unwrap()
            .trim()
            .to_string()
    };
    let (agent_token, submit_token) = (read("agent.token"), read("submit.token"));
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let channel = tonic::transport::Endpoint::from_shared(farm.url())
            .unwrap()
            .connect()
            .await
            .unwrap();
        let with = |token: Option<&str>| {
            let header = token.map(|t| {
                format!("Bearer {t}")
                    .parse::<tonic::metadata::MetadataValue<_>>()
                    .unwrap()
            });
            move |mut req: tonic::Request<()>| {
                if let Some(h) = &header {
                    req.metadata_mut().insert("authorization", h.clone());
                }
                Ok(req)
            }
        };
        let farm_call = |token: Option<&str>| {
            let mut c = FarmServiceClient::with_interceptor(channel.clone(), with(token));
            async move {
                c.list_agents(ListAgentsRequest {})
                    .await
                    .err()
                    .map(|s| s.code())
            }
        };
        assert_eq!(farm_call(None).await, Some(Code::Unauthenticated));
        assert_eq!(farm_call(Some("00ff")).await, Some(Code::Unauthenticated));
        assert_eq!(
            farm_call(Some(&agent_token)).await,
            Some(Code::PermissionDenied)
        );
        assert_eq!(farm_call(Some(&submit_token)).await, None);

        let register = |token: Option<&str>| {
            let mut c = AgentServiceClient::with_interceptor(channel.clone(), with(token));
            let caps = Capabilities {
                arch: "x86_64".into(),
                cpus_online: 1,
                ..Default::default()
            };
            async move {
                c.register(RegisterRequest {
                    capabilities: Some(caps),
                    resume_agent_id: String::new(),
                })
                .await
                .err()
                .map(|s| s.code())
            }
        };
        assert_eq!(register(None).await, Some(Code::Unauthenticated));
        assert_eq!(register(Some("00ff")).await, Some(Code::Unauthenticated));
        assert_eq!(
            register(Some(&submit_token)).await,
            Some(Code::PermissionDenied)
        );
        assert_eq!(register(Some(&agent_token)).await, None);
    });
    // farmctl with a wrong token says so and fails.
    let out = std::process::Command::new(common::farmctl_bin())
        .args(["agents"])
        .env("FARM_COORDINATOR", farm.url())
        .env("FARM_TOKEN", "00ff")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid token"));
}

/// An agent told to boot no guests and also given guest kernels refuses to
/// start, naming both flags, rather than ignore the kernels (also when they
/// come from the environment, as `FARM_KERNEL_REPOS`).
#[test]
fn an_agent_without_guests_refuses_guest_kernels() {
    for (args, env) in [
        (vec!["--kernel-repo", "linux=/srv/linux"], None),
        (vec!["--kernel-dir", "/srv/kernels"], None),
        (vec![], Some(("FARM_KERNEL_REPOS", "linux=/srv/linux"))),
    ] {
        let mut cmd = std::process::Command::new(common::sibling_bin("farm-agent"));
        cmd.args(["--coordinator", "http://127.0.0.1:1", "--no-guests"])
            .args(&args);
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {err}");
        assert!(
            err.contains("'--no-guests' cannot be used with"),
            "{args:?} {env:?}: {err}"
        );
    }
}
