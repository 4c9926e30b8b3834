//! Running one catalogued workload inside a guest, with telemetry.
//!
//! The initramfs carries the workload's program with every shared library it
//! needs (the farm's own `farm-workload` on x86_64, gathered by `ldd`; Debian's
//! builds of external tools on any arch, gathered from their packages), a
//! static busybox, and three files the host writes: `/job`, the argv one
//! argument a line, program first; `/state`, the machine state as words and
//! numbers; `/modules`, the kernel modules to load for the channel. Every
//! argument is checked here (no newline, no NUL, a small character set)
//! before it is written, and the runner never evaluates the job as shell
//! code: it reads it line by line into its positional parameters and runs
//! `"$@"`.
//!
//! The runner's lines on the channel, in order: `farm-job 2`, `release
//! <uname -r>`, `node <id> <cpulist>` per NUMA node, `domain before ...`,
//! `online <cpulist>`, `domain after ...`, the `before` snapshot (`irq`,
//! `ctxt`, `times` lines, see [`super::telemetry`]), `begin`, `session <sid>`,
//! the sampler's sweeps (`sample`, `task`, `mig`, `cpu` lines), the `after`
//! snapshot, `end`, `out <line>` per line of the workload's stdout, `err
//! <line>` per line of the tail of its stderr, `exit <code>`, `wall_s
//! <seconds>` (by /proc/uptime around the workload), `done`.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::initramfs::{self, BASE_DIRS, Entry, Initramfs};
use super::qemu::{self, Machine};
use super::telemetry::Observed;

const LDD: &str = "/usr/bin/ldd";

/// Where the farm's own workload binary lives in the guest.
pub const GUEST_BINARY: &str = "/bin/farm-workload";

/// Where the channel's kernel modules are put in the guest.
const MODULE_DIR: &str = "lib/farm-modules";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "guest job: argument `{0}` refused: only A-Z a-z 0-9 and _ . = + - , : / @ % are allowed"
    )]
    Argument(String),
    #[error("guest job: program `{0}` refused: it must be an absolute path without `..`")]
    Program(String),
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
    /// Run the workload in a cgroup (cgroup2, mounted by the runner) of its own.
    pub cgroup: bool,
    /// `cpu.weight` of that cgroup.
    pub cpu_weight: Option<u32>,
    /// `cpu.max` of that cgroup: quota and period in µs.
    pub cpu_max: Option<(u64, u64)>,
    /// `cpuset.cpus` of that cgroup.
    pub cpuset: Vec<u32>,
}

impl GuestState {
    /// The runner's `/state` file: a word and numbers a line (a CPU list is
    /// digits, commas and dashes), so nothing in it can be more than a
    /// number to the shell that reads it. The cgroup line comes before its
    /// limits, which the runner writes into the cgroup it made.
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
        if self.cgroup {
            out.push_str("cgroup 1\n");
            if let Some(w) = self.cpu_weight {
                out.push_str(&format!("cpu_weight {w}\n"));
            }
            if let Some((q, p)) = self.cpu_max {
                out.push_str(&format!("cpu_max {q} {p}\n"));
            }
            if !self.cpuset.is_empty() {
                out.push_str(&format!(
                    "cpuset {}\n",
                    crate::telemetry::topology::format_cpu_list(&self.cpuset)
                ));
            }
        }
        out
    }
}

/// A validated argv: an absolute program path in the guest, then arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    program: String,
    args: Vec<String>,
}

impl Job {
    /// `program` and its arguments, each checked ([`validate_arg`]).
    pub fn new(program: &str, args: Vec<String>) -> Result<Job, Error> {
        let ok = program.starts_with('/')
            && validate_arg(program).is_ok()
            && Path::new(program)
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !ok {
            return Err(Error::Program(program.to_string()));
        }
        for a in &args {
            validate_arg(a)?;
        }
        Ok(Job {
            program: program.to_string(),
            args,
        })
    }

