//! Property tests: every type's canonical form parses back to the same
//! value, and strings outside the grammar are refused with a reason.

use farm_spec::{CpuMax, CpuSet, CpuWeight, Executor, HotplugPlan, Kernel, StateKind};
use proptest::prelude::*;

fn ranges() -> impl Strategy<Value = Vec<(u32, u32)>> {
    prop::collection::vec((0u32..=CpuSet::MAX_CPU, 0u32..64), 1..20).prop_map(|v| {
        v.into_iter()
            .map(|(lo, len)| (lo, (lo + len).min(CpuSet::MAX_CPU)))
            .collect()
    })
}

proptest! {
    #[test]
    fn cpu_sets_round_trip(r in ranges()) {
        let set = CpuSet::from_ranges(r.clone());
        let text = set.to_string();
        let back: CpuSet = text.parse().unwrap();
        prop_assert_eq!(&back, &set);
        // The canonical form is merged: parsing the raw list gives the same set.
        let raw: Vec<String> = r.iter().map(|(lo, hi)| format!("{lo}-{hi}")).collect();
        prop_assert_eq!(raw.join(",").parse::<CpuSet>().unwrap(), set.clone());
        // Every listed CPU is in, and the count matches the distinct CPUs.
        let mut all: Vec<u32> = r.iter().flat_map(|&(lo, hi)| lo..=hi).collect();
        all.sort_unstable();
        all.dedup();
        prop_assert_eq!(set.count(), all.len());
        prop_assert!(all.iter().all(|&c| set.contains(c)));
    }

    #[test]
    fn difference_is_exact(a in ranges(), b in ranges()) {
        let (a, b) = (CpuSet::from_ranges(a), CpuSet::from_ranges(b));
        let d = a.difference(&b);
        prop_assert!(d.is_subset_of(&a));
        prop_assert!(d.iter().all(|c| !b.contains(c)));
        prop_assert_eq!(d.count() + a.iter().filter(|&c| b.contains(c)).count(), a.count());
    }

    #[test]
    fn cpu_lists_outside_the_grammar_are_refused(s in "[0-9,\\- a-z]{0,12}") {
        let ok_grammar = !s.is_empty() && s.split(',').all(|item| {
            let num = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
            match item.split_once('-') {
                Some((lo, hi)) => num(lo) && num(hi),
                None => num(item),
            }
        });
        match s.parse::<CpuSet>() {
            Ok(_) => prop_assert!(ok_grammar, "{:?} accepted", s),
            Err(e) => prop_assert!(!ok_grammar || !e.is_syntax(), "{:?}: {}", s, e),
        }
    }

    #[test]
    fn hotplug_round_trips(cycle in any::<bool>(), r in ranges()) {
        let text = format!(
            "{}:{}",
            if cycle { "cycle" } else { "offline" },
            CpuSet::from_ranges(r)
        );
        let plan: HotplugPlan = text.parse().unwrap();
        prop_assert_eq!(plan.to_string(), text);
    }

    #[test]
    fn cpu_max_round_trips(q in 0u64..(1 << 45), p in 0u64..2_000_000) {
        let text = format!("{q} {p}");
        let in_bounds = CpuMax::QUOTA_US.contains(&q) && CpuMax::PERIOD_US.contains(&p);
        match text.parse::<CpuMax>() {
            Ok(m) => {
                prop_assert!(in_bounds);
                prop_assert_eq!(m.to_string(), text);
            }
            Err(e) => {
                prop_assert!(!in_bounds);
                prop_assert!(e.to_string().contains("out of range"), "{}", e);
            }
        }
    }

    #[test]
    fn cpu_weights(w in 0u32..20_000) {
        match CpuWeight::new(w) {
            Ok(cw) => {
                prop_assert!((1..=10_000).contains(&w));
                prop_assert_eq!(cw.to_string().parse::<CpuWeight>().unwrap(), cw);
            }
            Err(e) => prop_assert_eq!(e.to_string(), format!("cpu weight {w} is out of range 1..=10000")),
        }
    }

    #[test]
    fn kernels_round_trip(v in "[0-9][0-9a-z]{0,4}([.+~-][0-9a-z]{1,4}){0,6}", flavour in prop::sample::select(vec!["amd64", "cloud-amd64", "s390x", "arm64", "powerpc64le"])) {
        let name = format!("debian:{v}-{flavour}");
        let k: Kernel = name.parse().unwrap();
        prop_assert!(k.is_guest());
        prop_assert_eq!(k.to_string(), name);
    }

    #[test]
    fn kernel_names_never_carry_shell_or_path_tricks(s in "\\PC{0,24}") {
        if let Ok(k) = s.parse::<Kernel>() {
            let text = k.to_string();
            prop_assert_eq!(&text, &s);
            prop_assert!(!text.chars().any(char::is_whitespace));
            match k {
                Kernel::Debian(d) => prop_assert!(d.version().bytes().all(|b| b.is_ascii_alphanumeric() || b".+~-".contains(&b))),
                Kernel::File(p) => prop_assert!(!p.path().split('/').any(|c| c == "..")),
                Kernel::Release(r) => prop_assert!(!r.contains(':')),
                Kernel::Running => prop_assert_eq!(text.as_str(), "running"),
                // One argument git never reads as an option, range or
                // expression.
                Kernel::Git(g) => {
                    prop_assert!(!g.rev().starts_with('-') && !g.rev().contains(".."));
                    prop_assert!(g.rev().bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+".contains(&b)));
                    prop_assert!(g.repo().bytes().all(|b| b.is_ascii_alphanumeric() || b"_-".contains(&b)));
                }
            }
        }
    }

    #[test]
    fn git_kernels_round_trip(repo in "[a-z0-9][a-z0-9_-]{0,10}", rev in "[a-z0-9][a-z0-9+_-]{0,6}(/[a-z0-9][a-z0-9+_-]{0,6}){0,3}") {
        let name = format!("git:{repo}@{rev}");
        let k: Kernel = name.parse().unwrap();
        prop_assert!(k.is_guest());
        prop_assert_eq!(k.to_string(), name);
    }

    #[test]
    fn words(s in "[a-z]{0,10}") {
        if let Ok(e) = s.parse::<Executor>() {
            prop_assert_eq!(e.as_str(), s.as_str());
        } else {
            prop_assert!(!["host", "tcg", "kvm"].contains(&s.as_str()));
        }
        if let Ok(k) = s.parse::<StateKind>() {
            prop_assert_eq!(k.as_str(), s.as_str());
        } else {
            prop_assert!(!["hotplug", "cgroup", "autogroup"].contains(&s.as_str()));
        }
    }
}
