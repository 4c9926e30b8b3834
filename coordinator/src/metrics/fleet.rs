//! The fleet gauge as plain data. Pure.

use std::collections::{BTreeMap, BTreeSet};

use farm_proto::Capabilities;

use super::series::Point;

/// Connected agents per (arch, executor, running kernel). An agent counts
/// once under each executor it offers: "how many agents could run a KVM
/// cell on s390x" is one query then, at the price of sums over executors
/// counting such an agent several times.
pub fn agents_connected<'a>(connected: impl IntoIterator<Item = &'a Capabilities>) -> Vec<Point> {
    let mut counts: BTreeMap<Vec<String>, f64> = BTreeMap::new();
    for caps in connected {
        let mut executors: BTreeSet<&str> = caps.executors.iter().map(String::as_str).collect();
        if executors.is_empty() {
            // Still connected, and still worth seeing: it can run nothing.
            executors.insert("none");
        }
        for executor in executors {
            let labels = vec![
                caps.arch.clone(),
                executor.to_owned(),
                caps.kernel_release.clone(),
            ];
            *counts.entry(labels).or_default() += 1.0;
        }
    }
    counts.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(arch: &str, kernel: &str, executors: &[&str]) -> Capabilities {
        Capabilities {
            arch: arch.into(),
            kernel_release: kernel.into(),
            executors: executors.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn agents_count_under_each_of_their_executors() {
        let fleet = [
            caps("x86_64", "6.1", &["host", "kvm"]),
            caps("x86_64", "6.1", &["host", "host"]),
            caps("s390x", "6.6", &[]),
        ];
        let l = |a: &str, e: &str, k: &str| vec![a.to_owned(), e.to_owned(), k.to_owned()];
        assert_eq!(
            agents_connected(&fleet),
            vec![
                (l("s390x", "none", "6.6"), 1.0),
                (l("x86_64", "host", "6.1"), 2.0),
                (l("x86_64", "kvm", "6.1"), 1.0),
            ]
        );
        assert!(agents_connected([]).is_empty());
    }
}
