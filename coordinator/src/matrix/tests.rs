use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use farm_proto::{
    Cell, GuestShape, HostSelector, MachineState, Param, Workload, param::Value as ParamValue,
};
use farm_workload::catalogue::{self, Value};
use proptest::prelude::*;

use super::workloads::wire_param;
use super::*;

const FILE: &str = "m.toml";

/// A parsed matrix as these tests read it: its cells in the wire's form,
/// which agents receive and the store keeps, so that the tests assert the
/// exact strings; beside the typed matrix the parser gave, converted back
/// with `From` (every test thus also checks that the conversion is exact).
#[derive(Debug, Clone, PartialEq)]
struct Matrix {
    name: String,
    repetitions: u32,
    timeout_s: u32,
    cells: Vec<farm_proto::Cell>,
    schedule: Option<Schedule>,
    typed: super::Matrix,
}

impl From<super::Matrix> for Matrix {
    fn from(m: super::Matrix) -> Matrix {
        let cells = crate::cell::wire(&m.cells);
        assert_eq!(
            crate::cell::all(&cells).as_ref(),
            Ok(&m.cells),
            "a round trip"
        );
        Matrix {
            name: m.name.clone(),
            repetitions: m.repetitions,
            timeout_s: m.timeout_s,
            cells,
            schedule: m.schedule.clone(),
            typed: m,
        }
    }
}

fn parse(file_name: &str, text: &str) -> Result<Matrix> {
    super::parse(file_name, text).map(Matrix::from)
}

fn parse_execution(file_name: &str, text: &str, new_kernel: Option<&str>) -> Result<Matrix> {
    super::parse_execution(file_name, text, new_kernel).map(Matrix::from)
}

fn runs(m: &Matrix) -> Vec<Run> {
    super::runs(&m.typed)
}

/// The smallest valid head of a matrix: a name and one workload.
const HEAD: &str = "name = \"m\"\n[[workloads]]\nname = \"lu\"\n";

/// Parses a matrix that must be valid.
fn ok(toml: &str) -> Matrix {
    parse(FILE, toml).unwrap_or_else(|e| panic!("unexpected error: {e}\n{toml}"))
}

/// Parses a matrix that must be refused at exactly `FILE`:`line`:`column`,
/// naming exactly `key` (empty for an error about no key, such as a syntax
/// error), with a message containing `message`. Position and key are checked
/// on the fields and on the error as displayed, which must begin
/// `m.toml:LINE:COLUMN: KEY: `: what the README promises a user.
fn check_err(toml: &str, line: usize, column: usize, key: &str, message: &str) {
    let key_part = if key.is_empty() {
        String::new()
    } else {
        format!("{key}: ")
    };
    let expected = format!("{FILE}:{line}:{column}: {key_part}");
    let err = match parse(FILE, toml) {
        Ok(_) => panic!("accepted, expected {expected}{message}\n{toml}"),
        Err(err) => err,
    };
    let exact = err.file == FILE
        && (err.line, err.column) == (line, column)
        && err.key == key
        && err.to_string().starts_with(&expected)
        && err.message.contains(message);
    assert!(
        exact,
        "got      {err}\nexpected {expected}...{message}...\n{toml}"
    );
}

// ------------------------------------------------------------------ errors

#[test]
fn unknown_keys() {
    check_err(
        "name = \"m\"\nfoo = 1\n[[workloads]]\nname = \"lu\"\n",
        2,
        1,
        "foo",
        "unknown field `foo`",
    );
    check_err(
        &format!("{HEAD}threads = 2\n"),
        4,
        1,
        "workloads[0].threads",
        "unknown field `threads`",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\nhotplg = \"cycle:1\"\n"),
        6,
        1,
        "states[0].hotplg",
        "unknown field `hotplg`",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\nname = \"h\"\ncpus = 2\n"),
        6,
        1,
        "hosts[0].cpus",
        "unknown field `cpus`",
    );
    check_err(
        &format!("{HEAD}[baseline]\nstat = \"default\"\n"),
        5,
        1,
        "baseline.stat",
        "unknown baseline axis `stat` (known: host, iterations, kernel, size, state, threads, workload)",
    );
}

#[test]
fn wrong_types() {
    check_err(
        "name = \"m\"\nrepetitions = \"3\"\n",
        2,
        15,
        "repetitions",
        "expected an integer",
    );
    check_err(
        "name = \"m\"\nrepetitions = 2.5\n",
        2,
        15,
        "repetitions",
        "expected an integer",
    );
    check_err("name = 7\n", 1, 8, "name", "expected a string");
    check_err(
        "name = \"m\"\nkernels = \"running\"\n",
        2,
        11,
        "kernels",
        "expected an array",
    );
    check_err(
        "name = \"m\"\nkernels = [\"a\", 1]\n",
        2,
        17,
        "kernels[1]",
        "expected a string",
    );
    check_err(
        "name = \"m\"\nworkloads = 3\n",
        2,
        13,
        "workloads",
        "expected an array",
    );
    check_err(
        "name = \"m\"\n[workloads]\nname = \"lu\"\n",
        2,
        1,
        "workloads",
        "invalid type: table, expected an array",
    );
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = \"2\" }\n",
        4,
        22,
        "workloads[0].params.threads",
        "expected a number or an array of numbers",
    );
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = [1, \"2\"] }\n",
        4,
        26,
        "workloads[0].params.threads[1]",
        "expected a number",
    );
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = 1.5 }\n",
        4,
        22,
        "workloads[0].params.threads",
        "parameter `threads` must be an integer",
    );
    check_err(
        &format!("{HEAD}params = [1]\n"),
        4,
        10,
        "workloads[0].params",
        "expected a table",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\nautogroup = true\n"),
        6,
        13,
        "states[0].autogroup",
        "expected an integer",
    );
    check_err(
        &format!("{HEAD}[baseline]\nstate = 1\n"),
        5,
        9,
        "baseline.state",
        "expected a state name",
    );
    check_err(
        &format!("{HEAD}[baseline]\nthreads = \"2\"\n"),
        5,
        11,
        "baseline.threads",
        "expected a parameter value",
    );
    check_err(
        &format!("{HEAD}[baseline]\nstate = true\n"),
        5,
        9,
        "baseline.state",
        "expected a string or a number",
    );
}

#[test]
fn missing_keys() {
    check_err(
        "[[workloads]]\nname = \"lu\"\n",
        1,
        1,
        "name",
        "missing field `name`",
    );
    check_err(
        "name = \"m\"\n",
        1,
        1,
        "workloads",
        "missing field `workloads`",
    );
    check_err(
        "name = \"m\"\n[[workloads]]\nparams = {}\n",
        2,
        1,
        "workloads[0].name",
        "missing field `name`",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\narch = \"x86_64\"\n"),
        4,
        1,
        "hosts[0].name",
        "missing field `name`",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \"a\"\n[[states]]\ncgroup = \"shared\"\n"),
        6,
        1,
        "states[1].name",
        "missing field `name`",
    );
}

#[test]
fn empty_values() {
    check_err(
        "name = \"\"\n[[workloads]]\nname = \"lu\"\n",
        1,
        8,
        "name",
        "must not be empty",
    );
    check_err(
        &format!("kernels = []\n{HEAD}"),
        1,
        11,
        "kernels",
        "empty axis",
    );
    check_err(
        &format!("kernels = [\"\"]\n{HEAD}"),
        1,
        12,
        "kernels[0]",
        "must not be empty",
    );
    check_err(
        "name = \"m\"\nworkloads = []\n",
        2,
        13,
        "workloads",
        "empty axis",
    );
    check_err(
        &format!("states = []\n{HEAD}"),
        1,
        10,
        "states",
        "empty axis",
    );
    check_err(&format!("hosts = []\n{HEAD}"), 1, 9, "hosts", "empty axis");
    check_err(
        &format!("{HEAD}params = {{ threads = [] }}\n"),
        4,
        22,
        "workloads[0].params.threads",
        "empty axis",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \" \"\n"),
        5,
        8,
        "states[0].name",
        "must not be empty",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\nname = \"h\"\narch = \"\"\n"),
        6,
        8,
        "hosts[0].arch",
        "must not be empty",
    );
    check_err(
        &format!("{HEAD}[baseline]\n"),
        4,
        1,
        "baseline",
        "empty baseline",
    );
}

/// The catalogue's workload names, as an unknown-workload error lists them.
fn known_workloads() -> String {
    let names: Vec<&str> = catalogue::CATALOGUE.iter().map(|w| w.name).collect();
    names.join(", ")
}

#[test]
fn unknown_names() {
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"stress\"\n",
        3,
        8,
        "workloads[0].name",
        &format!("unknown workload `stress` (known: {})", known_workloads()),
    );
    check_err(
        &format!("{HEAD}params = {{ size = 32, thread = 2 }}\n"),
        4,
        23,
        "workloads[0].params.thread",
        "unknown parameter `thread` of workload `lu`",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\ncgroup = \"nested\"\n"),
        6,
        10,
        "states[0].cgroup",
        "unknown cgroup layout `nested` (known: shared, separate)",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\nname = \"h\"\nexecutor = \"qemu\"\n"),
        6,
        12,
        "hosts[0].executor",
        "unknown executor `qemu` (known: host, tcg, kvm)",
    );
    check_err(
        &format!("kernels = [\"6.1 rc\"]\n{HEAD}"),
        1,
        12,
        "kernels[0]",
        "no whitespace",
    );
}

#[test]
fn out_of_range() {
    check_err(
        &format!("repetitions = 0\n{HEAD}"),
        1,
        15,
        "repetitions",
        "0 is out of range 1..=1000",
    );
    check_err(
        &format!("repetitions = 1001\n{HEAD}"),
        1,
        15,
        "repetitions",
        "1001 is out of range 1..=1000",
    );
    check_err(
        &format!("repetitions = -1\n{HEAD}"),
        1,
        15,
        "repetitions",
        "-1 is out of range 1..=1000",
    );
    check_err(
        &format!("repetitions = 9223372036854775808\n{HEAD}"),
        1,
        15,
        "repetitions",
        "too large",
    );
    check_err(
        &format!("max_cells = 0\n{HEAD}"),
        1,
        13,
        "max_cells",
        "out of range 1..=1000000",
    );
    check_err(
        &format!("timeout_s = 604801\n{HEAD}"),
        1,
        13,
        "timeout_s",
        "out of range 1..=604800",
    );
    check_err(
        &format!("{HEAD}params = {{ size = 4 }}\n"),
        4,
        19,
        "workloads[0].params.size",
        "parameter `size` = 4 is out of range 8..=512",
    );
    check_err(
        &format!("{HEAD}params = {{ threads = [1, 5000] }}\n"),
        4,
        26,
        "workloads[0].params.threads",
        "out of range 1..=4096",
    );
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"cpu-hog\"\nparams = { seconds = 0.001 }\n",
        4,
        22,
        "workloads[0].params.seconds",
        "out of range 0.01..=86400",
    );
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"cpu-hog\"\nparams = { seconds = nan }\n",
        4,
        22,
        "workloads[0].params.seconds",
        "parameter `seconds` = NaN is out of range 0.01..=86400",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\nname = \"h\"\nmin_cpus = 0\n"),
        6,
        12,
        "hosts[0].min_cpus",
        "out of range 1..=100000",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\nname = \"h\"\nmin_numa_nodes = 1025\n"),
        6,
        18,
        "hosts[0].min_numa_nodes",
        "out of range 1..=1024",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\nautogroup = 2\n"),
        6,
        13,
        "states[0].autogroup",
        "2 is out of range 0..=1",
    );
}

