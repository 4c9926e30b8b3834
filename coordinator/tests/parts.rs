//! Each part of the scheduler drives its own state: no part touches a field
//! of another part's state; it calls the methods that state offers.
//!
//! The state sits in `scheduler/state/`, below the struct that holds it and
//! the parts above, so its fields are visible to the whole scheduler and the
//! compiler cannot say who touches them. This test reads the sources, as
//! rust-analyzer's tidy tests read theirs: for every state the scheduler
//! holds, it finds the type's fields and every `holder.field` outside the
//! part that owns it (a method call, `holder.name(`, is allowed).

use std::path::{Path, PathBuf};

/// Where each part's state is held (`self.<holder>` or `<x>.<holder>`),
/// the file that defines its type, the type, and the part that owns it.
const STATES: &[(&str, &str, &str, &str)] = &[
    ("archiving", "state/archive.rs", "State", "archive.rs"),
    (
        "bisections",
        "state/bisection.rs",
        "Bisections",
        "bisection.rs",
    ),
    ("listings", "state/ranges.rs", "Listings", "ranges.rs"),
    ("schedules", "state/schedule.rs", "Schedules", "schedule.rs"),
    ("series", "state/histories.rs", "Series", "histories.rs"),
    ("summaries", "worker.rs", "Worker", "results.rs"),
    (
        "rejections",
        "state/provenance.rs",
        "Rejections",
        "provenance.rs",
    ),
    // Per matrix and per run.
    ("results", "state/results.rs", "Versions", "results.rs"),
    ("activity", "state/activity.rs", "Activity", "activity.rs"),
];

fn scheduler_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/scheduler")
}

/// The named fields of `struct <name> { … }` in `source` (`0` for a tuple
/// struct).
fn fields(source: &str, name: &str) -> Vec<String> {
    let at = source
        .find(&format!("struct {name}"))
        .unwrap_or_else(|| panic!("no struct {name}"));
    let rest = &source[at..];
    let open = rest.find(['{', '(']).expect("a struct body");
    if rest.as_bytes()[open] == b'(' {
        return vec!["0".into()];
    }
    let body = &rest[open + 1..rest.find("\n}\n").expect("the struct's end")];
    body.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("    ")?;
            if l.starts_with(' ') || l.starts_with("//") || l.starts_with('#') {
                return None;
            }
            let l = l.strip_prefix("pub(in crate::scheduler) ").unwrap_or(l);
            let (field, _) = l.split_once(':')?;
            field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                .then(|| field.to_string())
        })
        .collect()
}

/// Each `.<holder>.<field>` in `source` that is not a method call, with its line.
fn touches(source: &str, holder: &str, field: &str) -> Vec<usize> {
    let needle = format!(".{holder}.{field}");
    let mut out = Vec::new();
    for (i, line) in source.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find(&needle) {
            let end = from + at + needle.len();
            let next = line[end..].chars().next();
            let more_ident = next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            if !more_ident && next != Some('(') {
                out.push(i + 1);
            }
            from = end;
        }
    }
    out
}

#[test]
fn no_part_touches_another_parts_state() {
    let dir = scheduler_dir();
    let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    parts.push(dir.with_extension("rs"));
    parts.sort();
    let mut all_fields = Vec::new();
    let mut found = Vec::new();
    for (holder, file, ty, owner) in STATES {
        let names = fields(&std::fs::read_to_string(dir.join(file)).unwrap(), ty);
        all_fields.extend(names.iter().map(|f| format!("{ty}.{f}")));
        for part in &parts {
            let name = part.file_name().unwrap().to_str().unwrap();
            if name == *owner || name == "tests.rs" {
                continue;
            }
            let source = std::fs::read_to_string(part).unwrap();
            for field in &names {
                for line in touches(&source, holder, field) {
                    found.push(format!(
                        "{name}:{line}: {holder}.{field} ({ty} is {owner}'s)"
                    ));
                }
            }
        }
    }
    assert_eq!(found, Vec::<String>::new());
    // What was checked: every field of the nine states (a field added
    // to one is added here), against each of the parts.
    assert_eq!(
        all_fields,
        [
            "State.in_flight",
            "State.retry_at",
            "State.failing",
            "Bisections.0",
            "Listings.0",
            "Schedules.by_id",
            "Schedules.changed",
            "Schedules.crons",
            "Series.0",
            "Worker.tx",
            "Worker.cache",
            "Worker.pending",
            "Worker.retry",
            "Worker.retry_at",
            "Worker.generation",
            "Rejections.logged",
            "Versions.version",
            "Versions.requested",
            "Versions.gauged",
            "Activity.agent_id",
            "Activity.attempt",
            "Activity.build",
        ]
    );
    for (_, _, _, owner) in STATES {
        assert!(parts.iter().any(|p| p.ends_with(owner)), "no part {owner}");
    }
}

#[test]
fn the_check_finds_a_touch_and_lets_a_method_call_pass() {
    let source = "let a = self.archiving.retry_at;\nself.archiving.retry_at(now);\nx.results.version_of();\n";
    assert_eq!(touches(source, "archiving", "retry_at"), vec![1]);
    assert_eq!(touches(source, "results", "version"), Vec::<usize>::new());
    let state =
        "pub struct S {\n    pub(in crate::scheduler) a: u32,\n    /// doc\n    b: Vec<u8>,\n}\n";
    assert_eq!(fields(state, "S"), ["a", "b"]);
    assert_eq!(fields("pub struct T(u32);\n", "T"), ["0"]);
}
