//! What a run is doing before its workload starts, as its agent reports it
//! and every client shows it: a `git:` kernel's build, the one preparation
//! that takes minutes (a cold build of the farm's guest kernel is about 7
//! minutes on 2 cores, over 20 on a busy host).
//!
//! The wire carries these as numbers and an enum (`farm.v1.BuildProgress`);
//! the agent builds them here and each side converts once, at its edge, so
//! that the steps and the bounds are defined in one place.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::cgroup::{UnknownName, closed_word};

/// The step a kernel build is at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BuildStep {
    /// Another run on the same host builds the same kernel: this one waits
    /// for it and then finds it built.
    Waiting,
    /// The tree's source is extracted (`git archive`) and patched.
    Source,
    /// The configuration is made and checked (`tinyconfig`, the fragment,
    /// `olddefconfig`).
    Configure,
    /// `make bzImage` compiles the objects.
    Compile,
    /// `make bzImage` links `vmlinux` and makes the image (kbuild printed
    /// `LD vmlinux.o`).
    Link,
}

impl BuildStep {
    pub const ALL: [BuildStep; 5] = [
        BuildStep::Waiting,
        BuildStep::Source,
        BuildStep::Configure,
        BuildStep::Compile,
        BuildStep::Link,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BuildStep::Waiting => "waiting",
            BuildStep::Source => "source",
            BuildStep::Configure => "configure",
            BuildStep::Compile => "compile",
            BuildStep::Link => "link",
        }
    }
}

impl FromStr for BuildStep {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<BuildStep, UnknownName> {
        closed_word(
            s,
            "build step",
            &BuildStep::ALL,
            BuildStep::as_str,
            &["waiting", "source", "configure", "compile", "link"],
        )
    }
}

impl fmt::Display for BuildStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The longest time a report may say a build has taken or will take: a
/// build is killed after an hour (the agent's `BUILD_TIMEOUT`) and may wait
/// as long for another run's; a day is no build, and a larger figure would
/// only skew every estimate shown with it.
pub const MAX_BUILD_SECONDS: u32 = 24 * 3600;

/// What a build is expected to take before the agent has timed one: the
/// farm's small guest configuration on 2 cores (README), cold (an empty
/// ccache) and warm (ccache holding a neighbouring commit's objects).
pub const DEFAULT_COLD_BUILD: Duration = Duration::from_secs(7 * 60);
pub const DEFAULT_WARM_BUILD: Duration = Duration::from_secs(2 * 60);

/// What a build is expected to take in all, and whether ccache was warm
/// when it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    pub seconds: u32,
    pub warm: bool,
}

impl Estimate {
    /// The documented default for a cold or a warm build.
    pub fn default_for(warm: bool) -> Estimate {
        let d = if warm {
            DEFAULT_WARM_BUILD
        } else {
            DEFAULT_COLD_BUILD
        };
        Estimate {
            seconds: d.as_secs() as u32,
            warm,
        }
    }

    pub fn temperature(self) -> &'static str {
        if self.warm { "warm" } else { "cold" }
    }
}

/// A build under way: its step, how long it has been going (waiting
/// included) and what it was expected to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildProgress {
    pub step: BuildStep,
    pub elapsed_s: u32,
    /// `None`: the agent has no estimate.
    pub estimate: Option<Estimate>,
}

/// A report whose figures no build can have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgressError {
    /// The step is unset, or one this build does not know (the wire's number).
    UnknownStep(i32),
    /// A time beyond [`MAX_BUILD_SECONDS`].
    TooLong { what: &'static str, seconds: u32 },
}

impl fmt::Display for ProgressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressError::UnknownStep(n) => write!(
                f,
                "unknown build step {n} (known: {})",
                BuildStep::ALL.map(BuildStep::as_str).join(", ")
            ),
            ProgressError::TooLong { what, seconds } => write!(
                f,
                "build {what} of {seconds} s: at most {MAX_BUILD_SECONDS} s (MAX_BUILD_SECONDS)"
            ),
        }
    }
}

impl std::error::Error for ProgressError {}

impl BuildProgress {
    /// Checks the figures against [`MAX_BUILD_SECONDS`].
    pub fn checked(self) -> Result<BuildProgress, ProgressError> {
        let too_long = |what, seconds| ProgressError::TooLong { what, seconds };
        if self.elapsed_s > MAX_BUILD_SECONDS {
            return Err(too_long("elapsed time", self.elapsed_s));
        }
        if let Some(e) = self.estimate
            && e.seconds > MAX_BUILD_SECONDS
        {
            return Err(too_long("estimate", e.seconds));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_parse_their_names() {
        for s in BuildStep::ALL {
            assert_eq!(s.to_string().parse::<BuildStep>(), Ok(s));
        }
        assert_eq!(
            "linking".parse::<BuildStep>().unwrap_err().to_string(),
            "unknown build step `linking` (known: waiting, source, configure, compile, link)"
        );
    }

    #[test]
    fn figures_are_bounded() {
        let p = BuildProgress {
            step: BuildStep::Compile,
            elapsed_s: MAX_BUILD_SECONDS,
            estimate: Some(Estimate::default_for(false)),
        };
        assert_eq!(p.checked(), Ok(p));
        let long = BuildProgress {
            elapsed_s: MAX_BUILD_SECONDS + 1,
            ..p
        };
        assert_eq!(
            long.checked().unwrap_err().to_string(),
            "build elapsed time of 86401 s: at most 86400 s (MAX_BUILD_SECONDS)"
        );
        let guess = BuildProgress {
            estimate: Some(Estimate {
                seconds: u32::MAX,
                warm: true,
            }),
            ..p
        };
        assert_eq!(
            guess.checked(),
            Err(ProgressError::TooLong {
                what: "estimate",
                seconds: u32::MAX
            })
        );
        assert_eq!(
            ProgressError::UnknownStep(9).to_string(),
            "unknown build step 9 (known: waiting, source, configure, compile, link)"
        );
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        assert_eq!(
            Estimate::default_for(false),
            Estimate {
                seconds: 420,
                warm: false
            }
        );
        assert_eq!(Estimate::default_for(true).seconds, 120);
        assert_eq!(Estimate::default_for(true).temperature(), "warm");
    }
}
