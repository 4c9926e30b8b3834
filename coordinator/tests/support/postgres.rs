//! A real PostgreSQL server of Debian's `postgresql` on loopback, for
//! tests, run as the `postgres` user (it refuses root): made with initdb in
//! a temporary directory, stopped and started again at will. Shared by the
//! archive suite and the farm's HA tests (`#[path]`-included).
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Debian's PostgreSQL binaries: /usr/lib/postgresql/VERSION/bin.
fn bin_dir() -> PathBuf {
    let found = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin/initdb"))
        .find(|p| p.is_file());
    match found {
        Some(initdb) => initdb.parent().unwrap().to_path_buf(),
        None => panic!(
            "PostgreSQL is needed (apt-get install -y postgresql): no \
             /usr/lib/postgresql/*/bin/initdb; the README's test command installs it"
        ),
    }
}

pub struct Postgres {
    _dir: tempfile::TempDir,
    data: PathBuf,
    bin: PathBuf,
    pub port: u16,
    running: bool,
}

/// Runs a PostgreSQL tool as the `postgres` user.
fn as_postgres(bin: &Path, tool: &str, args: &[&str]) {
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(bin.join(tool))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("runuser (util-linux) is needed to run {tool}: {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Postgres {
    /// A new, empty server, started; database `postgres`, user `postgres`,
    /// trusted on loopback.
    pub fn start() -> Postgres {
        let bin = bin_dir();
        let dir = tempfile::tempdir().unwrap();
        // The postgres user must reach its data directory.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let data = dir.path().join("data");
        std::fs::create_dir(&data).unwrap();
        let chown = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&data)
            .status()
            .unwrap();
        assert!(chown.success(), "chown postgres (is the user there?)");
        let d = data.to_str().unwrap();
        as_postgres(
            &bin,
            "initdb",
            &[
                "-D",
                d,
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut pg = Postgres {
            _dir: dir,
            data,
            bin,
            port,
            running: false,
        };
        pg.resume();
        pg
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the server again (waiting until it takes connections).
    pub fn resume(&mut self) {
        let d = self.data.to_str().unwrap().to_owned();
        let opts = format!(
            "-c listen_addresses=127.0.0.1 -p {} -k {d} -c fsync=off",
            self.port
        );
        let log = format!("{d}/log");
        as_postgres(
            &self.bin,
            "pg_ctl",
            &["-D", &d, "-w", "-l", &log, "-o", &opts, "start"],
        );
        self.running = true;
    }

    /// Stops the server at once (as a crash would: no checkpoint).
    pub fn stop(&mut self) {
        let d = self.data.to_str().unwrap().to_owned();
        as_postgres(
            &self.bin,
            "pg_ctl",
            &["-D", &d, "-w", "-m", "immediate", "stop"],
        );
        self.running = false;
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            let d = self.data.to_str().unwrap().to_owned();
            let _ = Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(self.bin.join("pg_ctl"))
                .args(["-D", &d, "-w", "-m", "immediate", "stop"])
                .output();
        }
    }
}
