//! The coordinator's ids, typed: each made in one place, parsed where one
//! enters (an agent's message, a caller's request, a stored record), and
//! written back as a string only where it leaves (the wire, the store).
//!
//! A matrix id is what the scheduler drew for it when it was submitted:
//! `m-` and 12 lowercase hex digits ([`MatrixId`]); an agent's, `a-` and
//! as many, at its first registration ([`AgentId`]); a schedule's, `s-`
//! ([`ScheduleId`]); a bisection's, `b-` ([`BisectionId`]). A run's id is made
//! from its parts, `{matrix}.c{cell}.r{repetition}` ([`RunId`]).
//!
//! Run ids are predictable on purpose (a forger guessing them gains
//! nothing: `scheduler::provenance` accepts a message only for an attempt
//! leased to its sender); what the type adds is that no two places spell
//! one differently, and that a string that is no run id is refused once,
//! as an unknown run, instead of being looked up.

use std::fmt;
use std::str::FromStr;

/// The hex digits of a drawn id: 6 random bytes.
const RANDOM_ID_DIGITS: usize = 12;

/// An id the scheduler draws at random, `{prefix}-` and
/// [`RANDOM_ID_DIGITS`] lowercase hex digits: its bits are held, and its
/// one spelling is written back.
macro_rules! random_id {
    ($(#[$doc:meta])* $id:ident, $bad:ident, $prefix:literal, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $id(u64);

        impl $id {
            /// A new id, drawn at random: the one place one is made.
            pub fn random() -> $id {
                let mut b = [0u8; RANDOM_ID_DIGITS / 2];
                rand::fill(&mut b);
                $id(b.iter().fold(0, |n, &x| n << 8 | u64::from(x)))
            }
        }

        impl fmt::Display for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "-{:0w$x}"), self.0, w = RANDOM_ID_DIGITS)
            }
        }

        /// As the string it is written as, quoted, as before it was typed.
        impl fmt::Debug for $id {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.to_string(), f)
            }
        }

        #[doc = concat!("A string that is no ", $what, " id, quoted by its first characters.")]
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $bad(String);

        impl fmt::Display for $bad {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!("not a ", $what, " id: {:?}"), self.0)
            }
        }

        impl std::error::Error for $bad {}

        impl FromStr for $id {
            type Err = $bad;

            /// Only the form [`Display`](fmt::Display) writes: lowercase
            /// digits, all of them, so that an id has one spelling.
            fn from_str(s: &str) -> Result<$id, $bad> {
                let digits = s
                    .strip_prefix(concat!($prefix, "-"))
                    .filter(|d| {
                        d.len() == RANDOM_ID_DIGITS
                            && d.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                    })
                    .ok_or_else(|| $bad(farm_spec::excerpt(s)))?;
                u64::from_str_radix(digits, 16)
                    .map($id)
                    .map_err(|_| $bad(farm_spec::excerpt(s)))
            }
        }

        #[cfg(test)]
        #[allow(dead_code)] // Not every kind's tests make one.
        impl $id {
            /// A test's `n`th id, made as one that enters is: parsed from
            /// its one spelling.
            pub(crate) fn nth(n: u64) -> $id {
                format!(concat!($prefix, "-{:012x}"), n).parse().expect("an id")
            }
        }
    };
}

random_id!(
    /// A submitted matrix, schedules' executions and bisections' rounds
    /// included.
    MatrixId,
    BadMatrixId,
    "m",
    "matrix"
);

random_id!(
    /// A schedule (a continuous matrix), drawn when it is made.
    ScheduleId,
    BadScheduleId,
    "s",
    "schedule"
);

random_id!(
    /// A bisection, drawn when it starts. Its record is the wire's
    /// (`farm_proto::Bisection`), which keeps the id's string.
    BisectionId,
    BadBisectionId,
    "b",
    "bisection"
);

random_id!(
    /// A registered agent: drawn at its first `Register`, and resumed by
    /// it after.
    AgentId,
    BadAgentId,
    "a",
    "agent"
);

/// The longest run id accepted: a matrix id (`m-` and 12 hex digits) and
/// two `u32`s leave room to spare; a longer one is no id of ours.
pub const MAX_RUN_ID_BYTES: usize = 128;

/// A cell's index in its matrix, `0..cells`: given where the matrix is
/// expanded (or a stored cell is read back), and a run id's middle part.
/// Written as its decimal number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CellIndex(u32);

impl CellIndex {
    pub const fn new(index: u32) -> CellIndex {
        CellIndex(index)
    }

