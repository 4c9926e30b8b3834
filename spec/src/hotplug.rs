//! CPU hotplug plans: `cycle:CPUS` (offline, then online again before the
//! run — seed 000's "disable and re-enable one core") and `offline:CPUS`
//! (kept offline during the run).

use std::fmt;
use std::str::FromStr;

use crate::cpuset::{CpuSet, CpuSetError};
use crate::excerpt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HotplugMode {
    Cycle,
    Offline,
}

impl HotplugMode {
    pub const ALL: [HotplugMode; 2] = [HotplugMode::Cycle, HotplugMode::Offline];

    pub fn as_str(self) -> &'static str {
        match self {
            HotplugMode::Cycle => "cycle",
            HotplugMode::Offline => "offline",
        }
    }
}

/// What a state does to CPUs: a mode and the CPUs it acts on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HotplugPlan {
    pub mode: HotplugMode,
    pub cpus: CpuSet,
}

impl HotplugPlan {
    /// The CPUs that stay offline while the workload runs (none for a cycle).
    pub fn offline_during_run(&self) -> Option<&CpuSet> {
        (self.mode == HotplugMode::Offline).then_some(&self.cpus)
    }
}

/// Why a hotplug plan was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HotplugError {
    /// No `MODE:` prefix.
    Form {
        spec: String,
    },
    UnknownMode {
        mode: String,
    },
    Cpus(CpuSetError),
}

/// What a hotplug plan looks like, for messages.
pub const FORM: &str =
    "expected `cycle:CPUS` or `offline:CPUS` with CPUS like `1`, `1-3` or `1,3-5`";

impl fmt::Display for HotplugError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HotplugError::Form { spec } => write!(f, "`{spec}`: {FORM}"),
            HotplugError::UnknownMode { mode } => {
                write!(f, "unknown hotplug mode `{mode}` (known: cycle, offline)")
            }
            HotplugError::Cpus(e) if e.is_syntax() => write!(f, "{e}: {FORM}"),
            HotplugError::Cpus(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for HotplugError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HotplugError::Cpus(e) => Some(e),
            _ => None,
        }
    }
}

impl FromStr for HotplugPlan {
    type Err = HotplugError;

    fn from_str(spec: &str) -> Result<HotplugPlan, HotplugError> {
        let Some((mode, cpus)) = spec.split_once(':') else {
            return Err(HotplugError::Form {
                spec: excerpt(spec),
            });
        };
        let mode = HotplugMode::ALL
            .into_iter()
            .find(|m| m.as_str() == mode)
            .ok_or_else(|| HotplugError::UnknownMode {
                mode: excerpt(mode),
            })?;
        let cpus = cpus.parse().map_err(HotplugError::Cpus)?;
        Ok(HotplugPlan { mode, cpus })
    }
}

impl fmt::Display for HotplugPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.mode.as_str(), self.cpus)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let p: HotplugPlan = "offline:3,1-2".parse().unwrap();
        assert_eq!(p.mode, HotplugMode::Offline);
        assert_eq!(p.cpus.iter().collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(p.to_string(), "offline:1-3");
        assert_eq!(p.offline_during_run(), Some(&p.cpus));
        let c: HotplugPlan = "cycle:1".parse().unwrap();
        assert_eq!(c.offline_during_run(), None);
        for (bad, why) in [
            ("cycle", format!("`cycle`: {FORM}")),
            (
                "reboot:1",
                "unknown hotplug mode `reboot` (known: cycle, offline)".into(),
            ),
            ("cycle:", format!("no CPUs given: {FORM}")),
            ("cycle:x", format!("`x` in `x` is not a CPU number: {FORM}")),
            ("cycle:3-1", "range `3-1` runs backwards".into()),
        ] {
            assert_eq!(
                bad.parse::<HotplugPlan>().unwrap_err().to_string(),
                why,
                "{bad}"
            );
        }
    }
}
