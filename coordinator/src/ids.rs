//! A run's id, typed: made in one place from its parts, parsed where one
//! enters (an agent's message, a stored record), and written back to the
//! wire and the store as `{matrix}.c{cell}.r{repetition}`.
//!
//! Run ids are predictable on purpose (a forger guessing them gains
//! nothing: `scheduler::provenance` accepts a message only for an attempt
//! leased to its sender); what the type adds is that no two places spell
//! one differently, and that a string that is no run id is refused once,
//! as an unknown run, instead of being looked up.

use std::fmt;
use std::str::FromStr;

/// The longest run id accepted: a matrix id (`m-` and 12 hex digits) and
/// two `u32`s leave room to spare; a longer one is no id of ours.
pub const MAX_RUN_ID_BYTES: usize = 128;

/// One run of one cell of a matrix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId {
    matrix: String,
    cell: u32,
    repetition: u32,
}

impl RunId {
    /// The id of `matrix`'s run of `cell`, repetition `repetition`: the
    /// one place a run id is made.
    pub fn new(matrix: &str, cell: u32, repetition: u32) -> RunId {
        RunId {
            matrix: matrix.to_owned(),
            cell,
            repetition,
        }
    }

    pub fn matrix(&self) -> &str {
        &self.matrix
    }

    pub fn cell(&self) -> u32 {
        self.cell
    }

    pub fn repetition(&self) -> u32 {
        self.repetition
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.c{}.r{}", self.matrix, self.cell, self.repetition)
    }
}

/// A string that is no run id, quoted by its first characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a run id: {0:?}")]
pub struct BadRunId(String);

impl FromStr for RunId {
    type Err = BadRunId;

    /// Only the canonical form (what [`RunId`]'s `Display` writes): a
    /// `c01` would name the run `c1` names, and an id must have one
    /// spelling.
    fn from_str(s: &str) -> Result<RunId, BadRunId> {
        let bad = || BadRunId(farm_spec::excerpt(s));
        if s.len() > MAX_RUN_ID_BYTES {
            return Err(bad());
        }
        let (rest, repetition) = s.rsplit_once(".r").ok_or_else(bad)?;
        let (matrix, cell) = rest.rsplit_once(".c").ok_or_else(bad)?;
        let number = |n: &str| -> Result<u32, BadRunId> {
            let canonical = n.bytes().all(|b| b.is_ascii_digit())
                && !n.is_empty()
                && (n == "0" || !n.starts_with('0'));
            if !canonical {
                return Err(bad());
            }
            n.parse().map_err(|_| bad())
        };
        let ok_matrix = !matrix.is_empty()
            && matrix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok_matrix {
            return Err(bad());
        }
        Ok(RunId::new(matrix, number(cell)?, number(repetition)?))
    }
}

/// One attempt at a run: what an agent holds while it executes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub run: RunId,
    pub attempt: u32,
}

impl From<&Attempt> for farm_proto::RunRef {
    fn from(a: &Attempt) -> farm_proto::RunRef {
        farm_proto::RunRef {
            run_id: a.run.to_string(),
            attempt: a.attempt,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_is_written_and_read_one_way() {
        let id = RunId::new("m-4766cf90c98c", 12, 3);
        assert_eq!(id.to_string(), "m-4766cf90c98c.c12.r3");
        assert_eq!("m-4766cf90c98c.c12.r3".parse::<RunId>(), Ok(id));
        let parts = "m-1.c0.r0".parse::<RunId>().unwrap();
        assert_eq!(
            (parts.matrix(), parts.cell(), parts.repetition()),
            ("m-1", 0, 0)
        );
    }

    #[test]
    fn what_is_no_run_id_is_refused() {
        for bad in [
            "",
            "m-1",
            "m-1.c1",
            "m-1.r1",
            ".c1.r1",
            "m-1.c01.r1",
            "m-1.c1.r",
            "m-1.c1.r-1",
            "m-1.c1.r4294967296",
            "m 1.c1.r1",
            "m-1.c1.r1\n",
        ] {
            assert!(bad.parse::<RunId>().is_err(), "{bad:?}");
        }
        let long = format!("{}.c1.r1", "m".repeat(MAX_RUN_ID_BYTES));
        let e = long.parse::<RunId>().unwrap_err();
        assert_eq!(e.to_string().len(), "not a run id: \"\"".len() + 40 + 3);
    }
}
