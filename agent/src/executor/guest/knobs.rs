//! Scheduler knobs in a guest: the state's features, tunables, NUMA
//! balancing and command line as the runner applies them, and the check,
//! after the run, that the guest's kernel shows what was asked.
//!
//! The runner refuses what its kernel lacks (an `error` line naming it);
//! this check catches a kernel that took a write and kept another value
//! (a tunable clamped, a feature that cannot change), so that a run never
//! reports figures under a state it did not have.

use farm_spec::MachineState;
use farm_spec::sched::{KnobError, SchedFeature, Tunable, parse_features_file};

use super::runner::{GuestRun, GuestState};

/// Adds `state`'s knobs to what the guest applies.
pub fn add(state: &MachineState, out: &mut GuestState) {
    out.features = state.sched_features.iter().cloned().collect();
    out.tunables = state.sched_tunables.iter().collect();
    out.numa_balancing = state.numa_balancing.map(|n| n.value());
    out.cmdline = state.cmdline.words();
}

/// Why the guest's kernel does not show a knob as asked. What the guest
/// showed is kept as an excerpt (`farm_spec::excerpt`).
#[derive(Debug, thiserror::Error)]
pub enum Mismatch {
    #[error("the guest reported no sched features")]
    NoFeatures,
    #[error("the guest's features: {0}")]
    Features(KnobError),
    #[error("the guest's kernel did not take sched feature `{feature}` (features now: {now})")]
    Feature { feature: SchedFeature, now: String },
    #[error(
        "the guest's kernel did not take sched tunable {tunable}={value} (it reads {})",
        reads(.now)
    )]
    Tunable {
        tunable: Tunable,
        value: u64,
        now: Option<String>,
    },
    #[error(
        "the guest's kernel did not take numa_balancing={value} (it reads {})",
        reads(.now)
    )]
    NumaBalancing { value: u32, now: Option<String> },
    #[error("the guest's kernel did not boot with `{word}` (its command line: {cmdline})")]
    Cmdline { word: String, cmdline: String },
}

/// What a knob read in the guest, or "nothing".
fn reads(now: &Option<String>) -> &str {
    now.as_deref().unwrap_or("nothing")
}

/// Whether the guest's kernel shows every knob as asked.
pub fn check(asked: &GuestState, run: &GuestRun) -> Result<(), Mismatch> {
    if !asked.features.is_empty() {
        let text = run.knobs.get("features").ok_or(Mismatch::NoFeatures)?;
        let now = parse_features_file(text).map_err(Mismatch::Features)?;
        for f in &asked.features {
            if !now.contains(f) {
                return Err(Mismatch::Feature {
                    feature: f.clone(),
                    now: farm_spec::excerpt(text),
                });
            }
        }
    }
    for (t, v) in &asked.tunables {
        let now = run.knobs.get(t.as_str());
        if now.map(String::as_str) != Some(v.to_string().as_str()) {
            return Err(Mismatch::Tunable {
                tunable: *t,
                value: *v,
                now: now.cloned(),
            });
        }
    }
    if let Some(n) = asked.numa_balancing {
        let now = run.knobs.get("numa_balancing");
        if now.map(String::as_str) != Some(n.to_string().as_str()) {
            return Err(Mismatch::NumaBalancing {
                value: n,
                now: now.cloned(),
            });
        }
    }
    let booted: Vec<&str> = run.cmdline.split_whitespace().collect();
    for w in &asked.cmdline {
        if !booted.contains(&w.as_str()) {
            return Err(Mismatch::Cmdline {
                word: w.clone(),
                cmdline: farm_spec::excerpt(&run.cmdline),
            });
        }
    }
    Ok(())
}
