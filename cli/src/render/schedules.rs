//! `farmctl schedules`: continuous matrices, when they run and what their
//! latest execution found.

use farm_proto::{ExecutionSummary, ScheduleInfo};
use serde_json::{Value, json};

use super::names::state_name;

/// A unix time in ms as `2026-12-02 03:00 UTC`; `-` for 0 (never).
pub fn utc(ms: u64) -> String {
    if ms == 0 {
        return "-".into();
    }
    crate::dates::datetime(ms)
}

/// When a schedule runs, in words: `cron 0 3 * * *`, `new kernel file:/k/*`.
fn when(s: &ScheduleInfo) -> String {
    let mut parts = Vec::new();
    if !s.cron.is_empty() {
        parts.push(format!("cron {}", s.cron));
    }
    if !s.on_new_kernel.is_empty() {
        parts.push(format!("new kernel {}", s.on_new_kernel));
    }
    let mut out = parts.join(" + ");
    if s.bisect {
        out.push_str(", bisecting regressions");
    }
    out
}

/// The latest execution's verdicts: against baselines, then the histories.
fn verdicts(e: &ExecutionSummary) -> String {
    let state = state_name(e.state);
    if state != "done" {
        return state.to_string();
    }
    let mut out = match (e.regressions, e.improvements) {
        (0, 0) => "no regression against baselines".to_string(),
        (r, 0) => format!("{r} cell(s) regressed against baselines"),
        (0, i) => format!("{i} cell(s) improved against baselines"),
        (r, i) => format!("{r} cell(s) regressed, {i} improved against baselines"),
    };
    if e.change_regressions.is_empty() {
        out.push_str("; histories: no worse regime");
    } else {
        out.push_str("; histories worse: ");
        out.push_str(&e.change_regressions.join("; "));
    }
    for b in &e.bisections {
        out.push_str(&format!("; bisection {}: {}", b.bisection_id, b.status));
    }
    out
}

pub fn schedules_table(schedules: &[ScheduleInfo]) -> String {
    if schedules.is_empty() {
        return "no schedules\n".into();
    }
    let mut out = String::new();
    for s in schedules {
        out.push_str(&format!(
            "{}  {}  ({})  {}\n  executions: {}  next: {}\n",
            s.schedule_id,
            s.name,
            s.file_name,
            when(s),
            s.executions,
            utc(s.next_unix_ms),
        ));
        match &s.last {
            Some(e) => {
                let kernel = if e.kernel.is_empty() {
                    String::new()
                } else {
                    format!(" for {}", e.kernel)
                };
                out.push_str(&format!(
                    "  last: {} at {}{kernel}: {}\n",
                    e.matrix_id,
                    utc(e.at_unix_ms),
                    verdicts(e)
                ));
            }
            None => out.push_str("  last: none yet\n"),
        }
    }
    out
}

pub fn schedules_json(schedules: &[ScheduleInfo]) -> Value {
    Value::Array(
        schedules
            .iter()
            .map(|s| {
                json!({
                    "schedule_id": s.schedule_id,
                    "name": s.name,
                    "file_name": s.file_name,
                    "cron": s.cron,
                    "on_new_kernel": s.on_new_kernel,
                    "created_unix_ms": s.created_unix_ms,
                    "next_unix_ms": s.next_unix_ms,
                    "executions": s.executions,
                    "bisect": s.bisect,
                    "last": s.last.as_ref().map(|e| json!({
                        "matrix_id": e.matrix_id,
                        "at_unix_ms": e.at_unix_ms,
                        "kernel": e.kernel,
                        "state": state_name(e.state),
                        "regressions": e.regressions,
                        "improvements": e.improvements,
                        "change_regressions": e.change_regressions,
                        "bisections": e.bisections.iter().map(|b| json!({
                            "bisection_id": b.bisection_id,
                            "status": b.status,
                        })).collect::<Vec<_>>(),
                    })),
                })
            })
            .collect(),
    )
}