#[test]
fn names_have_a_length_limit() {
    let long = "s".repeat(20_000);
    let toml = format!("{HEAD}[[states]]\nname = \"{long}\"\n");
    let err = parse(FILE, &toml).unwrap_err();
    assert_eq!(
        (err.line, err.column, err.key.as_str()),
        (5, 8, "states[0].name")
    );
    assert_eq!(
        err.message,
        format!(
            "name `{}…` is 20000 bytes; the limit (MAX_NAME_BYTES) is 128",
            &long[..farm_spec::EXCERPT_CHARS]
        )
    );
    let err = parse(
        FILE,
        &format!("name = \"{long}\"\n[[workloads]]\nname = \"lu\"\n"),
    )
    .unwrap_err();
    assert_eq!((err.line, err.key.as_str()), (1, "name"));
    // 128 bytes is a name.
    ok(&format!(
        "name = \"{}\"\n[[workloads]]\nname = \"lu\"\n",
        "m".repeat(128)
    ));
}

#[test]
fn duplicates() {
    check_err(
        &format!("kernels = [\"a\", \"b\", \"a\"]\n{HEAD}"),
        1,
        22,
        "kernels[2]",
        "duplicate kernel `a` (also kernels[0])",
    );
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\n[[states]]\nname = \"s\"\n"),
        7,
        8,
        "states[1].name",
        "duplicate state name `s` (also states[0])",
    );
    check_err(
        &format!("{HEAD}[[hosts]]\nname = \"h\"\n[[hosts]]\nname = \"h\"\n"),
        7,
        8,
        "hosts[1].name",
        "duplicate host name `h` (also hosts[0])",
    );
    check_err(
        &format!("{HEAD}params = {{ threads = [1, 2, 1] }}\n"),
        4,
        29,
        "workloads[0].params.threads",
        "duplicate value 1 on the axis",
    );
    // Both entries resolve to lu with the default size.
    let size = default("lu", "size");
    check_err(
        &format!(
            "{HEAD}params = {{ threads = [1, 2] }}\n[[workloads]]\nname = \"lu\"\nparams = {{ threads = 2, size = {size} }}\n"
        ),
        6,
        8,
        "workloads[1]",
        &format!("`lu threads=2 size={size}` is also made by workloads[0]"),
    );
    // Refused by the TOML parser already.
    check_err(
        "name = \"a\"\nname = \"b\"\n",
        2,
        1,
        "name",
        "duplicate key",
    );
}

