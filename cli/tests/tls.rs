//! Mutual TLS end to end, as a user sets it up: `farm-coordinator pki`
//! issues the certificates, a coordinator serves on them, an agent and
//! farmctl dial it with theirs and a matrix runs. Then, from a client that
//! is not ours (Python's grpcio, `tls/impostor.py`): another agent's
//! certificate cannot speak for the first agent, a connection without a
//! certificate or with one of another authority is refused at the
//! handshake, and a submitter's certificate cannot call the agents'
//! service. And plaintext is refused off loopback, on both ends.
//!
//! Needs python3-grpcio, python3-protobuf and protobuf-compiler (Debian);
//! scripts/test.sh installs them. Fails loudly where they are missing.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{free_port, serial, sibling_bin, spawn, wait_for};

fn coordinator_cmd(args: &[&str]) -> Output {
    Command::new(sibling_bin("farm-coordinator"))
        .args(args)
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `cmd` without the environment a developer's shell may carry into it.
fn clean(cmd: &mut Command) -> &mut Command {
    for k in [
        "RUST_BACKTRACE",
        "FARM_TLS_CA",
        "FARM_TLS_CERT",
        "FARM_TLS_KEY",
        "FARM_INSECURE_PLAINTEXT",
        "FARM_COORDINATOR",
    ] {
        cmd.env_remove(k);
    }
    cmd
}

/// Runs `cmd` and checks it fails with `code` and exactly `stderr`.
fn refused(cmd: &mut Command, code: i32, stderr: &str) {
    let out = clean(cmd).output().unwrap();
    assert_eq!(out.status.code(), Some(code), "{cmd:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        stderr,
        "{cmd:?}"
    );
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// farmctl with the submitter's certificate (and no token anywhere).
fn farmctl(url: &str, pki: &Path, who: &str, args: &[&str]) -> Output {
    clean(&mut Command::new(common::farmctl_bin()))
        .args(["--coordinator", url])
        .arg("--tls-ca")
        .arg(pki.join("ca.crt"))
        .arg("--tls-cert")
        .arg(pki.join(format!("{who}.crt")))
        .arg("--tls-key")
        .arg(pki.join(format!("{who}.key")))
        .args(args)
        .env_remove("FARM_TOKEN")
        .env_remove("FARM_TOKEN_FILE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn a_farm_over_mutual_tls_knows_its_agents_by_their_certificates() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let p = pki.display().to_string();
    let said = ok(
        coordinator_cmd(&["pki", "init", "--dir", &p, "--host", "127.0.0.1"]),
        "pki init",
    );
    assert_eq!(
        said,
        format!(
            "authority: {p}/ca.crt (key {p}/ca.key)\ncoordinator: {p}/coordinator.crt (key {p}/coordinator.key)\n"
        )
    );
    for (cmd, name) in [
        ("issue-agent", "node-1"),
        ("issue-agent", "node-2"),
        ("issue-client", "alice"),
    ] {
        ok(coordinator_cmd(&["pki", cmd, name, "--dir", &p]), cmd);
    }
    // Another authority, with an agent of the same name.
    let foreign = dir.path().join("foreign");
    let f = foreign.display().to_string();
    ok(
        coordinator_cmd(&["pki", "init", "--dir", &f]),
        "foreign init",
    );
    ok(
        coordinator_cmd(&["pki", "issue-agent", "node-1", "--dir", &f]),
        "foreign agent",
    );
    let keys = [
        "ca.key",
        "coordinator.key",
        "agents/node-1.key",
        "agents/node-2.key",
        "submitters/alice.key",
    ];
    for k in keys {
        assert_eq!(mode(&pki.join(k)), 0o600, "{k}");
    }
    // Reissuing is refused, and names no file it did not write.
    let again = coordinator_cmd(&["pki", "issue-agent", "node-1", "--dir", &p]);
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&again.stderr).trim(),
        format!("Error: {p}/agents/node-1.crt exists: remove it first to issue it again")
    );

    // The key as systemd hands it to a service with a dynamic user
    // (LoadCredential=): root's file, mode 0400, readable by the service's
    // user through an ACL, which stat shows as group bits (0440). Refused
    // as too open anywhere but under $CREDENTIALS_DIRECTORY.
    let creds = dir.path().join("credentials");
    std::fs::create_dir(&creds).unwrap();
    let key = creds.join("coordinator.key");
    std::fs::copy(pki.join("coordinator.key"), &key).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    let acl = Command::new("setfacl")
        .args(["-m", "u:nobody:r"])
        .arg(&key)
        .status()
        .expect("setfacl (Debian package acl; scripts/test.sh installs it)");
    assert!(acl.success());
    assert_eq!(mode(&key), 0o440);
    let data = dir.path().join("data");
    let tls_args = |key: &Path| -> Vec<String> {
        vec![
            "--tls-ca".into(),
            pki.join("ca.crt").display().to_string(),
            "--tls-cert".into(),
            pki.join("coordinator.crt").display().to_string(),
            "--tls-key".into(),
            key.display().to_string(),
        ]
    };
    refused(
        Command::new(sibling_bin("farm-coordinator"))
            .args(["--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data)
            .args(tls_args(&key)),
        1,
        &format!(
            "Error: {}: a secret readable by group or others (mode 440) is refused; chmod 600 it",
            key.display()
        ),
    );
    let port = free_port();
    let _coordinator = spawn(
        "coordinator",
        &sibling_bin("farm-coordinator"),
        &[
            "--listen".into(),
            format!("127.0.0.1:{port}"),
            "--data-dir".into(),
            data.display().to_string(),
        ]
        .into_iter()
        .chain(tls_args(&key))
        .collect::<Vec<_>>(),
        dir.path().join("coordinator.log"),
        &[("CREDENTIALS_DIRECTORY", creds.display().to_string())],
    );
    wait_for(Duration::from_secs(30), "the coordinator to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = format!("https://127.0.0.1:{port}");
    let agent = |name: &str, state: PathBuf| {
        spawn(
            name,
            &sibling_bin("farm-agent"),
            &[
                "--coordinator".into(),
                url.clone(),
                "--workload-bin".into(),
                env!("CARGO_BIN_EXE_farm-workload").into(),
                "--state-dir".into(),
                state.display().to_string(),
                "--no-guests".into(),
            ],
            dir.path().join(format!("{name}.log")),
            &[
                ("FARM_TLS_CA", pki.join("ca.crt").display().to_string()),
                (
                    "FARM_TLS_CERT",
                    pki.join(format!("agents/{name}.crt")).display().to_string(),
                ),
                (
                    "FARM_TLS_KEY",
                    pki.join(format!("agents/{name}.key")).display().to_string(),
                ),
            ],
        )
    };
    let _node1 = agent("node-1", dir.path().join("node-1-state"));
    let rows = || {
        let out = farmctl(&url, &pki, "submitters/alice", &["agents"]);
        assert!(
            out.status.success(),
            "farmctl agents over TLS: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    wait_for(Duration::from_secs(30), "node-1 connected", || {
        rows().iter().any(|r| r[1] == "connected")
    });
    let listed = rows();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let victim = listed[0][0].clone();
    assert_eq!(listed[0][6], "node-1", "{listed:?}");

    // A matrix submitted, watched and read over TLS.
    let m = dir.path().join("m.toml");
    std::fs::write(
        &m,
        "name = \"tls\"\nrepetitions = 2\n[[workloads]]\nname = \"cpu-hog\"\n\
         params = { seconds = 0.2, threads = 1 }\n",
    )
    .unwrap();
    let out = farmctl(
        &url,
        &pki,
        "submitters/alice",
        &["submit", m.to_str().unwrap()],
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && id.starts_with("m-"),
        "submit: {out:?}"
    );
    let out = farmctl(&url, &pki, "submitters/alice", &["watch", &id]);
    assert_eq!(out.status.code(), Some(0), "watch: {out:?}");
    let out = farmctl(&url, &pki, "submitters/alice", &["results", &id, "--json"]);
    let results: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(results["state"], "done", "{results}");
    let by: Vec<&str> = results["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["agent_id"].as_str().unwrap())
        .collect();
    assert_eq!(by, vec![victim.as_str(), victim.as_str()], "{results}");
    let wall = results["cells"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "wall_s")
        .unwrap();
    assert_eq!(wall["n"], 2, "{results}");

    // An agent's certificate is not a submitter's.
    let out = farmctl(&url, &pki, "agents/node-1", &["agents"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: the certificate of agent node-1 may not call FarmService"
    );
    // https without certificates is a usage error, before any connection.
    refused(
        Command::new(common::farmctl_bin()).args(["--coordinator", &url, "agents"]),
        2,
        &format!("error: {url}: an https:// URL needs --tls-ca, --tls-cert and --tls-key"),
    );

    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("/usr/bin/python3")
        .arg(format!("{crate_dir}/tests/tls/impostor.py"))
        .args(["--addr", &format!("127.0.0.1:{port}")])
        .arg("--proto")
        .arg(format!("{crate_dir}/../proto/proto/farm/v1/farm.proto"))
        .args(
            [
                ("--ca", pki.join("ca.crt")),
                ("--agent-cert", pki.join("agents/node-2.crt")),
                ("--agent-key", pki.join("agents/node-2.key")),
                ("--foreign-cert", foreign.join("agents/node-1.crt")),
                ("--foreign-key", foreign.join("agents/node-1.key")),
                ("--submitter-cert", pki.join("submitters/alice.crt")),
                ("--submitter-key", pki.join("submitters/alice.key")),
            ]
            .into_iter()
            .flat_map(|(flag, path)| [flag.into(), path.into_os_string()]),
        )
        .args(["--victim", &victim])
        .output()
        .expect("/usr/bin/python3 must be installed (scripts/test.sh installs python3-grpcio)");
    assert!(
        out.status.success(),
        "impostor.py (needs python3-grpcio, python3-protobuf, protobuf-compiler): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // node-2 asked to resume node-1's id and got an id of its own.
    assert_eq!(r["resume_victim"]["code"], "OK", "{r}");
    let node2 = r["resume_victim"]["value"].as_str().unwrap().to_string();
    assert_ne!(node2, victim);
    assert_eq!(r["hello_as_victim"]["code"], "PERMISSION_DENIED", "{r}");
    assert_eq!(
        r["hello_as_victim"]["message"],
        format!(
            "agent {victim} is bound to certificate node-1; certificate node-2 may not speak for it"
        )
    );
    // Refused in the handshake: grpc-core reports the connection unavailable.
    assert_eq!(r["no_certificate"]["code"], "UNAVAILABLE", "{r}");
    assert_eq!(r["foreign_authority"]["code"], "UNAVAILABLE", "{r}");
    assert_eq!(r["submitter_as_agent"]["code"], "PERMISSION_DENIED", "{r}");
    assert_eq!(
        r["submitter_as_agent"]["message"],
        "the certificate of submitter alice may not call AgentService"
    );
    assert_eq!(r["agent_as_submitter"]["code"], "PERMISSION_DENIED", "{r}");
    assert_eq!(
        r["agent_as_submitter"]["message"],
        "the certificate of agent node-2 may not call FarmService"
    );
    let mut want = vec![
        serde_json::json!([victim, "node-1"]),
        serde_json::json!([node2, "node-2"]),
    ];
    want.sort_by_key(|v| v[0].as_str().unwrap().to_string());
    assert_eq!(r["agents"]["value"], serde_json::Value::Array(want), "{r}");
}

#[test]
fn plaintext_is_refused_off_loopback_on_both_ends() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    refused(
        Command::new(sibling_bin("farm-coordinator")).args([
            "--listen",
            "0.0.0.0:0",
            "--data-dir",
            data.to_str().unwrap(),
        ]),
        1,
        "Error: --listen 0.0.0.0:0: plaintext on an address that is not loopback is \
         refused; give --tls-cert, --tls-key and --tls-ca, or pass --insecure-plaintext",
    );
    // Refused before anything was created.
    assert!(!data.exists());

    let remote = "http://192.0.2.1:7700";
    let refusal = format!(
        "{remote}: plaintext to a host that is not loopback is refused (tokens would cross the \
         network in clear); use an https:// URL with --tls-ca, --tls-cert and --tls-key, or pass \
         --insecure-plaintext"
    );
    refused(
        Command::new(sibling_bin("farm-agent"))
            .args(["--coordinator", remote, "--state-dir"])
            .arg(dir.path().join("agent"))
            .env("FARM_AGENT_TOKEN", "00ff"),
        1,
        &format!("Error: {refusal}"),
    );
    refused(
        Command::new(common::farmctl_bin())
            .args(["--coordinator", remote, "agents"])
            .env("FARM_TOKEN", "00ff"),
        2,
        &format!("error: {refusal}"),
    );

    // A token file others can read is refused, by the agent and farmctl.
    let open_token = dir.path().join("open.token");
    std::fs::write(&open_token, "00ff\n").unwrap();
    std::fs::set_permissions(&open_token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let too_open = format!(
        "{}: a secret readable by group or others (mode 644) is refused; chmod 600 it",
        open_token.display()
    );
    refused(
        Command::new(sibling_bin("farm-agent"))
            .arg("--state-dir")
            .arg(dir.path().join("agent"))
            .arg("--token-file")
            .arg(&open_token)
            .env_remove("FARM_AGENT_TOKEN"),
        1,
        &format!("Error: reading the agent token (--token-file)\n\nCaused by:\n    {too_open}"),
    );
    refused(
        Command::new(common::farmctl_bin())
            .args(["agents", "--token-file"])
            .arg(&open_token)
            .env_remove("FARM_TOKEN"),
        2,
        &format!(
            "error: reading the submitter token (pass --token-file, set FARM_TOKEN, or use TLS: \
             --tls-ca, --tls-cert, --tls-key): {too_open}"
        ),
    );

    // Asked for by name, plaintext off loopback listens.
    let port = free_port();
    let mut c = spawn(
        "coordinator",
        &sibling_bin("farm-coordinator"),
        &[
            "--listen".into(),
            format!("0.0.0.0:{port}"),
            "--data-dir".into(),
            data.display().to_string(),
            "--insecure-plaintext".into(),
        ],
        dir.path().join("coordinator.log"),
        &[],
    );
    wait_for(Duration::from_secs(30), "the coordinator to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    // And farmctl dials it there when told to: a real call to this
    // machine's own address that is not loopback (connecting a UDP socket
    // sends nothing; it only picks the route's source address).
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    probe.connect("192.0.2.1:9").unwrap();
    let ip = probe.local_addr().unwrap().ip();
    assert!(
        !ip.is_loopback(),
        "{ip}: this machine needs an address off loopback"
    );
    let url = format!("http://{ip}:{port}");
    let agents = |insecure: bool| {
        let mut cmd = Command::new(common::farmctl_bin());
        cmd.args(["--coordinator", &url, "agents", "--token-file"])
            .arg(data.join("submit.token"))
            .env_remove("RUST_BACKTRACE");
        if insecure {
            cmd.arg("--insecure-plaintext");
        }
        cmd.output().unwrap()
    };
    let out = agents(true);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().next(),
        Some(
            "AGENT            STATE      ARCH     KERNEL                   CPUS NODES  IDENTITY         CURRENT"
        )
    );
    assert_eq!(agents(false).status.code(), Some(2));
    c.kill();
}