    /// As the wire and the stores carry it.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The cell's place in its matrix's per-cell vectors.
    pub const fn at(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for CellIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A `u32` in the one form `Display` writes it: decimal digits, no
/// leading zero (a `c01` would name the cell `c1` names).
fn decimal(s: &str) -> Option<u32> {
    let canonical =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
    canonical.then(|| s.parse().ok()).flatten()
}

/// One run of one cell of a matrix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RunId {
    matrix: MatrixId,
    cell: CellIndex,
    repetition: u32,
}

impl RunId {
    /// The id of `matrix`'s run of `cell`, repetition `repetition`: the
    /// one place a run id is made.
    pub fn new(matrix: MatrixId, cell: CellIndex, repetition: u32) -> RunId {
        RunId {
            matrix,
            cell,
            repetition,
        }
    }

    pub fn matrix(&self) -> MatrixId {
        self.matrix
    }

    pub fn cell(&self) -> CellIndex {
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
        let matrix = matrix.parse::<MatrixId>().map_err(|_| bad())?;
        let cell = decimal(cell).map(CellIndex).ok_or_else(bad)?;
        let repetition = decimal(repetition).ok_or_else(bad)?;
        Ok(RunId::new(matrix, cell, repetition))
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
    fn a_matrix_id_is_drawn_written_and_read_one_way() {
        let id: MatrixId = "m-4766cf90c98c".parse().unwrap();
        assert_eq!(id.to_string(), "m-4766cf90c98c");
        assert_eq!(format!("{id:?}"), "\"m-4766cf90c98c\"");
        let low: MatrixId = "m-000000000001".parse().unwrap();
        assert_eq!(low.to_string(), "m-000000000001");
        assert!(low < id);
        for _ in 0..100 {
            let drawn = MatrixId::random();
            assert_eq!(drawn.to_string().parse::<MatrixId>(), Ok(drawn));
        }
    }

    #[test]
    fn what_is_no_matrix_id_is_refused() {
        for bad in [
            "",
            "m",
            "m-",
            "m-1",
            "m0",
            "kept",
            "m-4766cf90c98",
            "m-4766cf90c98c0",
            "m-4766CF90C98C",
            "m-4766cf90c98g",
            "m-+766cf90c98c",
            "a-4766cf90c98c",
            "M-4766cf90c98c",
            " m-4766cf90c98c",
            "m-4766cf90c98c\n",
        ] {
            assert!(bad.parse::<MatrixId>().is_err(), "{bad:?}");
        }
        let e = "x".repeat(100).parse::<MatrixId>().unwrap_err();
        assert_eq!(e.to_string().len(), "not a matrix id: \"\"".len() + 40 + 3);
    }

    #[test]
    fn a_cell_index_is_written_one_way() {
        let i = CellIndex::new(12);
        assert_eq!((i.to_string(), i.get(), i.at()), ("12".to_owned(), 12, 12));
        // Read only as a run id's middle part, in one spelling.
        for bad in ["", "012", "-1", "+1", "1 ", "4294967296", "c1"] {
            let id = format!("m-000000000001.c{bad}.r0");
            assert!(id.parse::<RunId>().is_err(), "{id:?}");
        }
    }

    #[test]
    fn a_run_id_is_written_and_read_one_way() {
        let m: MatrixId = "m-4766cf90c98c".parse().unwrap();
        let id = RunId::new(m, CellIndex::new(12), 3);
        assert_eq!(id.to_string(), "m-4766cf90c98c.c12.r3");
        assert_eq!("m-4766cf90c98c.c12.r3".parse::<RunId>(), Ok(id));
        let parts = "m-000000000001.c0.r0".parse::<RunId>().unwrap();
        assert_eq!(
            (
                parts.matrix().to_string(),
                parts.cell().get(),
                parts.repetition()
            ),
            ("m-000000000001".to_owned(), 0, 0)
        );
    }

    #[test]
    fn what_is_no_run_id_is_refused() {
        for bad in [
            "",
            "m-000000000001",
            "m-000000000001.c1",
            "m-000000000001.r1",
            ".c1.r1",
            "m-1.c1.r1",
            "m-000000000001.c01.r1",
            "m-000000000001.c1.r",
            "m-000000000001.c1.r-1",
            "m-000000000001.c1.r4294967296",
            "m 000000000001.c1.r1",
            "m-000000000001.c1.r1\n",
        ] {
            assert!(bad.parse::<RunId>().is_err(), "{bad:?}");
        }
        let long = format!("{}.c1.r1", "m".repeat(MAX_RUN_ID_BYTES));
        let e = long.parse::<RunId>().unwrap_err();
        assert_eq!(e.to_string().len(), "not a run id: \"\"".len() + 40 + 3);
    }
}
