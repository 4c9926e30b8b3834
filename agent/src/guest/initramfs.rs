//! The guest's initramfs: busybox-static with its applet links and an
//! `/init` (busybox sh). The newc cpio archive is written here (a tiny
//! format: a 110-byte ASCII header, the name, the data, each padded to 4
//! bytes) so that device nodes need no privileges and the archive is
//! deterministic; `gzip -n` compresses it. The result is cached under
//! `<cache>/initramfs/<sha256 of the cpio>.cpio.gz`: the cpio is a pure
//! function of the inputs (busybox, its applet list, the init script).
//!
//! The runner `/init` writes its report to the second serial port
//! (`/dev/ttyS1`), one record a line; [`super::qemu::parse_report`] reads it.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{run_tool, sha256_file, unique_suffix};

/// Where the Debian package `busybox-static` installs busybox.
pub const BUSYBOX: &str = "/bin/busybox";
const GZIP: &str = "/usr/bin/gzip";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("initramfs: {step}: {detail}")]
    Step { step: &'static str, detail: String },
}

fn step(step: &'static str) -> impl Fn(String) -> Error {
    move |detail| Error::Step { step, detail }
}

fn io(s: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::Step {
        step: s,
        detail: e.to_string(),
    }
}

/// What `/init` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Init {
    /// The guest runner: report, hotplug cycle of cpu1, report, power off.
    Runner,
    /// Never powers off (for testing the host's timeout).
    Hang,
    /// Exits, so that the kernel panics (for testing what a panic gives).
    Exit,
}

impl Init {
    pub fn script(self) -> &'static str {
        match self {
            Init::Runner => RUNNER,
            Init::Hang => HANG,
            Init::Exit => {
                "#!/bin/sh\necho 'farm-guest: init exits on purpose' > /dev/console\nexit 1\n"
            }
        }
    }
}

/// The runner. Report lines (on ttyS1):
/// `farm-guest 1`, `release <uname -r>`, `node <id> <cpulist>`,
/// `domain <before|after> <cpu> <level> <name>`, `online <phase> <cpulist>`
/// with phase `before`, `offline` (cpu1 offline) and `after`,
/// `error <what>`, and `done` last.
const RUNNER: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
exec 3>/dev/ttyS1
stty -F /dev/ttyS1 raw -echo 2>/dev/null
r() { echo "$*" >&3; }
domains() {
  for d in /sys/kernel/debug/sched/domains/cpu*/domain*; do
    [ -f "$d/name" ] || continue
    c=${d%/domain*}; c=${c##*/cpu}; l=${d##*/domain}
    r "domain $1 $c $l $(cat "$d/name")"
  done
}
r "farm-guest 1"
r "release $(uname -r)"
for n in /sys/devices/system/node/node[0-9]*; do
  [ -d "$n" ] && r "node ${n##*/node} $(cat "$n/cpulist")"
done
domains before
r "online before $(cat /sys/devices/system/cpu/online)"
if echo 0 > /sys/devices/system/cpu/cpu1/online; then
  r "online offline $(cat /sys/devices/system/cpu/online)"
else
  r "error cpu1 offline"
fi
if echo 1 > /sys/devices/system/cpu/cpu1/online; then
  r "online after $(cat /sys/devices/system/cpu/online)"
else
  r "error cpu1 online"
fi
domains after
r "done"
exec 3>&-
sync
poweroff -f
"#;

const HANG: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
echo "farm-guest: init hangs on purpose" > /dev/console
while :; do sleep 1; done
"#;

/// An initramfs in the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initramfs {
    pub path: PathBuf,
    /// sha256 of the uncompressed cpio: the cache key.
    pub key: String,
    /// Whether this call wrote it (false: reused).
    pub built: bool,
}

/// Builds (or reuses) the initramfs with `busybox` (a static busybox,
/// normally [`BUSYBOX`]) and `init`, under `cache`.
pub fn build(cache: &Path, busybox: &Path, init: Init) -> Result<Initramfs, Error> {
    build_with(cache, busybox, Applets::Listed, init.script(), &[])
}

