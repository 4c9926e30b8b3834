//! The values inside the runner's lines: numbers, times, and the `cpu` and
//! `task` lines' fields, each checked as it is parsed.

pub(super) use crate::executor::guest::decimal::number;

use super::error::{Reason, cut};
use super::sweep::Task;
use crate::telemetry::procstat::CpuTimes;
use crate::telemetry::sampler;
use crate::telemetry::taskstat;

/// The reason of a telemetry parse error: the line is named by the caller.
pub(super) fn reason(e: crate::telemetry::Error) -> Reason {
    match e {
        crate::telemetry::Error::Parse { reason, .. } => Reason::Proc(reason),
        e => Reason::ProcOther(e.to_string()),
    }
}

/// `/proc/uptime`'s `12.34` (any number of fraction digits, or none) in ms.
pub(super) fn uptime_ms(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.len() > 12 || frac.len() > 9 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if s.contains('.') && frac.is_empty() {
        return None;
    }
    let ms: String = frac.chars().chain("000".chars()).take(3).collect();
    Some(number(int)? * 1000 + ms.parse::<u64>().ok()?)
}

/// A time of ash's `times`, `<m>m<s>.<fff>s` (2 or 3 fraction digits), in ms.
pub(super) fn clock_ms(s: &str) -> Option<u64> {
    let (min, rest) = s.strip_suffix('s')?.split_once('m')?;
    let (sec, frac) = rest.split_once('.')?;
    if sec.len() > 2 {
        return None;
    }
    let (min, sec) = (number(min)?, number(sec)?);
    if min > 1 << 32 || sec >= 60 {
        return None;
    }
    let frac_ms = match frac.len() {
        2 => number(frac)? * 10,
        3 => number(frac)?,
        _ => return None,
    };
    Some(min * 60_000 + sec * 1000 + frac_ms)
}

/// A `cpu` or `cpu<N>` line of `/proc/stat`: `None` for the total. At least
/// the four columns every kernel prints, later ones beyond the ten known
/// ignored, as [`crate::telemetry::procstat::parse`] reads them.
pub(super) fn parse_cpu(raw: &str) -> Result<(Option<u32>, CpuTimes), Reason> {
    let mut fields = raw.split_ascii_whitespace();
    let label = fields.next().unwrap_or("");
    let cpu = match label.strip_prefix("cpu") {
        Some("") => None,
        Some(n) => Some(
            number(n)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n < crate::capabilities::parse::MAX_CPUS)
                .ok_or_else(|| Reason::NotCpuN(cut(label)))?,
        ),
        None => return Err(Reason::NotCpuLine(cut(label))),
    };
    let mut t = [0u64; 10];
    let mut n = 0;
    for field in fields {
        let v = number(field).ok_or_else(|| Reason::Ticks(cut(field)))?;
        if let Some(slot) = t.get_mut(n) {
            *slot = v;
        }
        n += 1;
    }
    if n < 4 {
        return Err(Reason::TooFewColumns(n));
    }
    Ok((cpu, CpuTimes::from(t)))
}

/// A task stat line; `None` for one cut short by a thread that exited while
/// it was read (empty, or a prefix of a stat line: see the module doc).
pub(super) fn parse_task(raw: &str) -> Result<Option<Task>, Reason> {
    if raw.trim().is_empty() {
        return Ok(None);
    }
    let t = match taskstat::parse(raw) {
        Ok(t) => t,
        Err(_) if truncated(raw) => return Ok(None),
        Err(e) => return Err(reason(e)),
    };
    // Field 6, counted from after the comm like `taskstat` does: rest[i] is
    // field i + 3.
    let close = raw.rfind(')').expect("parsed: the comm is closed");
    let field = raw[close + 1..].split_ascii_whitespace().nth(3);
    // A thread on its way out whose pids are already unlinked shows its
    // process group and session as -1 (seen on 6.1: `Z 0 -1 -1`): it is
    // gone, as a thread whose stat no longer reads.
    if field == Some("-1") {
        return Ok(None);
    }
    let session = field
        .and_then(number)
        .and_then(|s| u32::try_from(s).ok())
        .ok_or(Reason::SessionField)?;
    Ok(Some(Task {
        tid: t.tid,
        session,
        state: t.state,
        cpu: t.cpu,
        instance: sampler::instance_of(&t.comm),
    }))
}

/// Whether `raw`, which does not parse, is the start of a stat line: a tid
/// and `(`, then a comm left open, or a single-letter state followed by
/// fewer than the 37 fields up to field 39, all of them integers.
fn truncated(raw: &str) -> bool {
    let raw = raw.trim_end();
    let Some(open) = raw.find('(') else {
        return false;
    };
    if number(raw[..open].trim()).is_none() {
        return false;
    }
    let Some(close) = raw.rfind(')').filter(|&c| c > open) else {
        // Cut inside the comm, which is at most 64 bytes.
        return raw.len() - open <= 65;
    };
    let fields: Vec<&str> = raw[close + 1..].split_ascii_whitespace().collect();
    let state_ok = fields
        .first()
        .is_none_or(|s| s.len() == 1 && s.bytes().all(|b| b.is_ascii_alphabetic()));
    let int = |f: &&str| number(f.strip_prefix('-').unwrap_or(f)).is_some();
    fields.len() < 37 && state_ok && fields.iter().skip(1).all(int)
}