#[test]
fn too_many_cells() {
    check_err(
        &format!("max_cells = 3\n{HEAD}params = {{ threads = [1, 2, 3, 4] }}\n"),
        1,
        13,
        "max_cells",
        "the matrix has 4 cells, more than the limit of 3",
    );
    let threads: Vec<String> = (1..=101).map(|t| t.to_string()).collect();
    let sizes: Vec<String> = (8..=107).map(|t| t.to_string()).collect();
    check_err(
        &format!(
            "{HEAD}params = {{ threads = [{}], size = [{}] }}\n",
            threads.join(","),
            sizes.join(",")
        ),
        1,
        1,
        "max_cells",
        "the matrix has 10100 cells, more than the limit of 10000",
    );
    // Far too many to build: refused by counting, at once.
    let kernels: Vec<String> = (0..1000).map(|k| format!("\"k{k}\"")).collect();
    let states: String = (0..1000)
        .map(|s| format!("[[states]]\nname = \"s{s}\"\n"))
        .collect();
    let threads: Vec<String> = (1..=4096).map(|t| t.to_string()).collect();
    let sizes: Vec<String> = (8..=512).map(|t| t.to_string()).collect();
    let iterations: Vec<String> = (1..=1000).map(|t| t.to_string()).collect();
    let text = format!(
        "kernels = [{}]\n{HEAD}params = {{ threads = [{}], size = [{}], iterations = [{}] }}\n{states}",
        kernels.join(","),
        threads.join(","),
        sizes.join(","),
        iterations.join(","),
    );
    let started = std::time::Instant::now();
    check_err(
        &text,
        1,
        1,
        "max_cells",
        "the matrix has 2068480000000000 cells",
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

/// A cell as `HEAD` makes it: what `MAX_EXPANDED_MATRIX_BYTES` is
/// measured against.
#[test]
fn a_typical_cell_is_a_few_hundred_bytes() {
    use prost::Message;
    let m = ok(&format!("{HEAD}params = {{ threads = [1, 2] }}\n"));
    let sizes: Vec<usize> = m.cells.iter().map(Message::encoded_len).collect();
    assert_eq!(sizes, vec![102, 104]);
}

#[test]
fn too_many_expanded_bytes() {
    // One state whose CPU list has `CpuSet::MAX_ITEMS` items, in 10,000 cells.
    let cpus: Vec<String> = (0..1024).map(|k| (2 * k + 1).to_string()).collect();
    let threads: Vec<String> = (1..=100).map(|t| t.to_string()).collect();
    let sizes: Vec<String> = (8..=107).map(|t| t.to_string()).collect();
    let text = format!(
        "{HEAD}params = {{ threads = [{}], size = [{}] }}\n[[states]]\nname = \"s\"\nhotplug = \"offline:{}\"\n",
        threads.join(","),
        sizes.join(","),
        cpus.join(","),
    );
    let started = std::time::Instant::now();
    let err = parse(FILE, &text).unwrap_err();
    assert_eq!(
        err.to_string(),
        "m.toml:1:1: the matrix expands to more than 33554432 bytes (MAX_EXPANDED_MATRIX_BYTES): \
         its first 7166 of 10000 cells take 33557772 bytes; shorten the values repeated in \
         every cell (states, hosts, parameters, loads) or split the matrix"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn too_many_runs() {
    let threads: Vec<String> = (1..=100).map(|t| t.to_string()).collect();
    let sizes: Vec<String> = (8..=207).map(|t| t.to_string()).collect();
    check_err(
        &format!(
            "max_cells = 1000000\nrepetitions = 1000\n{HEAD}params = {{ threads = [{}], size = [{}] }}\n",
            threads.join(","),
            sizes.join(",")
        ),
        2,
        15,
        "repetitions",
        "the matrix has 20000000 runs (20000 cells × 1000 repetitions), more than the limit of 1000000",
    );
}

#[test]
fn bad_hotplug() {
    let cases = [
        ("cycle", "expected `cycle:CPUS` or `offline:CPUS`"),
        ("up:1", "unknown hotplug mode `up` (known: cycle, offline)"),
        ("cycle:", "no CPUs given"),
        ("cycle:a", "`a` in `a` is not a CPU number"),
        ("cycle:1,,2", "`` in `1,,2` is not a CPU number"),
        ("cycle: 1", "` 1` in ` 1` is not a CPU number"),
        ("offline:1-", "`` in `1-` is not a CPU number"),
        ("offline:1-2-3", "`2-3` in `1-2-3` is not a CPU number"),
        ("offline:3-1", "range `3-1` runs backwards"),
        (
            "offline:100000",
            "CPU 100000 is beyond the largest supported CPU number 99999",
        ),
        ("offline:99999999999", "beyond the largest supported"),
    ];
    for (hotplug, message) in cases {
        let text = format!("{HEAD}[[states]]\nname = \"s\"\nhotplug = \"{hotplug}\"\n");
        check_err(&text, 6, 11, "states[0].hotplug", message);
    }
    for good in ["cycle:1", "offline:1-3", "cycle:0,2-5,7", "offline:3-3"] {
        ok(&format!(
            "{HEAD}[[states]]\nname = \"s\"\nhotplug = \"{good}\"\n"
        ));
    }
}

/// A state `s` with `cgroup = "shared"` and `line` after it, on line 7.
fn limited_state(line: &str) -> String {
    format!("{HEAD}[[states]]\nname = \"s\"\ncgroup = \"shared\"\n{line}\n")
}

#[test]
fn bad_cgroup_limits() {
    // (line 7 of the state, column, message); the key is the line's.
    let cases: &[(&str, usize, &str)] = &[
        ("cgroup_cpu_weight = 0", 21, "0 is out of range 1..=10000"),
        (
            "cgroup_cpu_weight = 10001",
            21,
            "10001 is out of range 1..=10000",
        ),
        ("cgroup_cpu_weight = -5", 21, "-5 is out of range 1..=10000"),
        ("cgroup_cpu_weight = \"100\"", 21, "expected an integer"),
        ("cgroup_cpu_weight = 1.5", 21, "expected an integer"),
        (
            "cgroup_cpu_max = \"50000\"",
            18,
            "`50000`: expected \"QUOTA PERIOD\" in µs",
        ),
        (
            "cgroup_cpu_max = \"\"",
            18,
            "``: expected \"QUOTA PERIOD\" in µs",
        ),
        (
            "cgroup_cpu_max = \"max 100000\"",
            18,
            "an unlimited quota (`max`) is what no cgroup_cpu_max gives",
        ),
        ("cgroup_cpu_max = \"max\"", 18, "an unlimited quota (`max`)"),
        (
            "cgroup_cpu_max = \"50000  100000\"",
            18,
            "period ` 100000` in `50000  100000` is not a number",
        ),
        (
            "cgroup_cpu_max = \"50000 100000 1\"",
            18,
            "period `100000 1` in `50000 100000 1` is not a number",
        ),
        (
            "cgroup_cpu_max = \"-1 100000\"",
            18,
            "quota `-1` in `-1 100000` is not a number",
        ),
        (
            "cgroup_cpu_max = \"50ms 100ms\"",
            18,
            "quota `50ms` in `50ms 100ms` is not a number",
        ),
        (
            "cgroup_cpu_max = \"999 100000\"",
            18,
            "quota 999 µs is out of range 1000..=17592186044415",
        ),
        (
            "cgroup_cpu_max = \"17592186044416 100000\"",
            18,
            "quota 17592186044416 µs is out of range 1000..=17592186044415",
        ),
        (
            "cgroup_cpu_max = \"99999999999999999999999 100000\"",
            18,
            "quota 99999999999999999999999 µs is out of range",
        ),
        (
            "cgroup_cpu_max = \"1000 999\"",
            18,
            "period 999 µs is out of range 1000..=1000000",
        ),
        (
            "cgroup_cpu_max = \"1000 1000001\"",
            18,
            "period 1000001 µs is out of range 1000..=1000000",
        ),
        ("cgroup_cpu_max = 50000", 18, "expected a string"),
        (
            "cgroup_cpuset = \"\"",
            17,
            "no CPUs given: expected a CPU list like `1`, `0-3` or `0,2-3`",
        ),
        (
            "cgroup_cpuset = \"0-\"",
            17,
            "`` in `0-` is not a CPU number: expected a CPU list",
        ),
        ("cgroup_cpuset = \"1-0\"", 17, "range `1-0` runs backwards"),
        (
            "cgroup_cpuset = \"0 ,1\"",
            17,
            "`0 ` in `0 ,1` is not a CPU number",
        ),
        (
            "cgroup_cpuset = \"0-3:2/4\"",
            17,
            "`3:2/4` in `0-3:2/4` is not a CPU number",
        ),
        (
            "cgroup_cpuset = \"100000\"",
            17,
            "CPU 100000 is beyond the largest supported CPU number 99999",
        ),
        ("cgroup_cpuset = [0, 1]", 17, "expected a string"),
    ];
    for &(line, column, message) in cases {
        let key = format!("states[0].{}", line.split(' ').next().unwrap_or_default());
        check_err(&limited_state(line), 7, column, &key, message);
    }
    for good in [
        "cgroup_cpu_weight = 1",
        "cgroup_cpu_weight = 10000",
        "cgroup_cpu_max = \"1000 1000\"",
        "cgroup_cpu_max = \"1000 1000000\"",
        "cgroup_cpu_max = \"200000 100000\"",
        "cgroup_cpu_max = \"17592186044415 1000000\"",
        "cgroup_cpuset = \"0\"",
        "cgroup_cpuset = \"0-1,3\"",
        "cgroup_cpuset = \"0,0-1\"",
    ] {
        ok(&limited_state(good));
    }
}

#[test]
fn cgroup_limits_need_a_cgroup() {
    let cases = [
        ("cgroup_cpu_weight", "100", 21),
        ("cgroup_cpu_max", "\"50000 100000\"", 18),
        ("cgroup_cpuset", "\"0\"", 17),
    ];
    for (key, value, column) in cases {
        let message = format!("{key} needs cgroup = \"shared\" or \"separate\" in the same state");
        // No cgroup at all, and a bad value too: the missing cgroup is reported.
        check_err(
            &format!("{HEAD}[[states]]\nname = \"s\"\n{key} = {value}\n"),
            6,
            column,
            &format!("states[0].{key}"),
            &message,
        );
        // The cgroup in another state does not count.
        check_err(
            &format!(
                "{HEAD}[[states]]\nname = \"a\"\ncgroup = \"separate\"\n\
                 [[states]]\nname = \"b\"\nhotplug = \"cycle:1\"\n{key} = {value}\n"
            ),
            10,
            column,
            &format!("states[1].{key}"),
            &message,
        );
    }
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\ncgroup_cpu_weight = 0\n"),
        6,
        21,
        "states[0].cgroup_cpu_weight",
        "cgroup_cpu_weight needs cgroup",
    );
}

#[test]
fn cpuset_needs_an_online_cpu() {
    // (hotplug, cpuset, refused)
    let cases = [
        ("offline:1", "1", true),
        ("offline:1-3", "2-3,1", true),
        ("offline:1-2,3", "2-3", true),
        ("offline:1,3", "1-3", false),
        ("offline:1", "0-1", false),
        ("cycle:1", "1", false),
        ("offline:0-99999", "99999", true),
    ];
    for (hotplug, cpuset, refused) in cases {
        let text = format!(
            "{HEAD}[[states]]\nname = \"s\"\nhotplug = \"{hotplug}\"\ncgroup = \"separate\"\n\
             cgroup_cpuset = \"{cpuset}\"\n"
        );
        if refused {
            check_err(
                &text,
                8,
                17,
                "states[0].cgroup_cpuset",
                &format!("every CPU of `{cpuset}` is offline during the run"),
            );
        } else {
            ok(&text);
        }
    }
}

/// `HEAD` then one `[[loads]]` entry whose lines are `body` (from line 5 on).
fn with_load(body: &str) -> String {
    format!("{HEAD}[[loads]]\n{body}\n")
}

#[test]
fn bad_loads() {
    let hog = "name = \"cpu-hog\"\n";
    check_err(
        &with_load("name = \"stress\""),
        5,
        8,
        "loads[0].name",
        &format!("unknown workload `stress` (known: {})", known_workloads()),
    );
    check_err(
        &with_load("params = { threads = 1 }"),
        4,
        1,
        "loads[0].name",
        "missing field `name`",
    );
    check_err(
        &with_load(&format!("{hog}params = {{ threads = [1, 2] }}")),
        6,
        22,
        "loads[0].params.threads",
        "loads take fixed parameters: give `threads` one value",
    );
    check_err(
        &with_load(&format!("{hog}params = {{ threads = 1, seconds = [] }}")),
        6,
        35,
        "loads[0].params.seconds",
        "loads take fixed parameters",
    );
    check_err(
        &with_load(&format!("{hog}params = {{ thread = 1 }}")),
        6,
        12,
        "loads[0].params.thread",
        "unknown parameter `thread` of workload `cpu-hog` (known: threads, seconds)",
    );
    check_err(
        &with_load(&format!("{hog}params = {{ seconds = 0 }}")),
        6,
        22,
        "loads[0].params.seconds",
        "parameter `seconds` = 0 is out of range 0.01..=86400",
    );
    check_err(
        &with_load(&format!("{hog}params = {{ threads = 1.5 }}")),
        6,
        22,
        "loads[0].params.threads",
        "parameter `threads` must be an integer",
    );
    check_err(
        &with_load(&format!("{hog}params = {{ threads = \"1\" }}")),
        6,
        22,
        "loads[0].params.threads",
        "expected a number or an array of numbers",
    );
    check_err(
        &with_load(&format!("{hog}instances = 0")),
        6,
        13,
        "loads[0].instances",
        "0 is out of range 1..=64",
    );
    check_err(
        &with_load(&format!("{hog}instances = 65")),
        6,
        13,
        "loads[0].instances",
        "65 is out of range 1..=64",
    );
    check_err(
        &with_load(&format!("{hog}instances = \"2\"")),
        6,
        13,
        "loads[0].instances",
        "expected an integer",
    );
    check_err(
        &with_load(&format!("{hog}count = 2")),
        6,
        1,
        "loads[0].count",
        "unknown field `count`",
    );
    check_err(
        &format!("{HEAD}[loads]\n{hog}"),
        4,
        1,
        "loads",
        "invalid type: table, expected an array",
    );
    check_err(
        &format!("loads = []\n{HEAD}"),
        1,
        9,
        "loads",
        "no loads given: leave `loads` out",
    );
}

#[test]
fn too_many_load_instances() {
    // 40 + 30 instances: the second entry goes over.
    check_err(
        &format!(
            "{HEAD}[[loads]]\nname = \"cpu-hog\"\ninstances = 40\n\
             [[loads]]\nname = \"lu\"\ninstances = 30\n"
        ),
        9,
        13,
        "loads[1].instances",
        "the loads have 70 instances so far, more than the limit of 64 per cell",
    );
    // 65 entries of one instance each: the 65th name.
    let entries: String = (0..65).map(|_| "[[loads]]\nname = \"cpu-hog\"\n").collect();
    check_err(
        &format!("{HEAD}{entries}"),
        4 + 64 * 2 + 1,
        8,
        "loads[64].name",
        "the loads have 65 instances so far, more than the limit of 64 per cell",
    );
    ok(&format!(
        "{HEAD}[[loads]]\nname = \"cpu-hog\"\ninstances = 60\n[[loads]]\nname = \"lu\"\ninstances = 4\n"
    ));
}

#[test]
fn too_many_load_copies() {
    // 4096 × 4 = 16384 cells × 64 instances = 1048576 copies.
    let threads: Vec<String> = (1..=4096).map(|t| t.to_string()).collect();
    check_err(
        &format!(
            "max_cells = 1000000\n{HEAD}params = {{ threads = [{}], size = [8, 9, 10, 11] }}\n\
             [[loads]]\nname = \"cpu-hog\"\ninstances = 64\n",
            threads.join(",")
        ),
        6,
        1,
        "loads",
        "the matrix has 1048576 load copies (16384 cells × 64 load instances), more than the \
         limit of 1000000",
    );
}

#[test]
fn bad_baselines() {
    let two_states = "[[states]]\nname = \"a\"\n[[states]]\nname = \"b\"\n";
    check_err(
        &format!("{HEAD}{two_states}[baseline]\nstate = \"c\"\n"),
        9,
        9,
        "baseline.state",
        "state `c` is not in the matrix (it has: a, b)",
    );
    check_err(
        &format!("{HEAD}[baseline]\nkernel = \"6.1\"\n"),
        5,
        10,
        "baseline.kernel",
        "kernel `6.1` is not in the matrix (it has: running)",
    );
    check_err(
        &format!("{HEAD}[baseline]\nhost = \"x\"\n"),
        5,
        8,
        "baseline.host",
        "host `x` is not in the matrix (it has: any)",
    );
    check_err(
        &format!("{HEAD}[baseline]\nworkload = \"cpu-hog\"\n"),
        5,
        12,
        "baseline.workload",
        "workload `cpu-hog` is not in the matrix (it has: lu)",
    );
    check_err(
        &format!("{HEAD}params = {{ threads = [1, 2] }}\n[baseline]\nthreads = 3\n"),
        6,
        11,
        "baseline.threads",
        "`threads` = 3 does not occur in the matrix (it has: 1, 2)",
    );
    check_err(
        &format!("{HEAD}[baseline]\nsize = 4\n"),
        5,
        8,
        "baseline.size",
        "parameter `size` = 4 is out of range 8..=512",
    );
    // cpu-hog threads=1 could be compared with lu size=16 or lu size=32.
    check_err(
        "name = \"m\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = 1, size = [16, 32] }\n\
         [[workloads]]\nname = \"cpu-hog\"\n[baseline]\nworkload = \"lu\"\n",
        8,
        12,
        "baseline.workload",
        "ambiguous: `cpu-hog` matches 2 workloads (`lu threads=1 size=16`, `lu threads=1 size=32`)",
    );
}

#[test]
fn syntax_errors() {
    check_err("name = \"m\n", 1, 10, "", "invalid basic string");
    check_err(&format!("{HEAD}[baseline\n"), 4, 10, "", "unclosed table");
}

#[test]
fn columns_count_characters() {
    check_err(
        "name = \"m\"\nkernels = [\"äöü\", 1]\n",
        2,
        19,
        "kernels[1]",
        "expected a string",
    );
}

#[test]
fn display() {
    let err = parse("dir/m.toml", "name = \"m\"\nfoo = 1\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "dir/m.toml:2:1: foo: unknown field `foo`, expected one of `name`, `repetitions`, \
         `max_cells`, `timeout_s`, `kernels`, `workloads`, `loads`, `states`, `hosts`, `baseline`, `verdict`, `guest`, `schedule`, `build`, `builds`"
    );
    let err = parse("m.toml", "name = \"m\n").unwrap_err();
    assert!(
        err.to_string()
            .starts_with("m.toml:1:10: invalid basic string"),
        "{err}"
    );
}

// ------------------------------------------------------------------ expansion

fn param_text(p: &Param) -> String {
    match &p.value {
        Some(ParamValue::Int(v)) => format!("{}={v}", p.name),
        Some(ParamValue::Float(v)) => format!("{}={v:?}", p.name),
        other => format!("{}={other:?}", p.name),
    }
}

/// A parameter's catalogue default, written as [`params_text`] writes it.
fn default(workload: &str, param: &str) -> String {
    let spec = catalogue::lookup(workload).and_then(|w| w.param(param));
    match spec.map(|p| p.default) {
        Ok(Value::Int(v)) => v.to_string(),
        Ok(Value::Float(v)) => format!("{v:?}"),
        Err(e) => panic!("{e}"),
    }
}

fn params_text(cell: &Cell) -> String {
    let workload = cell.workload.as_ref().expect("every cell has a workload");
    let params: Vec<String> = workload.params.iter().map(param_text).collect();
    format!("{} {}", workload.name, params.join(" "))
}

#[test]
fn defaults() {
    let m = ok(HEAD);
    assert_eq!(
        (m.name.as_str(), m.repetitions, m.timeout_s),
        ("m", 1, 3600)
    );
    assert_eq!(m.cells.len(), 1);
    let cell = &m.cells[0];
    assert_eq!(cell.index, 0);
    assert_eq!(cell.name, "lu");
    assert_eq!(cell.kernel, "running");
    let expected = format!(
        "lu iterations={} size={} threads={}",
        default("lu", "iterations"),
        default("lu", "size"),
        default("lu", "threads"),
    );
    assert_eq!(params_text(cell), expected);
    assert_eq!(
        cell.state,
        Some(MachineState {
            name: "default".into(),
            ..Default::default()
        })
    );
    assert_eq!(
        cell.host,
        Some(HostSelector {
            name: "any".into(),
            ..Default::default()
        })
    );
    assert_eq!(cell.baseline, None);
    assert_eq!(
        runs(&m),
        vec![Run {
            cell_index: crate::ids::CellIndex::new(0),
            repetition: 0,
            seq: 0
        }]
    );
}

#[test]
fn states_and_hosts_on_the_wire() {
    let m = ok(&format!(
        "{HEAD}[[states]]\nname = \"s\"\nhotplug = \"cycle:1\"\ncgroup = \"separate\"\nautogroup = 0\n\
         [[hosts]]\nname = \"h\"\narch = \"s390x\"\nmin_cpus = 16\nmin_numa_nodes = 2\nexecutor = \"host\"\n"
    ));
    let cell = &m.cells[0];
    let state = MachineState {
        name: "s".into(),
        hotplug: "cycle:1".into(),
        cgroup: "separate".into(),
        autogroup: Some(0),
        ..Default::default()
    };
    assert_eq!(cell.state.as_ref(), Some(&state));
    let host = HostSelector {
        name: "h".into(),
        arch: "s390x".into(),
        min_cpus: 16,
        min_numa_nodes: 2,
        executor: "host".into(),
    };
    assert_eq!(cell.host.as_ref(), Some(&host));
}

#[test]
fn cgroup_limits_on_the_wire() {
    let m = ok(&format!(
        "{HEAD}[[states]]\nname = \"limited\"\ncgroup = \"separate\"\ncgroup_cpu_weight = 50\n\
         cgroup_cpu_max = \"50000 100000\"\ncgroup_cpuset = \"0-1,3\"\nautogroup = 1\n\
         [[states]]\nname = \"weighted\"\ncgroup = \"shared\"\ncgroup_cpu_weight = 10000\n\
         [[states]]\nname = \"plain\"\ncgroup = \"shared\"\n"
    ));
    let states: Vec<MachineState> = m.cells.iter().filter_map(|c| c.state.clone()).collect();
    assert_eq!(
        states,
        [
            MachineState {
                name: "limited".into(),
                cgroup: "separate".into(),
                autogroup: Some(1),
                cgroup_cpu_weight: 50,
                cgroup_cpu_max: "50000 100000".into(),
                cgroup_cpuset: "0-1,3".into(),
                ..Default::default()
            },
            MachineState {
                name: "weighted".into(),
                cgroup: "shared".into(),
                cgroup_cpu_weight: 10000,
                ..Default::default()
            },
            MachineState {
                name: "plain".into(),
                cgroup: "shared".into(),
                ..Default::default()
            },
        ]
    );
}

fn workload_text(w: &Workload) -> String {
    let params: Vec<String> = w.params.iter().map(param_text).collect();
    format!("{} {}", w.name, params.join(" "))
}

fn loads_text(cell: &Cell) -> Vec<String> {
    cell.loads.iter().map(workload_text).collect()
}

#[test]
fn loads_on_the_wire() {
    let m = ok(&format!(
        "{HEAD}params = {{ threads = [1, 2] }}\n\
         [[loads]]\nname = \"cpu-hog\"\nparams = {{ threads = 1 }}\ninstances = 2\n\
         [[loads]]\nname = \"cpu-hog\"\nparams = {{ seconds = 30, threads = 2 }}\n\
         [[loads]]\nname = \"lu\"\nparams = {{ size = 16 }}\n\
         [[loads]]\nname = \"cpu-hog\"\n\
         [[states]]\nname = \"a\"\n[[states]]\nname = \"b\"\ncgroup = \"separate\"\n"
    ));
    // Instances copies each, in file order, complete and sorted by name; a
    // cpu-hog without `seconds` runs for a day (the agent stops it).
    let hog_threads = default("cpu-hog", "threads");
    let expected = [
        "cpu-hog seconds=86400.0 threads=1".to_owned(),
        "cpu-hog seconds=86400.0 threads=1".to_owned(),
        "cpu-hog seconds=30.0 threads=2".to_owned(),
        format!(
            "lu iterations={} size=16 threads={}",
            default("lu", "iterations"),
            default("lu", "threads")
        ),
        format!("cpu-hog seconds=86400.0 threads={hog_threads}"),
    ];
    assert_eq!(m.cells.len(), 4);
    for cell in &m.cells {
        assert_eq!(loads_text(cell), expected, "{}", cell.name);
    }
    // The same in every cell, so not part of any name.
    let names: Vec<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "lu threads=1 | state=a",
            "lu threads=1 | state=b",
            "lu threads=2 | state=a",
            "lu threads=2 | state=b",
        ]
    );
    // No [[loads]]: no loads.
    assert!(ok(HEAD).cells.iter().all(|c| c.loads.is_empty()));
}

#[test]
fn loads_run_long_unless_told() {
    // Every catalogued workload with a duration gets a day of it as a load;
    // the others get their defaults.
    for spec in catalogue::CATALOGUE {
        let m = ok(&with_load(&format!("name = \"{}\"", spec.name)));
        let load = &m.cells[0].loads;
        assert_eq!(load.len(), 1, "{}", spec.name);
        let mut expected: Vec<(&str, Value)> =
            spec.params.iter().map(|p| (p.name, p.default)).collect();
        for p in &mut expected {
            if p.0 == "seconds" {
                p.1 = Value::Float(LOAD_SECONDS);
            }
        }
        expected.sort_by_key(|p| p.0);
        let expected = Workload {
            name: spec.name.to_owned(),
            params: expected.iter().map(|&(n, v)| wire_param(n, v)).collect(),
        };
        assert_eq!(load[0], expected, "{}", spec.name);
    }
    // A duration given is kept, even a short one.
    let m = ok(&with_load("name = \"cpu-hog\"\nparams = { seconds = 5 }"));
    assert_eq!(
        loads_text(&m.cells[0]),
        [format!(
            "cpu-hog seconds=5.0 threads={}",
            default("cpu-hog", "threads")
        )]
    );
    assert!(
        catalogue::lookup("cpu-hog")
            .and_then(|w| w.param("seconds"))
            .and_then(|p| p.check_float(LOAD_SECONDS))
            .is_ok(),
        "the catalogue takes LOAD_SECONDS for cpu-hog"
    );
}

#[test]
fn float_parameters() {
    let m =
        ok("name = \"m\"\n[[workloads]]\nname = \"cpu-hog\"\nparams = { seconds = [2, 0.5] }\n");
    let texts: Vec<String> = m.cells.iter().map(params_text).collect();
    assert_eq!(
        texts,
        [
            format!(
                "cpu-hog seconds=2.0 threads={}",
                default("cpu-hog", "threads")
            ),
            format!(
                "cpu-hog seconds=0.5 threads={}",
                default("cpu-hog", "threads")
            ),
        ]
    );
    let names: Vec<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["cpu-hog seconds=2", "cpu-hog seconds=0.5"]);
}