/// How busybox's applets (`mount`, `cat`, ...) get their links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applets {
    /// Listed by running busybox here: the archive carries every link.
    Listed,
    /// A busybox of another arch cannot run here: the archive carries
    /// `/bin/sh` only, and `/init` runs `busybox --install -s` first.
    InstalledAtBoot,
}

/// [`build`] with any `/init` script and `extra` members (added after the
/// busybox tree; their directories must be among them or the base ones).
pub(crate) fn build_with(
    cache: &Path,
    busybox: &Path,
    applets: Applets,
    init: &str,
    extra: &[Entry<'_>],
) -> Result<Initramfs, Error> {
    if !busybox.is_file() {
        return Err(step("find busybox")(format!(
            "{} is missing (install the Debian package busybox-static)",
            busybox.display()
        )));
    }
    let dir = cache.join("initramfs");
    fs::create_dir_all(&dir).map_err(io("create the cache directory"))?;
    let applets = match applets {
        Applets::Listed => {
            let out =
                run_tool(busybox, &["--list-full"], None).map_err(step("busybox --list-full"))?;
            String::from_utf8_lossy(&out.stdout).into_owned()
        }
        Applets::InstalledAtBoot => "bin/sh\n".to_string(),
    };
    let busybox_bytes = fs::read(busybox).map_err(io("read busybox"))?;
    let mut members = entries(&busybox_bytes, &applets, init);
    members.extend(extra.iter().cloned());
    let cpio = newc(&members);

    let tmp = dir.join(unique_suffix());
    fs::write(&tmp, &cpio).map_err(io("write the cpio"))?;
    let key = sha256_file(&tmp);
    let key = match key {
        Ok(k) => k,
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            return Err(step("sha256 of the cpio")(e));
        }
    };
    let path = dir.join(format!("{key}.cpio.gz"));
    if path.is_file() {
        let _ = fs::remove_file(&tmp);
        return Ok(Initramfs {
            path,
            key,
            built: false,
        });
    }
    let gz = dir.join(format!("{}.gz", unique_suffix()));
    let gzipped = gzip(&tmp, &gz);
    let _ = fs::remove_file(&tmp);
    if let Err(e) = gzipped {
        let _ = fs::remove_file(&gz);
        return Err(step("gzip")(e));
    }
    fs::rename(&gz, &path).map_err(io("move into the cache"))?;
    tracing::info!(path = %path.display(), "initramfs built");
    Ok(Initramfs {
        path,
        key,
        built: true,
    })
}

fn gzip(from: &Path, to: &Path) -> Result<(), String> {
    let input = fs::File::open(from).map_err(|e| e.to_string())?;
    let output = fs::File::create(to).map_err(|e| e.to_string())?;
    let status = Command::new(GZIP)
        .args(["-n", "-6", "-c"])
        .stdin(input)
        .stdout(output)
        .stderr(Stdio::inherit())
        .status()
        .map_err(|e| format!("cannot run {GZIP}: {e}"))?;
    if !status.success() {
        return Err(format!("{GZIP} exited with {status}"));
    }
    Ok(())
}

/// One archive member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry<'a> {
    Dir(String),
    File(String, u32, &'a [u8]),
    Symlink(String, String),
    /// name, mode bits, major, minor
    CharDev(String, u32, u32, u32),
}

/// The directories every initramfs has.
pub(crate) const BASE_DIRS: &[&str] = &[
    "bin", "sbin", "usr", "usr/bin", "usr/sbin", "dev", "proc", "sys", "tmp", "root",
];

