//! `farmctl bisect --good K --bad K --workload W …`: a bisection with no
//! matrix before it. The ends are measured first, by a matrix of their own
//! that this module only shapes from the flags: the coordinator parses and
//! checks it as any matrix file (one parser of matrices), so a bad
//! parameter or state is refused there, naming its key
//! (`workloads[0].params.threads`), before any run.

use anyhow::{Context as _, Result};
use farm_proto::{GetResultsRequest, ListRangeRequest, SubmitMatrixRequest};
use farm_runtime::coordinators::Urls;

use crate::client::{Access, Client};
use crate::input::BadInput;

/// Runs of each end when `--repetitions` is not given: enough for the
/// rank test to tell a large change at p < 0.01.
pub const DEFAULT_REPETITIONS: u32 = 5;

/// The name the ends' matrix has in the coordinator's errors.
const FILE_NAME: &str = "the ends' matrix of farmctl bisect";

/// What the flags say of the cell to bisect.
#[derive(Debug, Clone, Default)]
pub struct Ends {
    pub good: String,
    pub bad: String,
    pub workload: String,
    /// `KEY=VALUE`, a workload parameter each.
    pub params: Vec<String>,
    /// `KEY=VALUE`, a key of a matrix's `[[states]]` each.
    pub state: Vec<String>,
    /// `KEY=VALUE`, a key of a matrix's `[guest]` each.
    pub guest: Vec<String>,
    /// Runs of each end.
    pub repetitions: u32,
    pub timeout_s: Option<u32>,
    pub min_effect_pct: Option<f64>,
}

/// A value as a matrix file's TOML reads it (the `toml` crate's own
/// grammar: `2`, `1_000`, `0x10`, `0.5`, `true`, `"a b"`), and a word TOML
/// does not read as a value (`cycle:1`, `0-1`, `50000 100000`) as a string.
/// One value only: an array would make an axis, and the bisected cell is
/// one cell.
fn value(flag: &str, key: &str, s: &str) -> Result<toml::Value, BadInput> {
    match s.parse::<toml::Value>() {
        Ok(v @ (toml::Value::Array(_) | toml::Value::Table(_))) => Err(BadInput(format!(
            "{flag} {}: one value, not {} (a bisection runs one cell)",
            farm_spec::excerpt(key),
            v.type_str()
        ))),
        Ok(v) => Ok(v),
        Err(_) => Ok(toml::Value::String(s.to_owned())),
    }
}

/// `KEY=VALUE` pairs of one flag as a table; a key given twice, or a pair
/// without `=` or key, is refused naming the flag.
fn table(flag: &str, pairs: &[String]) -> Result<toml::Table, BadInput> {
    let mut t = toml::Table::new();
    for p in pairs {
        let quoted = farm_spec::excerpt(p);
        let (k, v) = p
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| BadInput(format!("{flag} `{quoted}`: KEY=VALUE")))?;
        let key_ok = k
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !key_ok {
            return Err(BadInput(format!(
                "{flag} `{quoted}`: a key is letters, digits, `_` and `-`"
            )));
        }
        if t.insert(k.to_owned(), value(flag, k, v)?).is_some() {
            return Err(BadInput(format!(
                "{flag} {}: given twice",
                farm_spec::excerpt(k)
            )));
        }
    }
    Ok(t)
}

/// The matrix that measures the ends: `kernels = [good, bad]` with good
/// the baseline, the workload and its parameters, one state, the guest,
/// `repetitions` runs of each. Its cell 1 (bad beside good) is the one
/// bisected.
pub fn matrix(e: &Ends) -> Result<String, BadInput> {
    use toml::Value;
    let mut m = toml::Table::new();
    m.insert(
        "name".into(),
        Value::String(format!("bisect-{}", e.workload)),
    );
    m.insert(
        "repetitions".into(),
        Value::Integer(i64::from(e.repetitions)),
    );
    if let Some(t) = e.timeout_s {
        m.insert("timeout_s".into(), Value::Integer(i64::from(t)));
    }
    m.insert(
        "kernels".into(),
        Value::Array(vec![
            Value::String(e.good.clone()),
            Value::String(e.bad.clone()),
        ]),
    );
    let mut w = toml::Table::new();
    w.insert("name".into(), Value::String(e.workload.clone()));
    w.insert("params".into(), Value::Table(table("--param", &e.params)?));
    m.insert("workloads".into(), Value::Array(vec![Value::Table(w)]));
    let state = table("--state", &e.state)?;
    if !state.is_empty() {
        let mut s = toml::Table::new();
        s.insert("name".into(), Value::String("bisected".into()));
        s.extend(state);
        m.insert("states".into(), Value::Array(vec![Value::Table(s)]));
    }
    let guest = table("--guest", &e.guest)?;
    if !guest.is_empty() {
        m.insert("guest".into(), Value::Table(guest));
    }
    let mut baseline = toml::Table::new();
    baseline.insert("kernel".into(), Value::String(e.good.clone()));
    m.insert("baseline".into(), Value::Table(baseline));
    if let Some(p) = e.min_effect_pct {
        let mut v = toml::Table::new();
        v.insert("min_effect_pct".into(), Value::Float(p));
        m.insert("verdict".into(), Value::Table(v));
    }
    toml::to_string(&m).map_err(|e| BadInput(format!("the ends' matrix: {e}")))
}

