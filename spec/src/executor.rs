//! Executors: where a run's workload runs — on the agent's own kernel
//! (`host`), or in a QEMU guest booting the kernel under test, emulated
//! (`tcg`) or hardware-virtualised (`kvm`).

use std::fmt;
use std::str::FromStr;

use crate::cgroup::{UnknownName, closed_word};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Executor {
    Host,
    Tcg,
    Kvm,
}

impl Executor {
    pub const ALL: [Executor; 3] = [Executor::Host, Executor::Tcg, Executor::Kvm];

    pub fn as_str(self) -> &'static str {
        match self {
            Executor::Host => "host",
            Executor::Tcg => "tcg",
            Executor::Kvm => "kvm",
        }
    }

    /// Whether the executor boots a guest.
    pub fn is_guest(self) -> bool {
        self != Executor::Host
    }
}

impl FromStr for Executor {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Executor, UnknownName> {
        closed_word(
            s,
            "executor",
            &Executor::ALL,
            Executor::as_str,
            &["host", "tcg", "kvm"],
        )
    }
}

impl fmt::Display for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for e in Executor::ALL {
            assert_eq!(e.to_string().parse::<Executor>(), Ok(e));
        }
        assert_eq!(
            "qemu".parse::<Executor>().unwrap_err().to_string(),
            "unknown executor `qemu` (known: host, tcg, kvm)"
        );
        assert!(!Executor::Host.is_guest() && Executor::Tcg.is_guest());
    }
}