    /// `farm-workload <workload> --param k=v ...`.
    pub fn built_in(workload: &str, params: &[(&str, &str)]) -> Result<Job, Error> {
        let mut args = vec![workload.to_string()];
        for (k, v) in params {
            args.push("--param".into());
            args.push(format!("{k}={v}"));
        }
        Job::new(GUEST_BINARY, args)
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The text of `/job`: the program, then one argument a line.
    pub fn file(&self) -> String {
        std::iter::once(&self.program)
            .chain(&self.args)
            .map(|a| format!("{a}\n"))
            .collect()
    }
}

/// Refuses an argument that does not match `^[A-Za-z0-9_.=+,:/@%-]+$`: the
/// runner reads arguments a line each and never evaluates them, so only a
/// newline could do harm; the narrow set keeps it that way if the runner
/// ever changes.
pub fn validate_arg(arg: &str) -> Result<(), Error> {
    let ok = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.=+-,:/@%".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Error::Argument(arg.to_string()))
    }
}

/// The job runner (`/init`).
pub const JOB_RUNNER: &str = r#"#!/bin/sh
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
if [ -e /bin/mount ]; then
  mount -t proc proc /proc
else
  # A foreign busybox (s390x) could not list its applets on the host.
  /bin/busybox mount -t proc proc /proc
  /bin/busybox --install -s
fi
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
# The channel's modules (virtio-serial on s390x), dependencies first.
if [ -f /modules ]; then
  while IFS= read -r m || [ -n "$m" ]; do
    insmod "$m" 2>/dev/console || echo "farm: insmod $m failed" > /dev/console
  done < /modules
fi
ch=/dev/ttyS1
i=0
while [ $i -lt 50 ]; do
  for p in /sys/class/virtio-ports/*; do
    [ -f "$p/name" ] && [ "$(cat "$p/name")" = farm ] && ch=/dev/${p##*/}
  done
  [ -f /modules ] || break
  [ "$ch" != /dev/ttyS1 ] && [ -e "$ch" ] && break
  sleep 0.1
  i=$((i + 1))
done
exec 3>"$ch"
[ "$ch" = /dev/ttyS1 ] && stty -F /dev/ttyS1 raw -echo 2>/dev/null
r() { printf '%s\n' "$*" >&3; }
domains() {
  for d in /sys/kernel/debug/sched/domains/cpu*/domain*; do
    [ -f "$d/name" ] || continue
    c=${d%/domain*}; c=${c##*/cpu}; l=${d##*/domain}
    r "domain $1 $c $l $(cat "$d/name")"
  done
}
r "farm-job 2"
r "release $(uname -r)"
for n in /sys/devices/system/node/node[0-9]*; do
  [ -f "$n/cpulist" ] && r "node ${n##*/node} $(cat "$n/cpulist")"
done
domains before
# The machine state: lines `cycle N`, `offline N`, `autogroup 0|1`, `cgroup 1`
# then its limits `cpu_weight N`, `cpu_max Q P`, `cpuset LIST`; written by the
# host (numbers only); anything else stops the job.
cg=
while IFS=' ' read -r what a b || [ -n "$what" ]; do
  case "$what" in
    cycle) echo 0 > /sys/devices/system/cpu/cpu$a/online && echo 1 > /sys/devices/system/cpu/cpu$a/online || r "error state $what $a" ;;
    offline) echo 0 > /sys/devices/system/cpu/cpu$a/online || r "error state $what $a" ;;
    autogroup) echo $a > /proc/sys/kernel/sched_autogroup_enabled || r "error state $what $a" ;;
    cgroup) mount -t cgroup2 none /sys/fs/cgroup && echo "+cpu +cpuset" > /sys/fs/cgroup/cgroup.subtree_control && mkdir /sys/fs/cgroup/farm && cg=/sys/fs/cgroup/farm || r "error state cgroup" ;;
    cpu_weight) [ -n "$cg" ] && echo $a > $cg/cpu.weight || r "error state $what $a" ;;
    cpu_max) [ -n "$cg" ] && echo "$a $b" > $cg/cpu.max || r "error state $what $a $b" ;;
    cpuset) [ -n "$cg" ] && echo $a > $cg/cpuset.cpus || r "error state $what $a" ;;
    *) r "error state $what" ;;
  esac
done < /state
r "online $(cat /sys/devices/system/cpu/online)"
domains after
set --
while IFS= read -r a || [ -n "$a" ]; do
  set -- "$@" "$a"
