//! `farmctl bisect`: start a bisection of a regressed cell and follow it to
//! its outcome; `farmctl bisection ID`: follow (or show) one.

pub mod ends;

use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, Result};
use farm_coordinator::bisection::{CANCELLED, CULPRIT};
use farm_proto::{Bisection, BisectionStep, GetBisectionRequest, StartBisectionRequest};

use crate::client::Client;
use crate::input::BadInput;

/// How often a followed bisection is asked for: a round is a matrix of
/// at least tens of runs, so its steps come minutes apart.
const POLL: Duration = Duration::from_secs(2);

/// The most bytes of a `--between-file`: 100,000 kernels of 60 bytes.
const MAX_BETWEEN_FILE_BYTES: u64 = 6 << 20;

/// The kernels between, from `--between` and `--between-file` (one per
/// line, `#` comments), in order.
pub fn between(list: &[String], file: Option<&Path>) -> Result<Vec<String>> {
    let mut out: Vec<String> = list.to_vec();
    if let Some(path) = file {
        let meta =
            std::fs::metadata(path).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
        if meta.len() > MAX_BETWEEN_FILE_BYTES {
            return Err(BadInput(format!(
                "{} is {} bytes; a list of kernels may have at most {MAX_BETWEEN_FILE_BYTES}",
                path.display(),
                meta.len()
            ))
            .into());
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
        out.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
    }
    Ok(out)
}

/// How a followed bisection ended.
pub struct Followed {
    /// The culprit was named and confirmed.
    pub confirmed: bool,
    /// The bisection as `--json` shows it.
    pub json: serde_json::Value,
}

/// Starts a bisection and follows it (see [`follow`]).
pub async fn start(c: &mut Client, req: StartBisectionRequest, json: bool) -> Result<bool> {
    let id = started(c, req).await?;
    follow(c, &id, json).await
}

/// Starts a bisection and says so on stderr; its id.
pub async fn started(c: &mut Client, req: StartBisectionRequest) -> Result<String> {
    let b = c
        .start_bisection(req)
        .await
        .context("starting the bisection")?
        .into_inner();
    eprintln!(
        "bisection {}: {} kernels, metric {}, {} runs a round, at most {} a step",
        b.bisection_id,
        b.kernels.len(),
        b.metric,
        b.runs,
        b.max_runs
    );
    Ok(b.bisection_id)
}

/// Writes bisection `id`'s report (its steps over the kernels, the table
/// and the confirmation's diagnosis) to `path`.
pub async fn write_report(c: &mut Client, id: &str, path: &std::path::Path) -> Result<()> {
    let b = c
        .get_bisection(GetBisectionRequest {
            bisection_id: id.to_owned(),
        })
        .await?
        .into_inner();
    let diagnosis = match &b.outcome {
        Some(o) => diagnosis(c, o).await?,
        None => Vec::new(),
    };
    let page = crate::report::bisection::render(&b, &outcome_line(&b), &diagnosis);
    std::fs::write(path, page).with_context(|| format!("writing {}", path.display()))
}

/// Prints each step as it is decided and the outcome (or, with `json`,
/// the whole bisection once ended); true when the culprit was confirmed.
pub async fn follow(c: &mut Client, id: &str, json: bool) -> Result<bool> {
    let f = follow_quietly(c, id, !json).await?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&f.json).context("encoding JSON")?
        );
    }
    Ok(f.confirmed)
}

