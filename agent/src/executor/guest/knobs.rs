//! Scheduler knobs in a guest: the state's features, tunables, NUMA
//! balancing and command line as the runner applies them, and the check,
//! after the run, that the guest's kernel shows what was asked.
//!
//! The runner refuses what its kernel lacks (an `error` line naming it);
//! this check catches a kernel that took a write and kept another value
//! (a tunable clamped, a feature that cannot change), so that a run never
//! reports figures under a state it did not have.

use farm_spec::MachineState;
use farm_spec::sched::parse_features_file;

use super::runner::{GuestRun, GuestState};

/// Adds `state`'s knobs to what the guest applies.
pub fn add(state: &MachineState, out: &mut GuestState) {
    out.features = state.sched_features.iter().cloned().collect();
    out.tunables = state.sched_tunables.iter().collect();
    out.numa_balancing = state.numa_balancing.map(|n| n.value());
    out.cmdline = state.cmdline.words();
}

/// Why the guest's kernel does not show a knob as asked.
pub fn check(asked: &GuestState, run: &GuestRun) -> Result<(), String> {
    if !asked.features.is_empty() {
        let text = run
            .knobs
            .get("features")
            .ok_or("the guest reported no sched features")?;
        let now = parse_features_file(text).map_err(|e| format!("the guest's features: {e}"))?;
        for f in &asked.features {
            if !now.contains(f) {
                return Err(format!(
                    "the guest's kernel did not take sched feature `{f}` (features now: {})",
                    farm_spec::excerpt(text)
                ));
            }
        }
    }
    for (t, v) in &asked.tunables {
        let now = run.knobs.get(t.as_str()).map(String::as_str);
        if now != Some(v.to_string().as_str()) {
            return Err(format!(
                "the guest's kernel did not take sched tunable {t}={v} (it reads {})",
                now.unwrap_or("nothing")
            ));
        }
    }
    if let Some(n) = asked.numa_balancing {
        let now = run.knobs.get("numa_balancing").map(String::as_str);
        if now != Some(n.to_string().as_str()) {
            return Err(format!(
                "the guest's kernel did not take numa_balancing={n} (it reads {})",
                now.unwrap_or("nothing")
            ));
        }
    }
    let booted: Vec<&str> = run.cmdline.split_whitespace().collect();
    for w in &asked.cmdline {
        if !booted.contains(&w.as_str()) {
            return Err(format!(
                "the guest's kernel did not boot with `{w}` (its command line: {})",
                farm_spec::excerpt(&run.cmdline)
            ));
        }
    }
    Ok(())
}
