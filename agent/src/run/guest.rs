//! A run whose kernel is `debian:<version>` or `file:<path>`: the workload
//! runs inside a QEMU guest booted with that kernel (see [`crate::guest`]),
//! x86_64 or s390x by the Debian flavour or the image's magic, under the
//! executor the cell asks for (`tcg`, `kvm`) or else KVM when the probe saw
//! it boot a guest, and TCG otherwise.
//!
//! The guest applies the run's hotplug, autogroup and cgroup (cgroup2: one
//! group for the workload, with the state's limits) before the workload, and
//! reports its sched domains before and after (booted with `sched_verbose`),
//! which become the run's topology telemetry: seed 000's "a domain level
//! missing after a hotplug cycle", on a 2-node guest. Its runner samples the
//! workload's threads and the CPUs' times every 500 ms and snapshots
//! /proc/interrupts, context switches and the workload's CPU times around
//! it; the host turns those into the same telemetry as a host run
//! ([`crate::guest::telemetry`]).
//!
//! Built-in workloads run in x86_64 guests only (the farm's binaries are
//! built for x86_64); external tools (stress-ng, sysbench, rt-tests'
//! hackbench) run on every arch from Debian's packages of the guest's arch.
//! Competing loads inside guests are refused, as are client/server tools.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use farm_proto::trace::TARGET;
use farm_proto::{Direction, RunAssignment, RunResult};
use farm_workload::catalogue;
use tracing::info_span;

use super::launch::{self, Output};
use super::{Context, lock, metric, unix_ms};
use crate::guest::arch::{Accel, GuestArch};
use crate::guest::{cache, initramfs, job, kernels, kvm, modules, qemu, sysroot, telemetry};
use crate::state::journal::{self, Entry};

/// Booting under TCG before the workload starts, beyond its own timeout.
const BOOT_ALLOWANCE: Duration = Duration::from_secs(120);