/// Measures the ends: with `git_range`, first the range is listed (an
/// unknown ref, or good not an ancestor of bad, is refused before any
/// run); then the ends' matrix runs, its table goes to stderr, and its
/// bad cell is given back with the matrix's id.
pub async fn measure(
    c: &mut Client,
    e: &Ends,
    git_range: bool,
    leaders: Option<(&Urls, &Access)>,
) -> Result<(String, u32)> {
    let toml = matrix(e)?;
    if git_range {
        let r = c
            .list_range(ListRangeRequest {
                good: e.good.clone(),
                bad: e.bad.clone(),
            })
            .await
            .context("listing the git range")?
            .into_inner();
        eprintln!(
            "{} commits after {} up to {} (listed by agent {})",
            r.commits.len().saturating_sub(1),
            e.good,
            e.bad,
            r.agent_id
        );
    }
    let r = c
        .submit_matrix(SubmitMatrixRequest {
            file_name: FILE_NAME.as_bytes().to_vec(),
            toml: toml.into_bytes(),
        })
        .await?
        .into_inner();
    eprintln!(
        "measuring the ends: matrix {} ({} runs)",
        r.matrix_id, r.runs
    );
    crate::watch::watch(c, &r.matrix_id, leaders).await?;
    let results = c
        .get_results(GetResultsRequest {
            matrix_id: r.matrix_id.clone(),
        })
        .await?
        .into_inner();
    eprint!("{}", crate::render::results_table(&results));
    let cell = results
        .cells
        .iter()
        .find(|c| c.baseline.is_some())
        .map(|c| c.cell_index)
        .with_context(|| format!("matrix {} compared no cell with good", r.matrix_id))?;
    Ok((r.matrix_id, cell))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends() -> Ends {
        Ends {
            good: "git:linux@v6.1".into(),
            bad: "git:linux@bisect-bad".into(),
            workload: "oltp".into(),
            params: vec!["threads=2".into(), "seconds=1".into()],
            state: vec!["hotplug=cycle:1".into(), "autogroup=0".into()],
            guest: vec!["numa_nodes=2".into()],
            repetitions: 5,
            timeout_s: Some(900),
            min_effect_pct: Some(2.5),
        }
    }

    #[test]
    fn the_flags_make_a_matrix_of_both_ends_with_good_the_baseline() {
        let m = crate::bisect::ends::matrix(&ends()).unwrap();
        let parsed =
            farm_coordinator::matrix::parse("ends", &m).unwrap_or_else(|e| panic!("{e}\n{m}"));
        let kernels: Vec<String> = parsed.cells.iter().map(|c| c.kernel.to_string()).collect();
        assert_eq!(kernels, ["git:linux@v6.1", "git:linux@bisect-bad"], "{m}");
        assert_eq!(parsed.cells[1].baseline.map(|b| b.get()), Some(0), "{m}");
        assert_eq!(parsed.cells[0].baseline, None, "{m}");
        let v: toml::Table = toml::from_str(&m).unwrap();
        assert_eq!(v["repetitions"].as_integer(), Some(5));
        assert_eq!(v["workloads"][0]["params"]["threads"].as_integer(), Some(2));
        assert_eq!(v["states"][0]["hotplug"].as_str(), Some("cycle:1"));
        assert_eq!(v["states"][0]["autogroup"].as_integer(), Some(0));
        assert_eq!(v["guest"]["numa_nodes"].as_integer(), Some(2));
        assert_eq!(v["verdict"]["min_effect_pct"].as_float(), Some(2.5));
    }

    #[test]
    fn bad_pairs_name_the_flag() {
        let with = |params: &[&str]| {
            let e = Ends {
                params: params.iter().map(|s| s.to_string()).collect(),
                ..ends()
            };
            matrix(&e).map(|_| ()).map_err(|e| e.0)
        };
        assert_eq!(
            with(&["threads"]),
            Err("--param `threads`: KEY=VALUE".into())
        );
        assert_eq!(with(&["=2"]), Err("--param `=2`: KEY=VALUE".into()));
        assert_eq!(
            with(&["threads=1", "threads=2"]),
            Err("--param threads: given twice".into())
        );
        assert_eq!(
            with(&["a.b=1"]),
            Err("--param `a.b=1`: a key is letters, digits, `_` and `-`".into())
        );
    }

    #[test]
    fn values_are_read_as_a_matrix_files_toml_reads_them() {
        let v = |s: &str| value("--param", "k", s).unwrap();
        assert_eq!(v("2"), toml::Value::Integer(2));
        assert_eq!(v("-3"), toml::Value::Integer(-3));
        assert_eq!(v("1_000"), toml::Value::Integer(1000));
        assert_eq!(v("0x10"), toml::Value::Integer(16));
        assert_eq!(v("0.5"), toml::Value::Float(0.5));
        assert_eq!(v("true"), toml::Value::Boolean(true));
        assert_eq!(v("\"a b\""), toml::Value::String("a b".into()));
        for s in ["cycle:1", "0-1", "50000 100000", "separate"] {
            assert_eq!(v(s), toml::Value::String(s.into()), "{s}");
        }
        assert_eq!(
            value("--param", "threads", "[1, 2]").map_err(|e| e.0),
            Err("--param threads: one value, not array (a bisection runs one cell)".into())
        );
    }
}
