//! The line protocol by which a workload reports its metrics on stdout.
//!
//! One line per metric, exactly `metric <name> <value> <unit> <lower|higher>`:
//!
//! ```text
//! metric lu_mops 1234.5 Mop/s higher
//! ```
//!
//! The value is printed with `{}`, which for `f64` is the shortest text that
//! parses back to the same number, so nothing is lost on the way to the
//! coordinator. Lines that do not start with `metric ` are not part of the
//! protocol and are ignored by the parser, so a workload may print other
//! things on stdout; a line that does start with it must be well formed,
//! because a silently dropped metric would look like a missing measurement.

use std::fmt;

use crate::catalogue::Direction;

#[cfg(test)]
mod tests;

/// The word every metric line starts with, followed by one space.
const PREFIX: &str = "metric ";

/// One metric as reported by a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Metric {
    pub name: String,
    pub value: f64,
    pub unit: String,
    pub direction: Direction,
}

impl Metric {
    /// The metric's line, without a trailing newline.
    pub fn to_line(&self) -> String {
        format_metric(&self.name, self.value, &self.unit, self.direction)
    }
}

/// Why a line starting with `metric ` is not a valid metric line.
#[derive(Debug, Clone, PartialEq)]
pub enum OutputError {
    /// Not exactly four fields (name, value, unit, direction) after `metric`.
    FieldCount { found: usize },
    /// The value field does not parse as a number.
    NotANumber { name: String, value: String },
    /// The value is NaN or infinite: no statistic can be computed from it.
    NotFinite { name: String, value: String },
    /// The direction is neither `lower` nor `higher`.
    BadDirection { name: String, direction: String },
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutputError::FieldCount { found } => write!(
                f,
                "metric line has {found} fields after `metric`, expected 4 \
                 (name value unit lower|higher)"
            ),
            OutputError::NotANumber { name, value } => {
                write!(
                    f,
                    "metric `{name}` has value `{value}`, which is not a number"
                )
            }
            OutputError::NotFinite { name, value } => {
                write!(
                    f,
                    "metric `{name}` has value `{value}`, which is not finite"
                )
            }
            OutputError::BadDirection { name, direction } => write!(
                f,
                "metric `{name}` has direction `{direction}`, expected `lower` or `higher`"
            ),
        }
    }
}

impl std::error::Error for OutputError {}

/// Formats one metric line, without a trailing newline.
///
/// `name` and `unit` must not contain whitespace: the protocol separates
/// fields by spaces. Every caller passes names and units from the catalogue,
/// so this is checked in debug builds only.
pub fn format_metric(name: &str, value: f64, unit: &str, direction: Direction) -> String {
    debug_assert!(
        !name.is_empty() && !name.contains(char::is_whitespace),
        "metric name `{name}` must be one word"
    );
    debug_assert!(
        !unit.is_empty() && !unit.contains(char::is_whitespace),
        "metric unit `{unit}` must be one word"
    );
    format!(
        "{PREFIX}{name} {value} {unit} {}",
        direction_word(direction)
    )
}

/// Parses one line of a workload's stdout.
///
/// Returns `Ok(None)` for lines that are not metric lines. Fields may be
/// separated by runs of whitespace and a trailing `\r` is tolerated, so that
/// output that passed through a serial console or a guest's terminal still
/// parses.
pub fn parse_metric_line(line: &str) -> Result<Option<Metric>, OutputError> {
    let Some(rest) = line.strip_prefix(PREFIX) else {
        return Ok(None);
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let [name, value, unit, direction] = fields[..] else {
        return Err(OutputError::FieldCount {
            found: fields.len(),
        });
    };
    let parsed: f64 = value.parse().map_err(|_| OutputError::NotANumber {
        name: name.to_string(),
        value: value.to_string(),
    })?;
    // `f64::from_str` accepts `inf` and `NaN`; a workload that prints one has
    // failed, and letting it through would poison every mean downstream.
    if !parsed.is_finite() {
        return Err(OutputError::NotFinite {
            name: name.to_string(),
            value: value.to_string(),
        });
    }
    let direction = parse_direction(direction).ok_or_else(|| OutputError::BadDirection {
        name: name.to_string(),
        direction: direction.to_string(),
    })?;
    Ok(Some(Metric {
        name: name.to_string(),
        value: parsed,
        unit: unit.to_string(),
        direction,
    }))
}

/// The protocol's word for a direction, also used by `--list`.
pub(crate) fn direction_word(direction: Direction) -> &'static str {
    direction.as_str()
}

fn parse_direction(word: &str) -> Option<Direction> {
    word.parse().ok()
}