/// Follows a bisection to its end; with `lines`, its steps and outcome as
/// text on stdout as they come, else nothing but the rounds on stderr.
pub async fn follow_quietly(c: &mut Client, id: &str, lines: bool) -> Result<Followed> {
    let mut shown = 0;
    let mut round = String::new();
    loop {
        let b = c
            .get_bisection(GetBisectionRequest {
                bisection_id: id.to_owned(),
            })
            .await?
            .into_inner();
        // Each round is a matrix: say which, so that `farmctl watch` can
        // follow it and the wait between steps has a name.
        if let Some(m) = b.pending_matrices.last().filter(|m| **m != round) {
            let kernels: Vec<String> = b.pending_kernels.iter().map(|&k| k.to_string()).collect();
            let measuring = if kernels.is_empty() {
                String::new()
            } else {
                format!(" (more runs of kernels {})", kernels.join(", "))
            };
            eprintln!(
                "round {}: matrix {m}{measuring}",
                farm_coordinator::bisection::rounds(&b)
            );
            round = m.clone();
        }
        if lines {
            for (i, s) in b.steps.iter().enumerate().skip(shown) {
                println!("{}", step_line(&b, i, s));
            }
        }
        shown = b.steps.len();
        if let Some(o) = &b.outcome {
            let diagnosis = diagnosis(c, o).await?;
            if lines {
                println!("{}", outcome_line(&b));
                for line in &diagnosis {
                    println!("  {line}");
                }
            }
            let mut v = to_json(&b);
            v["outcome"]["diagnosis"] = serde_json::json!(diagnosis);
            return Ok(Followed {
                confirmed: o.kind == CULPRIT && o.confirmed,
                json: v,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The farm's diagnosis of first bad against last good, from the
/// confirmation's last round (its one compared cell); empty when there was
/// none or it has gone to an archive without results.
pub async fn diagnosis(c: &mut Client, o: &farm_proto::BisectionOutcome) -> Result<Vec<String>> {
    // Only a confirmation compares the pair an outcome names.
    let confirmation = matches!(o.kind.as_str(), CULPRIT | "unresolved");
    let Some(m) = o.matrix_ids.last().filter(|_| confirmation) else {
        return Ok(Vec::new());
    };
    let r = c
        .get_results(farm_proto::GetResultsRequest {
            matrix_id: m.clone(),
        })
        .await
        .with_context(|| format!("the results of the confirmation {m}"))?
        .into_inner();
    Ok(r.cells
        .iter()
        .find(|cell| cell.baseline.is_some())
        .map(|cell| cell.diagnosis.clone())
        .unwrap_or_default())
}

fn kernel(b: &Bisection, i: u32) -> &str {
    b.kernels.get(i as usize).map_or("?", String::as_str)
}

/// The kernel with its commit's subject, when an agent listed one.
fn named(b: &Bisection, i: u32) -> String {
    match b.subjects.get(i as usize).filter(|s| !s.is_empty()) {
        Some(s) => format!("{} (\"{s}\")", kernel(b, i)),
        None => kernel(b, i).to_owned(),
    }
}

fn p(v: f64) -> String {
    if v.is_nan() {
        "-".to_owned()
    } else {
        format!("{v:.2e}")
    }
}

fn ratio(v: f64) -> String {
    if v.is_nan() {
        "-".to_owned()
    } else {
        format!("x{v:.3}")
    }
}

/// One decided step, e.g. `step 1: kernel 4 of 0..8 git:linux@4a72db3…
/// same_as_bad (vs good x1.31 p 1.1e-5, vs bad x1.00 p 0.87; 10 runs)`.
pub fn step_line(b: &Bisection, i: usize, s: &BisectionStep) -> String {
    format!(
        "step {}: kernel {} of 0..{} {} {} (vs good {} p {}, vs bad {} p {}; {} runs)",
        i + 1,
        s.kernel,
        b.kernels.len().saturating_sub(1),
        named(b, s.kernel),
        s.call,
        ratio(s.ratio_vs_good),
        p(s.p_vs_good),
        ratio(s.ratio_vs_bad),
        p(s.p_vs_bad),
        s.runs
    )
}

/// The outcome in one line.
pub fn outcome_line(b: &Bisection) -> String {
    let Some(o) = &b.outcome else {
        return "running".to_owned();
    };
    let sure = |o: &farm_proto::BisectionOutcome| {
        format!(
            "{}: {} {} against {} (p {}); last good against good p {}, first bad against bad p {}",
            if o.confirmed {
                "confirmed"
            } else {
                "NOT confirmed"
            },
            b.metric,
            ratio(o.ratio),
            kernel(b, o.last_good),
            p(o.p_value),
            p(o.p_last_good_vs_good),
            p(o.p_first_bad_vs_bad)
        )
    };
    match o.kind.as_str() {
        CULPRIT => format!(
            "first bad: {}, kernel {}; last good: {}; {}",
            named(b, o.first_bad),
            o.first_bad,
            named(b, o.last_good),
            sure(o)
        ),
        "unresolved" => format!(
            "unresolved: the first bad kernel is one of {}..={} ({} .. {}), every kernel between stayed unknown; {}",
            o.last_good + 1,
            o.first_bad,
            kernel(b, o.last_good + 1),
            kernel(b, o.first_bad),
            sure(o)
        ),
        "ends_do_not_differ" => format!(
            "no bisection: {} was not worse than {} on {} ({} p {})",
            kernel(b, b.kernels.len().saturating_sub(1) as u32),
            kernel(b, 0),
            b.metric,
            ratio(o.ratio),
            p(o.p_value)
        ),
        "failed" => format!(
            "failed: every run of {} (kernel {}) failed, and the outcome rests on it",
            kernel(b, o.failed_kernel),
            o.failed_kernel
        ),
        CANCELLED => format!(
            "cancelled: its round matrix {} was cancelled",
            o.matrix_ids.last().map_or("?", String::as_str)
        ),
        other => format!("ended: {other}"),
    }
}

fn num(v: f64) -> serde_json::Value {
    serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, serde_json::Value::Number)
}

pub fn to_json(b: &Bisection) -> serde_json::Value {
    let o = b.outcome.clone().unwrap_or_default();
    serde_json::json!({
        "bisection_id": b.bisection_id,
        "matrix_id": b.matrix_id,
        "cell": b.cell,
        "kernels": b.kernels,
        "metric": b.metric,
        "steps": b.steps.iter().map(|s| serde_json::json!({
            "kernel": s.kernel,
            "name": kernel(b, s.kernel),
            "subject": b.subjects.get(s.kernel as usize).cloned().unwrap_or_default(),
            "call": s.call,
            "runs": s.runs,
            "ratio_vs_good": num(s.ratio_vs_good),
            "p_vs_good": num(s.p_vs_good),
            "ratio_vs_bad": num(s.ratio_vs_bad),
            "p_vs_bad": num(s.p_vs_bad),
            "matrix_ids": s.matrix_ids,
        })).collect::<Vec<_>>(),
        "outcome": b.outcome.as_ref().map(|_| serde_json::json!({
            "kind": o.kind,
            "last_good": o.last_good,
            "first_bad": o.first_bad,
            "last_good_kernel": kernel(b, o.last_good),
            "first_bad_kernel": kernel(b, o.first_bad),
            "first_bad_subject": b.subjects.get(o.first_bad as usize).cloned().unwrap_or_default(),
            "confirmed": o.confirmed,
            "ratio": num(o.ratio),
            "p_value": num(o.p_value),
            "p_last_good_vs_good": num(o.p_last_good_vs_good),
            "p_first_bad_vs_bad": num(o.p_first_bad_vs_bad),
            "matrix_ids": o.matrix_ids,
        })),
    })
}