fn entries<'a>(busybox: &'a [u8], applets: &str, init: &'a str) -> Vec<Entry<'a>> {
    let mut out: Vec<Entry<'a>> = BASE_DIRS
        .iter()
        .map(|d| Entry::Dir(d.to_string()))
        .collect();
    out.push(Entry::CharDev("dev/console".into(), 0o600, 5, 1));
    out.push(Entry::CharDev("dev/null".into(), 0o666, 1, 3));
    out.push(Entry::File("bin/busybox".into(), 0o755, busybox));
    out.push(Entry::File("init".into(), 0o755, init.as_bytes()));
    let mut links: Vec<&str> = applets
        .lines()
        .map(|l| l.trim().trim_start_matches('/'))
        .filter(|l| {
            !l.is_empty() && *l != "bin/busybox" && !l.split('/').any(|c| c == ".." || c.is_empty())
        })
        .collect();
    links.sort_unstable();
    links.dedup();
    for link in links {
        out.push(Entry::Symlink(link.to_string(), "/bin/busybox".into()));
    }
    out
}

/// A newc ("070701") archive of `entries`, with the trailer.
pub(crate) fn newc(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    for (e, ino) in entries.iter().zip(1u32..) {
        let (name, mode, data, rdev): (&str, u32, &[u8], (u32, u32)) = match e {
            Entry::Dir(n) => (n, 0o040755, &[], (0, 0)),
            Entry::File(n, m, d) => (n, 0o100000 | m, d, (0, 0)),
            Entry::Symlink(n, t) => (n, 0o120777, t.as_bytes(), (0, 0)),
            Entry::CharDev(n, m, maj, min) => (n, 0o020000 | m, &[], (*maj, *min)),
        };
        let nlink = if matches!(e, Entry::Dir(_)) { 2 } else { 1 };
        member(&mut out, name, ino, mode, nlink, data, rdev);
    }
    member(&mut out, "TRAILER!!!", 0, 0, 1, &[], (0, 0));
    out
}

fn member(
    out: &mut Vec<u8>,
    name: &str,
    ino: u32,
    mode: u32,
    nlink: u32,
    data: &[u8],
    rdev: (u32, u32),
) {
    let fields = [
        ino,
        mode,
        0, // uid
        0, // gid
        nlink,
        0, // mtime
        data.len() as u32,
        0, // devmajor
        0, // devminor
        rdev.0,
        rdev.1,
        name.len() as u32 + 1,
        0, // check
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        write!(out, "{f:08X}").expect("writing to a Vec");
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    pad4(out);
    out.extend_from_slice(data);
    pad4(out);
}

fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_layout() {
        let archive = newc(&[
            Entry::File("init".into(), 0o755, b"#!/bin/sh\n"),
            Entry::Symlink("bin/sh".into(), "/bin/busybox".into()),
        ]);
        let text = String::from_utf8_lossy(&archive);
        // header of the first member: magic, ino 1, mode 0100755, size 10, namesize 5
        assert!(text.starts_with("07070100000001000081ED"), "{text}");
        assert_eq!(&archive[6 + 6 * 8..6 + 7 * 8], b"0000000A");
        assert_eq!(&archive[6 + 11 * 8..6 + 12 * 8], b"00000005");
        assert_eq!(&archive[110..115], b"init\0");
        // name padded to 4: 110 + 5 = 115 → 116; data 10 → 128
        assert_eq!(&archive[116..126], b"#!/bin/sh\n");
        assert_eq!(&archive[128..134], b"070701");
        assert!(text.contains("bin/sh\0"));
        assert!(text.contains("TRAILER!!!\0"));
        assert_eq!(archive.len() % 4, 0);
    }

    #[test]
    fn applet_links_are_sanitised() {
        let applets = "/bin/sh\nusr/bin/env\nbin/busybox\n../etc/x\nbin//y\n\nsbin/poweroff\n";
        let e = entries(b"BB", applets, "init");
        let links: Vec<_> = e
            .iter()
            .filter_map(|e| match e {
                Entry::Symlink(n, _) => Some(n.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(links, ["bin/sh", "sbin/poweroff", "usr/bin/env"]);
    }

    #[test]
    fn the_runner_reports_to_the_second_serial_port() {
        let s = Init::Runner.script();
        assert!(s.contains("exec 3>/dev/ttyS1"));
        assert!(s.contains("poweroff -f"));
        assert!(s.contains("r \"done\""));
    }
}