done < /job
# Under TCG every exec costs tens of milliseconds: a sweep runs one sed for
# the tasks, a grep and a sed for the migrations, one sed for the CPUs (a
# file that vanishes meanwhile is skipped, not fatal).
sampler() {
  while [ ! -e /tmp/stop ]; do
    read up x < /proc/uptime
    r "sample $up"
    sed 's/^/task /' /proc/[0-9]*/task/*/stat 2>/dev/null >&3
    grep -H '^se.nr_migrations' /proc/[0-9]*/task/*/sched 2>/dev/null | sed 's/^/mig /' >&3
    sed -n 's/^cpu/cpu &/p' /proc/stat >&3
    # Every 500 ms: coarser than the host's 100 ms, as every sweep forks.
    sleep 0.5
  done
  # What the sweeps cost: this shell's own CPU time and its children's.
  times > /tmp/sampler.times
  { read -r su ss; read -r cu cs; } < /tmp/sampler.times
  r "sampler $su $ss $cu $cs"
}
# Counters right before and after the workload, kept in files and sent
# once the workload and the sampler are done, so that neither the sending
# (forked seds) nor the sampler lands between them; `times` is the shell's
# builtin (children's user and sys), run without a fork, taken where the
# snapshot's own forks (cat, grep) fall outside the difference.
snap() {
  [ $1 = after ] && times > /tmp/times.$1
  cat /proc/interrupts > /tmp/irq.$1
  grep '^ctxt ' /proc/stat > /tmp/ctxt.$1
  [ $1 = before ] && times > /tmp/times.$1
}
send() {
  sed "s/^/irq $1 /" /tmp/irq.$1 >&3
  while read -r k v; do r "ctxt $1 $v"; done < /tmp/ctxt.$1
  { read -r x; read -r u s; } < /tmp/times.$1
  r "times $1 $u $s"
}
# The workload does not get the channel (3>&-): it could write report
# lines, and would hold the port open past poweroff.
snap before
r "begin"
read t0 x < /proc/uptime
if [ -n "$cg" ]; then
  setsid sh -c 'echo $$ > /sys/fs/cgroup/farm/cgroup.procs && exec "$@"' farm-job "$@" > /tmp/out 2> /tmp/err 3>&- &
else
  setsid "$@" > /tmp/out 2> /tmp/err 3>&- &
fi
pid=$!
r "session $pid"
sampler &
spid=$!
# Under TCG a busy workload would starve the sweeps (each forks a few
# programs) until it ends: the sampler runs at a higher priority, and
# reports what it cost.
renice -n -5 -p $spid > /dev/null 2>&1
wait $pid
rc=$?
read t1 x < /proc/uptime
snap after
touch /tmp/stop
wait $spid
send before
send after
r "end"
# A last line without a newline must not run into the next report line.
sed 's/^/out /' /tmp/out >&3
printf '\n' >&3
tail -n 100 /tmp/err | sed 's/^/err /' >&3
printf '\n' >&3
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

/// What goes into a job's initramfs besides the runner.
#[derive(Debug, Clone)]
pub struct Image<'a> {
    /// A static busybox for the guest's arch.
    pub busybox: &'a Path,
    /// Whether that busybox runs on this host (it lists its applets here;
    /// a foreign one installs them at boot).
    pub busybox_native: bool,
    /// Files to carry: (file on the host, absolute path in the guest): the
    /// workload's program and its libraries.
    pub files: Vec<(PathBuf, String)>,
    /// Kernel modules to load, in order (their dependencies first).
    pub modules: Vec<PathBuf>,
    pub job: &'a Job,
    pub state: &'a GuestState,
}

/// The files that run the farm's own `workload_bin` in a guest of the
/// host's arch: itself at [`GUEST_BINARY`] and the libraries `ldd` names, at
/// their host paths.
pub fn native_files(workload_bin: &Path) -> Result<Vec<(PathBuf, String)>, Error> {
    let fail = |detail: String| Error::Binary {
        binary: workload_bin.display().to_string(),
        detail,
    };
    if !workload_bin.is_file() {
        return Err(fail("not found".into()));
    }
    let mut files = vec![(workload_bin.to_path_buf(), GUEST_BINARY.to_string())];
    for lib in shared_libraries(workload_bin)? {
        let guest = lib.display().to_string();
        files.push((lib, guest));
    }
    Ok(files)
}

/// Builds (or reuses, by the hash of its contents) the initramfs of
/// `image` under `cache`.
pub fn build_initramfs(cache: &Path, image: &Image<'_>) -> Result<Initramfs, Error> {
    let mut contents: Vec<(String, Vec<u8>)> = Vec::new();
    let mut modules_file = String::new();
    for (host, guest) in &image.files {
        let bytes = fs::read(host).map_err(|e| Error::Binary {
            binary: host.display().to_string(),
            detail: format!("read: {e}"),
        })?;
        let rel = guest.trim_start_matches('/');
        if !guest.starts_with('/')
            || rel.is_empty()
            || Path::new(rel)
                .components()
                .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(Error::Binary {
                binary: host.display().to_string(),
                detail: format!("refusing the guest path `{guest}`"),
            });
        }
        contents.push((rel.to_string(), bytes));
    }
    for (i, m) in image.modules.iter().enumerate() {
        let bytes = fs::read(m).map_err(|e| Error::Binary {
            binary: m.display().to_string(),
            detail: format!("read: {e}"),
        })?;
        let name = m.file_name().unwrap_or_default().to_string_lossy();
        let rel = format!("{MODULE_DIR}/{i:02}-{name}");
        modules_file.push_str(&format!("/{rel}\n"));
        contents.push((rel, bytes));
    }
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
    for (path, bytes) in &contents {
        extra.push(Entry::File(path.clone(), 0o755, bytes));
    }
    let job_file = image.job.file();
    extra.push(Entry::File("job".into(), 0o644, job_file.as_bytes()));
    let state_file = image.state.file();
    extra.push(Entry::File("state".into(), 0o644, state_file.as_bytes()));
    if !image.modules.is_empty() {
        extra.push(Entry::File(
            "modules".into(),
            0o644,
            modules_file.as_bytes(),
        ));
    }
    let applets = if image.busybox_native {
        initramfs::Applets::Listed
    } else {
        initramfs::Applets::InstalledAtBoot
    };
    Ok(initramfs::build_with(
        cache,
        image.busybox,
        applets,
        JOB_RUNNER,
        &extra,
    )?)
}

/// What a job in a guest returned.
#[derive(Debug)]
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
    /// The workload's stdout, and the tail of its stderr.
    pub stdout: String,
    pub stderr: String,
    /// Nodes, counters and sweeps, for [`super::telemetry::build`].
    pub observed: Observed,
    pub console_tail: String,
    /// From starting QEMU to its exit.
    pub elapsed: Duration,
    /// From starting QEMU to the runner's `begin` line, written just before
    /// it starts the workload (polled every 50 ms): boot plus state.
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
    on_spawn: &mut dyn FnMut(u32),
    cancelled: &dyn Fn() -> bool,
) -> Result<GuestRun, Error> {
    let mut begin_after = None;
    let channel = dir.join("channel.log");
    let mut seen = 0usize;
    let (elapsed, text) = qemu::run_to_poweroff(
        machine,
        vmlinuz,
        initrd,
        dir,
        qemu::Watch {
            on_spawn,
            on_tick: &mut |t| {
                if begin_after.is_some() {
                    return;
                }
                // Only the start of the report matters here: read what is new.
                let Ok(bytes) = fs::read(&channel) else {
                    return;
                };
                if bytes.len() == seen {
                    return;
                }
                seen = bytes.len();
                if String::from_utf8_lossy(&bytes)
                    .lines()
                    .any(|l| l.trim_end() == "begin")
                {
                    begin_after = Some(t);
                }
            },
            cancelled,
        },
    )?;
    let console_tail = qemu::console_tail(dir);
    let mut r = parse_run(&text).map_err(|detail| qemu::Error::Report {
        detail,
        console_tail: console_tail.clone(),
    })?;
    r.console_tail = console_tail;
    r.elapsed = elapsed;
    r.begin_after = begin_after;
    tracing::info!(?elapsed, exit = r.exit_code, "guest job done");
    Ok(r)
}

/// Parses the job runner's lines (see [`JOB_RUNNER`]). Unknown lines and a
/// missing `release`, `exit`, `wall_s` or `done` are errors naming the line;
/// the telemetry lines go to [`Observed`], which checks them.
pub fn parse_run(text: &str) -> Result<GuestRun, String> {
    let mut lines = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty());
    match lines.next().map(str::trim) {
        Some("farm-job 2") => {}
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
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut observed = Observed::default();
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
                stdout.push_str(rest);
                stdout.push('\n');
            }
            "err" => {
                stderr.push_str(rest);
                stderr.push('\n');
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
            _ => {
                if !observed.line(kind, rest)? {
                    return Err(format!("unknown line `{line}`"));
                }
            }
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
        stdout,
        stderr,
        observed,
        console_tail: String::new(),
        elapsed: Duration::ZERO,
        begin_after: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORDED: &str = "farm-job 2\r\nrelease 6.1.0-57-cloud-amd64\r\nbegin\r\n\
end\r\nout some chatter\r\nout metric hog_ops_per_s 123456.5 ops/s higher\r\n\
err a warning\r\nexit 0\r\nwall_s 1.02\r\ndone\r\n";

    #[test]
    fn domains_before_and_after_the_state() {
        let text = "farm-job 2\nrelease 6.1.0-57-cloud-amd64\n\
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
            let text = format!("farm-job 2\nrelease r\n{bad}\nexit 0\nwall_s 1\ndone\n");
            let e = parse_run(&text).unwrap_err();
            assert!(e.contains("malformed domain line"), "{bad}: {e}");
        }
        // A state the guest could not apply fails the run.
        let e = parse_run("farm-job 2\nrelease r\nerror state cycle 1\n").unwrap_err();
        assert!(e.contains("could not state cycle 1"), "{e}");
    }

    #[test]
    fn the_state_file_holds_numbers_only() {
        let s = GuestState {
            cycle: vec![1, 3],
            offline: vec![2],
            autogroup: Some(false),
            ..GuestState::default()
        };
        assert_eq!(s.file(), "cycle 1\ncycle 3\noffline 2\nautogroup 0\n");
        let s = GuestState {
            cgroup: true,
            cpu_weight: Some(50),
            cpu_max: Some((50000, 100000)),
            cpuset: vec![0, 1, 3],
            ..GuestState::default()
        };
        assert_eq!(
            s.file(),
            "cgroup 1\ncpu_weight 50\ncpu_max 50000 100000\ncpuset 0-1,3\n"
        );
        // Limits without the cgroup are not written: the runner has nowhere to put them.
        let s = GuestState {
            cpu_weight: Some(50),
            ..GuestState::default()
        };
        assert_eq!(s.file(), "");
        assert_eq!(GuestState::default().file(), "");
    }

    #[test]
    fn parses_a_recorded_run() {
        let r = parse_run(RECORDED).unwrap();
        assert_eq!(r.release, "6.1.0-57-cloud-amd64");
        assert_eq!(r.exit_code, 0);
        assert_eq!(r.wall_s, 1.02);
        assert_eq!(
            r.stdout,
            "some chatter\nmetric hog_ops_per_s 123456.5 ops/s higher\n"
        );
        assert_eq!(r.stderr, "a warning\n");
    }

    #[test]
    fn malformed_or_truncated_runs_are_errors() {
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
            parse_run("farm-job 1\n")
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
        let job = Job::built_in("cpu-hog", &[("threads", "2"), ("seconds", "1")]).unwrap();
        assert_eq!(
            job.file(),
            "/bin/farm-workload\ncpu-hog\n--param\nthreads=2\n--param\nseconds=1\n"
        );
        for bad in [
            "x;reboot", "$(id)", "`id`", "a b", "a\nb", "", "x|y", "x&", "'", "\"", "*", "~",
        ] {
            let e = Job::new("/usr/bin/stress-ng", vec![bad.into()]).unwrap_err();
            assert!(
                matches!(e, Error::Argument(ref a) if a == bad),
                "{bad:?}: {e}"
            );
            assert!(e.to_string().contains(&format!("`{bad}`")), "{e}");
        }
        let e = Job::built_in("cpu-hog", &[("threads", "$(id)")]).unwrap_err();
        assert!(e.to_string().contains("`threads=$(id)`"), "{e}");
        for bad in ["stress-ng", "/usr/../bin/sh", "/usr/bin/a b", ""] {
            let e = Job::new(bad, vec![]).unwrap_err();
            assert!(matches!(e, Error::Program(_)), "{bad}: {e}");
        }
        let job = Job::new(
            "/usr/bin/stress-ng",
            vec!["--taskset".into(), "0,2-3".into(), "10s".into()],
        )
        .unwrap();
        assert_eq!(job.file(), "/usr/bin/stress-ng\n--taskset\n0,2-3\n10s\n");
    }

    #[test]
    fn the_runner_does_not_evaluate_the_job() {
        assert!(JOB_RUNNER.contains("set -- \"$@\" \"$a\""));
        assert!(JOB_RUNNER.contains("setsid \"$@\" >"));
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
