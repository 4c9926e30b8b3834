//! Running one catalogued built-in workload inside a guest.
//!
//! The initramfs carries `/bin/farm-workload` with every shared library
//! `ldd` names (and the dynamic loader) at their host paths, and `/job`:
//! the argv, one argument per line. Every argument is checked here against
//! `^[A-Za-z0-9_.=+-]+$` before it is written, and the runner never
//! evaluates the job as shell code: it reads it line by line into its
//! positional parameters and runs `/bin/farm-workload "$@"`.
//!
//! The job runner's lines on ttyS1: `farm-job 1`, `release <uname -r>`,
//! `begin`, `out <line>` for each line of the workload's stdout, `end`,
//! `exit <code>`, `wall_s <seconds>` (by /proc/uptime around the workload),
//! `done`. The workload's stderr goes to the console.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use farm_workload::output::{Metric, parse_metric_line};

use super::initramfs::{self, BASE_DIRS, Entry, Initramfs};
use super::qemu::{self, Machine};

const LDD: &str = "/usr/bin/ldd";

/// Where the workload binary lives in the guest.
pub const GUEST_BINARY: &str = "/bin/farm-workload";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("guest job: argument `{0}` refused: only A-Z a-z 0-9 _ . = + - are allowed")]
    Argument(String),
    #[error("guest job: the job has no arguments (the workload name comes first)")]
    Empty,
    #[error("guest job: {binary}: {detail}")]
    Binary { binary: String, detail: String },
    #[error(transparent)]
    Initramfs(#[from] initramfs::Error),
    #[error(transparent)]
    Guest(#[from] qemu::Error),
}

/// A machine state to apply inside the guest before the workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestState {
    /// CPUs to take offline and bring back (`cycle:`).
    pub cycle: Vec<u32>,
    /// CPUs to keep offline during the run (`offline:`).
    pub offline: Vec<u32>,
    /// `kernel.sched_autogroup_enabled`.
    pub autogroup: Option<bool>,
}

impl GuestState {
    /// The runner's `/state` file: numbers only, so nothing in it can be
    /// more than a CPU number or 0/1 to the shell that reads it.
    pub fn file(&self) -> String {
        let mut out = String::new();
        for c in &self.cycle {
            out.push_str(&format!("cycle {c}\n"));
        }
        for c in &self.offline {
            out.push_str(&format!("offline {c}\n"));
        }
        if let Some(a) = self.autogroup {
            out.push_str(&format!("autogroup {}\n", u8::from(a)));
        }
        out
    }
}

/// A validated argv for `farm-workload` (without the program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    args: Vec<String>,
}

impl Job {
    /// `<workload> --param k=v ...`.
    pub fn new(workload: &str, params: &[(&str, &str)]) -> Result<Job, Error> {
        let mut args = vec![workload.to_string()];
        for (k, v) in params {
            args.push("--param".into());
            args.push(format!("{k}={v}"));
        }
        Job::from_args(args)
    }

    /// Any argv, each argument checked by [`validate_arg`].
    pub fn from_args(args: Vec<String>) -> Result<Job, Error> {
        if args.is_empty() {
            return Err(Error::Empty);
        }
        for a in &args {
            validate_arg(a)?;
        }
        Ok(Job { args })
    }

    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The text of `/job`: one argument a line.
    pub fn file(&self) -> String {
        self.args.iter().map(|a| format!("{a}\n")).collect()
    }
}

/// Refuses an argument that does not match `^[A-Za-z0-9_.=+-]+$`.
pub fn validate_arg(arg: &str) -> Result<(), Error> {
    let ok = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.=+-".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::Argument(arg.to_string()))
    }
}

/// The job runner (`/init`).
pub const JOB_RUNNER: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
exec 3>/dev/ttyS1
stty -F /dev/ttyS1 raw -echo 2>/dev/null
r() { printf '%s\n' "$*" >&3; }
domains() {
  for d in /sys/kernel/debug/sched/domains/cpu*/domain*; do
    [ -f "$d/name" ] || continue
    c=${d%/domain*}; c=${c##*/cpu}; l=${d##*/domain}
    r "domain $1 $c $l $(cat "$d/name")"
  done
}
r "farm-job 1"
r "release $(uname -r)"
domains before
# The machine state: lines `cycle N`, `offline N`, `autogroup 0|1`, checked
# on the host (digits only); anything else stops the job.
while IFS=' ' read -r what n || [ -n "$what" ]; do
  case "$what" in
    cycle) echo 0 > /sys/devices/system/cpu/cpu$n/online && echo 1 > /sys/devices/system/cpu/cpu$n/online || r "error state $what $n" ;;
    offline) echo 0 > /sys/devices/system/cpu/cpu$n/online || r "error state $what $n" ;;
    autogroup) echo $n > /proc/sys/kernel/sched_autogroup_enabled || r "error state $what $n" ;;
    *) r "error state $what" ;;
  esac
