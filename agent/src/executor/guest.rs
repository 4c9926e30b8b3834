//! The guest executor: a run whose kernel is `debian:<version>` or
//! `file:<path>` runs its workload inside a QEMU guest booted with that
//! kernel, x86_64 or s390x by the Debian flavour or the image's magic, under
//! the executor the cell asks for (`tcg`, `kvm`) or else KVM when the probe
//! saw it boot a guest, and TCG otherwise.
//!
//! - [`machine`]: the guest machine (arch, QEMU, the KVM probe) and whether
//!   this host boots guests at all;
//! - [`image`]: what the guest boots (kernels, Debian packages of any arch,
//!   kernel modules, the initramfs) and the cache that keeps them;
//! - [`runner`]: the guest's `/init` (a shell script), the line protocol
//!   between it and the host, and the telemetry it returns.
//!
//! This file walks a run through them in order: the kernel and the arch it
//! implies, the machine and the state it can have (checked before any
//! download), the workload's files, the image, the boot, the report.
//!
//! The guest applies the run's hotplug, autogroup and cgroup (cgroup2: one
//! group for the workload, with the state's limits), scheduler features,
//! tunables and NUMA balancing before the workload, boots with the state's
//! command-line words, and reports the knobs as its kernel then shows them
//! ([`knobs`] checks them against the state); it also reports its sched
//! domains before and after (booted with `sched_verbose`),
//! which become the run's topology telemetry: seed 000's "a domain level
//! missing after a hotplug cycle", on a 2-node guest. Its runner samples the
//! workload's threads and the CPUs' times every 500 ms and snapshots
//! /proc/interrupts, context switches and the workload's CPU times around
//! it; the host turns those into the same telemetry as a host run
//! ([`runner::telemetry`]).
//!
//! Built-in workloads run in x86_64 guests only (the farm's binaries are
//! built for x86_64); external tools (stress-ng, sysbench, rt-tests'
//! hackbench) run on every arch from Debian's packages of the guest's arch.
//! Competing loads inside guests are refused, as are client/server tools.

pub mod arch;
mod decimal;
pub mod image;
mod knobs;
pub mod machine;
pub mod runner;
pub mod slowdown;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use farm_proto::{RunAssignment, RunResult};
use farm_runtime::trace::TARGET;
use farm_spec::metric::{GUEST_START_S, WALL_S};
use farm_spec::{Autogroup, CpuSet, Executor as ExecutorName, HotplugMode, Kernel};
use farm_workload::catalogue;
use tracing::info_span;

use super::contract::{
    Context, End, Executor, Outcome, Run, known_metric, lock, tail_bytes, unix_ms,
};
use super::launch::{self, Output};
use crate::cache;
use crate::kernel;
use crate::state::journal::{self, Entry};
use arch::{Accel, GuestArch};
use image::{initramfs, kernels, modules, sysroot};
use machine::{kvm, qemu};
use runner::protocol::{self, GuestRun, GuestState, Job};
use runner::telemetry;

/// Booting under TCG before the workload starts, beyond its own timeout.
const BOOT_ALLOWANCE: Duration = Duration::from_secs(120);