#[test]
fn order() {
    let m = ok("name = \"m\"\nkernels = [\"a\", \"b\"]\n\
                [[workloads]]\nname = \"lu\"\nparams = { threads = [2, 1], size = [16, 8] }\n\
                [[workloads]]\nname = \"cpu-hog\"\n\
                [[states]]\nname = \"s1\"\n[[states]]\nname = \"s2\"\n");
    let names: Vec<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
    let mut expected = Vec::new();
    for kernel in ["a", "b"] {
        for workload in [
            "lu threads=2 size=16",
            "lu threads=2 size=8",
            "lu threads=1 size=16",
            "lu threads=1 size=8",
            "cpu-hog",
        ] {
            for state in ["s1", "s2"] {
                expected.push(format!("{workload} | kernel={kernel} | state={state}"));
            }
        }
    }
    assert_eq!(names, expected);
    assert!(
        m.cells
            .iter()
            .enumerate()
            .all(|(i, c)| c.index as usize == i)
    );
    // Complete parameters, sorted by name.
    let iterations = default("lu", "iterations");
    assert_eq!(
        params_text(&m.cells[2]),
        format!("lu iterations={iterations} size=8 threads=2")
    );
    let (seconds, threads) = (default("cpu-hog", "seconds"), default("cpu-hog", "threads"));
    assert_eq!(
        params_text(&m.cells[8]),
        format!("cpu-hog seconds={seconds} threads={threads}")
    );
}

#[test]
fn runs_are_repetition_major() {
    let m = ok(&format!(
        "repetitions = 3\n{HEAD}params = {{ threads = [1, 2] }}\n"
    ));
    let got: Vec<(u32, u32, u64)> = runs(&m)
        .iter()
        .map(|r| (r.cell_index.get(), r.repetition, r.seq))
        .collect();
    assert_eq!(
        got,
        [
            (0, 0, 0),
            (1, 0, 1),
            (0, 1, 2),
            (1, 1, 3),
            (0, 2, 4),
            (1, 2, 5)
        ]
    );
}

/// `(name, baseline name)` of every cell.
fn baselines(m: &Matrix) -> Vec<(String, Option<String>)> {
    m.cells
        .iter()
        .map(|c| {
            (
                c.name.clone(),
                c.baseline.map(|b| m.cells[b as usize].name.clone()),
            )
        })
        .collect()
}

fn pairs(expected: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    expected
        .iter()
        .map(|(a, b)| (a.to_string(), b.map(str::to_string)))
        .collect()
}

