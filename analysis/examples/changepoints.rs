//! Change points of one series file, as `farmctl analyze changepoints` prints
//! them, plus the in-process detection time: the Rust side of
//! `bench/changepoints/run.sh`.
//!
//! ```text
//! cargo run --release -p farm-analysis --example changepoints -- FILE [--repeat N] [--max-p P] [--seed S] [--min-segment-len L]
//! ```
//!
//! FILE has one number per line (blank lines and lines starting with `#` are
//! skipped). Prints one JSON object on stdout:
//! `{"change_points": [{"index", "mean_before", "mean_after", "p_value"}, ...], "seconds": <median detection time>}`.
//! Reading and printing are outside the timed part, as on Otava's side.

// An example is a program: it prints its report.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;
use std::time::Instant;

use farm_analysis::changepoint::{ChangePoint, Options, try_detect};

const USAGE: &str =
    "usage: changepoints FILE [--repeat N] [--max-p P] [--seed S] [--min-segment-len L]";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("changepoints: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let mut file = None;
    let mut repeat = 1usize;
    let mut options = Options::default();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "--repeat" => repeat = parse(&value("--repeat")?)?,
            "--max-p" => options.max_p_value = parse(&value("--max-p")?)?,
            "--seed" => options.seed = parse(&value("--seed")?)?,
            "--min-segment-len" => options.min_segment_len = parse(&value("--min-segment-len")?)?,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            _ if file.is_none() && !arg.starts_with('-') => file = Some(arg),
            _ => return Err(format!("unexpected argument {arg:?}\n{USAGE}")),
        }
    }
    let file = file.ok_or(USAGE)?;
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{file}: {e}"))?;
    let series = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| parse::<f64>(l).map_err(|e| format!("{file}: {e}")))
        .collect::<Result<Vec<f64>, String>>()?;

    let mut times = Vec::with_capacity(repeat.max(1));
    let mut found = Vec::new();
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        found = try_detect(&series, &options).map_err(|e| format!("{file}: {e}"))?;
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    println!("{}", to_json(&found, times[times.len() / 2]));
    Ok(())
}

fn parse<T: std::str::FromStr>(s: &str) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    s.parse().map_err(|e| format!("{s:?}: {e}"))
}

/// JSON by hand: the crate has no serde, and these are plain numbers
/// (`{:?}` prints a float in a form JSON accepts, exponent included).
fn to_json(points: &[ChangePoint], seconds: f64) -> String {
    let items: Vec<String> = points
        .iter()
        .map(|c| {
            format!(
                r#"{{"index": {}, "mean_before": {:?}, "mean_after": {:?}, "p_value": {:?}}}"#,
                c.index, c.mean_before, c.mean_after, c.p_value
            )
        })
        .collect();
    format!(
        r#"{{"change_points": [{}], "seconds": {:?}}}"#,
        items.join(", "),
        seconds
    )
}
