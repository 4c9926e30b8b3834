//! Kernels a matrix names, and the architectures they run on.
//!
//! - `running`: whatever the agent runs, on the host;
//! - a release (`6.1.0-57-amd64`): an agent whose `uname -r` is exactly it;
//! - `debian:<version>`: Debian's package of that version, booted in a guest
//!   of the arch its flavour names (`6.1.0-57-cloud-amd64`: x86_64);
//! - `file:<absolute path>`: an image of an agent's operator, booted in a
//!   guest by the agents that list it;
//! - `git:<repo>@<ref>`: built from a commit, tag or branch of a repository
//!   an agent's operator named `<repo>` (`--kernel-repo`), and booted in a
//!   guest; `git:<repo>@<ref>#<build>` is built as the matrix's
//!   `[builds.<build>]` says (a patch on top, another configuration).
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

/// A kernel built from a tree: `git:<repo>@<ref>`. The repository is a
/// name an agent's operator gave a local clone, never a path or a URL; the
/// ref is a commit id, a tag or a branch, in a grammar narrower than git's
/// (`git check-ref-format`), so it is one argument that git can never read
/// as an option, a range or a revision expression.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GitKernel {
    repo: String,
    rev: String,
    /// `#<name>`: built as the matrix's `[builds.<name>]` says, rather than
    /// as its `[build]` (the same commit patched, or configured otherwise,
    /// is another kernel of the axis).
    variant: Option<String>,
}

impl GitKernel {
    /// The longest repository name.
    pub const MAX_REPO_LEN: usize = 64;
    /// The longest ref: git's own limit is the file system's, and refs in
    /// kernel trees are under 100 characters.
    pub const MAX_REF_LEN: usize = 200;
    /// The longest build name after `#`.
    pub const MAX_VARIANT_LEN: usize = 32;

    pub fn repo(&self) -> &str {
        &self.repo
    }

    pub fn rev(&self) -> &str {
        &self.rev
    }

    /// The `[builds.<name>]` this kernel is built by, if not `[build]`.
    pub fn variant(&self) -> Option<&str> {
        self.variant.as_deref()
    }

    /// Whether `name` is a build's name: lowercase letters, digits and
    /// `_ -`, starting with a letter or digit, at most
    /// [`GitKernel::MAX_VARIANT_LEN`].
    pub fn valid_variant(name: &str) -> bool {
        let b = name.as_bytes();
        !b.is_empty()
            && b.len() <= GitKernel::MAX_VARIANT_LEN
            && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
            && b.iter()
                .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || b"_-".contains(&c))
    }

    /// Whether `name` is a repository name: letters, digits and `_ -`,
    /// starting with a letter or digit. The agent's `--kernel-repo` names
    /// are checked by the same rule.
    pub fn valid_repo(name: &str) -> bool {
        let b = name.as_bytes();
        !b.is_empty()
            && b.len() <= GitKernel::MAX_REPO_LEN
            && b[0].is_ascii_alphanumeric()
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || b"_-".contains(&c))
    }

    /// Whether `rev` is a ref of the grammar: components of letters,
    /// digits and `. _ - +` joined by single `/`, none starting with `.` or
    /// `-` nor ending in `.lock` or `.`, and no `..` anywhere.
    pub fn valid_rev(rev: &str) -> bool {
        !rev.is_empty()
            && rev.len() <= GitKernel::MAX_REF_LEN
            && !rev.contains("..")
            && rev.split('/').all(|c| {
                !c.is_empty()
                    && !c.starts_with(['.', '-'])
                    && !c.ends_with(".lock")
                    && !c.ends_with('.')
                    && c.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
            })
    }
}

impl fmt::Display for GitKernel {
    /// `git:<repo>@<ref>`, then `#<build>` when it has one.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "git:{}@{}", self.repo, self.rev)?;
        match &self.variant {
            Some(v) => write!(f, "#{v}"),
            None => Ok(()),
        }
    }
}

/// A kernel of the matrix's kernel axis.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    Running,
    Release(String),
    Debian(DebianKernel),
    File(KernelPath),
    Git(GitKernel),
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
    GitForm { name: String },
    GitRepo { name: String },
    GitRef { name: String },
    GitVariant { name: String },
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
                "`{name}`: a kernel is `running`, a release, `debian:<version>`, `file:<path>` \
                 or `git:<repo>@<ref>`"
            ),
            KernelError::GitForm { name } => write!(
                f,
                "`{name}`: a kernel from a tree is `git:<repo>@<ref>` (e.g. git:linux@v6.1)"
            ),
            KernelError::GitRepo { name } => write!(
                f,
                "`{name}`: a repository is a name of at most {} letters, digits, _ and -, \
                 starting with a letter or digit (one an agent's --kernel-repo gives)",
                GitKernel::MAX_REPO_LEN
            ),
            KernelError::GitVariant { name } => write!(
                f,
                "`{name}`: after `#` comes the name of one of the matrix's [builds.<name>]: at \
                 most {} lowercase letters, digits, _ and -",
                GitKernel::MAX_VARIANT_LEN
            ),
            KernelError::GitRef { name } => write!(
                f,
                "`{name}`: a ref is a commit id, tag or branch of at most {} characters: \
                 letters, digits and . _ - + in parts joined by single /, no part starting \
                 with . or - or ending in . or .lock, and no ..",
                GitKernel::MAX_REF_LEN
            ),
        }
    }
}

impl std::error::Error for KernelError {}

impl Kernel {
    /// The longest name: a `file:` path as long as the kernel's `PATH_MAX`.
    pub const MAX_LEN: usize = 4096 + "file:".len();
    pub const RUNNING: &'static str = "running";

    /// Whether the kernel boots in a guest (`debian:`, `file:`, `git:`).
    pub fn is_guest(&self) -> bool {
        matches!(self, Kernel::Debian(_) | Kernel::File(_) | Kernel::Git(_))
    }

    /// What a history of this kernel's runs is apart from others' by: the
    /// guest's arch, since an s390x figure never continues an x86_64 trend
    /// (`git:` kernels are built for x86_64 guests); a `file:` image's is
    /// its own, since only its agent knows its arch; host kernels' is empty.
    pub fn history_class(&self) -> &'static str {
        match self {
            Kernel::Debian(d) => d.arch.uname(),
            Kernel::Git(_) => Arch::X86_64.uname(),
            Kernel::File(_) => "file",
            Kernel::Running | Kernel::Release(_) => "",
        }
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
        } else if let Some(g) = name.strip_prefix("git:") {
            let (g, variant) = match g.split_once('#') {
                Some((g, v)) if GitKernel::valid_variant(v) => (g, Some(v.to_owned())),
                Some(_) => return Err(KernelError::GitVariant { name: quoted() }),
                None => (g, None),
            };
            let (repo, rev) = g
                .split_once('@')
                .ok_or_else(|| KernelError::GitForm { name: quoted() })?;
            if !GitKernel::valid_repo(repo) {
                return Err(KernelError::GitRepo { name: quoted() });
            }
            if !GitKernel::valid_rev(rev) {
                return Err(KernelError::GitRef { name: quoted() });
            }
            Ok(Kernel::Git(GitKernel {
                repo: repo.to_owned(),
                rev: rev.to_owned(),
                variant,
            }))
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
            Kernel::Git(g) => write!(f, "{g}"),
        }
    }
}

#[cfg(test)]
mod tests;