/// The guest machine the assignment asks for (the matrix's `[guest]`, a
/// field left out taking the arch's default: x86_64 4 vCPUs on 2 NUMA
/// nodes, the topology the farm's hosts lack; s390x 2 vCPUs, no NUMA),
/// checked again here: an agent trusts nothing it receives.
fn machine(
    a: &RunAssignment,
    arch: GuestArch,
    accel: Accel,
    timeout: Duration,
) -> Result<qemu::Machine, String> {
    let shape = farm_proto::guest::resolve(a.guest.as_ref(), arch.uname())
        .map_err(|e| format!("guest machine refused: {e}"))?;
    Ok(qemu::Machine {
        arch,
        accel,
        cpus: shape.cpus,
        memory_mib: shape.memory_mib,
        nodes: shape.numa_nodes,
        timeout,
    })
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

/// Executes `a` in a guest; the result says the accelerator (`tcg` or
/// `kvm`), the guest's arch and the release the guest actually booted.
pub fn execute(a: &RunAssignment, ctx: &Context<'_>) -> RunResult {
    let mut result = RunResult {
        run: a.run.clone(),
        started_unix_ms: unix_ms(SystemTime::now()),
        ..Default::default()
    };
    let outcome = run(a, ctx, &mut result);
    // The guest's QEMU was journalled: it is gone now (killed or exited),
    // and the journal forgets it.
    let restored = info_span!(target: TARGET, "restore").in_scope(|| lock(ctx.journal).restore());
    match outcome {
        Ok(g) => info_span!(target: TARGET, "telemetry").in_scope(|| report(&g, &mut result)),
        Err(e) => result.error = e,
    }
    if let Err(e) = restored
        && result.error.is_empty()
    {
        result.error = format!("restoring machine state: {e}");
    }
    result.finished_unix_ms = unix_ms(SystemTime::now());
    result.ok = result.error.is_empty();
    // After the run (and outside its times), so that nothing it is about to
    // use goes; its own entries were just touched.
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

/// Fills `result` from what the guest reported.
fn report(g: &Prepared, result: &mut RunResult) {
    let run = &g.run;
    result.kernel_release = run.release.clone();
    result.log_tail = run.console_tail.clone();
    if let Some(begin) = run.begin_after {
        tracing::info!(
            prepare_ms = g.prepared.as_millis() as u64,
            boot_and_state_ms = begin.as_millis() as u64,
            "guest workload started"
        );
        // From the assignment to the workload's start: kernel and image
        // (cached or not), boot, state.
        result.metrics.push(metric(
            "guest_start_s",
            g.prepared.as_secs_f64() + begin.as_secs_f64(),
            "s",
            Direction::LowerIsBetter,
        ));
    }
    result
        .metrics
        .push(metric("wall_s", run.wall_s, "s", Direction::LowerIsBetter));
    let online = match crate::capabilities::parse_cpu_list(&run.online) {
        Ok(cpus) => cpus,
        Err(e) => {
            result.error = format!("the guest's online CPUs `{}`: {e}", run.online);
            return;
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
    match telemetry::build(
        &run.observed,
        run.wall_s,
        &allowed,
        crate::telemetry::procstat::user_hz(),
    ) {
        Ok((metrics, mut t)) => {
            result.metrics.extend(metrics);
            let topo = topology(run);
            t.topology_source = topo.topology_source;
            t.topology_before = topo.topology_before;
            t.topology_after = topo.topology_after;
            t.topology_changes = topo.topology_changes;
            result.telemetry = Some(t);
        }
        Err(e) => {
            result.error = format!("guest telemetry: {e}");
            return;
        }
    }
    if run.exit_code != 0 {
        result.error = format!("workload exited with status {} in the guest", run.exit_code);
        if !run.stderr.trim().is_empty() {
            result.log_tail = format!("{}\n--- console ---\n{}", run.stderr, run.console_tail);
        }
        result.log_tail = tail_bytes(&result.log_tail);
        return;
    }
    let parsed = match g.output {
        Output::MetricLines => run
            .stdout
            .lines()
            .filter_map(|l| farm_workload::output::parse_metric_line(l).transpose())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| e.to_string()),
        Output::External(name) => {
            crate::external::parse(name, &run.stdout, &run.stderr).map_err(|e| e.to_string())
        }
    };
    match parsed {
        Ok(ms) => result.metrics.extend(ms.into_iter().map(|m| {
            let direction = match m.direction {
                catalogue::Direction::LowerIsBetter => Direction::LowerIsBetter,
                catalogue::Direction::HigherIsBetter => Direction::HigherIsBetter,
            };
            metric(&m.name, m.value, &m.unit, direction)
        })),
        Err(e) => {
            result.error = format!("workload output: {e}");
            result.log_tail = tail_bytes(&run.stdout);
        }
    }
}

/// The assignment's machine state as the guest applies it: hotplug,
/// autogroup and the workload's cgroup; competing loads are refused (the
/// coordinator refuses such matrices up front).
fn guest_state(a: &RunAssignment, cpus: u32) -> Result<job::GuestState, String> {
    if !a.loads.is_empty() {
        return Err("competing loads inside guests are not supported yet".into());
    }
    let mut out = job::GuestState::default();
    let Some(s) = &a.state else {
        return Ok(out);
    };
    if !s.cgroup.is_empty() {
        // Without loads, `shared` and `separate` both put the workload in a
        // group of its own.
        crate::state::cgroup::Shape::parse(&s.cgroup)?;
        let limits = crate::state::cgroup::Limits::from_state(s)?;
        out.cgroup = true;
        out.cpu_weight = limits.weight;
        out.cpu_max = limits.max;
        if let Some(set) = &limits.cpuset {
            out.cpuset = crate::capabilities::parse_cpu_list(set)
                .map_err(|e| format!("cgroup cpuset `{set}`: {e}"))?;
            if let Some(c) = out.cpuset.iter().find(|&&c| c >= cpus) {
                return Err(format!(
                    "cgroup cpuset `{set}`: the guest has cpus 0-{} (cpu{c} asked)",
                    cpus - 1
                ));
            }
        }
    }
    if !s.hotplug.is_empty() {
        let plan = crate::state::hotplug::parse(&s.hotplug)?;
        if plan.cpus.contains(&0) {
            return Err(format!("hotplug `{}`: cpu0 stays online", s.hotplug));
        }
        if let Some(c) = plan.cpus.iter().find(|&&c| c >= cpus) {
            return Err(format!(
                "hotplug `{}`: the guest has cpus 0-{} (cpu{c} asked)",
                s.hotplug,
                cpus - 1
            ));
        }
        match plan.mode {
            crate::state::hotplug::Mode::Cycle => out.cycle = plan.cpus,
            crate::state::hotplug::Mode::Offline => out.offline = plan.cpus,
        }
    }
    out.autogroup = s.autogroup.map(|v| v != 0);
    Ok(out)
}

/// The guest's sched domains before and after its state, as the host
/// executor reports topology (names only: debugfs gives no spans here).
fn topology(g: &job::GuestRun) -> farm_proto::Telemetry {
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

/// As much of a log as a result keeps (as the host executor's stderr tail).
const LOG_TAIL: usize = 8 << 10;

fn tail_bytes(text: &str) -> String {
    let mut start = text.len().saturating_sub(LOG_TAIL);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// A guest's run, and what the host needs to read it.
struct Prepared {
    run: job::GuestRun,
    /// The state's cpuset (empty: none), for the CPUs the workload had.
    cpuset: Vec<u32>,
    /// How long preparing it took (kernel, tools, image).
    prepared: Duration,
    output: Output,
}

/// The program and files of the workload for a guest of `arch`.
struct Workload {
    job: job::Job,
    files: Vec<(PathBuf, String)>,
    output: Output,
}

fn workload(
    a: &RunAssignment,
    ctx: &Context<'_>,
    arch: GuestArch,
    cache: &Path,
) -> Result<Workload, String> {
    let w = a
        .workload
        .as_ref()
        .ok_or("the assignment has no workload")?;
    let spec = catalogue::lookup(&w.name).map_err(|e| e.to_string())?;
    match spec.origin {
        catalogue::Origin::BuiltIn => {
            if !arch.runs_built_ins() {
                return Err(format!(
                    "`{}` is built into the farm, whose binaries exist for x86_64 only; \
                     {arch} guests run external tools (stress-ng, sysbench-cpu, \
                     sysbench-threads, rt-hackbench)",
                    w.name
                ));
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
                job: job::Job::new(job::GUEST_BINARY, args).map_err(|e| e.to_string())?,
                files: job::native_files(&binary).map_err(|e| e.to_string())?,
                output: Output::MetricLines,
            })
        }
        catalogue::Origin::External { program } => {
            let package = package_of(program).ok_or_else(|| {
                format!(
                    "`{}` cannot run in a guest: only stress-ng, sysbench and rt-tests' \
                     hackbench are carried into guests",
                    w.name
                )
            })?;
            let guest_program = format!("/usr/bin/{program}");
            let l = launch::launch_external_at(w, Path::new(&guest_program))?;
            if l.server.is_some() {
                return Err(format!(
                    "`{}` needs a server, which guests do not run",
                    w.name
                ));
            }
            let root =
                sysroot::fetch(cache, arch.deb_arch(), &[package]).map_err(|e| e.to_string())?;
            used(cache, &root.root);
            let files = sysroot::closure(&root.root, guest_program.trim_start_matches('/'))
                .map_err(|e| e.to_string())?;
            Ok(Workload {
                job: job::Job::new(&guest_program, l.program.args).map_err(|e| e.to_string())?,
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
    a: &RunAssignment,
    ctx: &Context<'_>,
) -> Result<(Option<kernels::Kernel>, GuestArch), String> {
    if a.kernel.starts_with("file:") {
        return kernels::resolve_file(&a.kernel, &ctx.workload.kernel_dirs)
            .map(|(k, arch)| (Some(k), arch))
            .map_err(|e| e.to_string());
    }
    let arch = kernels::parse_name(&a.kernel)
        .ok()
        .and_then(GuestArch::of_debian_version)
        .ok_or_else(|| format!("kernel `{}`: no guest arch this agent knows", a.kernel))?;
    Ok((None, arch))
}

fn run(a: &RunAssignment, ctx: &Context<'_>, result: &mut RunResult) -> Result<Prepared, String> {
    let t0 = Instant::now();
    // Kernel, tools and image: fetched or found in the cache.
    let prepare = info_span!(target: TARGET, "prepare", kernel = %a.kernel).entered();
    let cache = ctx
        .workload
        .guest_cache
        .as_ref()
        .ok_or("this agent boots no guests")?;
    let (file_kernel, arch) = kernel_arch(a, ctx)?;
    result.arch = arch.uname().into();
    let timeout = Duration::from_secs(u64::from(a.timeout_s)) + BOOT_ALLOWANCE;
    // Checked before any download: a state or workload the guest cannot
    // have fails at once.
    let state = guest_state(a, machine(a, arch, Accel::Tcg, timeout)?.cpus)?;
    let w = workload(a, ctx, arch, cache)?;
    let kernel = match file_kernel {
        Some(k) => k,
        None => kernels::resolve(&a.kernel, cache).map_err(|e| e.to_string())?,
    };
    used(cache, &kernel.vmlinuz);
    // After the kernel: the KVM probe boots a cached one.
    let accel = match a.executor.as_str() {
        "" => kvm::accel_for(arch, cache),
        "tcg" => Accel::Tcg,
        "kvm" => match kvm::accel_for(arch, cache) {
            Accel::Kvm => Accel::Kvm,
            Accel::Tcg => {
                return Err(format!(
                    "executor `kvm` asked, but KVM does not boot {arch} guests here ({})",
                    match kvm::kept_verdict(cache) {
                        Some(kvm::Verdict::Fails(why)) => why,
                        _ => "not this host's arch, or no /dev/kvm".into(),
                    }
                ));
            }
        },
        other => {
            return Err(format!(
                "executor `{other}` cannot run a guest kernel (tcg or kvm can)"
            ));
        }
    };
    result.executor = accel.name().into();
    let machine = machine(a, arch, accel, timeout)?;
    let (busybox, busybox_native, modules) = match arch {
        GuestArch::X86_64 => (PathBuf::from(initramfs::BUSYBOX), true, Vec::new()),
        GuestArch::S390x => {
            let root = sysroot::fetch(cache, arch.deb_arch(), &["busybox-static"])
                .map_err(|e| e.to_string())?;
            used(cache, &root.root);
            // A `file:` image without modules must have the port built in.
            let mods = if !kernel.modules.exists() && a.kernel.starts_with("file:") {
                Ok(Vec::new())
            } else {
                modules::load_order(&kernel.modules, "virtio_console")
            };
            let mods = mods.map_err(|e| e.to_string())?;
            (root.root.join("bin/busybox"), false, mods)
        }
    };
    let image = job::build_initramfs(
        &cache.join("images"),
        &job::Image {
            busybox: &busybox,
            busybox_native,
            files: w.files,
            modules,
            job: &w.job,
            state: &state,
        },
    )
    .map_err(|e| e.to_string())?;
    cache::touch(&image.path);
    let dir = tempfile::Builder::new()
        .prefix("run-")
        .tempdir_in(cache)
        .map_err(|e| {
            format!(
                "a directory for the guest's logs under {}: {e}",
                cache.display()
            )
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
            *journal_error.borrow_mut() = Some(e.to_string());
        }
    };
    // An unjournalled guest is stopped at once, like a cancelled one.
    let cancelled = || ctx.killer.is_cancelled() || journal_error.borrow().is_some();
    let run = job::run(
        &machine,
        &kernel.vmlinuz,
        &image.path,
        dir.path(),
        &mut on_spawn,
        &cancelled,
    );
    if let Some(e) = journal_error.take() {
        return Err(format!("journal the guest's QEMU: {e}"));
    }
    let run = run.map_err(|e| {
        // A guest that hung, panicked or reported nonsense: its console says why.
        result.log_tail = tail_bytes(&qemu::console_tail(dir.path()));
        match e {
            job::Error::Guest(qemu::Error::Cancelled) => "cancelled by the coordinator".to_string(),
            e => e.to_string(),
        }
    })?;
    Ok(Prepared {
        run,
        cpuset: state.cpuset.clone(),
        prepared,
        output: w.output,
    })
}