/// Why a guest run did not get as far as a report.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error("this agent boots no guests")]
    NoCache,
    #[error("kernel `{0}` boots no guest")]
    NotGuest(String),
    #[error("kernel `{0}`: this agent builds no kernels from trees (no --kernel-repo)")]
    NoTrees(String),
    #[error(transparent)]
    Build(#[from] kernel::build::Error),
    #[error(transparent)]
    NoGuest(#[from] arch::NoGuest),
    #[error(transparent)]
    Kernel(#[from] kernels::Error),
    #[error(transparent)]
    Machine(#[from] machine::Refused),
    #[error("guest: {0}")]
    Knob(knobs::Mismatch),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("the assignment has no workload")]
    NoWorkload,
    #[error(transparent)]
    Catalogue(#[from] catalogue::ParamError),
    #[error(
        "`{0}` is built into the farm, whose binaries exist for x86_64 only; \
         {1} guests run external tools (stress-ng, sysbench-cpu, \
         sysbench-threads, rt-hackbench)"
    )]
    BuiltInOnX86(String, GuestArch),
    #[error(
        "`{0}` cannot run in a guest: only stress-ng, sysbench and rt-tests' \
         hackbench are carried into guests"
    )]
    NotCarried(String),
    #[error("`{0}` needs a server, which guests do not run")]
    Server(String),
    #[error(transparent)]
    Launch(#[from] launch::Error),
    #[error(transparent)]
    Job(#[from] protocol::Error),
    #[error(transparent)]
    Image(#[from] image::Error),
    #[error(transparent)]
    Sysroot(#[from] sysroot::Error),
    #[error(transparent)]
    Modules(#[from] modules::Error),
    #[error(transparent)]
    Sampler(#[from] image::sampler::Error),
    #[error("executor `kvm` asked, but KVM does not boot {0} guests here ({1})")]
    NoKvm(GuestArch, String),
    #[error("executor `{0}` cannot run a guest kernel (tcg or kvm can)")]
    Executor(ExecutorName),
    #[error("a directory for the guest's logs under {}: {source}", cache.display())]
    LogDir {
        cache: PathBuf,
        source: std::io::Error,
    },
    #[error("journal the guest's QEMU: {0}")]
    Journal(#[source] journal::Error),
    #[error("cancelled by the coordinator")]
    Cancelled,
    #[error(transparent)]
    Runner(#[from] runner::Error),
}

/// A machine state a guest cannot have.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StateError {
    #[error("competing loads inside guests are not supported yet")]
    Loads,
    #[error("cgroup cpuset `{set}`: the guest has cpus 0-{last} (cpu{asked} asked)")]
    CpusetOutside { set: String, last: u32, asked: u32 },
    #[error("hotplug `{0}`: cpu0 stays online")]
    Cpu0(String),
    #[error("hotplug `{spec}`: the guest has cpus 0-{last} (cpu{asked} asked)")]
    HotplugOutside { spec: String, last: u32, asked: u32 },
}

/// Where guest kernels, images and built kernels are cached when nothing
/// names another place: for root (an agent, `farmctl run` as root)
/// [`kernel::reach::ROOT_CACHE`], which the unprivileged build user can
/// reach (root's home is 0700); for anyone else
/// `$XDG_CACHE_HOME/farm/guests`, else `$HOME/.cache/farm/guests`. Kernels
/// are tens of megabytes, worth keeping across agents and runs.
pub fn default_cache() -> Option<PathBuf> {
    if nix::unistd::geteuid().is_root() {
        return Some(PathBuf::from(kernel::reach::ROOT_CACHE));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("farm/guests"))
}

/// The Debian package that ships an external tool's program.
fn package_of(program: &str) -> Option<&'static str> {
    match program {
        "stress-ng" => Some("stress-ng"),
        "sysbench" => Some("sysbench"),
        "hackbench" => Some("rt-tests"),
        _ => None,
    }
}

/// The guest executor; the result says the accelerator (`tcg` or `kvm`),
/// the guest's arch and the release the guest actually booted.
pub struct Guest;

impl Executor for Guest {
    fn execute(&self, r: &Run<'_>, ctx: &Context<'_>) -> RunResult {
        let a = r.assignment;
        if let Err(e) = super::contract::check(r, ctx.caps) {
            return RunResult {
                run: a.run.clone(),
                error: e.to_string(),
                ..Default::default()
            };
        }
        let mut result = RunResult {
            run: a.run.clone(),
            started_unix_ms: unix_ms(SystemTime::now()),
            ..Default::default()
        };
        let prepared = run(r, ctx, &mut result);
        // The guest's QEMU was journalled: it is gone now (killed or exited),
        // and the journal forgets it.
        let restored =
            info_span!(target: TARGET, "restore").in_scope(|| lock(ctx.journal).restore());
        match prepared {
            Ok(g) => info_span!(target: TARGET, "telemetry")
                .in_scope(|| report(g, a.timeout_s, &mut result)),
            Err(e) => result.error = e.to_string(),
        }
        if let Err(e) = restored
            && result.error.is_empty()
        {
            result.error = format!("restoring machine state: {e}");
        }
        result.finished_unix_ms = unix_ms(SystemTime::now());
        result.ok = result.error.is_empty();
        // After the run (and outside its times), so that nothing it is about
        // to use goes; its own entries were just touched.
        if let Some(cache) = &ctx.workload.guest_cache {
            match cache::evict(cache, ctx.workload.guest_cache_max_bytes) {
                Ok(e) => {
                    for f in &e.failed {
                        tracing::warn!(failure = %f, "guest cache: an entry could not be evicted");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "guest cache: eviction failed"),
            }
        }
        result
    }
}

/// Fills `result` from what the guest reported.
fn report(g: Prepared, timeout_s: u32, result: &mut RunResult) {
    let run = g.run;
    result.kernel_release = run.release.clone();
    let mut metrics = Vec::new();
    if let Some(begin) = run.begin_after {
        tracing::info!(
            prepare_ms = g.prepared.as_millis() as u64,
            boot_and_state_ms = begin.as_millis() as u64,
            "guest workload started"
        );
        // From the assignment to the workload's start: kernel and image
        // (cached or not), boot, state.
        metrics.push(known_metric(
            GUEST_START_S,
            g.prepared.as_secs_f64() + begin.as_secs_f64(),
        ));
    }
    metrics.push(known_metric(WALL_S, run.wall_s));
    let fail = |result: &mut RunResult, metrics: Vec<farm_proto::Metric>, error: String| {
        result.log_tail = run.console_tail.clone();
        result.metrics.extend(metrics);
        result.error = error;
    };
    let online: Vec<u32> = match CpuSet::parse_kernel_list(&run.online) {
        Ok(cpus) => cpus.iter().collect(),
        Err(e) => {
            let error = format!("the guest's online CPUs `{}`: {e}", run.online);
            return fail(result, metrics, error);
        }
    };
    // The CPUs the workload could run on: a cpuset narrows them, and idle
    // time outside it is no capacity the workload was denied.
    let allowed: Vec<u32> = if g.cpuset.is_empty() {
        online
    } else {
        online
            .into_iter()
            .filter(|c| g.cpuset.contains(c))
            .collect()
    };
    let telemetry = match telemetry::build(
        &run.observed,
        run.wall_s,
        &allowed,
        crate::telemetry::procstat::user_hz(),
        &run.domains_after,
    ) {
        Ok((ms, mut t)) => {
            metrics.extend(ms);
            metrics.extend(slowdown::metric(
                run.observed.calibration(),
                g.host_calibration.as_ref(),
            ));
            let topo = topology(&run);
            t.topology_source = topo.topology_source;
            t.topology_before = topo.topology_before;
            t.topology_after = topo.topology_after;
            t.topology_changes = topo.topology_changes;
            t
        }
        Err(e) => return fail(result, metrics, format!("guest telemetry: {e}")),
    };
    let outcome = Outcome {
        end: End::Exited(run.exit_code),
        stdout: run.stdout,
        stderr: run.stderr,
        metrics,
        telemetry: Some(telemetry),
        console: Some(run.console_tail),
    };
    super::contract::finish(result, outcome, g.output, timeout_s);
}

/// The run's machine state as the guest applies it: hotplug, autogroup and
/// the workload's cgroup, as the CPU numbers and values the runner writes
/// (it parses no spec); competing loads are refused (the coordinator
/// refuses such matrices up front).
fn guest_state(run: &Run<'_>, cpus: u32) -> Result<GuestState, StateError> {
    if !run.assignment.loads.is_empty() {
        return Err(StateError::Loads);
    }
    let mut out = GuestState::default();
    let Some(s) = &run.state else {
        return Ok(out);
    };
    if let Some(cg) = &s.cgroup {
        // Without loads, `shared` and `separate` both put the workload in a
        // group of its own.
        out.cgroup = true;
        out.cpu_weight = cg.weight.map(|w| w.get());
        out.cpu_max = cg.max.map(|m| (m.quota_us(), m.period_us()));
        if let Some(set) = &cg.cpuset {
            if let Some(c) = set.iter().find(|&c| c >= cpus) {
                return Err(StateError::CpusetOutside {
                    set: set.to_string(),
                    last: cpus - 1,
                    asked: c,
                });
            }
            out.cpuset = set.iter().collect();
        }
    }
    if let Some(plan) = &s.hotplug {
        if plan.cpus.contains(0) {
            return Err(StateError::Cpu0(plan.to_string()));
        }
        if let Some(c) = plan.cpus.iter().find(|&c| c >= cpus) {
            return Err(StateError::HotplugOutside {
                spec: plan.to_string(),
                last: cpus - 1,
                asked: c,
            });
        }
        let cpus = plan.cpus.iter().collect();
        match plan.mode {
            HotplugMode::Cycle => out.cycle = cpus,
            HotplugMode::Offline => out.offline = cpus,
        }
    }
    out.autogroup = s.autogroup.map(|v| v == Autogroup::On);
    knobs::add(s, &mut out);
    Ok(out)
}

/// The guest's sched domains before and after its state, as the host
/// executor reports topology (names only: debugfs gives no spans here).
fn topology(g: &GuestRun) -> farm_proto::Telemetry {
    use crate::telemetry::topology::{self as topo, Domains, Level, Source, Topology};
    type PerCpu = std::collections::BTreeMap<u32, Vec<String>>;
    let snapshot = |m: &PerCpu| Topology {
        source: Source::Debugfs,
        domains: Domains {
            per_cpu: m
                .iter()
                .map(|(cpu, names)| {
                    let levels = names
                        .iter()
                        .map(|n| Level {
                            name: n.clone(),
                            flags: Vec::new(),
                            span: Vec::new(),
                        })
                        .collect();
                    (*cpu, levels)
                })
                .collect(),
        },
    };
    let lines = |m: &PerCpu| -> Vec<String> {
        m.iter()
            .map(|(cpu, names)| format!("cpu{cpu}: {}", names.join(" ")))
            .collect()
    };
    let (before, after) = (snapshot(&g.domains_before), snapshot(&g.domains_after));
    farm_proto::Telemetry {
        topology_source: if g.domains_before.is_empty() {
            String::new()
        } else {
            "guest debugfs sched/domains (sched_verbose)".into()
        },
        topology_before: lines(&g.domains_before),
        topology_after: lines(&g.domains_after),
        topology_changes: topo::diff(&before, &after)
            .iter()
            .map(ToString::to_string)
            .collect(),
        ..Default::default()
    }
}

/// A guest's run, and what the host needs to read it.
struct Prepared {
    run: GuestRun,
    /// The state's cpuset (empty: none), for the CPUs the workload had.
    cpuset: Vec<u32>,
    /// How long preparing it took (kernel, tools, image).
    prepared: Duration,
    output: Output,
    /// The host's timing of the calibration loop the guest timed too.
    host_calibration: Option<slowdown::Calibration>,
}

/// The program and files of the workload for a guest of `arch`.
struct Workload {
    job: Job,
    files: Vec<(PathBuf, String)>,
    output: Output,
}

fn workload(
    a: &RunAssignment,
    ctx: &Context<'_>,
    arch: GuestArch,
    cache: &Path,
) -> Result<Workload, Error> {
    let w = a.workload.as_ref().ok_or(Error::NoWorkload)?;
    let spec = catalogue::lookup(&w.name)?;
    match spec.origin {
        catalogue::Origin::BuiltIn => {
            if !arch.runs_built_ins() {
                return Err(Error::BuiltInOnX86(w.name.clone(), arch));
            }
            let l = launch::launch(w, ctx.workload)?;
            // A guest boots faster with the small farm-workload binary than
            // with farmctl (which embeds it behind `workload`): use it when
            // it is beside.
            let sibling = ctx.workload.program.with_file_name("farm-workload");
            let skip = ctx.workload.leading_args.len();
            let (binary, args) = if skip > 0 && sibling.is_file() {
                (sibling, l.program.args[skip..].to_vec())
            } else {
                (ctx.workload.program.clone(), l.program.args)
            };
            Ok(Workload {
                job: Job::new(protocol::GUEST_BINARY, args)?,
                files: image::native_files(&binary)?,
                output: Output::MetricLines,
            })
        }
        catalogue::Origin::External { program } => {
            let package = package_of(program).ok_or_else(|| Error::NotCarried(w.name.clone()))?;
            let guest_program = format!("/usr/bin/{program}");
            let l = launch::launch_external_at(w, Path::new(&guest_program))?;
            if l.server.is_some() {
                return Err(Error::Server(w.name.clone()));
            }
            let root = sysroot::fetch(cache, arch.deb_arch(), &[package])?;
            used(cache, &root.root);
            let files = sysroot::closure(&root.root, guest_program.trim_start_matches('/'))?;
            Ok(Workload {
                job: Job::new(&guest_program, l.program.args)?,
                files,
                output: l.output,
            })
        }
    }
}

/// Marks the cache entry holding `path` as used now (eviction goes by it).
fn used(cache: &Path, path: &Path) {
    if let Some(entry) = cache::entry_of(cache, path) {
        cache::touch(&entry);
    }
}

/// The assignment's kernel: a `file:` image (found and checked now), or
/// the arch a Debian version's flavour names (fetched later, once the run
/// is known to be possible).
fn kernel_arch(
    run: &Run<'_>,
    ctx: &Context<'_>,
) -> Result<(Option<kernels::Kernel>, GuestArch), Error> {
    match &run.kernel {
        Kernel::File(_) => {
            let (k, arch) =
                kernels::resolve_file(&run.kernel.to_string(), &ctx.workload.kernel_dirs)?;
            Ok((Some(k), GuestArch::try_from(arch)?))
        }
        Kernel::Debian(d) => Ok((None, GuestArch::try_from(d.arch())?)),
        // Built later, once the run is known to be possible.
        Kernel::Git(_) => Ok((None, GuestArch::X86_64)),
        other => Err(Error::NotGuest(other.to_string())),
    }
}

/// A `git:` kernel, built now or found built, as a kernel to boot; the run's
/// result says its commit and configuration.
fn built(
    g: &farm_spec::GitKernel,
    build: &farm_spec::KernelBuild,
    ctx: &Context<'_>,
    cache: &Path,
    result: &mut RunResult,
) -> Result<kernels::Kernel, Error> {
    let name = g.to_string();
    let trees = ctx
        .workload
        .trees
        .as_ref()
        .ok_or_else(|| Error::NoTrees(name.clone()))?;
    let b = trees.build_reporting(g, build, cache, &|| ctx.killer.is_cancelled(), ctx.progress)?;
    tracing::info!(kernel = %name, commit = %b.commit, built = b.built, took = ?b.took, "guest kernel from a tree");
    result.kernel_commit = b.commit.to_string();
    result.kernel_config_sha256 = b.config_sha256.clone();
    result.kernel_build_ms = b.took.as_millis() as u64;
    result.kernel_built = b.built;
    Ok(kernels::Kernel {
        version: b.commit.short().to_owned(),
        name,
        package: String::new(),
        deb_sha256: String::new(),
        // All built in: the build's configuration has no modules.
        modules: b.image.with_file_name("no-modules"),
        vmlinuz: b.image,
        downloaded: b.built,
    })
}

fn run(r: &Run<'_>, ctx: &Context<'_>, result: &mut RunResult) -> Result<Prepared, Error> {
    let a = r.assignment;
    let t0 = Instant::now();
    // Kernel, tools and image: fetched or found in the cache.
    let prepare = info_span!(target: TARGET, "prepare", kernel = %a.kernel).entered();
    let cache = ctx.workload.guest_cache.as_ref().ok_or(Error::NoCache)?;
    let (file_kernel, arch) = kernel_arch(r, ctx)?;
    result.arch = arch.uname().into();
    let timeout = Duration::from_secs(u64::from(a.timeout_s)) + BOOT_ALLOWANCE;
    // Checked before any download: a state or workload the guest cannot
    // have fails at once.
    let state = guest_state(
        r,
        machine::of_assignment(a, arch, Accel::Tcg, timeout)?.cpus,
    )?;
    let w = workload(a, ctx, arch, cache)?;
    let kernel = match (file_kernel, &r.kernel) {
        (Some(k), _) => k,
        (None, Kernel::Git(g)) => built(g, &r.build, ctx, cache, result)?,
        (None, _) => kernels::resolve(&a.kernel, cache)?,
    };
    used(cache, &kernel.vmlinuz);
    // After the kernel: the KVM probe boots a cached one.
    let accel = match r.executor {
        None => kvm::accel_for(arch, cache),
        Some(ExecutorName::Tcg) => Accel::Tcg,
        Some(ExecutorName::Kvm) => match kvm::accel_for(arch, cache) {
            Accel::Kvm => Accel::Kvm,
            Accel::Tcg => {
                let why = match kvm::kept_verdict(cache) {
                    Some(kvm::Verdict::Fails(why)) => why,
                    _ => "not this host's arch, or no /dev/kvm".into(),
                };
                return Err(Error::NoKvm(arch, why));
            }
        },
        Some(ExecutorName::Host) => return Err(Error::Executor(ExecutorName::Host)),
    };
    result.executor = accel.executor().to_string();
    let mut machine = machine::of_assignment(a, arch, accel, timeout)?;
    machine.cmdline = state.cmdline.clone();
    let (busybox, busybox_native, modules) = match arch {
        // Debian's kernels have virtio-serial as modules (virtio_pci the
        // transport, virtio_console the port); the farm's own builds have
        // no modules, and report on the second serial port.
        GuestArch::X86_64 if kernel.modules.exists() => {
            let mut mods = modules::load_order(&kernel.modules, "virtio_pci")?;
            for m in modules::load_order(&kernel.modules, "virtio_console")? {
                if !mods.contains(&m) {
                    mods.push(m);
                }
            }
            machine.channel = qemu::Channel::VirtioSerial;
            (PathBuf::from(initramfs::BUSYBOX), true, mods)
        }
        GuestArch::X86_64 => (PathBuf::from(initramfs::BUSYBOX), true, Vec::new()),
        GuestArch::S390x => {
            let root = sysroot::fetch(cache, arch.deb_arch(), &["busybox-static"])?;
            used(cache, &root.root);
            // A `file:` image without modules must have the port built in.
            let mods = if !kernel.modules.exists() && matches!(r.kernel, Kernel::File(_)) {
                Vec::new()
            } else {
                modules::load_order(&kernel.modules, "virtio_console")?
            };
            (root.root.join("bin/busybox"), false, mods)
        }
    };
    let mut files = w.files;
    files.push((
        image::sampler::build(cache, arch)?,
        image::sampler::GUEST_PATH.to_string(),
    ));
    let image = image::build(
        &cache.join("images"),
        &image::Image {
            busybox: &busybox,
            busybox_native,
            files,
            modules,
            init: runner::RUNNER,
            job: &w.job.file(),
            state: &state.file(),
        },
    )?;
    cache::touch(&image.path);
    // Before the boot, so that the first run's measurement (once per
    // agent) does not compete with its own guest.
    let host_calibration = image::sampler::host_calibration(cache);
    let dir = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(cache)
        .map_err(|source| Error::LogDir {
            cache: cache.clone(),
            source,
        })?;
    tracing::info!(kernel = %kernel.version, %arch, accel = accel.name(), downloaded = kernel.downloaded, image_built = image.built, "booting the run's guest");
    let prepared = t0.elapsed();
    drop(prepare);
    // The guest boots, applies the machine state, runs the workload and
    // samples it: one phase seen from here.
    let _workload = info_span!(target: TARGET, "workload", accel = accel.name()).entered();
    let journal_error = std::cell::RefCell::new(None);
    let mut on_spawn = |pid: u32| {
        // So that a crashed agent's restart kills a guest it left running.
        let mut j = lock(ctx.journal);
        let pid = pid as i32;
        let start_time = journal::process_start_time(j.root(), pid).unwrap_or(0);
        if let Err(e) = j.record(&Entry::Process { pid, start_time }) {
            *journal_error.borrow_mut() = Some(e);
        }
    };
    // An unjournalled guest is stopped at once, like a cancelled one.
    let cancelled = || ctx.killer.is_cancelled() || journal_error.borrow().is_some();
    let run = runner::run(
        &machine,
        &kernel.vmlinuz,
        &image.path,
        dir.path(),
        &mut on_spawn,
        &cancelled,
    );
    if let Some(e) = journal_error.take() {
        return Err(Error::Journal(e));
    }
    let run = run.map_err(|e| {
        // A guest that hung, panicked or reported nonsense: its console says why.
        result.log_tail = tail_bytes(&qemu::console_tail(dir.path()));
        match e {
            runner::Error::Guest(qemu::Error::Cancelled) => Error::Cancelled,
            e => Error::Runner(e),
        }
    })?;
    knobs::check(&state, &run).map_err(Error::Knob)?;
    Ok(Prepared {
        run,
        cpuset: state.cpuset.clone(),
        prepared,
        output: w.output,
        host_calibration,
    })
}
