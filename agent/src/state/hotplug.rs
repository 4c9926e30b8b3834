//! CPU hotplug states: `cycle:CPUS` (offline, then online again before the
//! run — seed 000's "disable and re-enable one core") and `offline:CPUS`
//! (kept offline during the run).

use farm_proto::Capabilities;

use crate::capabilities::parse_cpu_list;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Cycle,
    Offline,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub mode: Mode,
    pub cpus: Vec<u32>,
}

pub fn parse(spec: &str) -> Result<Plan, String> {
    let (mode, list) = spec
        .split_once(':')
        .ok_or_else(|| format!("hotplug `{spec}` must be cycle:CPUS or offline:CPUS"))?;
    let mode = match mode {
        "cycle" => Mode::Cycle,
        "offline" => Mode::Offline,
        other => return Err(format!("hotplug mode `{other}` must be cycle or offline")),
    };
    let cpus = parse_cpu_list(list).map_err(|e| format!("hotplug `{spec}`: {e}"))?;
    if cpus.is_empty() {
        return Err(format!("hotplug `{spec}` names no CPU"));
    }
    Ok(Plan { mode, cpus })
}

/// Refuses CPUs this machine cannot hotplug (cpu0 usually has no `online`
/// file) and plans that would leave no CPU online.
pub fn check(plan: &Plan, caps: &Capabilities) -> Result<(), String> {
    if let Some(cpu) = plan
        .cpus
        .iter()
        .find(|c| !caps.hotpluggable_cpus.contains(c))
    {
        return Err(format!(
            "cpu{cpu} cannot be hotplugged here (hotpluggable: {:?})",
            caps.hotpluggable_cpus
        ));
    }
    let left = caps
        .online_cpus
        .iter()
        .filter(|c| !plan.cpus.contains(c))
        .count();
    if left == 0 {
        return Err("the plan would take every CPU offline".into());
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
        let ok = [
            ("cycle:1", Mode::Cycle, vec![1]),
            ("offline:1-3", Mode::Offline, vec![1, 2, 3]),
            ("cycle:1,3", Mode::Cycle, vec![1, 3]),
        ];
        for (s, mode, cpus) in ok {
            let p = parse(s).unwrap();
            assert_eq!(p, Plan { mode, cpus }, "{s}");
            check(&p, &caps).unwrap();
        }
        let bad = [
            ("cycle", "must be"),
            ("reboot:1", "mode"),
            ("cycle:x", "cycle:x"),
            ("cycle:0", "cpu0 cannot"),
            ("cycle:7", "cpu7"),
        ];
        for (s, want) in bad {
            let e = parse(s).and_then(|p| check(&p, &caps)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
        let all = Capabilities {
            online_cpus: vec![1],
            hotpluggable_cpus: vec![1],
            ..Default::default()
        };
        assert!(
            check(&parse("offline:1").unwrap(), &all)
                .unwrap_err()
                .contains("every CPU")
        );
    }
}
