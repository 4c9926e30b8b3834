//! Words of a guest kernel's command line a state may add, from a grammar
//! of allowed keys and typed values. Nothing else reaches QEMU's `-append`:
//! the farm's own words (`console=`, `panic=`) cannot be overridden, and no
//! value can carry a space or a quote into the line.

use std::fmt;
use std::str::FromStr;

use super::KnobError;
use crate::cgroup::OutOfRange;
use crate::cpuset::CpuSet;
use crate::excerpt;

/// Words with a CPU list value.
const CPU_LISTS: [&str; 3] = ["nohz_full", "rcu_nocbs", "irqaffinity"];
/// Words with one of a few values.
const CHOICES: [(&str, &[&str]); 6] = [
    ("nohz", &["on", "off"]),
    ("numa_balancing", &["enable", "disable"]),
    ("preempt", &["none", "voluntary", "full"]),
    ("mitigations", &["off", "auto"]),
    ("idle", &["poll", "halt", "nomwait"]),
    ("skew_tick", &["0", "1"]),
];
/// Words without a value.
const FLAGS: [&str; 5] = [
    "nosmt",
    "sched_verbose",
    "threadirqs",
    "noautogroup",
    "nosoftlockup",
];
/// `isolcpus=`'s flags before its CPU list.
const ISOL_FLAGS: [&str; 3] = ["nohz", "domain", "managed_irq"];
/// The deepest `relax_domain_level`.
const MAX_RELAX_LEVEL: u64 = 5;

const KNOWN: &str = "isolcpus=[nohz,domain,managed_irq,]CPUS, nohz_full=CPUS, rcu_nocbs=CPUS, \
irqaffinity=CPUS, nohz=on|off, numa_balancing=enable|disable, preempt=none|voluntary|full, \
mitigations=off|auto, idle=poll|halt|nomwait, skew_tick=0|1, relax_domain_level=0..5, nosmt, \
sched_verbose, threadirqs, noautogroup, nosoftlockup";

/// One allowed command-line word.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CmdlineWord {
    Isolcpus {
        flags: Vec<&'static str>,
        cpus: CpuSet,
    },
    CpuList {
        key: &'static str,
        cpus: CpuSet,
    },
    Choice {
        key: &'static str,
        value: &'static str,
    },
    RelaxDomainLevel(u8),
    Flag(&'static str),
}

impl CmdlineWord {
    /// The word's key (`isolcpus`, `nosmt`): a line holds each key once.
    pub fn key(&self) -> &'static str {
        match self {
            CmdlineWord::Isolcpus { .. } => "isolcpus",
            CmdlineWord::CpuList { key, .. } | CmdlineWord::Choice { key, .. } => key,
            CmdlineWord::RelaxDomainLevel(_) => "relax_domain_level",
            CmdlineWord::Flag(f) => f,
        }
    }
}

fn cpus(what: &str, v: &str) -> Result<CpuSet, KnobError> {
    v.parse::<CpuSet>().map_err(|e| KnobError::Form {
        what: "cmdline word",
        value: excerpt(what),
        expected: if e.is_syntax() {
            "a CPU list like `1`, `0-3` or `0,2-3` after the `=`"
        } else {
            "a CPU list within the farm's limits after the `=`"
        },
    })
}

impl FromStr for CmdlineWord {
    type Err = KnobError;

    fn from_str(s: &str) -> Result<CmdlineWord, KnobError> {
        let unknown = || KnobError::Form {
            what: "cmdline word",
            value: excerpt(s),
            expected: KNOWN,
        };
        let Some((key, value)) = s.split_once('=') else {
            return FLAGS
                .iter()
                .find(|f| **f == s)
                .map(|f| CmdlineWord::Flag(f))
                .ok_or_else(unknown);
        };
        if key == "isolcpus" {
            let mut flags = Vec::new();
            let mut rest = value;
            while let Some((head, tail)) = rest.split_once(',') {
                match ISOL_FLAGS.iter().find(|f| **f == head) {
                    Some(f) if !flags.contains(f) => flags.push(*f),
                    _ => break,
                }
                rest = tail;
            }
            return Ok(CmdlineWord::Isolcpus {
                flags,
                cpus: cpus(s, rest)?,
            });
        }
        if let Some(k) = CPU_LISTS.iter().find(|k| **k == key) {
            return Ok(CmdlineWord::CpuList {
                key: k,
                cpus: cpus(s, value)?,
            });
        }
        if let Some((k, values)) = CHOICES.iter().find(|(k, _)| *k == key) {
            return values
                .iter()
                .find(|v| **v == value)
                .map(|v| CmdlineWord::Choice { key: k, value: v })
                .ok_or_else(unknown);
        }
        if key == "relax_domain_level" {
            let n: u64 = value.parse().map_err(|_| unknown())?;
            if n > MAX_RELAX_LEVEL {
                return Err(KnobError::OutOfRange(OutOfRange {
                    what: "relax_domain_level",
                    value: n.to_string(),
                    min: 0,
                    max: MAX_RELAX_LEVEL,
                }));
            }
            return Ok(CmdlineWord::RelaxDomainLevel(n as u8));
        }
        Err(unknown())
    }
}

impl fmt::Display for CmdlineWord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CmdlineWord::Isolcpus { flags, cpus } => {
                f.write_str("isolcpus=")?;
                for fl in flags {
                    write!(f, "{fl},")?;
                }
                write!(f, "{cpus}")
            }
            CmdlineWord::CpuList { key, cpus } => write!(f, "{key}={cpus}"),
            CmdlineWord::Choice { key, value } => write!(f, "{key}={value}"),
            CmdlineWord::RelaxDomainLevel(n) => write!(f, "relax_domain_level={n}"),
            CmdlineWord::Flag(w) => f.write_str(w),
        }
    }
}

/// The words a state adds to a guest kernel's command line, each key once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct KernelCmdline(Vec<CmdlineWord>);

impl KernelCmdline {
    pub const MAX: usize = 16;

    pub fn parse<S: AsRef<str>>(words: &[S]) -> Result<KernelCmdline, KnobError> {
        if words.len() > Self::MAX {
            return Err(KnobError::TooMany {
                what: "cmdline word",
                max: Self::MAX,
            });
        }
        let mut out: Vec<CmdlineWord> = Vec::with_capacity(words.len());
        for w in words {
            let word: CmdlineWord = w.as_ref().parse()?;
            if out.iter().any(|o| o.key() == word.key()) {
                return Err(KnobError::Twice {
                    what: "cmdline word",
                    name: word.key().into(),
                });
            }
            out.push(word);
        }
        Ok(KernelCmdline(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &CmdlineWord> {
        self.0.iter()
    }

    /// The canonical words, in the order given.
    pub fn words(&self) -> Vec<String> {
        self.0.iter().map(ToString::to_string).collect()
    }
}