#[test]
fn baseline_by_state_and_kernel() {
    let m = ok(
        "name = \"m\"\nkernels = [\"old\", \"new\"]\n[[workloads]]\nname = \"lu\"\n\
                [[states]]\nname = \"plain\"\n[[states]]\nname = \"cycled\"\nhotplug = \"cycle:1\"\n\
                [baseline]\nkernel = \"old\"\nstate = \"plain\"\n",
    );
    assert_eq!(
        baselines(&m),
        pairs(&[
            ("lu | kernel=old | state=plain", None),
            (
                "lu | kernel=old | state=cycled",
                Some("lu | kernel=old | state=plain")
            ),
            (
                "lu | kernel=new | state=plain",
                Some("lu | kernel=old | state=plain")
            ),
            (
                "lu | kernel=new | state=cycled",
                Some("lu | kernel=old | state=plain")
            ),
        ])
    );
}

#[test]
fn baseline_by_parameter() {
    // cpu-hog's threads are fixed at 2: it has no threads=1 cell to be compared with.
    let m = ok(
        "name = \"m\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = [1, 2], size = [8, 16] }\n\
                [[workloads]]\nname = \"cpu-hog\"\nparams = { threads = 2, seconds = [1, 2] }\n\
                [baseline]\nthreads = 1\nseconds = 2\n",
    );
    assert_eq!(
        baselines(&m),
        pairs(&[
            ("lu threads=1 size=8", None),
            ("lu threads=1 size=16", None),
            ("lu threads=2 size=8", Some("lu threads=1 size=8")),
            ("lu threads=2 size=16", Some("lu threads=1 size=16")),
            ("cpu-hog threads=2 seconds=1", None),
            ("cpu-hog threads=2 seconds=2", None),
        ])
    );
}

#[test]
fn baseline_by_workload() {
    let m = ok(
        "name = \"m\"\n[[workloads]]\nname = \"lu\"\nparams = { threads = [1, 2] }\n\
                [[workloads]]\nname = \"cpu-hog\"\nparams = { threads = [1, 2, 3] }\n\
                [baseline]\nworkload = \"cpu-hog\"\n",
    );
    assert_eq!(
        baselines(&m),
        pairs(&[
            ("lu threads=1", Some("cpu-hog threads=1")),
            ("lu threads=2", Some("cpu-hog threads=2")),
            ("cpu-hog threads=1", None),
            ("cpu-hog threads=2", None),
            ("cpu-hog threads=3", None),
        ])
    );
}

/// The examples, one per seed, and the quick look.
const EXAMPLES: &[&str] = &[
    "quick.toml",
    "hotplug-cycle.toml",
    "stream-instances.toml",
    "udp-stream.toml",
    "group-imbalance.toml",
    "migrations.toml",
    "kernels.toml",
    "nightly.toml",
    "eevdf-knobs.toml",
    "stream-instances-guest.toml",
];

fn example(name: &str) -> Matrix {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    parse(&path.display().to_string(), &text).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn examples_parse() {
    // Every example there is, and every one expected.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("examples/ exists") {
        let path = entry.expect("examples/ is readable").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
            example(name.as_deref().unwrap_or_default());
            seen.extend(name);
        }
    }
    for name in EXAMPLES {
        assert!(seen.iter().any(|s| s == name), "{name} missing: {seen:?}");
    }

    let quick = example("quick.toml");
    assert_eq!((quick.cells.len(), quick.repetitions), (4, 5));
    assert_eq!(runs(&quick).len(), 20);
    assert_eq!(quick.cells[1].verdict.as_ref().unwrap().max_runs, 10);

    let knobs = example("eevdf-knobs.toml");
    let states: Vec<(&[String], &[String])> = knobs
        .cells
        .iter()
        .map(|c| {
            let s = c.state.as_ref().unwrap();
            (&s.sched_features[..], &s.sched_tunables[..])
        })
        .collect();
    assert_eq!(states.len(), 4);
    assert_eq!(states[3].0, ["NO_RUN_TO_PARITY"]);
    assert_eq!(states[3].1, ["base_slice_ns=500000"]);

    let guest = example("stream-instances-guest.toml");
    assert_eq!(guest.cells.len(), 2);
    assert_eq!(guest.cells[1].baseline, Some(0));
    let shape = guest.cells[1].guest.as_ref().unwrap();
    assert_eq!(
        (shape.cpus, shape.numa_nodes, shape.memory_mib),
        (4, 4, 2048)
    );
}

/// The format reference, docs/MATRIX.md, stays true: its example is a valid
/// matrix and its error is what a matrix gets.
#[test]
fn the_format_reference_holds() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/MATRIX.md");
    let doc = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let blocks: Vec<&str> = doc
        .split("```")
        .skip(1)
        .step_by(2)
        .map(|b| b.split_once('\n').map_or("", |(_, body)| body))
        .collect();
    let example = blocks
        .iter()
        .find(|b| b.starts_with("name = \"group-imbalance\""))
        .expect("docs/MATRIX.md has the group-imbalance example");
    let m = ok(example);
    let names: Vec<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "lu threads=2 | state=shared",
            "lu threads=2 | state=separate",
            "lu threads=3 | state=shared",
            "lu threads=3 | state=separate",
        ]
    );
    assert_eq!(m.cells[1].baseline, Some(0));
    assert_eq!(m.cells[0].loads.len(), 2);

    let err = parse(FILE, &format!("{HEAD}params = {{ threads = [1, 2, 1] }}\n")).unwrap_err();
    assert!(
        doc.contains(&format!("\n{err}\n")),
        "docs/MATRIX.md shows another error than `{err}`"
    );
}

#[test]
fn example_nightly_is_a_schedule_whose_executions_parse() {
    let nightly = example("nightly.toml");
    let schedule = nightly.schedule.expect("a [schedule]");
    assert_eq!(schedule.cron, "0 3 * * *");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/nightly.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    // A cron execution: the hosts' running kernel; a trigger's: the new
    // image instead, in a guest, with the same comparisons.
    let cron = parse_execution("nightly.toml", &text, None).unwrap();
    assert_eq!(cron.cells.len(), 4);
    assert!(cron.cells.iter().all(|c| c.kernel == "running"));
    let new = parse_execution("nightly.toml", &text, Some("file:/srv/kernels/v6.13")).unwrap();
    assert_eq!(new.cells.len(), 4);
    for c in &new.cells {
        assert_eq!(c.kernel, "file:/srv/kernels/v6.13");
        assert!(matches!(c.kernel.parse(), Ok(farm_spec::Kernel::File(_))));
    }
    assert_eq!(new.cells[1].baseline, Some(0), "autogroup on against off");
}

#[test]
fn example_group_imbalance() {
    let m = example("group-imbalance.toml");
    assert_eq!(m.repetitions, 5);
    let names: Vec<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "lu threads=2 size=162 iterations=40 | state=shared",
            "lu threads=2 size=162 iterations=40 | state=separate",
            "lu threads=3 size=162 iterations=40 | state=shared",
            "lu threads=3 size=162 iterations=40 | state=separate",
        ]
    );
    assert_eq!(
        baselines(&m),
        pairs(&[
            ("lu threads=2 size=162 iterations=40 | state=shared", None),
            (
                "lu threads=2 size=162 iterations=40 | state=separate",
                Some("lu threads=2 size=162 iterations=40 | state=shared")
            ),
            ("lu threads=3 size=162 iterations=40 | state=shared", None),
            (
                "lu threads=3 size=162 iterations=40 | state=separate",
                Some("lu threads=3 size=162 iterations=40 | state=shared")
            ),
        ])
    );
    for cell in &m.cells {
        // Two `stress --cpu 1`: two one-thread hogs, for as long as the run.
        assert_eq!(
            loads_text(cell),
            ["cpu-hog seconds=86400.0 threads=1"; 2],
            "{}",
            cell.name
        );
        let state = cell.state.as_ref().expect("every cell has a state");
        assert_eq!(state.cgroup, state.name, "{}", cell.name);
        assert_eq!(state.autogroup, Some(0), "{}", cell.name);
    }
}

#[test]
fn example_hotplug_cycle() {
    let m = example("hotplug-cycle.toml");
    let states: Vec<(&str, &str, Option<u32>)> = m
        .cells
        .iter()
        .filter_map(|c| c.state.as_ref())
        .map(|s| (s.name.as_str(), s.hotplug.as_str(), s.autogroup))
        .collect();
    assert_eq!(
        states,
        [("booted", "", Some(0)), ("cpu1-cycled", "cycle:1", Some(0))]
    );
    assert_eq!(m.cells[1].baseline, Some(0));
    assert!(
        m.cells
            .iter()
            .all(|c| c.workload.as_ref().is_some_and(|w| w.name == "lu"))
    );
}

// ------------------------------------------------------------------ properties

/// A random valid matrix, written as TOML by [`Generated::toml`].
#[derive(Debug, Clone)]
struct Generated {
    kernels: Vec<&'static str>,
    workloads: Vec<GeneratedWorkload>,
    states: usize,
    hosts: usize,
    repetitions: u32,
    /// `[[loads]]` entries: workload and instances.
    loads: Vec<(&'static str, u32)>,
    /// `[baseline]` entries, already written as TOML values.
    baseline: Vec<(&'static str, String)>,
}

/// A workload name and its axes (parameter, values).
type GeneratedWorkload = (&'static str, Vec<(&'static str, Vec<i64>)>);

impl Generated {
    fn toml(&self) -> String {
        let mut t = format!(
            "name = \"p\"\nrepetitions = {}\nkernels = [",
            self.repetitions
        );
        let kernels: Vec<String> = self.kernels.iter().map(|k| format!("\"{k}\"")).collect();
        t.push_str(&kernels.join(", "));
        t.push_str("]\n");
        for (i, (name, axes)) in self.workloads.iter().enumerate() {
            // A fixed parameter that no other entry shares keeps entries apart.
            let tag = if *name == "lu" {
                "iterations"
            } else {
                "seconds"
            };
            t.push_str(&format!(
                "[[workloads]]\nname = \"{name}\"\nparams = {{ {tag} = {}",
                i + 1
            ));
            for (param, values) in axes {
                let values: Vec<String> = values.iter().map(i64::to_string).collect();
                t.push_str(&format!(", {param} = [{}]", values.join(", ")));
            }
            t.push_str(" }\n");
        }
        for (name, instances) in &self.loads {
            t.push_str(&format!(
                "[[loads]]\nname = \"{name}\"\ninstances = {instances}\n"
            ));
        }
        for s in 0..self.states {
            t.push_str(&format!("[[states]]\nname = \"s{s}\"\n"));
        }
        for h in 0..self.hosts {
            t.push_str(&format!("[[hosts]]\nname = \"h{h}\"\n"));
        }
        if !self.baseline.is_empty() {
            t.push_str("[baseline]\n");
            for (key, value) in &self.baseline {
                t.push_str(&format!("{key} = {value}\n"));
            }
        }
        t
    }

