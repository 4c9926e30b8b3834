//! The wire's enum values as farmctl prints them.

use farm_proto::{Direction, MatrixState};

pub(super) fn state_name(s: i32) -> &'static str {
    match MatrixState::try_from(s) {
        Ok(MatrixState::Running) => "running",
        Ok(MatrixState::Done) => "done",
        Ok(MatrixState::Cancelled) => "cancelled",
        _ => "unknown",
    }
}

pub(super) fn direction_name(d: i32) -> &'static str {
    match Direction::try_from(d) {
        Ok(Direction::LowerIsBetter) => "lower_is_better",
        Ok(Direction::HigherIsBetter) => "higher_is_better",
        _ => "unspecified",
    }
}
