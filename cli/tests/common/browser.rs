//! Debian's headless Chromium for the tests that render a report: a page
//! loaded with a fresh profile, its DOM, its console messages, a screenshot.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The flags `../shared/FACTS.md` gives for headless Chromium on this
/// machine type (without the background-networking ones it fights the closed
/// network), plus a window as large as a long report.
pub const CHROMIUM_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,4000",
];
pub const WINDOW: (u32, u32) = (1400, 4000);

/// Debian's `chromium` on the PATH, or a failure that says what to install.
pub fn chromium() -> PathBuf {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("chromium"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`chromium` is not installed, and this test renders the report in it: \
                 install the Debian package `chromium` (apt-get install -y chromium)"
            )
        })
}

/// What a Chromium run printed.
pub struct Browser {
    pub stdout: String,
    pub stderr: String,
}

/// Runs headless Chromium with a fresh profile on `args`, for at most two
/// minutes; console messages are logged to stderr.
pub fn browse(dir: &Path, args: &[String]) -> Browser {
    let profile = tempfile::tempdir_in(dir).unwrap();
    let (out, err) = (dir.join("chromium.out"), dir.join("chromium.err"));
    let mut child = Command::new(chromium())
        .args(CHROMIUM_FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        // Every console message of the page, whatever its level, becomes a
        // line `[...:INFO:CONSOLE:<line>] "<message>", source: <url> (<line>)`.
        .args(["--enable-logging=stderr", "--v=0"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("starting chromium: {e}"));
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "chromium {args:?} did not finish in 120 s: {}",
                std::fs::read_to_string(&err).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let b = Browser {
        stdout: std::fs::read_to_string(&out).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err).unwrap_or_default(),
    };
    assert!(
        status.success(),
        "chromium {args:?}: {status}\n{}",
        b.stderr
    );
    b
}

/// The page's console messages among Chromium's log lines.
pub fn console(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// A screenshot of `url`: its width, height and size in bytes.
pub fn screenshot(dir: &Path, url: &str, png: &Path) -> (u32, u32, usize) {
    let _ = std::fs::remove_file(png);
    browse(
        dir,
        &[format!("--screenshot={}", png.display()), url.into()],
    );
    let bytes = std::fs::read(png)
        .unwrap_or_else(|e| panic!("chromium wrote no screenshot {}: {e}", png.display()));
    // A PNG: the signature, then the IHDR chunk with width and height.
    assert!(
        bytes.len() > 24,
        "{} is {} bytes",
        png.display(),
        bytes.len()
    );
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    assert_eq!(&bytes[12..16], b"IHDR", "no IHDR chunk first");
    let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    (be(&bytes[16..20]), be(&bytes[20..24]), bytes.len())
}

pub fn file_url(p: &Path) -> String {
    format!("file://{}", p.canonicalize().unwrap().display())
}
