//! How a `git:` kernel is built: a matrix's `[build]` table.
//!
//! - `config`: the base configuration, `tinyconfig` (the default: the
//!   smallest kernel that boots the farm's guests), `defconfig` (the
//!   arch's), or the name of a complete `.config` the agent's operator keeps
//!   in its `--build-configs` directory (a distribution's, a fleet's);
//! - `fragments`: `CONFIG_X=y|n|m|number|0xhex|"string"` lines merged on top
//!   of the base, then checked in the built configuration (an option that
//!   Kconfig drops, for a missing dependency or a typo, fails the build,
//!   naming it);
//! - `patches`: names of patches in the operator's `--build-patches`
//!   directory, applied in order to the tree (seed 001's authors offer to
//!   test any proposed patch).
//!
//! A matrix names files and never gives their contents or a path: the
//! names' grammar leaves them one path component. What the guest runner
//! needs of every kernel ([`RUNNER_NEEDS`]) is merged last, and a fragment
//! that contradicts it is refused here, at submission, rather than by a
//! failed boot.

use std::fmt;
use std::str::FromStr;

use crate::excerpt;

/// What the guest runner needs of a kernel, merged into every build's
/// configuration and checked in the result: a serial console and a second
/// serial port for the report, an initramfs, /proc, /sys and devtmpfs, NUMA
/// with ACPI's SRAT (QEMU's nodes), CPU hotplug, the scheduler's debug and
/// statistics files, cgroups with the CPU controller and cpusets,
/// autogroup, perf events, sockets (workloads use them), and PCI with ACPI
/// so that the guest can power off (without it `poweroff -f` only halts).
pub const RUNNER_NEEDS: &[(&str, &str)] = &[
    ("CONFIG_64BIT", "y"),
    ("CONFIG_SMP", "y"),
    ("CONFIG_NUMA", "y"),
    ("CONFIG_ACPI", "y"),
    ("CONFIG_ACPI_NUMA", "y"),
    ("CONFIG_PCI", "y"),
    ("CONFIG_HOTPLUG_CPU", "y"),
    ("CONFIG_TTY", "y"),
    ("CONFIG_SERIAL_8250", "y"),
    ("CONFIG_SERIAL_8250_CONSOLE", "y"),
    ("CONFIG_PRINTK", "y"),
    ("CONFIG_BLK_DEV_INITRD", "y"),
    ("CONFIG_RD_GZIP", "y"),
    ("CONFIG_BINFMT_ELF", "y"),
    ("CONFIG_BINFMT_SCRIPT", "y"),
    ("CONFIG_PROC_FS", "y"),
    ("CONFIG_SYSFS", "y"),
    ("CONFIG_DEVTMPFS", "y"),
    ("CONFIG_DEBUG_FS", "y"),
    ("CONFIG_SCHED_DEBUG", "y"),
    ("CONFIG_SCHEDSTATS", "y"),
    ("CONFIG_CGROUPS", "y"),
    ("CONFIG_CGROUP_SCHED", "y"),
    ("CONFIG_FAIR_GROUP_SCHED", "y"),
    ("CONFIG_CPUSETS", "y"),
    ("CONFIG_SCHED_AUTOGROUP", "y"),
    ("CONFIG_PERF_EVENTS", "y"),
    ("CONFIG_FUTEX", "y"),
    ("CONFIG_EPOLL", "y"),
    ("CONFIG_SHMEM", "y"),
    ("CONFIG_NET", "y"),
    ("CONFIG_UNIX", "y"),
    ("CONFIG_INET", "y"),
];

/// The name of a file in an operator's directory (a base configuration or
/// a patch): letters, digits and `. _ + -`, starting with a letter or
/// digit, so it is one path component and never `..` or hidden.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileName(String);

