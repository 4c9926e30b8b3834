//! Property tests of the matrix parser on what a submitter may send: random
//! bytes, and random TOML documents made of the matrix's own keys with
//! values of any type and size. Whatever the input, `matrix::parse` returns
//! in bounded time, without panicking, either a matrix within every limit
//! or an error that names a position and is at most `MAX_ERROR_BYTES` long.

use std::time::{Duration, Instant};

use farm_coordinator::matrix::{
    self, MAX_EXPANDED_MATRIX_BYTES, MAX_KEY_BYTES, MAX_MESSAGE_BYTES, MAX_NAME_BYTES, MAX_RUNS,
};
use proptest::prelude::*;
use prost::Message;
use toml::{Table, Value};

const FILE: &str = "m.toml";
/// `FILE:LINE:COLUMN: KEY: MESSAGE` at its longest (line and column of a
/// 1 MiB file take at most 7 digits each).
const MAX_ERROR_BYTES: usize = FILE.len() + 2 * 7 + 5 + MAX_KEY_BYTES + MAX_MESSAGE_BYTES;
/// A case of a debug build on a loaded machine; a real one takes milliseconds.
const MAX_CASE_TIME: Duration = Duration::from_secs(3);
/// The largest `max_cells` a matrix may ask for.
const MAX_MAX_CELLS: usize = 1_000_000;

/// Parses `text` and checks the outcome against every limit.
fn check(text: &str) -> Result<(), TestCaseError> {
    let started = Instant::now();
    let parsed = matrix::parse(FILE, text);
    let took = started.elapsed();
    prop_assert!(took < MAX_CASE_TIME, "took {took:?}");
    match parsed {
        Ok(m) => {
            prop_assert!(!m.cells.is_empty());
            prop_assert!(m.cells.len() <= MAX_MAX_CELLS, "{} cells", m.cells.len());
            let runs = m.cells.len() as u64 * u64::from(m.repetitions);
            prop_assert!(runs <= MAX_RUNS, "{runs} runs");
            prop_assert!(m.name.len() <= MAX_NAME_BYTES);
            let wire = farm_coordinator::cell::wire(&m.cells);
            let bytes: usize = wire.iter().map(Message::encoded_len).sum();
            prop_assert!(bytes <= MAX_EXPANDED_MATRIX_BYTES, "{bytes} bytes");
            for (i, c) in m.cells.iter().enumerate() {
                prop_assert_eq!(c.index.at(), i);
                let state = c.state.as_ref().map_or(0, |s| s.name.len());
                let host = c.host.as_ref().map_or(0, |h| h.name.len());
                prop_assert!(state <= MAX_NAME_BYTES && host <= MAX_NAME_BYTES);
            }
        }
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(shown.len() <= MAX_ERROR_BYTES, "{} bytes", shown.len());
            prop_assert!(e.line >= 1 && e.column >= 1);
            let position = format!("{FILE}:{}:{}: ", e.line, e.column);
            prop_assert!(shown.starts_with(&position), "{}", shown);
            prop_assert!(!e.message.is_empty());
        }
    }
    Ok(())
}

/// Strings as a submitter may write them: empty, known words of the
/// format, CPU lists, unicode, and long ones (up to twice the name limit,
/// or a long list).
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        prop::sample::select(vec![
            "lu",
            "cpu-hog",
            "stream",
            "hackbench",
            "udp-stream",
            "oltp",
            "running",
            "debian:6.1.0-57-cloud-amd64",
            "file:/srv/k/*",
            "offline:1-99999",
            "cycle:0-3",
            "offline:0",
            "v2",
            "v1",
            "max 100000",
            "0-3",
            "x86_64",
            "host",
            "qemu",
            "0 3 * * *",
            "6.*",
        ])
        .prop_map(str::to_owned),
        "[a-z0-9:,._*-]{1,24}",
        "\\PC{1,16}",
        (1..2 * MAX_NAME_BYTES).prop_map(|n| "n".repeat(n)),
        (1..1200u32).prop_map(|n| (0..n)
            .map(|i| (2 * i).to_string())
            .collect::<Vec<_>>()
            .join(",")),
    ]
}

