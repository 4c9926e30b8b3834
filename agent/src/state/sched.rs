//! Scheduler knobs on the host: debugfs feature toggles and tunables, and
//! `kernel.numa_balancing`, each journalled with the value it replaces
//! before it is written.
//!
//! Everything a state names is checked against what the running kernel
//! has *before* anything is changed: a feature or tunable it lacks refuses
//! the run naming it, and nothing was touched.

use std::collections::BTreeMap;
use std::path::Path;

use farm_spec::MachineState;
use farm_spec::sched::parse_features_file;

use super::error::{Error, Result};
use super::files::{read_trimmed, write};
use super::journal::{self, Entry, Journal};

/// The most feature names an error lists (a kernel has ~30).
const LISTED: usize = 40;

/// Applies `state`'s features, tunables and NUMA balancing.
pub fn apply(journal: &mut Journal, root: &Path, state: &MachineState) -> Result<()> {
    let refuse = |why: String| Error::Refused {
        state: state.name.clone(),
        why,
    };
    // What the kernel has, read before anything is changed.
    let current: BTreeMap<String, bool> = if state.sched_features.is_empty() {
        BTreeMap::new()
    } else {
        let path = journal::sched_features_path(root);
        let text = read_trimmed(&path)?;
        parse_features_file(&text)
            .map_err(|e| refuse(format!("{}: {e}", path.display())))?
            .into_iter()
            .map(|f| (f.name().to_string(), f.on()))
            .collect()
    };
    for f in state.sched_features.iter() {
        if !current.contains_key(f.name()) {
            let known: Vec<&str> = current.keys().take(LISTED).map(String::as_str).collect();
            return Err(refuse(format!(
                "the running kernel has no sched feature `{}` (it has: {})",
                f.name(),
                known.join(" ")
            )));
        }
    }
    let mut tunables = Vec::new();
    for (t, value) in state.sched_tunables.iter() {
        let path = journal::sched_tunable_path(root, t);
        if !path.exists() {
            return Err(refuse(format!(
                "the running kernel has no sched tunable `{t}` ({} is missing)",
                path.display()
            )));
        }
        let was: u64 = read_trimmed(&path)?
            .parse()
            .map_err(|_| refuse(format!("{} does not hold a number", path.display())))?;
        tunables.push((t, was, value));
    }
    let numa = journal::sysctl_path(root, journal::SYSCTLS[1]);
    if state.numa_balancing.is_some() && !numa.exists() {
        return Err(refuse(
            "the running kernel has no kernel.numa_balancing (CONFIG_NUMA_BALANCING)".into(),
        ));
    }

    for f in state.sched_features.iter() {
        let was = current[f.name()];
        if was == f.on() {
            continue;
        }
        let old = farm_spec::sched::SchedFeature::new(f.name(), was).expect("read from the kernel");
        journal.record(&Entry::SchedFeature { feature: old })?;
        write(&journal::sched_features_path(root), &f.to_string())?;
        journal::step("sched feature written");
    }
    for (t, was, value) in tunables {
        journal.record(&Entry::SchedTunable { tunable: t, was })?;
        write(&journal::sched_tunable_path(root, t), &value.to_string())?;
        journal::step("sched tunable written");
    }
    if let Some(n) = state.numa_balancing {
        let was = read_trimmed(&numa)?;
        journal.record(&Entry::Sysctl {
            key: journal::SYSCTLS[1].into(),
            was,
        })?;
        write(&numa, &n.value().to_string())?;
        journal::step("numa_balancing written");
    }
    Ok(())
}