impl FileName {
    pub const MAX_LEN: usize = 100;

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for FileName {
    type Err = BuildError;

    fn from_str(s: &str) -> Result<FileName, BuildError> {
        let b = s.as_bytes();
        let ok = !b.is_empty()
            && b.len() <= FileName::MAX_LEN
            && b[0].is_ascii_alphanumeric()
            && b.iter()
                .all(|&c| c.is_ascii_alphanumeric() || b"._+-".contains(&c));
        if ok {
            Ok(FileName(s.to_owned()))
        } else {
            Err(BuildError::FileName(excerpt(s)))
        }
    }
}

impl fmt::Display for FileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The configuration a build starts from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum BaseConfig {
    #[default]
    Tinyconfig,
    Defconfig,
    /// A complete `.config` in the operator's `--build-configs` directory.
    File(FileName),
}

impl BaseConfig {
    pub const TINYCONFIG: &'static str = "tinyconfig";
    pub const DEFCONFIG: &'static str = "defconfig";
}

impl FromStr for BaseConfig {
    type Err = BuildError;

    /// The wire's empty string is the default, `tinyconfig`.
    fn from_str(s: &str) -> Result<BaseConfig, BuildError> {
        match s {
            "" | BaseConfig::TINYCONFIG => Ok(BaseConfig::Tinyconfig),
            BaseConfig::DEFCONFIG => Ok(BaseConfig::Defconfig),
            _ => s
                .parse()
                .map(BaseConfig::File)
                .map_err(|_| BuildError::Base(excerpt(s))),
        }
    }
}

impl fmt::Display for BaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaseConfig::Tinyconfig => f.write_str(BaseConfig::TINYCONFIG),
            BaseConfig::Defconfig => f.write_str(BaseConfig::DEFCONFIG),
            BaseConfig::File(n) => write!(f, "{n}"),
        }
    }
}

/// One Kconfig option and its value, as a `.config` line says it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConfigOption {
    name: String,
    value: ConfigValue,
}

/// A Kconfig value: a tristate, a number, or a string of printable ASCII
/// without `"` or `\` (so it needs no escaping in `.config`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ConfigValue {
    Yes,
    No,
    Module,
    Int(i64),
    /// Lowercase digits after `0x`, as Kconfig writes them.
    Hex(String),
    Str(String),
}

impl ConfigOption {
    /// The longest option name (the kernel's are under 60 characters).
    pub const MAX_NAME_LEN: usize = 100;
    /// The longest string value.
    pub const MAX_STRING_LEN: usize = 256;

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn value(&self) -> &ConfigValue {
        &self.value
    }

    /// The option's line in a `.config`: `CONFIG_X=y`, or `# CONFIG_X is
    /// not set` for `n`, as Kconfig writes them.
    pub fn config_line(&self) -> String {
        match &self.value {
            ConfigValue::No => format!("# {} is not set", self.name),
            _ => self.to_string(),
        }
    }

    /// Whether the `.config` text `config` holds this option as set: `n` is
    /// held when no line gives the option a value.
    pub fn held_by(&self, config: &str) -> bool {
        match &self.value {
            ConfigValue::No => {
                let set = format!("{}=", self.name);
                !config.lines().any(|l| l.starts_with(&set))
            }
            _ => {
                let line = self.to_string();
                config.lines().any(|l| l == line)
            }
        }
    }
}

impl FromStr for ConfigOption {
    type Err = BuildError;

