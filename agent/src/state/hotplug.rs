//! CPU hotplug states: `cycle:CPUS` (offline, then online again before the
//! run — seed 000's "disable and re-enable one core") and `offline:CPUS`
//! (kept offline during the run), as [`HotplugPlan`]s parsed once at the
//! run's edge; here only whether this machine can carry one out.

use farm_proto::Capabilities;
use farm_spec::HotplugPlan;

/// A plan this machine cannot carry out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("cpu{cpu} cannot be hotplugged here (hotpluggable: {hotpluggable:?})")]
    NotHotpluggable { cpu: u32, hotpluggable: Vec<u32> },
    #[error("the plan would take every CPU offline")]
    EveryCpu,
}

/// Refuses CPUs this machine cannot hotplug (cpu0 usually has no `online`
/// file) and plans that would leave no CPU online.
pub fn check(plan: &HotplugPlan, caps: &Capabilities) -> Result<(), Error> {
    if let Some(cpu) = plan
        .cpus
        .iter()
        .find(|c| !caps.hotpluggable_cpus.contains(c))
    {
        return Err(Error::NotHotpluggable {
            cpu,
            hotpluggable: caps.hotpluggable_cpus.clone(),
        });
    }
    let left = caps
        .online_cpus
        .iter()
        .filter(|&&c| !plan.cpus.contains(c))
        .count();
    if left == 0 {
        return Err(Error::EveryCpu);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let caps = Capabilities {
            online_cpus: vec![0, 1, 2, 3],
            hotpluggable_cpus: vec![1, 2, 3],
            ..Default::default()
        };
        for s in ["cycle:1", "offline:1-3", "cycle:1,3"] {
            let p: HotplugPlan = s.parse().unwrap();
            check(&p, &caps).unwrap();
        }
        let bad = [("cycle:0", "cpu0 cannot"), ("cycle:7", "cpu7")];
        for (s, want) in bad {
            let e = check(&s.parse().unwrap(), &caps).unwrap_err().to_string();
            assert!(e.contains(want), "{s}: {e}");
        }
        let all = Capabilities {
            online_cpus: vec![1],
            hotpluggable_cpus: vec![1],
            ..Default::default()
        };
        assert_eq!(
            check(&"offline:1".parse().unwrap(), &all),
            Err(Error::EveryCpu)
        );
    }
}
