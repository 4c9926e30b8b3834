//! `/proc/loadavg`: the host's load averages, the figure a verdict's spread
//! is read against (how busy the host was while the runs ran).
//!
//! One line, `0.52 0.58 0.59 2/1234 56789`: the 1-, 5- and 15-minute load
//! averages (runnable and uninterruptible threads, exponentially weighted),
//! threads runnable now over all threads, the last pid. Only the averages
//! and the counts are kept.

use std::path::Path;

use super::error::{Error, Result};

/// The canonical name errors use; [`read`] replaces it with the path it read.
const FILE: &str = "/proc/loadavg";

/// One reading of `/proc/loadavg`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadAvg {
    pub one: f64,
    pub five: f64,
    pub fifteen: f64,
    /// Threads runnable when it was read.
    pub runnable: u32,
    /// All threads when it was read.
    pub threads: u32,
}

/// Parses the text of `/proc/loadavg`.
pub fn parse(text: &str) -> Result<LoadAvg> {
    let line = text.lines().next().unwrap_or("");
    let bad = |reason: &'static str| Error::parse(FILE, 1, reason, line);
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    let [one, five, fifteen, counts, _last_pid] = fields[..] else {
        return Err(bad(
            "expected 5 fields: three load averages, runnable/threads, a pid",
        ));
    };
    // A load average is never negative, and the kernel prints it with two
    // decimals: anything else is not this file.
    let average = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| bad("a load average is not a non-negative number"))
    };
    let (runnable, threads) = counts
        .split_once('/')
        .and_then(|(r, t)| Some((r.parse::<u32>().ok()?, t.parse::<u32>().ok()?)))
        .ok_or_else(|| bad("the fourth field is not runnable/threads"))?;
    Ok(LoadAvg {
        one: average(one)?,
        five: average(five)?,
        fifteen: average(fifteen)?,
        runnable,
        threads,
    })
}

/// Reads and parses `<root>/proc/loadavg`.
pub fn read(root: &Path) -> Result<LoadAvg> {
    let path = super::files::path_below(root, FILE);
    parse(&super::files::read_text(&path)?).map_err(|e| e.at(&path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_line_and_names_the_file_with_a_short_excerpt() {
        // Read on a 2-CPU host while the workspace built.
        assert_eq!(
            parse("2.05 0.97 0.39 3/130 13258\n").unwrap(),
            LoadAvg {
                one: 2.05,
                five: 0.97,
                fifteen: 0.39,
                runnable: 3,
                threads: 130,
            }
        );
        for (text, error) in [
            (
                "",
                "/proc/loadavg line 1: expected 5 fields: three load averages, \
                 runnable/threads, a pid: \"\"",
            ),
            (
                "0.52 0.58 nan 2/1234 56789",
                "/proc/loadavg line 1: a load average is not a non-negative number: \
                 \"0.52 0.58 nan 2/1234 56789\"",
            ),
            (
                "0.52 -1 0.59 2/1234 56789",
                "/proc/loadavg line 1: a load average is not a non-negative number: \
                 \"0.52 -1 0.59 2/1234 56789\"",
            ),
            (
                "0.52 0.58 0.59 2-1234 56789",
                "/proc/loadavg line 1: the fourth field is not runnable/threads: \
                 \"0.52 0.58 0.59 2-1234 56789\"",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err().to_string(), error, "{text:?}");
        }
        // Garbage is quoted up to 120 characters.
        let long = format!("{} 1 1 1/1 1", "x".repeat(300));
        let e = parse(&long).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "/proc/loadavg line 1: a load average is not a non-negative number: \"{}...\"",
                "x".repeat(120)
            )
        );
    }

    #[test]
    fn reads_below_a_root_and_names_the_path_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        let path = dir.path().join("proc/loadavg");
        std::fs::write(&path, "0.00 0.01 0.05 1/99 4242\n").unwrap();
        assert_eq!(read(dir.path()).unwrap().one, 0.0);
        std::fs::write(&path, "x\n").unwrap();
        assert_eq!(
            read(dir.path()).unwrap_err().to_string(),
            format!(
                "{} line 1: expected 5 fields: three load averages, runnable/threads, a pid: \"x\"",
                path.display()
            )
        );
    }
}
