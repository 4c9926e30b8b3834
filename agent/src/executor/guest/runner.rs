//! The runner: the guest's `/init` ([`RUNNER`], the shell script
//! `runner/runner.sh`), which applies the run's machine state, runs the
//! workload, samples it and powers off, and the host's side of it: booting
//! the image it is in and reading what it reported.
//!
//! The runner never evaluates the job as shell code: it reads `/job` line
//! by line into its positional parameters and runs `"$@"`; `/state` holds
//! words and numbers only ([`protocol`]).
//!
//! The runner's lines on the channel, in order: `farm-job 2`, `release
//! <uname -r>`, `node <id> <cpulist>` per NUMA node, `domain before ...`,
//! `online <cpulist>`, `domain after ...`, `calibrate <iterations>
//! <ns>...` (the calibration loop's times), the `before` snapshot (`irq`,
//! `ctxt`, `times` lines, see [`telemetry`]), `begin`, `session <sid>`,
//! the sampler's sweeps (`sample`, `task`, `mig`, `cpu` lines), the `after`
//! snapshot, `end`, `out <line>` per line of the workload's stdout, `err
//! <line>` per line of the tail of its stderr, `exit <code>`, `wall_s
//! <seconds>` (by /proc/uptime around the workload), `done`;
//! [`protocol::parse_run`] reads them.

pub mod protocol;
pub mod telemetry;

use std::fs;
use std::path::Path;

use super::machine::qemu::{self, Machine};
pub use protocol::{GuestRun, GuestState, Job};

/// The runner (`/init`), as the shell script `runner/runner.sh`.
pub const RUNNER: &str = include_str!("runner/runner.sh");

/// Why a guest's run gave no report.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Guest(#[from] qemu::Error),
    #[error("guest: report: {source}. Console tail:\n{console_tail}")]
    Report {
        source: protocol::ReportError,
        console_tail: String,
    },
}

/// Boots `vmlinuz` with a runner image (see
/// [`image::build`](super::image::build)) on
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
            report_complete: &mut || protocol::is_complete(&last_bytes(&channel, 8)),
        },
    )?;
    let console_tail = qemu::console_tail(dir);
    let mut r = protocol::parse_run(&text).map_err(|source| Error::Report {
        source,
        console_tail: console_tail.clone(),
    })?;
    r.console_tail = console_tail;
    r.elapsed = elapsed;
    r.begin_after = begin_after;
    tracing::info!(?elapsed, exit = r.exit_code, "guest job done");
    Ok(r)
}

/// The last `n` bytes of a file (fewer if it is shorter; none if it cannot
/// be read).
fn last_bytes(path: &Path, n: u64) -> Vec<u8> {
    use std::io::{Read, Seek, SeekFrom};
    let mut out = Vec::new();
    if let Ok(mut f) = fs::File::open(path) {
        let len = f.metadata().map_or(0, |m| m.len());
        if f.seek(SeekFrom::Start(len.saturating_sub(n))).is_ok() {
            let _ = f.take(n).read_to_end(&mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests;