done < /state
r "online $(cat /sys/devices/system/cpu/online)"
domains after
set --
while IFS= read -r a || [ -n "$a" ]; do
  set -- "$@" "$a"
done < /job
read t0 x < /proc/uptime
r "begin"
{ /bin/farm-workload "$@" 2>/dev/console; echo "$?" > /tmp/rc; } | while IFS= read -r l; do r "out $l"; done
read t1 x < /proc/uptime
rc=255
[ -f /tmp/rc ] && read rc < /tmp/rc
r "end"
r "exit $rc"
r "wall_s $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')"
r "done"
exec 3>&-
sync
poweroff -f
"#;

/// The shared libraries (and loader) of `binary`, by `ldd`; a binary with a
/// library ldd cannot find is refused, naming it. A static binary has none.
pub fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>, Error> {
    let fail = |detail: String| Error::Binary {
        binary: binary.display().to_string(),
        detail,
    };
    let out = Command::new(LDD)
        .arg(binary)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| fail(format!("cannot run {LDD}: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        if stdout.contains("not a dynamic executable")
            || stderr.contains("not a dynamic executable")
        {
            return Ok(Vec::new());
        }
        return Err(fail(format!(
            "{LDD} exited with {}: {}",
            out.status,
            super::tail(&stderr, 5)
        )));
    }
    parse_ldd(&stdout).map_err(fail)
}

/// The absolute paths in `ldd`'s output. `name => not found` is an error
/// naming the library; the vDSO (no path) is skipped.
pub fn parse_ldd(out: &str) -> Result<Vec<PathBuf>, String> {
    let mut libs = Vec::new();
    for line in out.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("statically linked") {
            continue;
        }
        let (name, target) = match line.split_once("=>") {
            Some((n, t)) => (n.trim(), t.trim()),
            None => (line, line),
        };
        if target.starts_with("not found") {
            return Err(format!("ldd cannot resolve the shared library `{name}`"));
        }
        let path = target.split_whitespace().next().unwrap_or("");
        if path.is_empty() || path.starts_with('(') {
            continue; // linux-vdso.so.1 (0x...)
        }
        let path = Path::new(path);
        if !path.is_absolute() {
            if line.contains("=>") {
                return Err(format!("unexpected ldd line `{line}`"));
            }
            continue; // the vDSO without "=>"
        }
        if path
            .components()
            .any(|c| !matches!(c, Component::RootDir | Component::Normal(_)))
        {
            return Err(format!("refusing the library path in `{line}`"));
        }
        if !libs.iter().any(|l: &PathBuf| l == path) {
            libs.push(path.to_path_buf());
        }
    }
    Ok(libs)
}

/// Builds (or reuses) the initramfs that runs `job` with `workload_bin`
/// (a farm-workload binary) and its shared libraries, under `cache`.
pub fn build_initramfs(
    cache: &Path,
    busybox: &Path,
    workload_bin: &Path,
    job: &Job,
    state: &GuestState,
) -> Result<Initramfs, Error> {
    let fail = |detail: String| Error::Binary {
        binary: workload_bin.display().to_string(),
        detail,
    };
    if !workload_bin.is_file() {
        return Err(fail("not found".into()));
    }
    let libs = shared_libraries(workload_bin)?;
    let binary = fs::read(workload_bin).map_err(|e| fail(e.to_string()))?;
    let mut contents = Vec::new();
    for lib in &libs {
        let bytes = fs::read(lib).map_err(|e| fail(format!("read {}: {e}", lib.display())))?;
        contents.push((
            lib.to_string_lossy().trim_start_matches('/').to_string(),
            bytes,
        ));
    }
    let job_file = job.file();
    let mut dirs: Vec<String> = Vec::new();
    for (path, _) in &contents {
        let mut prefix = String::new();
        let parts: Vec<&str> = path.split('/').collect();
        for part in &parts[..parts.len() - 1] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if !BASE_DIRS.contains(&prefix.as_str()) && !dirs.contains(&prefix) {
                dirs.push(prefix.clone());
            }
        }
    }
    let mut extra: Vec<Entry<'_>> = dirs.into_iter().map(Entry::Dir).collect();
    extra.push(Entry::File(
        GUEST_BINARY.trim_start_matches('/').into(),
        0o755,
        &binary,
    ));
    for (path, bytes) in &contents {
        extra.push(Entry::File(path.clone(), 0o755, bytes));
    }
    extra.push(Entry::File("job".into(), 0o644, job_file.as_bytes()));
    let state_file = state.file();
    extra.push(Entry::File("state".into(), 0o644, state_file.as_bytes()));
    Ok(initramfs::build_with(cache, busybox, JOB_RUNNER, &extra)?)
}

