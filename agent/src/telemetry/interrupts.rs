//! `/proc/interrupts`: per-CPU interrupt counts, their deltas over a run, and the
//! inter-processor interrupts (IPIs) the scheduler causes.
//!
//! The file is a header of `CPU<n>` columns, one per *online* CPU, then one line per
//! interrupt: a name and a colon, one count per header column, and a free-text
//! description. A few lines are machine-wide counters with a single count and no
//! description (x86 `ERR` and `MIS`). Numbered device interrupts describe themselves
//! with chip, hardware irq and handler names (`IO-APIC   5-edge      ACPI:Ged`), which
//! are kept verbatim as the description.
//!
//! Columns follow CPU hotplug: a CPU taken offline between two samples disappears from
//! the header and from every line, so [`delta`] matches columns by CPU id, never by
//! position, and compares only CPUs online at both samples.
//!
//! IPI names differ by architecture, see [`classify`]:
//!
//! | kind | x86 | arm64 (and arm, riscv) | s390x |
//! |---|---|---|---|
//! | rescheduling | `RES` Rescheduling interrupts | `IPI0` Rescheduling interrupts | `EXC`, `EMS` (mixed) |
//! | function call | `CAL` Function call interrupts | `IPI1` Function call interrupts | `EXC`, `EMS` (mixed) |
//! | TLB shootdown | `TLB` TLB shootdowns | none: broadcast TLBI in hardware | none: IPTE/IDTE broadcast in hardware |
//!
//! s390x has no per-purpose IPI counters: the kernel sends a reschedule or a function
//! call as a SIGP *external call* to a running CPU (counted in `EXC`, "\[EXT\] External
//! Call") and as an *emergency signal* to one that is not running (`EMS`, "\[EXT\]
//! Emergency Signal"), the purpose being a bit in a per-CPU word the counters do not
//! see. Both lines are therefore [`IpiKind::Mixed`]. `IUC` ("\[EXT\] IUCV") looks like
//! a messaging interrupt but is z/VM's inter-user communication with other guests, not
//! an IPI, and `EXT` is the sum of all external interrupts (counting it would count
//! `EXC` twice); neither is classified.
//!
//! On x86 a remote TLB flush is sent as a function call, so each shootdown received
//! counts in `TLB` *and* in `CAL`: the kinds overlap and must not be added up.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::error::{Error, InterruptsLine as LineError, Result};

/// The canonical name errors use; [`read`] replaces it with the path it read.
const FILE: &str = "/proc/interrupts";

/// One sample of `/proc/interrupts`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupts {
    /// The ids of the CPU columns, in file order: the CPUs online when it was read.
    pub cpus: Vec<u32>,
    pub lines: Vec<Line>,
}

/// One interrupt line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The text before the colon: `RES`, `LOC`, `24`, `EXC`, `I/O`.
    pub name: String,
    /// One count per entry of [`Interrupts::cpus`], in the same order; or a single
    /// machine-wide count for the lines that have only one column (x86 `ERR`, `MIS`).
    /// With one CPU online the two shapes look alike, and are treated alike.
    pub counts: Vec<u64>,
    /// The rest of the line, trimmed; empty where the kernel prints none.
    pub description: String,
}

/// Parses the text of `/proc/interrupts`.
pub fn parse(text: &str) -> Result<Interrupts> {
    let mut numbered = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let Some((header_no, header)) = numbered.find(|(_, l)| !l.trim().is_empty()) else {
        return Err(Error::parse(FILE, 1, "no CPU header", text));
    };
    let cpus =
        parse_header(header).map_err(|reason| Error::parse(FILE, header_no, reason, header))?;
    let mut lines = Vec::new();
    for (no, line) in numbered.filter(|(_, l)| !l.trim().is_empty()) {
        lines.push(
            parse_line(line, cpus.len()).map_err(|reason| Error::parse(FILE, no, reason, line))?,
        );
    }
    Ok(Interrupts { cpus, lines })
}

/// The header: `CPU0       CPU1`, or `CPU0 CPU2 CPU3` with cpu1 offline.
fn parse_header(header: &str) -> Result<Vec<u32>, LineError> {
    let mut cpus = Vec::new();
    let mut seen = BTreeSet::new();
    for column in header.split_whitespace() {
        let cpu = column
            .strip_prefix("CPU")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| LineError::HeaderColumn(column.to_owned()))?;
        if !seen.insert(cpu) {
            return Err(LineError::HeaderTwice(cpu));
        }
        cpus.push(cpu);
    }
    if cpus.is_empty() {
        return Err(LineError::NoCpuColumns);
    }
    Ok(cpus)
}