/// Turns the scheduler's statistics on for the run
/// (`kernel.sched_schedstats=1`, journalled and undone with the rest of the
/// state) where the kernel has them: `/proc/schedstat`'s load-balancing
/// counters only count while it is on. Whether they are on; false too
/// where the sysctl cannot be written (a read-only /proc/sys): nothing is
/// journalled that could not be undone.
pub fn enable_schedstats(journal: &mut Journal, root: &Path) -> Result<bool> {
    let key = journal::SYSCTLS[2];
    let path = journal::sysctl_path(root, key);
    if !path.exists() {
        return Ok(false);
    }
    let was = read_trimmed(&path)?;
    if was != "1" && std::fs::OpenOptions::new().write(true).open(&path).is_err() {
        tracing::warn!(path = %path.display(), "not writable: no load-balancing counters");
        return Ok(false);
    }
    if was != "1" {
        journal.record(&Entry::Sysctl {
            key: key.into(),
            was,
        })?;
        write(&path, "1")?;
        journal::step("sched_schedstats written");
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_spec::state::StateStrings;

    /// A root with the kernel's files as a 6.12 kernel has them.
    fn fake_root() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let sched = root.path().join("sys/kernel/debug/sched");
        std::fs::create_dir_all(&sched).unwrap();
        std::fs::write(
            sched.join("features"),
            "RUN_TO_PARITY NO_HRTICK DELAY_DEQUEUE\n",
        )
        .unwrap();
        std::fs::write(sched.join("base_slice_ns"), "3000000\n").unwrap();
        std::fs::write(sched.join("migration_cost_ns"), "500000\n").unwrap();
        let sys = root.path().join("proc/sys/kernel");
        std::fs::create_dir_all(&sys).unwrap();
        std::fs::write(sys.join("numa_balancing"), "0\n").unwrap();
        root
    }

    fn state(features: &[&str], tunables: &[&str], numa: Option<u32>) -> MachineState {
        let f: Vec<String> = features.iter().map(|s| s.to_string()).collect();
        let t: Vec<String> = tunables.iter().map(|s| s.to_string()).collect();
        MachineState::from_strings(StateStrings {
            name: "knobs",
            sched_features: &f,
            sched_tunables: &t,
            numa_balancing: numa,
            ..Default::default()
        })
        .unwrap()
    }

    fn read(root: &Path, rel: &str) -> String {
        std::fs::read_to_string(root.join(rel))
            .unwrap()
            .trim()
            .to_string()
    }

    #[test]
    fn journals_each_knob_then_restores_it() {
        let root = fake_root();
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("journal"), root.path()).unwrap();
        let s = state(
            &["NO_RUN_TO_PARITY", "HRTICK", "DELAY_DEQUEUE"],
            &["base_slice_ns=700000"],
            Some(1),
        );
        apply(&mut j, root.path(), &s).unwrap();
        // DELAY_DEQUEUE was on already: nothing to change, nothing journalled.
        let lines: Vec<String> = j
            .entries()
            .unwrap()
            .iter()
            .map(|e| format!("{e:?}"))
            .collect();
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines[0].contains("RUN_TO_PARITY") && lines[0].contains("on: true"));
        assert!(lines[1].contains("HRTICK") && lines[1].contains("on: false"));
        assert!(lines[2].contains("BaseSliceNs") && lines[2].contains("was: 3000000"));
        assert!(lines[3].contains("kernel/numa_balancing") && lines[3].contains("was: \"0\""));
        assert_eq!(
            read(root.path(), "sys/kernel/debug/sched/base_slice_ns"),
            "700000"
        );
        assert_eq!(read(root.path(), "proc/sys/kernel/numa_balancing"), "1");
        // A plain file keeps the last toggle written; the kernel's keeps all.
        assert_eq!(
            read(root.path(), "sys/kernel/debug/sched/features"),
            "HRTICK"
        );
        assert_eq!(j.restore().unwrap(), 4);
        assert_eq!(
            read(root.path(), "sys/kernel/debug/sched/base_slice_ns"),
            "3000000"
        );
        assert_eq!(read(root.path(), "proc/sys/kernel/numa_balancing"), "0");
        // Undone newest first: HRTICK back off, then RUN_TO_PARITY back on.
        assert_eq!(
            read(root.path(), "sys/kernel/debug/sched/features"),
            "RUN_TO_PARITY"
        );
    }

    #[test]
    fn what_the_kernel_lacks_is_refused_before_anything_changes() {
        let root = fake_root();
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("journal"), root.path()).unwrap();
        for (s, why) in [
            (
                state(&["NO_RUN_TO_PARITY", "NO_PLACE_LAG"], &[], None),
                "state `knobs`: the running kernel has no sched feature `PLACE_LAG` \
                 (it has: DELAY_DEQUEUE HRTICK RUN_TO_PARITY)",
            ),
            (
                state(&["NO_RUN_TO_PARITY"], &["nr_migrate=8"], Some(1)),
                "state `knobs`: the running kernel has no sched tunable `nr_migrate`",
            ),
        ] {
            let e = apply(&mut j, root.path(), &s).unwrap_err().to_string();
            assert!(e.starts_with(why), "{e}");
            assert!(j.is_empty().unwrap(), "journalled before refusing");
        }
        assert_eq!(
            read(root.path(), "sys/kernel/debug/sched/features"),
            "RUN_TO_PARITY NO_HRTICK DELAY_DEQUEUE"
        );
        assert_eq!(read(root.path(), "proc/sys/kernel/numa_balancing"), "0");
    }

    #[test]
    fn journal_lines_parse_and_foreign_ones_are_refused() {
        assert_eq!(
            Entry::parse("sched-feature HRTICK 0").unwrap(),
            Entry::SchedFeature {
                feature: farm_spec::sched::SchedFeature::new("HRTICK", false).unwrap()
            }
        );
        assert_eq!(
            Entry::parse("sched-tunable base_slice_ns 3000000").unwrap(),
            Entry::SchedTunable {
                tunable: farm_spec::Tunable::BaseSliceNs,
                was: 3_000_000
            }
        );
        for bad in [
            "sched-feature ../../x 1",
            "sched-feature HRTICK 2",
            "sched-tunable ../../../etc/passwd 1",
            "sysctl kernel/core_pattern |/bin/sh",
        ] {
            assert!(Entry::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn schedstats_are_turned_on_journalled_and_restored() {
        let root = fake_root();
        let dir = tempfile::tempdir().unwrap();
        let mut j = Journal::open(&dir.path().join("journal"), root.path()).unwrap();
        // A kernel without CONFIG_SCHEDSTATS: nothing to turn on.
        assert!(!enable_schedstats(&mut j, root.path()).unwrap());
        assert!(j.is_empty().unwrap());
        let sysctl = "proc/sys/kernel/sched_schedstats";
        std::fs::write(root.path().join(sysctl), "0\n").unwrap();
        assert!(enable_schedstats(&mut j, root.path()).unwrap());
        assert_eq!(read(root.path(), sysctl), "1");
        assert_eq!(
            format!("{:?}", j.entries().unwrap()),
            r#"[Sysctl { key: "kernel/sched_schedstats", was: "0" }]"#
        );
        // On already (a second run, or the operator's): left, not journalled.
        assert!(enable_schedstats(&mut j, root.path()).unwrap());
        assert_eq!(j.entries().unwrap().len(), 1);
        assert_eq!(j.restore().unwrap(), 1);
        assert_eq!(read(root.path(), sysctl), "0");
    }
}