/// What a job in a guest returned.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestRun {
    pub release: String,
    /// Sched domain names per CPU, in level order, before and after the
    /// state was applied (empty without `sched_verbose` debugfs).
    pub domains_before: std::collections::BTreeMap<u32, Vec<String>>,
    pub domains_after: std::collections::BTreeMap<u32, Vec<String>>,
    /// CPUs online once the state was applied.
    pub online: String,
    pub exit_code: i32,
    /// The workload's wall time by the guest's /proc/uptime.
    pub wall_s: f64,
    pub metrics: Vec<Metric>,
    pub console_tail: String,
    /// From starting QEMU to its exit.
    pub elapsed: Duration,
    /// From starting QEMU to the first metric line seen on the channel (by
    /// polling it every 50 ms).
    pub first_metric_after: Option<Duration>,
    /// From starting QEMU to the runner's `begin` line, written just before
    /// it starts the workload (polled likewise): boot plus state.
    pub begin_after: Option<Duration>,
}

/// Boots `vmlinuz` with a job initramfs (see [`build_initramfs`]) on
/// `machine`; `dir` (which must exist) receives the logs. A non-zero exit
/// of the workload is returned in [`GuestRun::exit_code`], not as an error.
pub fn run(
    machine: &Machine,
    vmlinuz: &Path,
    initrd: &Path,
    dir: &Path,
) -> Result<GuestRun, Error> {
    let mut first_metric_after = None;
    let mut begin_after = None;
    let channel = dir.join("channel.log");
    let (elapsed, text) = qemu::run_to_poweroff(machine, vmlinuz, initrd, dir, &mut |t| {
        if first_metric_after.is_some() {
            return;
        }
        let Ok(bytes) = fs::read(&channel) else {
            return;
        };
        let text = String::from_utf8_lossy(&bytes);
        if begin_after.is_none() && text.lines().any(|l| l.trim_end() == "begin") {
            begin_after = Some(t);
        }
        if text.contains("\nout metric ") {
            first_metric_after = Some(t);
        }
    })?;
    let console_tail = qemu::console_tail(dir);
    let mut r = parse_run(&text).map_err(|detail| qemu::Error::Report {
        detail,
        console_tail: console_tail.clone(),
    })?;
    r.console_tail = console_tail;
    r.elapsed = elapsed;
    r.first_metric_after = first_metric_after.or(r.metrics.first().map(|_| elapsed));
    r.begin_after = begin_after;
    tracing::info!(?elapsed, exit = r.exit_code, "guest job done");
    Ok(r)
}

