//! Submitters cannot grow the coordinator: small matrices that expand into
//! much (issue 13 measured 168 MB of RSS for a 44 KB one, 99 MB for 250
//! cells of `offline:1-99999`) are refused with exit 2 naming the limit, or,
//! where they are legitimate, kept small; nothing refused is stored; and the
//! coordinator's peak RSS stays within a stated bound throughout.

// Test code: clippy.toml lets #[test] fns unwrap and print, not the helpers
// around them.
#![allow(clippy::unwrap_used, clippy::print_stderr)]

mod common;

use common::{Farm, serial};

/// The most the coordinator (a debug build) may reach over the whole
/// test. Its idle peak is about 20 MiB; the expanded-bytes refusal builds
/// up to `MAX_EXPANDED_MATRIX_BYTES` (32 MiB) of cells before it stops, and
/// the allocator keeps some of it: 96 MiB leaves room for that and nothing
/// for an amplification (the cases here used to cost 99–168 MB each).
const MAX_PEAK_KIB: u64 = 96 << 10;

fn peak_kib(farm: &Farm) -> u64 {
    let pid = farm.coordinator.as_ref().unwrap().child.id();
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap()
}

fn list(items: impl Iterator<Item = u32>) -> String {
    items.map(|i| i.to_string()).collect::<Vec<_>>().join(",")
}

#[test]
fn amplifying_matrices_are_refused_or_kept_small() {
    let _g = serial();
    let mut farm = Farm::start(&[]);
    farm.start_agent();
    farm.wait_agents(1);
    let head = "[[workloads]]\nname = \"cpu-hog\"\n";
    let long = "s".repeat(20_000);
    let refused = [
        (
            // The 44 KB matrix: two 20 KB state names × 1,000 threads.
            "names",
            format!(
                "name = \"m\"\n{head}params = {{ threads = [{}] }}\n\
                 [[states]]\nname = \"{long}\"\nautogroup = 0\n\
                 [[states]]\nname = \"{long}x\"\nautogroup = 1\n",
                list(1..=1000)
            ),
            ":6:8: states[0].name: name `ssssssssssssssssssssssssssssssssssssssss…` is 20000 \
             bytes; the limit (MAX_NAME_BYTES) is 128",
        ),
        (
            "expanded",
            format!(
                "name = \"m\"\n{head}params = {{ threads = [{}], seconds = [{}] }}\n\
                 [[states]]\nname = \"s\"\nhotplug = \"offline:{}\"\n",
                list(1..=100),
                list(1..=100),
                list((0..1024).map(|k| 2 * k + 1)),
            ),
            ":1:1: the matrix expands to more than 33554432 bytes (MAX_EXPANDED_MATRIX_BYTES)",
        ),
        (
            "cells",
            format!(
                "name = \"m\"\n{head}params = {{ threads = [{}], seconds = [{}] }}\n",
                list(1..=101),
                list(1..=100),
            ),
            ":1:1: max_cells: the matrix has 10100 cells, more than the limit of 10000: shrink \
             an axis or raise max_cells",
        ),
    ];
    for (name, text, want) in &refused {
        let file = farm.write(&format!("{name}.toml"), text);
        let out = farm.farmctl(&["submit", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.starts_with(&format!("error: {}{want}", file.display())),
            "{name}: {stderr}"
        );
        // An error quotes no more than a prefix of what it refuses.
        assert!(stderr.len() < 1024, "{name}: {} bytes", stderr.len());
        eprintln!("{name}: peak RSS {} KiB", peak_kib(&farm));
    }

    // Legitimate but large: 250 cells each offlining CPUs 1-99999, which
    // no agent can do, so every cell waits and says why at every status.
    let file = farm.write(
        "offline.toml",
        &format!(
            "name = \"offline\"\n{head}params = {{ threads = [{}] }}\n\
             [[states]]\nname = \"all-off\"\nhotplug = \"offline:1-99999\"\n",
            list(1..=250)
        ),
    );
    let id = farm.submit(&file);
    for _ in 0..5 {
        let out = farm.farmctl(&["results", &id]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.len() < 256 << 10,
            "results of {id}: {} bytes",
            text.len()
        );
    }
    let v = farm.results(&id);
    assert_eq!(v["cells"].as_array().unwrap().len(), 250);
    assert_eq!(
        v["waiting"],
        serde_json::json!([
            "waiting: no agent with hotplug of cpus 1-99999 (250 cells: cpu-hog threads=1; \
             cpu-hog threads=2; cpu-hog threads=3 and 247 more)"
        ]),
        "{id}"
    );
    let peak = peak_kib(&farm);
    eprintln!("coordinator peak RSS over the test: {peak} KiB");
    assert!(
        peak < MAX_PEAK_KIB,
        "coordinator peak RSS {peak} KiB, bound {MAX_PEAK_KIB} KiB"
    );

    // Nothing of the refused matrices was stored: the one accepted matrix
    // is all there is — in live state, or in the archive once its end was
    // published and it left (which may or may not come before the kill).
    let out = farm.farmctl(&["cancel", &id]);
    assert!(out.status.success());
    farm.kill_coordinator();
    use farm_coordinator::archive::Archive;
    use farm_coordinator::store::Backend;
    let db = farm.data_dir().join("farm.db");
    let mut store = farm_coordinator::store::Sqlite::open(&db).unwrap();
    let live: Vec<String> = store
        .load()
        .unwrap()
        .matrices
        .into_iter()
        .map(|m| m.name)
        .collect();
    let archived = farm_coordinator::archive::Sqlite::open(&db)
        .unwrap()
        .matrix(id.parse().unwrap())
        .unwrap()
        .is_some();
    match (live.as_slice(), archived) {
        ([one], false) if one == "offline" => {}
        ([], true) => {}
        other => panic!("stored: live {:?}, archived {}", other.0, other.1),
    }
}