/// One line below the header, with `n_cpus` columns expected.
fn parse_line(line: &str, n_cpus: usize) -> Result<Line, LineError> {
    let Some((name, rest)) = line.split_once(':') else {
        return Err(LineError::NoColon);
    };
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(LineError::BadName(name.to_owned()));
    }
    // Take up to `n_cpus` leading numbers; whatever follows is the description. The
    // description may itself hold numbers (an ARM GIC's hardware irq), hence the limit.
    let mut counts = Vec::with_capacity(n_cpus);
    let mut description_start = rest.len();
    let mut pos = 0;
    while pos < rest.len() {
        let tail = &rest[pos..];
        let token_start = pos + (tail.len() - tail.trim_start().len());
        if token_start == rest.len() {
            break;
        }
        let token_len = rest[token_start..]
            .find(char::is_whitespace)
            .unwrap_or(rest.len() - token_start);
        let token = &rest[token_start..token_start + token_len];
        if counts.len() == n_cpus || !token.bytes().all(|b| b.is_ascii_digit()) {
            description_start = token_start;
            break;
        }
        let count = token
            .parse::<u64>()
            .map_err(|_| LineError::CountTooLarge(token.to_owned()))?;
        counts.push(count);
        pos = token_start + token_len;
    }
    let description = rest[description_start..].trim().to_owned();
    let machine_wide = counts.len() == 1 && description.is_empty();
    if counts.len() != n_cpus && !machine_wide {
        return Err(LineError::CountsShort {
            expected: n_cpus,
            found: counts.len(),
        });
    }
    Ok(Line {
        name: name.to_owned(),
        counts,
        description,
    })
}

/// What an IPI line counts. See the module documentation for the names per architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpiKind {
    /// A wake-up asking the target CPU to reschedule (x86 `RES`): the IPIs of seed 002.
    Rescheduling,
    /// A function run on the target CPU (x86 `CAL`).
    FunctionCall,
    /// A remote TLB flush (x86 `TLB`; also counted in `CAL`).
    TlbShootdown,
    /// Reschedules and function calls counted together, where the architecture does not
    /// split them (s390x `EXC` and `EMS`).
    Mixed,
    /// Another IPI: IRQ work (x86 `IWI`, mostly sent by a CPU to itself), CPU stop,
    /// timer broadcast, wake-up (arm64 `IPI2`..).
    Other,
}

/// The IPI kind of the line named `name` with `description`, or `None` for an
/// interrupt that is not an IPI (devices, timers, `EXT`, `IUC`, ...).
pub fn classify(name: &str, description: &str) -> Option<IpiKind> {
    match name {
        // x86
        "RES" => Some(IpiKind::Rescheduling),
        "CAL" => Some(IpiKind::FunctionCall),
        "TLB" => Some(IpiKind::TlbShootdown),
        "IWI" => Some(IpiKind::Other),
        // s390x: the names are too short to be trusted alone, the descriptions say "[EXT]".
        "EXC" if description.starts_with("[EXT] External Call") => Some(IpiKind::Mixed),
        "EMS" if description.starts_with("[EXT] Emergency Signal") => Some(IpiKind::Mixed),
        // arm64, arm, riscv: IPI<n>, whose numbering changed over time; the description
        // says what it is.
        _ if name
            .strip_prefix("IPI")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())) =>
        {
            Some(match description {
                "Rescheduling interrupts" => IpiKind::Rescheduling,
                "Function call interrupts" | "Single function call interrupts" => {
                    IpiKind::FunctionCall
                }
                _ => IpiKind::Other,
            })
        }
        _ => None,
    }
}

/// How much one line grew between two samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrqDelta {
    pub name: String,
    /// As in the later sample.
    pub description: String,
    pub ipi: Option<IpiKind>,
    /// By CPU id, for each CPU online at both samples. Empty for a machine-wide counter.
    pub per_cpu: BTreeMap<u32, u64>,
    /// The sum of `per_cpu`, or the growth of a machine-wide counter.
    pub total: u64,
}