/// Parses the job runner's lines (see [`JOB_RUNNER`]). Malformed metric
/// lines, unknown lines and a missing `release`, `exit`, `wall_s` or
/// `done` are errors naming the line.
pub fn parse_run(text: &str) -> Result<GuestRun, String> {
    let mut lines = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty());
    match lines.next().map(str::trim) {
        Some("farm-job 1") => {}
        Some(other) => return Err(format!("unexpected first line `{other}`")),
        None => return Err("the guest reported nothing".into()),
    }
    let mut release = None;
    let mut domains_before: std::collections::BTreeMap<u32, Vec<(usize, String)>> =
        Default::default();
    let mut domains_after = domains_before.clone();
    let mut online = String::new();
    let mut exit_code = None;
    let mut wall_s = None;
    let mut metrics = Vec::new();
    let mut done = false;
    for line in lines {
        if done {
            return Err(format!("`{line}` after done"));
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "release" if !rest.trim().is_empty() => release = Some(rest.trim().to_string()),
            "begin" | "end" => {}
            "domain" => {
                // `domain <before|after> <cpu> <level> <name>`
                let f: Vec<&str> = rest.split_whitespace().collect();
                let (Some(phase), Some(cpu), Some(level), Some(name), None) = (
                    f.first(),
                    f.get(1).and_then(|c| c.parse::<u32>().ok()),
                    f.get(2).and_then(|l| l.parse::<usize>().ok()),
                    f.get(3),
                    f.get(4),
                ) else {
                    return Err(format!("malformed domain line `{line}`"));
                };
                let map = match *phase {
                    "before" => &mut domains_before,
                    "after" => &mut domains_after,
                    _ => return Err(format!("malformed domain line `{line}`")),
                };
                let levels: &mut Vec<(usize, String)> = map.entry(cpu).or_default();
                levels.push((level, name.to_string()));
            }
            "online" => online = rest.trim().to_string(),
            "error" => return Err(format!("the guest could not {}", rest.trim())),
            "out" => {
                if let Some(m) = parse_metric_line(rest)
                    .map_err(|e| format!("malformed metric line `{line}`: {e}"))?
                {
                    metrics.push(m);
                }
            }
            "exit" => {
                exit_code = Some(
                    rest.trim()
                        .parse::<i32>()
                        .map_err(|_| format!("bad exit code in `{line}`"))?,
                )
            }
            "wall_s" => {
                let v = rest
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| format!("bad wall time in `{line}`"))?;
                wall_s = Some(v);
            }
            "done" => done = true,
            _ => return Err(format!("unknown line `{line}`")),
        }
    }
    if !done {
        return Err("the report has no `done` line (the guest stopped early)".into());
    }
    let by_level = |m: std::collections::BTreeMap<u32, Vec<(usize, String)>>| {
        m.into_iter()
            .map(|(cpu, mut levels)| {
                levels.sort();
                (cpu, levels.into_iter().map(|(_, n)| n).collect())
            })
            .collect()
    };
    Ok(GuestRun {
        release: release.ok_or("the report has no release")?,
        domains_before: by_level(domains_before),
        domains_after: by_level(domains_after),
        online,
        exit_code: exit_code.ok_or("the report has no exit code")?,
        wall_s: wall_s.ok_or("the report has no wall_s")?,
        metrics,
        console_tail: String::new(),
        elapsed: Duration::ZERO,
        first_metric_after: None,
        begin_after: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_workload::catalogue::Direction;

    const RECORDED: &str = "farm-job 1\r\nrelease 6.1.0-57-cloud-amd64\r\nbegin\r\n\
out some chatter\r\nout metric hog_ops_per_s 123456.5 ops/s higher\r\nend\r\n\
exit 0\r\nwall_s 1.02\r\ndone\r\n";

    #[test]
    fn domains_before_and_after_the_state() {
        let text = "farm-job 1\nrelease 6.1.0-57-cloud-amd64\n\
            domain before 0 1 NUMA\ndomain before 0 0 MC\ndomain before 1 0 MC\n\
            online 0-3\ndomain after 0 0 MC\ndomain after 1 0 MC\n\
            begin\nend\nexit 0\nwall_s 1.00\ndone\n";
        let r = parse_run(text).unwrap();
        assert_eq!(r.domains_before[&0], ["MC", "NUMA"]);
        assert_eq!(r.domains_after[&0], ["MC"]);
        assert_eq!(r.online, "0-3");
        for bad in [
            "domain sideways 0 0 MC",
            "domain before x 0 MC",
            "domain before 0 0",
        ] {
            let text = format!("farm-job 1\nrelease r\n{bad}\nexit 0\nwall_s 1\ndone\n");
            let e = parse_run(&text).unwrap_err();
            assert!(e.contains("malformed domain line"), "{bad}: {e}");
        }
        // A state the guest could not apply fails the run.
        let e = parse_run("farm-job 1\nrelease r\nerror state cycle 1\n").unwrap_err();
        assert!(e.contains("could not state cycle 1"), "{e}");
    }

    #[test]
    fn the_state_file_holds_numbers_only() {
        let s = GuestState {
            cycle: vec![1, 3],
            offline: vec![2],
            autogroup: Some(false),
        };
        assert_eq!(s.file(), "cycle 1\ncycle 3\noffline 2\nautogroup 0\n");
        assert_eq!(GuestState::default().file(), "");
    }

    #[test]
    fn parses_a_recorded_run() {
        let r = parse_run(RECORDED).unwrap();
        assert_eq!(r.release, "6.1.0-57-cloud-amd64");
        assert_eq!(r.exit_code, 0);
        assert_eq!(r.wall_s, 1.02);
        assert_eq!(r.metrics.len(), 1);
        let m = &r.metrics[0];
        assert_eq!(
            (m.name.as_str(), m.value, m.unit.as_str(), m.direction),
            (
                "hog_ops_per_s",
                123456.5,
                "ops/s",
                Direction::HigherIsBetter
            )
        );
    }

    #[test]
    fn malformed_or_truncated_runs_are_errors() {
        let bad = RECORDED.replace("123456.5 ops/s higher", "x ops/s higher");
        let e = parse_run(&bad).unwrap_err();
        assert!(
            e.contains("`out metric hog_ops_per_s x ops/s higher`"),
            "{e}"
        );
        let e = parse_run(&RECORDED.replace(" higher", "")).unwrap_err();
        assert!(e.contains("malformed metric line"), "{e}");
        let cut = &RECORDED[..RECORDED.find("done").unwrap()];
        assert!(parse_run(cut).unwrap_err().contains("no `done`"));
        assert!(
            parse_run(&RECORDED.replace("exit 0\r\n", ""))
                .unwrap_err()
                .contains("exit code")
        );
        assert!(
            parse_run(&RECORDED.replace("wall_s 1.02", "wall_s x"))
                .unwrap_err()
                .contains("`wall_s x`")
        );
        assert!(
            parse_run(&RECORDED.replace("begin", "rm -rf"))
                .unwrap_err()
                .contains("unknown line `rm -rf`")
        );
        assert!(parse_run("").unwrap_err().contains("nothing"));
        assert!(
            parse_run("farm-guest 1\n")
                .unwrap_err()
                .contains("first line")
        );
    }

    #[test]
    fn a_nonzero_exit_is_data() {
        let r = parse_run(&RECORDED.replace("exit 0", "exit 2")).unwrap();
        assert_eq!(r.exit_code, 2);
    }

    #[test]
    fn job_arguments_are_validated() {
        let job = Job::new("cpu-hog", &[("threads", "2"), ("seconds", "1")]).unwrap();
        assert_eq!(
            job.file(),
            "cpu-hog\n--param\nthreads=2\n--param\nseconds=1\n"
        );
        for bad in [
            "x;reboot", "$(id)", "`id`", "a b", "a\nb", "", "x|y", "x&", "'", "\"", "*", "~",
        ] {
            let e = Job::from_args(vec!["cpu-hog".into(), bad.into()]).unwrap_err();
            assert!(
                matches!(e, Error::Argument(ref a) if a == bad),
                "{bad:?}: {e}"
            );
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
        let e = Job::new("cpu-hog", &[("threads", "$(id)")]).unwrap_err();
        assert!(e.to_string().contains("`threads=$(id)`"), "{e}");
        assert!(matches!(Job::from_args(vec![]), Err(Error::Empty)));
        assert!(Job::from_args(vec!["a-b_c.d=e+f".into(), "X9".into()]).is_ok());
    }

    #[test]
    fn the_runner_does_not_evaluate_the_job() {
        assert!(JOB_RUNNER.contains("set -- \"$@\" \"$a\""));
        assert!(JOB_RUNNER.contains("/bin/farm-workload \"$@\""));
        assert!(!JOB_RUNNER.contains("eval"));
        assert!(!JOB_RUNNER.contains(". /job"));
    }

    #[test]
    fn ldd_output() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\
\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f1)\n\
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2)\n\
\t/lib64/ld-linux-x86-64.so.2 (0x00007f3)\n";
        assert_eq!(
            parse_ldd(out).unwrap(),
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libgcc_s.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        let e = parse_ldd(&format!("{out}\tlibfoo.so.3 => not found\n")).unwrap_err();
        assert!(e.contains("`libfoo.so.3`"), "{e}");
        assert!(parse_ldd("\tstatically linked\n").unwrap().is_empty());
        assert!(parse_ldd("\tlibx.so => /lib/../etc/x (0x1)\n").is_err());
    }
}
