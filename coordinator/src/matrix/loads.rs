//! `[[loads]]`: the competing programs every cell runs beside its workload.

use std::ops::RangeInclusive;

use farm_proto::Workload;
use farm_workload::catalogue::{self, Value};
use toml::Spanned;

use super::checks::bounded;
use super::location::{Checked, Issue, join};
use super::raw::{RawLoad, Setting};
use super::workloads::{typed, wire_param};

/// The most load instances one cell may have (`instances` summed over `[[loads]]`).
pub const MAX_LOADS_PER_CELL: u32 = 64;

/// A load's `seconds` when the file leaves it out: the agent stops a load
/// after the measured workload, so its own duration only has to outlast the
/// run. A day, the catalogue's largest duration.
pub const LOAD_SECONDS: f64 = 86_400.0;

const LOAD_INSTANCES: RangeInclusive<i64> = 1..=MAX_LOADS_PER_CELL as i64;
/// The parameter that bounds a workload's duration, long for loads.
const DURATION_PARAM: &str = "seconds";

/// The competing loads of every cell: each `[[loads]]` entry checked against
/// the catalogue with fixed parameters only, completed, and repeated
/// `instances` times, in file order.
pub(super) fn loads(raw: Option<&Spanned<Vec<Spanned<RawLoad>>>>) -> Checked<Vec<Workload>> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    if raw.get_ref().is_empty() {
        return Err(Issue::new(
            raw.span(),
            "loads",
            "no loads given: leave `loads` out for runs without competing load",
        ));
    }
    let mut out: Vec<Workload> = Vec::new();
    for (i, entry) in raw.get_ref().iter().enumerate() {
        let entry = entry.get_ref();
        let key = format!("loads[{i}]");
        let (load, instances) = load(entry, &key)?;
        let total = out.len() as u32 + instances;
        if total > MAX_LOADS_PER_CELL {
            let (span, key) = match &entry.instances {
                Some(n) => (n.span(), join(&key, "instances")),
                None => (entry.name.span(), join(&key, "name")),
            };
            return Err(Issue::new(
                span,
                key,
                format!(
                    "the loads have {total} instances so far, more than the limit of \
                     {MAX_LOADS_PER_CELL} per cell"
                ),
            ));
        }
        out.extend(std::iter::repeat_n(load, instances as usize));
    }
    Ok(out)
}

/// One `[[loads]]` entry as it goes on the wire, and its number of instances.
fn load(entry: &RawLoad, key: &str) -> Checked<(Workload, u32)> {
    let spec = catalogue::lookup(entry.name.get_ref())
        .map_err(|e| Issue::new(entry.name.span(), join(key, "name"), e.to_string()))?;
    let mut params: Vec<_> = entry.params.iter().collect();
    params.sort_by_key(|(name, _)| name.span().start);
    let mut given: Vec<(String, Value)> = Vec::with_capacity(params.len() + 1);
    for (name, setting) in params {
        let key = format!("{key}.params.{}", name.get_ref());
        let param = spec
            .param(name.get_ref())
            .map_err(|e| Issue::new(name.span(), &key, e.to_string()))?;
        let value = match setting.get_ref() {
            Setting::Fixed(n) => {
                typed(param, *n).map_err(|e| Issue::new(setting.span(), &key, e.to_string()))?
            }
            Setting::Axis(_) => {
                return Err(Issue::new(
                    setting.span(),
                    key,
                    format!(
                        "loads take fixed parameters: give `{}` one value (every cell runs \
                         the same loads; an axis belongs in [[workloads]])",
                        param.name
                    ),
                ));
            }
        };
        given.push((param.name.to_owned(), value));
    }
    // Stopped by the agent after the run, not by its own clock: see "Loads".
    if let Ok(duration) = spec.param(DURATION_PARAM)
        && !given.iter().any(|(name, _)| name == DURATION_PARAM)
    {
        // Integer for external tools (stress-ng's `seconds`), float for ours.
        let value = match duration.kind {
            farm_workload::catalogue::Kind::Int { .. } => duration.check_int(LOAD_SECONDS as i64),
            farm_workload::catalogue::Kind::Float { .. } => duration.check_float(LOAD_SECONDS),
        }
        .map_err(|e| {
            Issue::new(
                entry.name.span(),
                join(key, "name"),
                format!("the long default duration of a load: {e}"),
            )
        })?;
        given.push((DURATION_PARAM.to_owned(), value));
    }
    let params = catalogue::resolve(spec.name, &given)
        .map_err(|e| Issue::new(entry.name.span(), join(key, "name"), e.to_string()))?;
    let instances = bounded(
        entry.instances.as_ref(),
        &join(key, "instances"),
        LOAD_INSTANCES,
        1u32,
    )?;
    let workload = Workload {
        name: spec.name.to_owned(),
        params: params
            .iter()
            .map(|&(name, value)| wire_param(name, value))
            .collect(),
    };
    Ok((workload, instances))
}
