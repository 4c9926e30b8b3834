use super::*;
use farm_proto::CgroupLayout;

fn caps(layout: CgroupLayout, v1: &[&str], v2: &[&str]) -> Capabilities {
    Capabilities {
        cgroup_layout: layout as i32,
        cgroup_v1_controllers: v1.iter().map(|s| s.to_string()).collect(),
        cgroup_v2_controllers: v2.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

#[test]
fn layouts() {
    let cases = [
        (
            caps(CgroupLayout::Hybrid, &["cpu", "cpuset"], &["hugetlb"]),
            Some(Layout::V1 { cpuset: true }),
        ),
        (
            caps(CgroupLayout::V1, &["cpu"], &[]),
            Some(Layout::V1 { cpuset: false }),
        ),
        (
            caps(CgroupLayout::V2, &[], &["cpu", "memory"]),
            Some(Layout::V2),
        ),
        (caps(CgroupLayout::V2, &[], &["memory"]), None),
        (caps(CgroupLayout::None, &[], &[]), None),
    ];
    for (c, want) in cases {
        assert_eq!(Layout::of(&c), want, "{c:?}");
    }
}

/// A fake v1 tree: cpu and cpuset hierarchies with root cpus/mems.
fn v1_root() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    fs::create_dir_all(d.path().join("sys/fs/cgroup/cpu")).unwrap();
    let cs = d.path().join("sys/fs/cgroup/cpuset");
    fs::create_dir_all(&cs).unwrap();
    fs::write(cs.join("cpuset.cpus"), "0-3\n").unwrap();
    fs::write(cs.join("cpuset.mems"), "0\n").unwrap();
    d
}

#[test]
fn separate_groups_on_v1_are_journalled_and_removed() {
    let root = v1_root();
    let mut j = Journal::open(&root.path().join("journal"), root.path()).unwrap();
    let spec = farm_spec::CgroupSpec {
        weight: Some(farm_spec::CpuWeight::new(50).unwrap()),
        cpuset: Some("1".parse().unwrap()),
        ..farm_spec::CgroupSpec::new(farm_spec::CgroupShape::Separate)
    };
    let p = create(
        &mut j,
        root.path(),
        Layout::V1 { cpuset: true },
        &spec,
        "m-1.c0.r0",
        2,
    )
    .unwrap();
    let cpu = root.path().join("sys/fs/cgroup/cpu/farm/m-1-c0-r0");
    assert_eq!(p.workload[0], cpu.join("workload/cgroup.procs"));
    assert_eq!(p.loads.len(), 2);
    assert_eq!(p.loads[1][0], cpu.join("load1/cgroup.procs"));
    assert_eq!(
        fs::read_to_string(cpu.join("load0/cpu.shares")).unwrap(),
        "512"
    );
    let cs = root
        .path()
        .join("sys/fs/cgroup/cpuset/farm/m-1-c0-r0/workload");
    assert_eq!(fs::read_to_string(cs.join("cpuset.cpus")).unwrap(), "1");
    // The parents copied the root's cpus and mems, so the group is usable.
    assert_eq!(
        fs::read_to_string(cs.parent().unwrap().join("cpuset.mems")).unwrap(),
        "0"
    );
    // Plain directories stand in for cgroups here: empty their files so rmdir works.
    for e in walk(&root.path().join("sys/fs/cgroup")) {
        if e.is_file() && e.to_string_lossy().contains("/farm") {
            fs::remove_file(e).unwrap();
        }
    }
    j.restore().unwrap();
    assert!(!root.path().join("sys/fs/cgroup/cpu/farm").exists());
    assert!(!root.path().join("sys/fs/cgroup/cpuset/farm").exists());
    assert!(root.path().join("sys/fs/cgroup/cpu").exists());
}

#[test]
fn shared_on_v2_enables_the_cpu_controller_and_restores_it() {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().join("sys/fs/cgroup");
    fs::create_dir_all(&base).unwrap();
    fs::write(base.join("cgroup.subtree_control"), "memory\n").unwrap();
    let mut j = Journal::open(&root.path().join("journal"), root.path()).unwrap();
    let p = create(
        &mut j,
        root.path(),
        Layout::V2,
        &farm_spec::CgroupSpec::new(farm_spec::CgroupShape::Shared),
        "r",
        2,
    )
    .unwrap();
    assert_eq!(p.workload, p.loads[0]);
    assert_eq!(p.loads[0], p.loads[1]);
    assert_eq!(
        fs::read_to_string(base.join("cgroup.subtree_control")).unwrap(),
        "+cpu"
    );
    assert!(j.entries().unwrap().contains(&Entry::SubtreeControl {
        path: base.clone(),
        controller: "cpu".into()
    }));
    // The controller must reach the leaves: enabled in every group above them.
    for d in [base.join("farm"), base.join("farm/r")] {
        let enabled = fs::read_to_string(d.join("cgroup.subtree_control")).unwrap();
        assert_eq!(enabled, "+cpu", "{}", d.display());
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            }
            out.push(p);
        }
    }
    out
}