    fn from_str(s: &str) -> Result<ConfigOption, BuildError> {
        let bad = |why: &'static str| BuildError::Fragment {
            option: excerpt(s),
            why,
        };
        let (name, value) = s
            .split_once('=')
            .ok_or(bad("a fragment is CONFIG_NAME=VALUE"))?;
        let ok_name = name.len() <= ConfigOption::MAX_NAME_LEN
            && name.strip_prefix("CONFIG_").is_some_and(|n| {
                !n.is_empty()
                    && n.bytes()
                        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
            });
        if !ok_name {
            return Err(bad(
                "an option's name is CONFIG_ and capitals, digits and _, at most 100 characters",
            ));
        }
        let value = match value {
            "y" => ConfigValue::Yes,
            "n" => ConfigValue::No,
            "m" => ConfigValue::Module,
            v if v.starts_with('"') => {
                let inner = v
                    .strip_prefix('"')
                    .and_then(|v| v.strip_suffix('"'))
                    .filter(|i| {
                        i.len() <= ConfigOption::MAX_STRING_LEN
                            && i.bytes()
                                .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
                    })
                    .ok_or(bad(
                        "a string value is quoted, at most 256 printable ASCII characters, \
                         without \" or \\",
                    ))?;
                ConfigValue::Str(inner.to_owned())
            }
            v if v.starts_with("0x") => {
                let digits = &v[2..];
                if digits.is_empty()
                    || digits.len() > 16
                    || !digits.bytes().all(|b| b.is_ascii_hexdigit())
                {
                    return Err(bad("a hex value is 0x and 1 to 16 hex digits"));
                }
                ConfigValue::Hex(digits.to_ascii_lowercase())
            }
            v => ConfigValue::Int(v.parse().map_err(|_| {
                bad("a value is y, n, m, a decimal or 0x hex number, or a quoted string")
            })?),
        };
        Ok(ConfigOption {
            name: name.to_owned(),
            value,
        })
    }
}

impl fmt::Display for ConfigOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.value {
            ConfigValue::Yes => write!(f, "{name}=y"),
            ConfigValue::No => write!(f, "{name}=n"),
            ConfigValue::Module => write!(f, "{name}=m"),
            ConfigValue::Int(n) => write!(f, "{name}={n}"),
            ConfigValue::Hex(h) => write!(f, "{name}=0x{h}"),
            ConfigValue::Str(s) => write!(f, "{name}=\"{s}\""),
        }
    }
}

/// A validated `[build]`: the default is `tinyconfig` with nothing added.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct KernelBuild {
    pub base: BaseConfig,
    pub fragments: Vec<ConfigOption>,
    pub patches: Vec<FileName>,
}

/// Where in a `[build]` a value was refused: a field and, for a list, the
/// item's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildFieldError {
    /// `config`, `fragments[3]`, `patches`, …
    pub key: String,
    pub error: BuildError,
}

impl KernelBuild {
    /// The most fragment options one build may set.
    pub const MAX_FRAGMENTS: usize = 256;
    /// The most patches one build may apply.
    pub const MAX_PATCHES: usize = 32;

    /// A build from its fields as a matrix or the wire gives them.
    pub fn parse(
        config: &str,
        fragments: &[impl AsRef<str>],
        patches: &[impl AsRef<str>],
    ) -> Result<KernelBuild, BuildFieldError> {
        let at = |key: String| move |error| BuildFieldError { key, error };
        let base = config.parse().map_err(at("config".into()))?;
        if fragments.len() > KernelBuild::MAX_FRAGMENTS {
            return Err(at("fragments".into())(BuildError::TooMany {
                what: "fragment options",
                max: KernelBuild::MAX_FRAGMENTS,
            }));
        }
        if patches.len() > KernelBuild::MAX_PATCHES {
            return Err(at("patches".into())(BuildError::TooMany {
                what: "patches",
                max: KernelBuild::MAX_PATCHES,
            }));
        }
        let mut opts: Vec<ConfigOption> = Vec::with_capacity(fragments.len());
        for (i, f) in fragments.iter().enumerate() {
            let key = format!("fragments[{i}]");
            let o: ConfigOption = f.as_ref().parse().map_err(at(key.clone()))?;
            if let Some(j) = opts.iter().position(|p| p.name == o.name) {
                return Err(at(key)(BuildError::Twice {
                    name: o.name,
                    first: format!("fragments[{j}]"),
                }));
            }
            if let Some((_, need)) = RUNNER_NEEDS
                .iter()
                .find(|(n, v)| *n == o.name && o.value_text() != *v)
            {
                return Err(at(key)(BuildError::AgainstRunner {
                    option: o.to_string(),
                    need: format!("{}={need}", o.name),
                }));
            }
            opts.push(o);
        }
        let mut names: Vec<FileName> = Vec::with_capacity(patches.len());
        for (i, p) in patches.iter().enumerate() {
            let key = format!("patches[{i}]");
            let n: FileName = p.as_ref().parse().map_err(at(key.clone()))?;
            if let Some(j) = names.iter().position(|q| *q == n) {
                return Err(at(key)(BuildError::PatchTwice {
                    name: n.0,
                    first: format!("patches[{j}]"),
                }));
            }
            names.push(n);
        }
        Ok(KernelBuild {
            base,
            fragments: opts,
            patches: names,
        })
    }

