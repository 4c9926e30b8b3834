//! Kernels a matrix names, and the architectures they run on.
//!
//! - `running`: whatever the agent runs, on the host;
//! - a release (`6.1.0-57-amd64`): an agent whose `uname -r` is exactly it;
//! - `debian:<version>`: Debian's package of that version, booted in a guest
//!   of the arch its flavour names (`6.1.0-57-cloud-amd64`: x86_64);
//! - `file:<absolute path>`: an image of an agent's operator, booted in a
//!   guest by the agents that list it.
//!
//! The flavour → arch table is here and nowhere else: the coordinator
//! places a `debian:` cell by it and the agent boots the guest by it.

use std::fmt;
use std::str::FromStr;

use crate::cgroup::{UnknownName, closed_word};
use crate::excerpt;

/// An architecture, as `uname -m` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    X86_64,
    S390x,
    Aarch64,
    Ppc64le,
}

impl Arch {
    pub const ALL: [Arch; 4] = [Arch::X86_64, Arch::S390x, Arch::Aarch64, Arch::Ppc64le];

    /// `uname -m`.
    pub fn uname(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::S390x => "s390x",
            Arch::Aarch64 => "aarch64",
            Arch::Ppc64le => "ppc64le",
        }
    }

    /// The arch of Debian's packages (`dpkg --print-architecture`).
    pub fn deb_arch(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::S390x => "s390x",
            Arch::Aarch64 => "arm64",
            Arch::Ppc64le => "ppc64el",
        }
    }

    /// The suffix of Debian's kernel flavours for this arch (`-amd64`,
    /// `-cloud-amd64` and `-rt-amd64` all end in it).
    pub fn debian_flavour(self) -> &'static str {
        match self {
            Arch::X86_64 => "-amd64",
            Arch::S390x => "-s390x",
            Arch::Aarch64 => "-arm64",
            Arch::Ppc64le => "-powerpc64le",
        }
    }

    /// The arch of a Debian kernel version, by its flavour's suffix.
    pub fn of_debian_version(version: &str) -> Option<Arch> {
        Arch::ALL
            .into_iter()
            .find(|a| version.ends_with(a.debian_flavour()))
    }
}

impl FromStr for Arch {
    type Err = UnknownName;

    /// From `uname -m`.
    fn from_str(s: &str) -> Result<Arch, UnknownName> {
        closed_word(
            s,
            "arch",
            &Arch::ALL,
            Arch::uname,
            &["x86_64", "s390x", "aarch64", "ppc64le"],
        )
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.uname())
    }
}

/// A Debian kernel package's version (`6.1.0-57-cloud-amd64`): letters,
/// digits and `. + ~ -`, starting with a letter or digit, with a known
/// flavour — so it can only ever be one argument of a package name and
/// one path component.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DebianKernel {
    version: String,
    arch: Arch,
}

impl DebianKernel {
    /// The longest version: Debian's are under 40 characters.
    pub const MAX_VERSION_LEN: usize = 100;

    pub fn version(&self) -> &str {
        &self.version
    }

    /// The arch its flavour names.
    pub fn arch(&self) -> Arch {
        self.arch
    }
}

/// Debian's version grammar as kernel package names use it (`6.1.0-57`,
/// `6.12.38+deb13`, then the flavour), checked character by character with
/// no regular expression: a digit first, then runs of ASCII letters and
/// digits joined by single `. + ~ -`, ending in a letter or digit. So
/// `6.+-amd64`, which apt would take for a pattern, is no version.
fn debian_version_grammar(v: &str) -> bool {
    let sep = |b: u8| b".+~-".contains(&b);
    let b = v.as_bytes();
    b.first().is_some_and(u8::is_ascii_digit)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || sep(c))
        && !b.windows(2).any(|w| sep(w[0]) && sep(w[1]))
}

/// The path of a `file:` kernel image: absolute, without `..`, of letters,
/// digits and `/ . _ + - ~`. The agent boots it only if it lies in one of
/// its kernel directories.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelPath(String);

impl KernelPath {
    pub fn path(&self) -> &str {
        &self.0
    }
}

/// A kernel of the matrix's kernel axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    Running,
    Release(String),
    Debian(DebianKernel),
    File(KernelPath),
}

