//! Unix times in milliseconds as the tables and the report print them (UTC).

/// A Unix time in milliseconds as `2025-11-30 22:26 UTC`.
pub fn datetime(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (y, m, d) = civil(secs / 86_400);
    let s = secs % 86_400;
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        s / 3600,
        s % 3600 / 60
    )
}

/// A Unix time in milliseconds as `2025-11-30`.
pub fn date(unix_ms: u64) -> String {
    let (y, m, d) = civil(unix_ms / 1000 / 86_400);
    format!("{y:04}-{m:02}-{d:02}")
}

/// Year, month, day of the `days`-th day since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}