    pub fn is_default(&self) -> bool {
        *self == KernelBuild::default()
    }

    /// The fragment a build merges over its base: the matrix's options,
    /// then the runner's needs (which they cannot contradict), as `.config`
    /// lines.
    pub fn merged_fragment(&self) -> String {
        let mut out = String::new();
        for o in &self.fragments {
            out.push_str(&o.config_line());
            out.push('\n');
        }
        for (k, v) in RUNNER_NEEDS {
            out.push_str(&format!("{k}={v}\n"));
        }
        out
    }

    /// Every option the built configuration must hold: the matrix's and
    /// the runner's.
    pub fn required(&self) -> Vec<ConfigOption> {
        let mut out = self.fragments.clone();
        for (k, v) in RUNNER_NEEDS {
            if !out.iter().any(|o| o.name == *k) {
                out.push(format!("{k}={v}").parse().expect("RUNNER_NEEDS parse"));
            }
        }
        out
    }
}

/// How an agent's catalogue names a build it keeps, and how placement
/// looks for one: `git:linux@v6.1 tinyconfig`, the kernel as the matrix
/// names it and the build as [`KernelBuild`]'s `Display` says it.
pub fn catalogue_name(kernel: &crate::GitKernel, build: &KernelBuild) -> String {
    format!("git:{}@{} {build}", kernel.repo(), kernel.rev())
}

impl ConfigOption {
    /// The value as it follows `=` (for comparison with [`RUNNER_NEEDS`]).
    fn value_text(&self) -> String {
        let s = self.to_string();
        s[self.name.len() + 1..].to_owned()
    }
}

impl fmt::Display for KernelBuild {
    /// `tinyconfig`, `defconfig +CONFIG_HZ_1000=y +fix.patch`: what a
    /// report says of a build.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.base)?;
        for o in &self.fragments {
            write!(f, " {o}")?;
        }
        for p in &self.patches {
            write!(f, " +{p}")?;
        }
        Ok(())
    }
}

/// Why a `[build]` value was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    FileName(String),
    Base(String),
    Fragment { option: String, why: &'static str },
    TooMany { what: &'static str, max: usize },
    Twice { name: String, first: String },
    PatchTwice { name: String, first: String },
    AgainstRunner { option: String, need: String },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::FileName(n) => write!(
                f,
                "`{n}`: a file name is letters, digits and . _ + -, starting with a letter or \
                 digit, at most {} characters",
                FileName::MAX_LEN
            ),
            BuildError::Base(n) => write!(
                f,
                "`{n}`: a base configuration is `tinyconfig`, `defconfig` or the name of a file \
                 in an agent's --build-configs directory (letters, digits and . _ + -)"
            ),
            BuildError::Fragment { option, why } => write!(f, "`{option}`: {why}"),
            BuildError::TooMany { what, max } => write!(f, "at most {max} {what}"),
            BuildError::Twice { name, first } => write!(f, "{name} is set twice (also {first})"),
            BuildError::PatchTwice { name, first } => {
                write!(f, "patch `{name}` is applied twice (also {first})")
            }
            BuildError::AgainstRunner { option, need } => {
                write!(f, "`{option}`: the guest runner needs {need}")
            }
        }
    }
}

impl std::error::Error for BuildError {}

impl fmt::Display for BuildFieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.error)
    }
}

#[cfg(test)]
mod tests;
