//! What farmctl reads from its user, and the error that says the input,
//! not the farm, was bad (exit 2).

use std::path::Path;

use anyhow::Result;

/// An error that means the input was bad (exit 2), not that the farm failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// The file's text, refused without reading it all when it is larger than
/// a coordinator accepts (`service::MAX_MATRIX_BYTES`).
pub fn read_matrix(file: &Path) -> Result<String> {
    use std::io::Read;
    let limit = farm_coordinator::service::MAX_MATRIX_BYTES;
    let bad = |e: std::io::Error| BadInput(format!("{}: {e}", file.display()));
    let mut bytes = Vec::new();
    std::fs::File::open(file)
        .map_err(bad)?
        // One byte more than the limit tells a file at the limit from a larger one.
        .take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(bad)?;
    if bytes.len() > limit {
        return Err(BadInput(format!(
            "{}: matrix file is over {limit} bytes; the limit (MAX_MATRIX_BYTES) is {limit}",
            file.display()
        ))
        .into());
    }
    String::from_utf8(bytes).map_err(|e| {
        BadInput(format!(
            "{}: not UTF-8 (byte {} is not part of a UTF-8 character)",
            file.display(),
            e.utf8_error().valid_up_to()
        ))
        .into()
    })
}