/// Why a kernel name was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelError {
    Empty,
    TooLong,
    Whitespace,
    DebianChars { name: String },
    DebianLength { name: String },
    DebianFlavour { name: String },
    FileNotAbsolute { name: String },
    FileChars { name: String },
    Prefix { name: String },
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::Empty => f.write_str("a kernel name is not empty"),
            KernelError::TooLong => {
                write!(f, "a kernel name has at most {} bytes", Kernel::MAX_LEN)
            }
            KernelError::Whitespace => f.write_str("a kernel release has no whitespace"),
            KernelError::DebianChars { name } => write!(
                f,
                "`{name}`: a Debian kernel version starts with a digit and is letters and \
                 digits separated by single . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)"
            ),
            KernelError::DebianLength { name } => write!(
                f,
                "`{name}`: a Debian kernel version has at most {} characters",
                DebianKernel::MAX_VERSION_LEN
            ),
            KernelError::DebianFlavour { name } => {
                let known: Vec<&str> = Arch::ALL.iter().map(|a| &a.debian_flavour()[1..]).collect();
                write!(
                    f,
                    "`{name}`: the version must end with a Debian flavour naming its arch ({})",
                    known.join(", ")
                )
            }
            KernelError::FileNotAbsolute { name } => {
                write!(
                    f,
                    "`{name}`: a kernel image is an absolute path without `..`"
                )
            }
            KernelError::FileChars { name } => write!(
                f,
                "`{name}`: a kernel image's path is letters, digits and / . _ + - ~"
            ),
            KernelError::Prefix { name } => write!(
                f,
                "`{name}`: a kernel is `running`, a release, `debian:<version>` or `file:<path>`"
            ),
        }
    }
}

impl std::error::Error for KernelError {}

impl Kernel {
    /// The longest name: a `file:` path as long as the kernel's `PATH_MAX`.
    pub const MAX_LEN: usize = 4096 + "file:".len();
    pub const RUNNING: &'static str = "running";

    /// Whether the kernel boots in a guest (`debian:`, `file:`).
    pub fn is_guest(&self) -> bool {
        matches!(self, Kernel::Debian(_) | Kernel::File(_))
    }

    /// The arch the kernel must run on, where its name says it.
    pub fn arch(&self) -> Option<Arch> {
        match self {
            Kernel::Debian(d) => Some(d.arch),
            _ => None,
        }
    }
}

impl FromStr for Kernel {
    type Err = KernelError;

    fn from_str(name: &str) -> Result<Kernel, KernelError> {
        if name.is_empty() {
            return Err(KernelError::Empty);
        }
        if name.len() > Kernel::MAX_LEN {
            return Err(KernelError::TooLong);
        }
        if name.chars().any(char::is_whitespace) {
            return Err(KernelError::Whitespace);
        }
        let quoted = || excerpt(name);
        if name == Kernel::RUNNING {
            Ok(Kernel::Running)
        } else if let Some(v) = name.strip_prefix("debian:") {
            if !debian_version_grammar(v) {
                return Err(KernelError::DebianChars { name: quoted() });
            }
            if v.len() > DebianKernel::MAX_VERSION_LEN {
                return Err(KernelError::DebianLength { name: quoted() });
            }
            let arch = Arch::of_debian_version(v)
                .ok_or_else(|| KernelError::DebianFlavour { name: quoted() })?;
            Ok(Kernel::Debian(DebianKernel {
                version: v.to_owned(),
                arch,
            }))
        } else if let Some(p) = name.strip_prefix("file:") {
            if !p.starts_with('/') || p.split('/').any(|part| part == "..") {
                return Err(KernelError::FileNotAbsolute { name: quoted() });
            }
            let ok_chars = p
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"/._+-~".contains(&b));
            if !ok_chars {
                return Err(KernelError::FileChars { name: quoted() });
            }
            Ok(Kernel::File(KernelPath(p.to_owned())))
        } else if name.contains(':') {
            Err(KernelError::Prefix { name: quoted() })
        } else {
            Ok(Kernel::Release(name.to_owned()))
        }
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kernel::Running => f.write_str(Kernel::RUNNING),
            Kernel::Release(r) => f.write_str(r),
            Kernel::Debian(d) => write!(f, "debian:{}", d.version),
            Kernel::File(p) => write!(f, "file:{}", p.0),
        }
    }
}

#[cfg(test)]
mod tests;