/// The growth of every line of `after` since `before`, in the order of `after`.
///
/// - Columns are matched by CPU id; a CPU online at only one of the samples is left out
///   (an offline CPU has no column, so there is nothing to subtract).
/// - Lines are matched by name (and by rank among lines of the same name). A line only
///   in `after` counts from zero: the kernel omits unused interrupts with zero counts. A
///   line only in `before` (a device that went away) is left out.
/// - The kernel keeps these counts in 32 bits and prints them unsigned. A count that
///   is smaller in `after` is taken as one wrap past 2^32 when both values fit in 32
///   bits and the wrapped growth is below 2^31; any other decrease is an
///   [`Error::Backwards`] naming the line and the CPU.
pub fn delta(before: &Interrupts, after: &Interrupts) -> Result<Vec<IrqDelta>> {
    let before_col: BTreeMap<u32, usize> = before
        .cpus
        .iter()
        .enumerate()
        .map(|(col, &cpu)| (cpu, col))
        .collect();
    let before_lines = by_name(&before.lines);
    let machine_wide = |l: &Line, n_cpus: usize| l.counts.len() != n_cpus;
    let mut rank: BTreeMap<&str, usize> = BTreeMap::new();
    let mut deltas = Vec::with_capacity(after.lines.len());
    for line in &after.lines {
        let r = rank.entry(line.name.as_str()).or_default();
        let old = before_lines.get(&(line.name.as_str(), *r)).copied();
        *r += 1;
        let mut per_cpu = BTreeMap::new();
        let total = match old {
            Some(old)
                if machine_wide(line, after.cpus.len()) || machine_wide(old, before.cpus.len()) =>
            {
                let (b, a) = (sum(&old.counts), sum(&line.counts));
                grow(b, a, || line.name.clone())?
            }
            _ if machine_wide(line, after.cpus.len()) => sum(&line.counts),
            _ => {
                for (col, &cpu) in after.cpus.iter().enumerate() {
                    let a = line.counts[col];
                    let d = match old {
                        None => a,
                        Some(old) => match before_col.get(&cpu) {
                            None => continue,
                            Some(&bcol) => {
                                grow(old.counts[bcol], a, || format!("{} on cpu{cpu}", line.name))?
                            }
                        },
                    };
                    per_cpu.insert(cpu, d);
                }
                per_cpu.values().fold(0, |s: u64, &d| s.saturating_add(d))
            }
        };
        deltas.push(IrqDelta {
            name: line.name.clone(),
            description: line.description.clone(),
            ipi: classify(&line.name, &line.description),
            per_cpu,
            total,
        });
    }
    Ok(deltas)
}

/// The sum of `counts`; a file of absurd numbers saturates rather than overflows.
fn sum(counts: &[u64]) -> u64 {
    counts.iter().fold(0, |s, &c| s.saturating_add(c))
}

/// Lines by (name, rank among lines of that name).
fn by_name(lines: &[Line]) -> BTreeMap<(&str, usize), &Line> {
    let mut rank: BTreeMap<&str, usize> = BTreeMap::new();
    let mut map = BTreeMap::new();
    for line in lines {
        let r = rank.entry(line.name.as_str()).or_default();
        map.insert((line.name.as_str(), *r), line);
        *r += 1;
    }
    map
}

/// `after - before` for a 32-bit kernel counter, allowing one wrap (see [`delta`]).
fn grow(before: u64, after: u64, counter: impl FnOnce() -> String) -> Result<u64> {
    if after >= before {
        return Ok(after - before);
    }
    const WRAP: u64 = 1 << 32;
    if before < WRAP {
        let wrapped = after + WRAP - before;
        if wrapped < WRAP / 2 {
            return Ok(wrapped);
        }
    }
    Err(Error::Backwards {
        file: FILE.to_owned(),
        counter: counter(),
        before,
        after,
    })
}

/// IPIs received over an interval, by kind, summed over CPUs. Seed 002's "rescheduling
/// IPIs ×6.1" compares two `rescheduling` figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IpiTotals {
    pub rescheduling: u64,
    pub function_call: u64,
    /// Also included in `function_call` on x86.
    pub tlb_shootdown: u64,
    pub mixed: u64,
    pub other: u64,
}

impl IpiTotals {
    pub fn get(&self, kind: IpiKind) -> u64 {
        match kind {
            IpiKind::Rescheduling => self.rescheduling,
            IpiKind::FunctionCall => self.function_call,
            IpiKind::TlbShootdown => self.tlb_shootdown,
            IpiKind::Mixed => self.mixed,
            IpiKind::Other => self.other,
        }
    }

    fn add(&mut self, kind: IpiKind, n: u64) {
        let slot = match kind {
            IpiKind::Rescheduling => &mut self.rescheduling,
            IpiKind::FunctionCall => &mut self.function_call,
            IpiKind::TlbShootdown => &mut self.tlb_shootdown,
            IpiKind::Mixed => &mut self.mixed,
            IpiKind::Other => &mut self.other,
        };
        *slot = slot.saturating_add(n);
    }
}

/// The totals per IPI kind of a [`delta`].
pub fn ipi_totals(deltas: &[IrqDelta]) -> IpiTotals {
    let mut totals = IpiTotals::default();
    for d in deltas {
        if let Some(kind) = d.ipi {
            totals.add(kind, d.total);
        }
    }
    totals
}

/// Reads and parses `<root>/proc/interrupts`.
pub fn read(root: &Path) -> Result<Interrupts> {
    let path = super::files::path_below(root, FILE);
    parse(&super::files::read_text(&path)?).map_err(|e| e.at(&path))
}
