//! The line helpers the tools' output parsers share.

use super::spec::Error;

/// Splits `key <sep> value` and trims both sides.
pub(super) fn key_value(line: &str, sep: char) -> Option<(&str, &str)> {
    let (k, v) = line.split_once(sep)?;
    Some((k.trim(), v.trim()))
}

/// The first line whose key (before `sep`, trimmed) is exactly `key`,
/// together with its trimmed value.
pub(super) fn find_key<'a>(text: &'a str, key: &str, sep: char) -> Option<(&'a str, &'a str)> {
    text.lines().find_map(|line| match key_value(line, sep) {
        Some((k, v)) if k == key => Some((line, v)),
        _ => None,
    })
}

/// Like [`find_key`], but a missing line is an error naming what is missing.
pub(super) fn require_key<'a>(
    tool: &'static str,
    text: &'a str,
    key: &str,
    sep: char,
    what: &'static str,
) -> Result<(&'a str, &'a str), Error> {
    find_key(text, key, sep).ok_or(Error::Missing { tool, what })
}

/// Parses one figure of `line`. Non-finite values are refused, as in the
/// metric protocol: a tool that prints `nan` has failed.
pub(super) fn number(tool: &'static str, line: &str, text: &str) -> Result<f64, Error> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(bad_line(tool, line, format!("`{text}` is not a number"))),
    }
}

/// The `i`th whitespace-separated field of `line` as a number.
pub(super) fn field(tool: &'static str, line: &str, i: usize, what: &str) -> Result<f64, Error> {
    match line.split_whitespace().nth(i) {
        Some(text) => number(tool, line, text),
        None => Err(bad_line(tool, line, format!("no field {} ({what})", i + 1))),
    }
}

pub(super) fn bad_line(tool: &'static str, line: &str, why: String) -> Error {
    Error::BadLine {
        tool,
        line: line.trim().to_string(),
        why,
    }
}