/// A value of any TOML type; arrays of up to 300 numbers make large axes.
fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        string().prop_map(Value::String),
        any::<i64>().prop_map(Value::Integer),
        (-3i64..5000).prop_map(Value::Integer),
        any::<f64>().prop_map(Value::Float),
        any::<bool>().prop_map(Value::Boolean),
        prop::collection::vec(1i64..5000, 0..300)
            .prop_map(|v| Value::Array(v.into_iter().map(Value::Integer).collect())),
    ];
    leaf.prop_recursive(2, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..6)
                .prop_map(|m| Value::Table(m.into_iter().collect())),
        ]
    })
}

/// Keys of the format (any table's), and a few that are not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(vec![
            "name", "repetitions", "max_cells", "timeout_s", "kernels", "workloads", "loads",
            "states", "hosts", "baseline", "verdict", "guest", "schedule", "params",
            "instances", "threads", "size", "seconds", "iterations", "hotplug", "cgroup",
            "cgroup_cpu_weight", "cgroup_cpu_max", "cgroup_cpuset", "autogroup", "arch",
            "min_cpus", "min_numa_nodes", "executor", "kernel", "state", "host", "workload",
            "cron", "on_new_kernel", "cpus", "numa_nodes", "memory_mib", "min_effect_pct",
            "max_runs", "mix_executors", "drift_window",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z_]{1,12}",
        1 => (1..2000usize).prop_map(|n| "k".repeat(n)),
    ]
}

/// Mostly a value of the type `kind` asks for (so that validation goes
/// past serde), sometimes anything.
fn typed(kind: &'static str) -> BoxedStrategy<Value> {
    let int = prop_oneof![
        8 => (0i64..70).prop_map(Value::Integer),
        1 => any::<i64>().prop_map(Value::Integer),
    ];
    let right = match kind {
        "int" => int.boxed(),
        "axis" => prop_oneof![
            int,
            prop::collection::vec(1i64..70, 1..300)
                .prop_map(|v| Value::Array(v.into_iter().map(Value::Integer).collect())),
            (0.0f64..100.0).prop_map(Value::Float),
        ]
        .boxed(),
        "strings" => prop::collection::vec(string().prop_map(Value::String), 0..8)
            .prop_map(Value::Array)
            .boxed(),
        "bool" => any::<bool>().prop_map(Value::Boolean).boxed(),
        _ => string().prop_map(Value::String).boxed(),
    };
    prop_oneof![9 => right, 1 => value()].boxed()
}

/// A table with `name` (mostly) and some of `fields` (key, kind).
fn table(
    names: BoxedStrategy<String>,
    fields: Vec<(&'static str, &'static str)>,
) -> BoxedStrategy<Value> {
    let picked = prop::sample::subsequence(fields.clone(), 0..=fields.len());
    (proptest::option::weighted(0.9, names), picked)
        .prop_flat_map(|(name, picked)| {
            let values: Vec<BoxedStrategy<(String, Value)>> = picked
                .into_iter()
                .map(|(k, kind)| typed(kind).prop_map(move |v| (k.to_owned(), v)).boxed())
                .collect();
            (Just(name), values)
        })
        .prop_map(|(name, values)| {
            let mut t: Table = values.into_iter().collect();
            if let Some(n) = name {
                t.insert("name".into(), Value::String(n));
            }
            Value::Table(t)
        })
        .boxed()
}

/// A name: mostly a short word, sometimes any string.
fn name() -> BoxedStrategy<String> {
    prop_oneof![4 => "[a-z][a-z0-9-]{0,8}", 1 => string()].boxed()
}

fn tables(table: BoxedStrategy<Value>, max: usize) -> BoxedStrategy<Value> {
    prop::collection::vec(table, 0..max)
        .prop_map(Value::Array)
        .boxed()
}

fn workload_name() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::sample::select(vec!["lu", "cpu-hog", "stream", "hackbench", "udp-stream", "oltp"])
            .prop_map(str::to_owned),
        1 => string(),
    ]
    .boxed()
}

/// A `[[workloads]]` table, or a `[[loads]]` one (`load`: with `instances`).
fn workload(load: bool) -> BoxedStrategy<Value> {
    let params = table(
        Just(String::new()).boxed(),
        vec![
            ("threads", "axis"),
            ("size", "axis"),
            ("seconds", "axis"),
            ("iterations", "axis"),
            ("x", "axis"),
        ],
    )
    .prop_map(|v| match v {
        // Params have no name.
        Value::Table(mut t) => {
            t.remove("name");
            Value::Table(t)
        }
        v => v,
    });
    let instances = proptest::option::of(typed("int")).prop_map(move |i| i.filter(|_| load));
    (workload_name(), proptest::option::of(params), instances)
        .prop_map(|(name, params, instances)| {
            let mut t = Table::new();
            t.insert("name".into(), Value::String(name));
            if let Some(p) = params {
                t.insert("params".into(), p);
            }
            if let Some(i) = instances {
                t.insert("instances".into(), i);
            }
            Value::Table(t)
        })
        .boxed()
}

