//! Files that hold secrets (tokens, private keys), for the coordinator, the
//! agents and farmctl alike: one check of who may read them.
//!
//! A secret that group or others can read, or that another user owns (and
//! so can read or replace), is refused rather than used: the agent runs as
//! root, and a token or key that leaked to another local user is a way onto
//! every agent of the farm. The mode is read off the opened file (fstat),
//! so the file checked is the file read; it is opened without blocking, so
//! a FIFO in its place is refused rather than waited on.
//!
//! One exception: a systemd credential (`LoadCredential=`, under
//! `$CREDENTIALS_DIRECTORY`) of a service with a dynamic or non-root user
//! is root's file with an ACL granting that user read access, which `stat`
//! shows as group bits. systemd makes that directory the service's alone, so
//! group bits are accepted there (others' bits never are).

use std::fs::OpenOptions;
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
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
    #[error(
        "{path}: a trust anchor or certificate writable by group or others (mode {mode:03o}) \
         is refused; chmod go-w it"
    )]
    Writable { path: PathBuf, mode: u32 },
    #[error("{path}: larger than {MAX_CERTIFICATE_BYTES} bytes; not a certificate")]
    TooLargeCertificate { path: PathBuf },
    #[error("{path}: not a regular file")]
    NotAFile { path: PathBuf },
    #[error(
        "{path}: a secret owned by uid {owner} is refused (this process runs as uid {me}); \
         chown it"
    )]
    NotOwned { path: PathBuf, owner: u32, me: u32 },
    #[error("{path}: a token is one line of printable ASCII without spaces")]
    Malformed { path: PathBuf },
}

/// Refuses `mode` when group or others have any right to the file; in
/// `credentials` (systemd's `$CREDENTIALS_DIRECTORY`), group bits are an ACL
/// for this service's user and are let be.
pub fn check_mode(path: &Path, mode: u32, credentials: Option<&Path>) -> Result<(), Error> {
    let mode = mode & 0o777;
    let in_credentials = credentials.is_some_and(|dir| path.starts_with(dir));
    let forbidden = if in_credentials { 0o007 } else { 0o077 };
    if mode & forbidden != 0 {
        return Err(Error::TooOpen {
            path: path.into(),
            mode,
        });
    }
    Ok(())
}

/// The largest certificate file read (a chain or a bundle of authorities).
pub const MAX_CERTIFICATE_BYTES: u64 = 1 << 20;

/// A certificate or the authority to trust: public, but whoever can write
/// it decides whom a root agent trusts, so it is refused when group or
/// others may write it or another user owns it.
pub fn read_trusted(path: &Path) -> Result<Vec<u8>, Error> {
    let (file, meta) = open_own(path)?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(Error::Writable {
            path: path.into(),
            mode,
        });
    }
    read_at_most(path, file, MAX_CERTIFICATE_BYTES)
        .ok_or_else(|| Error::TooLargeCertificate { path: path.into() })?
}

/// `path` opened without blocking, checked to be a regular file owned by
/// this process's user or root.
fn open_own(path: &Path) -> Result<(std::fs::File, std::fs::Metadata), Error> {
    let io_err = |source| Error::Io {
        path: path.into(),
        source,
    };
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.file_type().is_file() {
        return Err(Error::NotAFile { path: path.into() });
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me && meta.uid() != 0 {
        return Err(Error::NotOwned {
            path: path.into(),
            owner: meta.uid(),
            me,
        });
    }
    Ok((file, meta))
}

/// The rest of `file`, or `None` when it is longer than `limit`.
fn read_at_most(path: &Path, file: std::fs::File, limit: u64) -> Option<Result<Vec<u8>, Error>> {
    let mut bytes = Vec::new();
    if let Err(source) = file.take(limit + 1).read_to_end(&mut bytes) {
        return Some(Err(Error::Io {
            path: path.into(),
            source,
        }));
    }
    (bytes.len() as u64 <= limit).then_some(Ok(bytes))
}

/// The bytes of a private file (a key), refused when others may read it.
pub fn read_private(path: &Path) -> Result<Vec<u8>, Error> {
    let (file, meta) = open_own(path)?;
    let credentials = std::env::var_os("CREDENTIALS_DIRECTORY").map(PathBuf::from);
    check_mode(path, meta.permissions().mode(), credentials.as_deref())?;
    read_at_most(path, file, MAX_SECRET_BYTES)
        .ok_or_else(|| Error::TooLarge { path: path.into() })?
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
        // A FIFO is refused at once, not waited on.
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .args(["-m", "600"])
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert!(matches!(read_token(&fifo), Err(Error::NotAFile { .. })));
        // Another user's file, even private, is refused (the tests run as
        // root, which may chown).
        let theirs = file(dir.path(), "theirs", "abc\n", 0o600);
        std::os::unix::fs::chown(&theirs, Some(1000), None).unwrap();
        assert_eq!(
            read_token(&theirs).unwrap_err().to_string(),
            format!(
                "{}: a secret owned by uid 1000 is refused (this process runs as uid 0); chown it",
                theirs.display()
            )
        );
    }

    #[test]
    fn trust_anchors_are_refused_when_others_may_write_them() {
        let dir = tempfile::tempdir().unwrap();
        let ok = file(dir.path(), "ca.crt", "pem", 0o644);
        assert_eq!(read_trusted(&ok).unwrap(), b"pem");
        for mode in [0o664, 0o646, 0o666] {
            let p = file(dir.path(), "w.crt", "pem", mode);
            assert_eq!(
                read_trusted(&p).unwrap_err().to_string(),
                format!(
                    "{}: a trust anchor or certificate writable by group or others (mode {mode:03o}) is refused; chmod go-w it",
                    p.display()
                )
            );
        }
        let big = file(dir.path(), "big.crt", &"a".repeat(1 << 20 | 1), 0o644);
        assert!(matches!(
            read_trusted(&big),
            Err(Error::TooLargeCertificate { .. })
        ));
    }

    #[test]
    fn systemd_credentials_may_show_their_acl_as_group_bits() {
        let creds = Path::new("/run/credentials/farm-coordinator.service");
        let key = creds.join("coordinator.key");
        assert!(check_mode(&key, 0o440, Some(creds)).is_ok());
        assert!(check_mode(&key, 0o400, Some(creds)).is_ok());
        assert!(matches!(
            check_mode(&key, 0o444, Some(creds)),
            Err(Error::TooOpen { mode: 0o444, .. })
        ));
        // Elsewhere, group bits are refused as ever.
        let key = Path::new("/etc/farm/pki/coordinator.key");
        assert!(matches!(
            check_mode(key, 0o440, Some(creds)),
            Err(Error::TooOpen { mode: 0o440, .. })
        ));
        assert!(check_mode(key, 0o440, None).is_err());
    }
}
