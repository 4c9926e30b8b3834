//! [`CommitId`]: a commit as git prints a resolved ref, the one form in
//! which a commit crosses the farm (an agent's listing of a range, a
//! build's result, a bisection's kernels).

use std::fmt;
use std::str::FromStr;

/// A commit id: 40 lowercase hex digits (SHA-1 object names, as `git
/// rev-parse` prints them).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CommitId(String);

impl CommitId {
    /// Hex digits in a full commit id.
    pub const LEN: usize = 40;

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first 12 digits, as kernel engineers quote a commit.
    pub fn short(&self) -> &str {
        &self.0[..12]
    }
}

/// A string that is not a full commit id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotACommit {
    pub excerpt: String,
}

impl fmt::Display for NotACommit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a commit id ({} lowercase hex digits)",
            self.excerpt,
            CommitId::LEN
        )
    }
}

impl std::error::Error for NotACommit {}

impl FromStr for CommitId {
    type Err = NotACommit;

    fn from_str(s: &str) -> Result<CommitId, NotACommit> {
        let ok = s.len() == CommitId::LEN
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if ok {
            Ok(CommitId(s.to_owned()))
        } else {
            Err(NotACommit {
                excerpt: crate::excerpt(s),
            })
        }
    }
}

impl fmt::Display for CommitId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_forty_lowercase_hex_digits_are_a_commit() {
        let c: CommitId = "0123456789abcdef0123456789abcdef01234567".parse().unwrap();
        assert_eq!(c.short(), "0123456789ab");
        assert_eq!(c.to_string().parse::<CommitId>(), Ok(c));
        for bad in [
            "",
            "0123456789abcdef0123456789abcdef0123456",
            "0123456789abcdef0123456789abcdef012345678",
            "0123456789ABCDEF0123456789abcdef01234567",
            "g123456789abcdef0123456789abcdef01234567",
            "v6.1",
        ] {
            assert!(bad.parse::<CommitId>().is_err(), "{bad}");
        }
        assert_eq!(
            "HEAD~1".parse::<CommitId>().unwrap_err().to_string(),
            "`HEAD~1` is not a commit id (40 lowercase hex digits)"
        );
    }
}
