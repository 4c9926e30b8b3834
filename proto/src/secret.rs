//! Files that hold secrets (tokens, private keys), for the coordinator, the
//! agents and farmctl alike: one check of who may read them.
//!
//! A secret that group or others can read is refused rather than used: the
//! agent runs as root, and a token or key that leaked to another local user
//! is a way onto every agent of the farm. The mode is read off the opened
//! file (fstat), so the file checked is the file read.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The largest secret file read: a token is a line, a private key a few
/// hundred bytes of PEM; anything bigger is not one.
pub const MAX_SECRET_BYTES: u64 = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(
        "{path}: a secret readable by group or others (mode {mode:03o}) is refused; chmod 600 it"
    )]
    TooOpen { path: PathBuf, mode: u32 },
    #[error("{path}: larger than {MAX_SECRET_BYTES} bytes; not a token or key")]
    TooLarge { path: PathBuf },
    #[error("{path}: a token is one line of printable ASCII without spaces")]
    Malformed { path: PathBuf },
}

/// Refuses `mode` when group or others have any right to the file.
pub fn check_mode(path: &Path, mode: u32) -> Result<(), Error> {
    let mode = mode & 0o777;
    if mode & 0o077 != 0 {
        return Err(Error::TooOpen {
            path: path.into(),
            mode,
        });
    }
    Ok(())
}

/// The bytes of a private file (a key), refused when others may read it.
pub fn read_private(path: &Path) -> Result<Vec<u8>, Error> {
    let io_err = |source| Error::Io {
        path: path.into(),
        source,
    };
    let file = File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    check_mode(path, meta.permissions().mode())?;
    if meta.len() > MAX_SECRET_BYTES {
        return Err(Error::TooLarge { path: path.into() });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_SECRET_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > MAX_SECRET_BYTES {
        return Err(Error::TooLarge { path: path.into() });
    }
    Ok(bytes)
}

/// A token file: one line, trimmed, of printable ASCII without spaces (what
/// an `authorization: Bearer` header can carry), refused when others may
/// read it.
pub fn read_token(path: &Path) -> Result<String, Error> {
    let bytes = read_private(path)?;
    let malformed = || Error::Malformed { path: path.into() };
    let text = String::from_utf8(bytes).map_err(|_| malformed())?;
    let token = text.trim();
    if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(malformed());
    }
    Ok(token.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        fs::write(&p, text).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn tokens_are_read_only_from_private_files() {
        let dir = tempfile::tempdir().unwrap();
        let ok = file(dir.path(), "ok", "  abc123\n", 0o600);
        assert_eq!(read_token(&ok).unwrap(), "abc123");
        let owner_only = file(dir.path(), "ro", "abc\n", 0o400);
        assert_eq!(read_token(&owner_only).unwrap(), "abc");
        for mode in [0o640, 0o604, 0o660, 0o644, 0o601] {
            let p = file(dir.path(), "open", "abc\n", mode);
            let e = read_token(&p).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!(
                    "{}: a secret readable by group or others (mode {mode:03o}) is refused; chmod 600 it",
                    p.display()
                )
            );
        }
        for bad in ["", "\n", "two words", "caf\u{e9}"] {
            let p = file(dir.path(), "bad", bad, 0o600);
            assert!(
                matches!(read_token(&p), Err(Error::Malformed { .. })),
                "{bad:?}"
            );
        }
        let big = file(dir.path(), "big", &"a".repeat(70_000), 0o600);
        assert!(matches!(read_token(&big), Err(Error::TooLarge { .. })));
        let missing = dir.path().join("missing");
        assert!(matches!(read_token(&missing), Err(Error::Io { .. })));
    }
}