/// A matrix document: the matrix's keys, each mostly of its type, a name
/// and workloads most of the time, and now and then a key it does not know.
fn document() -> impl Strategy<Value = String> {
    let states = table(
        name(),
        vec![
            ("hotplug", "string"),
            ("cgroup", "string"),
            ("cgroup_cpu_weight", "int"),
            ("cgroup_cpu_max", "string"),
            ("cgroup_cpuset", "string"),
            ("autogroup", "int"),
        ],
    );
    let hosts = table(
        name(),
        vec![
            ("arch", "string"),
            ("min_cpus", "int"),
            ("min_numa_nodes", "int"),
            ("executor", "string"),
        ],
    );
    let unnamed = |fields| {
        table(Just(String::new()).boxed(), fields).prop_map(|v| match v {
            Value::Table(mut t) => {
                t.remove("name");
                Value::Table(t)
            }
            v => v,
        })
    };
    let top = (
        prop::sample::subsequence(
            vec![
                ("repetitions", typed("int")),
                ("max_cells", typed("int")),
                ("timeout_s", typed("int")),
                ("kernels", typed("strings")),
                ("loads", tables(workload(true), 3)),
                ("states", tables(states, 6)),
                ("hosts", tables(hosts, 4)),
                (
                    "baseline",
                    unnamed(vec![
                        ("kernel", "string"),
                        ("state", "string"),
                        ("host", "string"),
                        ("workload", "string"),
                    ])
                    .boxed(),
                ),
                (
                    "verdict",
                    unnamed(vec![
                        ("min_effect_pct", "int"),
                        ("max_runs", "int"),
                        ("mix_executors", "bool"),
                        ("drift_window", "int"),
                    ])
                    .boxed(),
                ),
                (
                    "guest",
                    unnamed(vec![
                        ("cpus", "int"),
                        ("numa_nodes", "int"),
                        ("memory_mib", "int"),
                    ])
                    .boxed(),
                ),
                (
                    "schedule",
                    unnamed(vec![("cron", "string"), ("on_new_kernel", "string")]).boxed(),
                ),
            ]
            .into_iter()
            .map(|(k, v)| v.prop_map(move |v| (k, v)).boxed())
            .collect::<Vec<_>>(),
            0..6,
        ),
        proptest::option::weighted(0.1, (key(), value())),
    );
    (
        proptest::option::weighted(0.95, name()),
        proptest::option::weighted(0.95, tables(workload(false), 4)),
        top,
    )
        .prop_flat_map(|(name, workloads, (picked, junk))| {
            (Just(name), Just(workloads), picked, Just(junk))
        })
        .prop_map(|(name, workloads, rest, junk)| {
            let mut t: Table = rest.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            if let Some(n) = name {
                t.insert("name".into(), Value::String(n));
            }
            if let Some(w) = workloads {
                t.insert("workloads".into(), w);
            }
            if let Some((k, v)) = junk {
                t.insert(k, v);
            }
            toml::to_string(&t).unwrap_or_default()
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_are_refused_with_a_position_or_parsed_within_the_limits(
        bytes in prop::collection::vec(any::<u8>(), 0..2048)
    ) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_documents_are_refused_with_a_position_or_parsed_within_the_limits(
        text in document()
    ) {
        check(&text)?;
    }
}

/// A random document rarely gets a long key into an error: this one does.
#[test]
fn a_long_unknown_key_is_cut_in_the_error() {
    let text = format!("name = \"m\"\n{} = 1\n", "k".repeat(1 << 20));
    let e = matrix::parse(FILE, &text).unwrap_err();
    assert_eq!((e.line, e.column), (2, 1));
    assert_eq!(e.key.len(), MAX_KEY_BYTES);
    assert!(e.key.ends_with('…'), "{}", e.key);
    assert_eq!(e.message.len(), MAX_MESSAGE_BYTES);
    assert!(e.to_string().len() <= MAX_ERROR_BYTES);
}