    fn cell_count(&self) -> usize {
        let variants: usize = self
            .workloads
            .iter()
            .map(|(_, axes)| axes.iter().map(|a| a.1.len()).product::<usize>())
            .sum();
        self.kernels.len() * variants * self.states * self.hosts
    }
}

fn axis(values: Vec<i64>) -> impl Strategy<Value = Vec<i64>> {
    let n = values.len();
    proptest::sample::subsequence(values, 1..=n).prop_shuffle()
}

fn workload() -> impl Strategy<Value = GeneratedWorkload> {
    let lu = (
        proptest::option::of(axis(vec![1, 2, 3, 4])),
        proptest::option::of(axis(vec![8, 16, 32])),
    )
        .prop_map(|(threads, size)| {
            let mut axes = Vec::new();
            axes.extend(size.map(|v| ("size", v)));
            axes.extend(threads.map(|v| ("threads", v)));
            ("lu", axes)
        });
    let hog = proptest::option::of(axis(vec![1, 2, 3])).prop_map(|threads| {
        (
            "cpu-hog",
            threads.map(|v| ("threads", v)).into_iter().collect(),
        )
    });
    prop_oneof![lu, hog]
}

fn generated() -> impl Strategy<Value = Generated> {
    (
        axis(vec![0, 1, 2]).prop_map(|ks| {
            ks.into_iter()
                .map(|k| ["running", "6.1.0", "6.12.0"][k as usize])
                .collect::<Vec<_>>()
        }),
        proptest::collection::vec(workload(), 1..=3),
        1..=3usize,
        1..=3usize,
        1..=4u32,
        proptest::collection::vec(
            (proptest::sample::select(vec!["cpu-hog", "lu"]), 1..=3u32),
            0..=2,
        ),
    )
        .prop_flat_map(|(kernels, workloads, states, hosts, repetitions, loads)| {
            // Baseline values are picked among those on the axes (or a parameter's default).
            let mut threads: Vec<i64> = workloads
                .iter()
                .flat_map(|(name, axes)| {
                    let given = axes.iter().find(|a| a.0 == "threads").map(|a| a.1.clone());
                    given.unwrap_or_else(|| {
                        let spec = catalogue::lookup(name).and_then(|w| w.param("threads"));
                        match spec.map(|p| p.default) {
                            Ok(Value::Int(t)) => vec![t],
                            other => panic!("threads of {name} default to {other:?}"),
                        }
                    })
                })
                .collect();
            threads.sort_unstable();
            threads.dedup();
            let mut names: Vec<&'static str> = workloads.iter().map(|w| w.0).collect();
            names.sort_unstable();
            names.dedup();
            let kernel = proptest::option::of(proptest::sample::select(kernels.clone()))
                .prop_map(|k| k.map(|k| ("kernel", format!("\"{k}\""))));
            let state = proptest::option::of(0..states)
                .prop_map(|s| s.map(|s| ("state", format!("\"s{s}\""))));
            let host = proptest::option::of(0..hosts)
                .prop_map(|h| h.map(|h| ("host", format!("\"h{h}\""))));
            let workload = proptest::option::weighted(0.2, proptest::sample::select(names))
                .prop_map(|w| w.map(|w| ("workload", format!("\"{w}\""))));
            let threads = proptest::option::of(proptest::sample::select(threads))
                .prop_map(|t| t.map(|t| ("threads", t.to_string())));
            let baseline = (kernel, state, host, workload, threads).prop_map(|(a, b, c, d, e)| {
                [a, b, c, d, e].into_iter().flatten().collect::<Vec<_>>()
            });
            (
                Just((kernels, workloads, states, hosts, repetitions, loads)),
                baseline,
            )
        })
        .prop_map(
            |((kernels, workloads, states, hosts, repetitions, loads), baseline)| Generated {
                kernels,
                workloads,
                states,
                hosts,
                repetitions,
                loads,
                baseline,
            },
        )
}

/// A cell's coordinates, read back from the wire form.
#[derive(Debug, PartialEq)]
struct Coordinates {
    kernel: String,
    state: String,
    host: String,
    workload: String,
    params: BTreeMap<String, f64>,
}

fn coordinates(cell: &Cell) -> Coordinates {
    let workload = cell.workload.as_ref().expect("every cell has a workload");
    let params = workload
        .params
        .iter()
        .map(|p| {
            let value = match p.value {
                Some(ParamValue::Int(v)) => v as f64,
                Some(ParamValue::Float(v)) => v,
                ref other => panic!("unexpected parameter value {other:?}"),
            };
            (p.name.clone(), value)
        })
        .collect();
    Coordinates {
        kernel: cell.kernel.clone(),
        state: cell
            .state
            .as_ref()
            .map(|s| s.name.clone())
            .unwrap_or_default(),
        host: cell
            .host
            .as_ref()
            .map(|h| h.name.clone())
            .unwrap_or_default(),
        workload: workload.name.clone(),
        params,
    }
}

/// The cells the baseline rule allows as `cell`'s baseline, found by brute force.
fn candidates(all: &[Coordinates], baseline: &[(&str, String)], cell: &Coordinates) -> Vec<usize> {
    let get = |key: &str| {
        baseline
            .iter()
            .find(|b| b.0 == key)
            .map(|b| b.1.trim_matches('"').to_owned())
    };
    let want = |key: &str, own: &str| get(key).unwrap_or_else(|| own.to_owned());
    all.iter()
        .enumerate()
        .filter(|(_, t)| {
            t.kernel == want("kernel", &cell.kernel)
                && t.state == want("state", &cell.state)
                && t.host == want("host", &cell.host)
                && t.workload == want("workload", &cell.workload)
                && t.params.iter().all(|(p, v)| match get(p) {
                    Some(b) => b.parse::<f64>().ok() == Some(*v),
                    None => cell.params.get(p).is_none_or(|own| own == v),
                })
        })
        .map(|(i, _)| i)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn expansion_is_deterministic_and_complete(g in generated()) {
        let text = g.toml();
        let first = parse(FILE, &text);
        prop_assert_eq!(&first, &parse(FILE, &text));
        let all_coordinates = |m: &Matrix| m.cells.iter().map(coordinates).collect::<Vec<_>>();
        let m = match first {
            Ok(m) => m,
            Err(e) => {
                // Only a workload baseline may be refused, and only when it is ambiguous.
                prop_assert!(e.key == "baseline.workload" && e.message.contains("ambiguous"), "{}\n{}", e, text);
                // The same matrix without the baseline parses; some cell has several candidates.
                let plain = Generated { baseline: Vec::new(), ..g.clone() };
                let m = parse(FILE, &plain.toml()).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let all = all_coordinates(&m);
                prop_assert!(all.iter().any(|c| candidates(&all, &g.baseline, c).len() > 1));
                return Ok(());
            }
        };
        prop_assert_eq!(m.cells.len(), g.cell_count(), "{}", text);
        prop_assert_eq!(m.repetitions, g.repetitions);

        let names: HashSet<&str> = m.cells.iter().map(|c| c.name.as_str()).collect();
        prop_assert_eq!(names.len(), m.cells.len(), "cell names are unique");
        // Every cell has the same loads: each entry's instances, in file order.
        let load_names: Vec<&str> = g
            .loads
            .iter()
            .flat_map(|&(name, n)| std::iter::repeat_n(name, n as usize))
            .collect();
        let first = &m.cells[0].loads;
        prop_assert_eq!(first.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(), load_names);
        prop_assert!(m.cells.iter().all(|c| &c.loads == first));
        let all = all_coordinates(&m);
        for (i, cell) in m.cells.iter().enumerate() {
            prop_assert_eq!(cell.index as usize, i);
            let found = candidates(&all, &g.baseline, &all[i]);
            prop_assert!(found.len() <= 1, "{}: several candidates", cell.name);
            let expected = found.first().copied().filter(|&t| t != i);
            prop_assert_eq!(cell.baseline.map(|b| b as usize), expected, "{}\n{}", cell.name, text);
            if let Some(b) = cell.baseline {
                // The baseline differs only on the baseline axes.
                let (c, t) = (&all[i], &all[b as usize]);
                let free = |key: &str| g.baseline.iter().any(|x| x.0 == key);
                prop_assert!(free("kernel") || c.kernel == t.kernel);
                prop_assert!(free("state") || c.state == t.state);
                prop_assert!(free("host") || c.host == t.host);
                prop_assert!(free("workload") || c.workload == t.workload);
                if !free("workload") {
                    for (p, v) in &c.params {
                        prop_assert!(free(p) || t.params.get(p) == Some(v), "{} vs {}", cell.name, m.cells[b as usize].name);
                    }
                }
            }
        }

        let runs = runs(&m);
        prop_assert_eq!(runs.len(), m.cells.len() * m.repetitions as usize);
        let pairs: HashSet<(u32, u32)> = runs.iter().map(|r| (r.cell_index.get(), r.repetition)).collect();
        prop_assert_eq!(pairs.len(), runs.len());
        prop_assert!(runs.iter().all(|r| r.cell_index.at() < m.cells.len() && r.repetition < m.repetitions));
        prop_assert!(runs.iter().enumerate().all(|(i, r)| r.seq == i as u64));
        prop_assert!(runs.windows(2).all(|w| w[0].repetition <= w[1].repetition), "repetition-major");
    }
}

// ------------------------------------------------------------------ verdicts

#[test]
fn verdict_policies() {
    // Without [verdict]: 2% and three times the repetitions.
    let m = ok(&format!("repetitions = 5\n{HEAD}"));
    let p = m.cells[0].verdict.clone().expect("a policy on every cell");
    assert_eq!((p.min_effect, p.max_runs), (0.02, 15));
    assert!(p.min_effect_by_metric.is_empty());
    let m = ok(&format!(
        "repetitions = 10\n{HEAD}[verdict]\nmin_effect_pct = 5\nmax_runs = 40\n\
         min_effect_pct_by_metric = {{ cpu_migrations = 12.5 }}\n"
    ));
    let p = m.cells[0].verdict.clone().unwrap();
    assert_eq!((p.min_effect, p.max_runs), (0.05, 40));
    assert_eq!(p.min_effect_by_metric["cpu_migrations"], 0.125);
    // max_runs = repetitions: never add runs.
    let m = ok(&format!("repetitions = 4\n{HEAD}[verdict]\nmax_runs = 4\n"));
    assert_eq!(m.cells[0].verdict.as_ref().unwrap().max_runs, 4);
    // A drift is judged over the last 30 points unless the matrix says
    // (stored as 0, the default, so that it costs no bytes per cell).
    let p = m.cells[0].verdict.as_ref().unwrap();
    assert_eq!((p.drift_window, crate::policy::drift_window(p)), (0, 30));
    let m = ok(&format!("{HEAD}[verdict]\ndrift_window = 60\n"));
    let p = m.cells[0].verdict.as_ref().unwrap();
    assert_eq!((p.drift_window, crate::policy::drift_window(p)), (60, 60));
}

#[test]
fn bad_verdict_policies() {
    check_err(
        &format!("repetitions = 4\n{HEAD}[verdict]\nmax_runs = 3\n"),
        6,
        12,
        "verdict.max_runs",
        "3 is out of range 4..=1000",
    );
    check_err(
        &format!("{HEAD}[verdict]\nmin_effect_pct = 120\n"),
        5,
        18,
        "verdict.min_effect_pct",
        "120 is out of range 0..=100",
    );
    check_err(
        &format!("{HEAD}[verdict]\nmin_effect_pct_by_metric = {{ wall_s = -1 }}\n"),
        5,
        39,
        "verdict.min_effect_pct_by_metric.wall_s",
        "-1 is out of range 0..=100",
    );
    // Fewer points than a drift needs, more than a history keeps.
    for bad in ["9", "1001"] {
        check_err(
            &format!("{HEAD}[verdict]\ndrift_window = {bad}\n"),
            5,
            16,
            "verdict.drift_window",
            &format!("{bad} is out of range 10..=1000"),
        );
    }
    check_err(
        &format!("{HEAD}[verdict]\nmin_effect = 2\n"),
        5,
        1,
        "verdict.min_effect",
        "unknown field `min_effect`",
    );
}

#[test]
fn kernel_names() {
    let m = ok(
        "kernels = [\"running\", \"6.1.0-47-amd64\", \"debian:6.1.0-57-cloud-amd64\", \
         \"debian:6.12.107+deb12-cloud-amd64\", \"debian:6.1.0-50-s390x\", \
         \"git:tip@sched/urgent\"]\n\
         name = \"m\"\n[[workloads]]\nname = \"stress-ng\"\n",
    );
    let kinds: Vec<String> = m
        .cells
        .iter()
        .map(|c| match c.kernel.parse::<farm_spec::Kernel>().unwrap() {
            farm_spec::Kernel::Running => "running".to_owned(),
            farm_spec::Kernel::Release(_) => "release".to_owned(),
            farm_spec::Kernel::Debian(d) => format!("debian {}", d.arch()),
            farm_spec::Kernel::File(_) => "file".to_owned(),
            farm_spec::Kernel::Git(g) => format!("git {}", g.repo()),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "running",
            "release",
            "debian x86_64",
            "debian x86_64",
            "debian s390x",
            "git tip"
        ]
    );
    for (kernel, message) in [
        (
            "debian:6.1.0-57-cloud-amd64;reboot",
            "letters and digits separated by single",
        ),
        ("debian:../../etc", "letters and digits separated by single"),
        ("debian:6.1.0-57", "flavour"),
        ("debian:", "letters and digits separated by single"),
        ("file:vmlinuz", "absolute path"),
        ("file:/srv/../etc/shadow", "absolute path"),
        ("file:/srv/kernels/vmlinuz;test", "letters, digits and /"),
        ("file:/srv/kernels/$(reboot)", "letters, digits and /"),
        ("http://example.com/vmlinuz", "`running`, a release"),
        ("git:/srv/linux@v6.1", "a repository is a name"),
        (
            "git:linux@v6.0..v6.1",
            "a ref is a commit id, tag or branch",
        ),
        (
            "git:linux@--output=x",
            "a ref is a commit id, tag or branch",
        ),
        ("git:linux", "`git:<repo>@<ref>`"),
    ] {
        check_err(
            &format!("kernels = [\"{kernel}\"]\n{HEAD}"),
            1,
            12,
            "kernels[0]",
            message,
        );
    }
}

#[test]
fn what_guests_cannot_run_is_refused() {
    check_err(
        &format!(
            "kernels = [\"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}\
             [[loads]]\nname = \"cpu-hog\"\n"
        ),
        1,
        12,
        "kernels[0]",
        "competing loads",
    );
    // The farm's binaries exist for x86_64 only.
    check_err(
        &format!("kernels = [\"debian:6.1.0-57-cloud-amd64\", \"debian:6.1.0-50-s390x\"]\n{HEAD}"),
        1,
        43,
        "kernels[1]",
        "whose binaries exist for x86_64 only; s390x guests run stress-ng",
    );
    check_err(
        "kernels = [\"debian:6.1.0-57-cloud-amd64\"]\nname = \"m\"\n\
         [[workloads]]\nname = \"iperf3\"\n",
        1,
        12,
        "kernels[0]",
        "`iperf3` is not carried into guests",
    );
    ok(
        "kernels = [\"debian:6.1.0-50-s390x\", \"debian:6.1.0-57-amd64\"]\nname = \"m\"\n\
        [[workloads]]\nname = \"sysbench-threads\"\n\
        [[workloads]]\nname = \"rt-hackbench\"\n",
    );
    // Cgroup layouts, hotplug and autogroup are applied inside guests.
    ok(&format!(
        "kernels = [\"running\", \"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}\
         [[states]]\nname = \"grouped\"\ncgroup = \"separate\"\ncgroup_cpu_weight = 50\n"
    ));
    // Hotplug and autogroup are applied inside guests.
    ok(&format!(
        "kernels = [\"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}[[states]]\nname = \"cycled\"\n\
         hotplug = \"cycle:1\"\nautogroup = 0\n"
    ));
}

#[test]
fn the_guest_table_shapes_guest_machines_only() {
    let m = ok(&format!(
        "kernels = [\"running\", \"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}\
         [guest]\ncpus = 8\nnuma_nodes = 4\nmemory_mib = 1024\n"
    ));
    assert_eq!(m.cells[0].guest, None, "the host cell");
    assert_eq!(
        m.cells[1].guest,
        Some(GuestShape {
            cpus: 8,
            numa_nodes: 4,
            memory_mib: 1024
        })
    );
    // A key left out is 0 on the wire: the arch's default, for each arch.
    let m = ok(
        "kernels = [\"debian:6.1.0-57-cloud-amd64\", \"debian:6.1.0-50-s390x\"]\n\
         name = \"m\"\n[[workloads]]\nname = \"stress-ng\"\n[guest]\nmemory_mib = 1024\n",
    );
    assert_eq!(
        m.cells[0].guest,
        Some(GuestShape {
            cpus: 0,
            numa_nodes: 0,
            memory_mib: 1024
        })
    );
    let guest = |table: &str| {
        format!("kernels = [\"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}[guest]\n{table}")
    };
    check_err(
        &guest("cpus = 6\nnuma_nodes = 4\n"),
        5,
        1,
        "guest",
        "for `debian:6.1.0-57-cloud-amd64` (x86_64; fields left out take its default): \
         6 vCPUs do not split evenly over 4 NUMA nodes",
    );
    // x86_64's default 2 nodes do not take 3 vCPUs.
    check_err(
        &guest("cpus = 3\n"),
        5,
        1,
        "guest",
        "3 vCPUs do not split evenly over 2",
    );
    check_err(
        &guest("cpus = 0\n"),
        6,
        8,
        "guest.cpus",
        "0 is out of range 1..=64",
    );
    check_err(
        &guest("cpus = 16\nnuma_nodes = 4\nmemory_mib = 256\n"),
        5,
        1,
        "guest",
        "less than 128 MiB a node",
    );
    check_err(
        &guest("vcpus = 2\n"),
        6,
        1,
        "guest.vcpus",
        "unknown field `vcpus`",
    );
    check_err(
        "kernels = [\"debian:6.1.0-50-s390x\"]\nname = \"m\"\n[[workloads]]\n\
         name = \"stress-ng\"\n[guest]\nnuma_nodes = 2\ncpus = 2\n",
        5,
        1,
        "guest",
        "s390x guests have no NUMA nodes",
    );
    check_err(
        &format!("{HEAD}[guest]\ncpus = 2\n"),
        4,
        1,
        "guest",
        "no kernel of the matrix boots in a guest",
    );
}

#[test]
fn an_executor_must_suit_every_kernel() {
    let hosts = |executor: &str| format!("[[hosts]]\nname = \"h\"\nexecutor = \"{executor}\"\n");
    ok(&format!(
        "kernels = [\"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}{}",
        hosts("tcg")
    ));
    ok(&format!("kernels = [\"running\"]\n{HEAD}{}", hosts("host")));
    check_err(
        &format!(
            "kernels = [\"running\", \"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}{}",
            hosts("host")
        ),
        7,
        12,
        "hosts[0].executor",
        "`debian:6.1.0-57-cloud-amd64` boots in a guest",
    );
    check_err(
        &format!("kernels = [\"running\"]\n{HEAD}{}", hosts("kvm")),
        7,
        12,
        "hosts[0].executor",
        "`running` runs on the agent's own kernel",
    );
}

#[test]
fn schedules() {
    let m = ok(&format!(
        "{HEAD}[schedule]\ncron = \" 0 3 * * * \"\non_new_kernel = \"file:/srv/k/*\"\n"
    ));
    assert_eq!(
        m.schedule,
        Some(Schedule {
            cron: "0 3 * * *".into(),
            on_new_kernel: "file:/srv/k/*".into(),
            bisect: false,
        })
    );
    assert_eq!(ok(HEAD).schedule, None);
    check_err(
        &format!("{HEAD}[schedule]\ncron = \"0 3 * *\"\n"),
        5,
        8,
        "schedule.cron",
        "`0 3 * *` has 4 fields; a cron schedule has five",
    );
    check_err(
        &format!("{HEAD}[schedule]\ncron = \"0 25 * * *\"\n"),
        5,
        8,
        "schedule.cron",
        "`0 25 * * *`",
    );
    check_err(
        &format!("{HEAD}[schedule]\non_new_kernel = \"file:[\"\n"),
        5,
        17,
        "schedule.on_new_kernel",
        "`file:[`",
    );
    check_err(
        &format!("{HEAD}[schedule]\n"),
        4,
        1,
        "schedule",
        "a schedule needs `cron`",
    );
    check_err(
        &format!("{HEAD}[schedule]\nevery = \"day\"\n"),
        5,
        1,
        "schedule.every",
        "unknown field `every`",
    );
}

#[test]
fn executions_add_the_new_kernel_to_the_axis() {
    let text = format!("{HEAD}[schedule]\non_new_kernel = \"*\"\n");
    let m = parse_execution(FILE, &text, Some("6.13.0-rc1")).unwrap();
    assert_eq!(m.schedule, None);
    let kernels: Vec<&str> = m.cells.iter().map(|c| c.kernel.as_str()).collect();
    assert_eq!(kernels, ["6.13.0-rc1"]);
    // After the file's kernels, compared with the file's baseline.
    let text = "name = \"m\"\nkernels = [\"debian:6.1.0-47-amd64\"]\n[[workloads]]\nname = \"lu\"\n\
         [baseline]\nkernel = \"debian:6.1.0-47-amd64\"\n[schedule]\non_new_kernel = \"debian:*\"\n";
    let m = parse_execution(FILE, text, Some("debian:6.1.0-57-amd64")).unwrap();
    let kernels: Vec<&str> = m.cells.iter().map(|c| c.kernel.as_str()).collect();
    assert_eq!(kernels, ["debian:6.1.0-47-amd64", "debian:6.1.0-57-amd64"]);
    assert_eq!(m.cells[1].baseline, Some(0));
    // The new kernel's cells trend apart from the file's own kernel's.
    assert!(!m.cells[0].new_kernel && m.cells[1].new_kernel);
    // A kernel the file runs anyway is not new.
    let m = parse_execution(FILE, text, Some("debian:6.1.0-47-amd64")).unwrap();
    assert_eq!(m.cells.len(), 1);
    assert!(!m.cells[0].new_kernel);
    // A kernel name no matrix may hold is refused, pointing at the trigger.
    for (kernel, message) in [
        ("debian:6.1.0-57-sparc", "new kernel"),
        ("file:/srv/k/a b", "no whitespace"),
    ] {
        let err = parse_execution(FILE, text, Some(kernel)).unwrap_err();
        assert_eq!(
            (err.file.as_str(), err.line, err.column, err.key.as_str()),
            (FILE, 8, 17, "schedule.on_new_kernel"),
            "{err}"
        );
        assert!(
            err.to_string()
                .starts_with("m.toml:8:17: schedule.on_new_kernel: ")
                && err.message.contains(message),
            "{err}"
        );
    }
}

#[test]
fn a_build_reaches_the_cells_of_git_kernels_only() {
    let m = ok(&format!(
        "kernels = [\"git:linux@v6.1\", \"debian:6.1.0-57-cloud-amd64\"]\n{HEAD}\
         [build]\nconfig = \"fleet-6.1.config\"\n\
         fragments = [\"CONFIG_HZ_1000=y\", \"CONFIG_PREEMPT=n\"]\n\
         patches = [\"0001-sched-fix.patch\"]\n"
    ));
    let b = m.cells[0].build.as_ref().unwrap();
    assert_eq!(b.config, "fleet-6.1.config");
    assert_eq!(b.fragments, ["CONFIG_HZ_1000=y", "CONFIG_PREEMPT=n"]);
    assert_eq!(b.patches, ["0001-sched-fix.patch"]);
    assert_eq!(m.cells[1].build, None);
    // The default build is no build on the wire: its series stay as they were.
    let m = ok(&format!(
        "kernels = [\"git:linux@v6.1\"]\n{HEAD}[build]\nconfig = \"tinyconfig\"\n"
    ));
    assert_eq!(m.cells[0].build, None);
}

#[test]
fn bad_builds_are_refused_where_they_are() {
    let git = "kernels = [\"git:linux@v6.1\"]\n";
    check_err(
        &format!("{HEAD}[build]\nfragments = [\"CONFIG_HZ_1000=y\"]\n"),
        4,
        1,
        "build",
        "no kernel of the matrix is built by it (`git:<repo>@<ref>`, without `#<build>`)",
    );
    check_err(
        &format!("{git}{HEAD}[build]\nconfig = \"../../etc/shadow\"\n"),
        6,
        10,
        "build.config",
        "`../../etc/shadow`: a base configuration is `tinyconfig`, `defconfig` or the name of a \
         file in an agent's --build-configs directory",
    );
    check_err(
        &format!("{git}{HEAD}[build]\nfragments = [\"CONFIG_HZ=100\", \"hz=1000\"]\n"),
        6,
        31,
        "build.fragments[1]",
        "`hz=1000`: an option's name is CONFIG_ and capitals, digits and _",
    );
    check_err(
        &format!("{git}{HEAD}[build]\nfragments = [\"CONFIG_SMP=n\"]\n"),
        6,
        14,
        "build.fragments[0]",
        "`CONFIG_SMP=n`: the guest runner needs CONFIG_SMP=y",
    );
    check_err(
        &format!("{git}{HEAD}[build]\nfragments = [\"CONFIG_HZ=100\", \"CONFIG_HZ=250\"]\n"),
        6,
        31,
        "build.fragments[1]",
        "CONFIG_HZ is set twice (also fragments[0])",
    );
    check_err(
        &format!("{git}{HEAD}[build]\npatches = [\"a.patch\", \"/tmp/x.patch\"]\n"),
        6,
        23,
        "build.patches[1]",
        "`/tmp/x.patch`: a file name is letters, digits and . _ + -",
    );
    let many: Vec<String> = (0..33).map(|i| format!("\"{i}.patch\"")).collect();
    check_err(
        &format!("{git}{HEAD}[build]\npatches = [{}]\n", many.join(", ")),
        6,
        11,
        "build.patches",
        "at most 32 patches",
    );
    check_err(
        &format!("{git}{HEAD}[build]\nconfig = \"defconfig\"\nmake = \"rm -rf /\"\n"),
        7,
        1,
        "build.make",
        "unknown field `make`",
    );
}

#[test]
fn a_schedule_bisects_only_what_it_can() {
    let git = "kernels = [\"git:linux@v6.1\", \"git:linux@sched/core\"]\n";
    let m = ok(&format!(
        "{git}{HEAD}[baseline]\nkernel = \"git:linux@v6.1\"\n\
         [schedule]\ncron = \"0 3 * * *\"\nbisect = true\n"
    ));
    assert!(m.schedule.unwrap().bisect);
    check_err(
        &format!("{git}{HEAD}[schedule]\ncron = \"0 3 * * *\"\nbisect = true\n"),
        7,
        10,
        "schedule.bisect",
        "a bisection runs from a regressed cell's baseline kernel to its own: give a [baseline]",
    );
    check_err(
        &format!(
            "kernels = [\"git:linux@v6.1\", \"git:tip@sched/core\"]\n{HEAD}\
             [baseline]\nkernel = \"git:linux@v6.1\"\n[schedule]\ncron = \"0 3 * * *\"\n\
             bisect = true\n"
        ),
        9,
        10,
        "schedule.bisect",
        "an automatic bisection lists the commits between two `git:` kernels of one \
         repository: the kernel axis has no two",
    );
    // `bisect = false` asks for nothing.
    let m = ok(&format!(
        "{HEAD}[schedule]\ncron = \"0 3 * * *\"\nbisect = false\n"
    ));
    assert!(!m.schedule.unwrap().bisect);
}

#[test]
fn named_builds_go_to_the_kernels_that_name_them() {
    let m = ok(&format!(
        "kernels = [\"git:linux@v6.1\", \"git:linux@v6.1#fix\", \"git:linux@v6.1#hz\"]\n{HEAD}\
         [baseline]\nkernel = \"git:linux@v6.1\"\n\
         [builds.fix]\npatches = [\"0001-fix.patch\"]\n\
         [builds.hz]\nconfig = \"defconfig\"\nfragments = [\"CONFIG_HZ_1000=y\"]\n"
    ));
    let builds: Vec<Option<farm_proto::KernelBuild>> =
        m.cells.iter().map(|c| c.build.clone()).collect();
    let wire = |config: &str, fragments: &[&str], patches: &[&str]| farm_proto::KernelBuild {
        config: config.into(),
        fragments: fragments.iter().map(|s| s.to_string()).collect(),
        patches: patches.iter().map(|s| s.to_string()).collect(),
    };
    assert_eq!(
        builds,
        [
            None,
            Some(wire("tinyconfig", &[], &["0001-fix.patch"])),
            Some(wire("defconfig", &["CONFIG_HZ_1000=y"], &[])),
        ]
    );
    // The patched kernel is compared with the same commit unpatched.
    assert_eq!(m.cells[1].baseline, Some(0));
    assert_eq!(m.cells[1].kernel, "git:linux@v6.1#fix");
    check_err(
        &format!("kernels = [\"git:linux@v6.1#fix\"]\n{HEAD}"),
        1,
        12,
        "kernels[0]",
        "`git:linux@v6.1#fix`: the matrix has no [builds.fix]",
    );
    check_err(
        &format!(
            "kernels = [\"git:linux@v6.1\"]\n{HEAD}[builds.unused]\npatches = [\"a.patch\"]\n"
        ),
        5,
        9,
        "builds.unused",
        "no kernel of the matrix is built by it (`git:<repo>@<ref>#unused`)",
    );
    check_err(
        &format!("kernels = [\"git:linux@v6.1#fix\"]\n{HEAD}[builds.fix]\nconfig = \"a/b\"\n"),
        6,
        10,
        "builds.fix.config",
        "`a/b`: a base configuration is",
    );
    check_err(
        &format!("kernels = [\"git:linux@v6.1\"]\n{HEAD}[builds.Fix]\nconfig = \"defconfig\"\n"),
        5,
        9,
        "builds.Fix",
        "a build's name is at most 32 lowercase letters, digits, _ and -",
    );
}

#[test]
fn scheduler_knobs_are_parsed_and_their_errors_named() {
    let guest = "name = \"m\"\nkernels = [\"debian:6.12.107+deb12-cloud-amd64\"]\n\
                 [[workloads]]\nname = \"cpu-hog\"\n[[states]]\nname = \"s\"\n";
    let m = ok(&format!(
        "{guest}sched_features = [\"NO_RUN_TO_PARITY\", \"HRTICK\"]\n\
         sched_tunables = {{ migration_cost_ns = 250000, base_slice_ns = 1_500_000 }}\n\
         numa_balancing = 2\ncmdline = [\"isolcpus=domain,2,3\", \"nosmt\"]\n"
    ));
    let s = m.cells[0].state.as_ref().unwrap();
    assert_eq!(s.sched_features, ["NO_RUN_TO_PARITY", "HRTICK"]);
    // Canonical: in the tunables' order, CPU lists merged.
    assert_eq!(
        s.sched_tunables,
        ["base_slice_ns=1500000", "migration_cost_ns=250000"]
    );
    assert_eq!(s.numa_balancing, Some(2));
    assert_eq!(s.cmdline, ["isolcpus=domain,2-3", "nosmt"]);

    // (the state's 7th line, column, key, message)
    let cases: &[(&str, usize, &str, &str)] = &[
        (
            "sched_features = [\"HRTICK\", \"no_hrtick\"]",
            29,
            "states[0].sched_features[1]",
            "bad sched feature `no_hrtick`: expected a name like `HRTICK`",
        ),
        (
            "sched_features = [\"HRTICK\", \"NO_HRTICK\"]",
            18,
            "states[0].sched_features",
            "sched feature `HRTICK` is given twice",
        ),
        (
            "sched_tunables = { base_slice_ns = 10 }",
            36,
            "states[0].sched_tunables.base_slice_ns",
            "base_slice_ns 10 is out of range 100000..=100000000",
        ),
        (
            "sched_tunables = { sched_latency_ns = 10 }",
            39,
            "states[0].sched_tunables.sched_latency_ns",
            "unknown sched tunable `sched_latency_ns` (known: base_slice_ns,",
        ),
        (
            "sched_tunables = { nr_migrate = -1 }",
            33,
            "states[0].sched_tunables.nr_migrate",
            "-1 is negative",
        ),
        (
            "numa_balancing = 3",
            18,
            "states[0].numa_balancing",
            "3 is out of range 0..=2",
        ),
        (
            "cmdline = [\"init=/bin/sh\"]",
            12,
            "states[0].cmdline[0]",
            "bad cmdline word `init=/bin/sh`: expected isolcpus=",
        ),
        (
            "cmdline = [\"isolcpus=1 init=/bin/sh\"]",
            12,
            "states[0].cmdline[0]",
            "bad cmdline word `isolcpus=1 init=/bin/sh`: expected a CPU list",
        ),
    ];
    for (line, column, key, message) in cases {
        check_err(&format!("{guest}{line}\n"), 7, *column, key, message);
    }
    // The agent's own kernel has the command line it booted with.
    check_err(
        &format!("{HEAD}[[states]]\nname = \"s\"\ncmdline = [\"nosmt\"]\n"),
        6,
        11,
        "states[0].cmdline",
        "a kernel command line needs a kernel booted in a guest, and `running` runs on",
    );
}
