//! The `[[workloads]]` axis: each entry looked up in the catalogue, its
//! parameters checked, and expanded over its parameter axes into variants.

use std::collections::{HashMap, HashSet};

use farm_proto::{Param, param::Value as ParamValue};
use farm_workload::catalogue::{self, ParamError, ParamSpec, Value, WorkloadSpec};
use toml::Spanned;

use super::location::{Checked, Issue, join};
use super::raw::{Number, RawMatrix, RawWorkload, Setting};

/// One workload with all its parameters resolved: a point of the workload axis.
pub(super) struct Variant {
    pub spec: &'static WorkloadSpec,
    /// Complete and sorted by name, as on the wire.
    pub params: Vec<(&'static str, Value)>,
    /// The workload name and the parameters the file gives, in file order.
    pub label: String,
}

impl Variant {
    pub(super) fn param(&self, name: &str) -> Option<Value> {
        self.params.iter().find(|p| p.0 == name).map(|p| p.1)
    }
}

/// A parameter value that can be hashed: floats by their bits (-0.0 never
/// reaches here, NaN is refused by the catalogue).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ValueKey {
    Int(i64),
    Float(u64),
}

impl ValueKey {
    pub(super) fn of(v: Value) -> Self {
        match v {
            Value::Int(i) => ValueKey::Int(i),
            Value::Float(f) => ValueKey::Float(f.to_bits()),
        }
    }
}

/// Checks a number given for a parameter.
pub(super) fn typed(spec: &ParamSpec, n: Number) -> std::result::Result<Value, ParamError> {
    match n {
        Number::Int(v) => spec.check_int(v),
        Number::Float(v) => spec.check_float(v),
    }
}

/// The values of a parameter axis, in file order.
pub(super) struct Axis {
    pub name: &'static str,
    pub values: Vec<Value>,
}

/// Looks a workload entry up in the catalogue and checks its parameters.
/// The axes come in declaration order.
pub(super) fn workload_axes(
    i: usize,
    entry: &Spanned<RawWorkload>,
) -> Checked<(&'static WorkloadSpec, Vec<Axis>)> {
    let entry = entry.get_ref();
    let key = format!("workloads[{i}]");
    let spec = catalogue::lookup(entry.name.get_ref())
        .map_err(|e| Issue::new(entry.name.span(), join(&key, "name"), e.to_string()))?;
    let mut params: Vec<_> = entry.params.iter().collect();
    params.sort_by_key(|(name, _)| name.span().start);
    let mut axes = Vec::with_capacity(params.len());
    for (name, setting) in params {
        let key = format!("{key}.params.{}", name.get_ref());
        let param = spec
            .param(name.get_ref())
            .map_err(|e| Issue::new(name.span(), &key, e.to_string()))?;
        let check = |n: &Spanned<Number>| {
            typed(param, *n.get_ref()).map_err(|e| Issue::new(n.span(), &key, e.to_string()))
        };
        let values = match setting.get_ref() {
            Setting::Fixed(n) => vec![check(&Spanned::new(setting.span(), *n))?],
            Setting::Axis(items) => {
                if items.is_empty() {
                    return Err(Issue::new(
                        setting.span(),
                        key,
                        "empty axis: give at least one value",
                    ));
                }
                let mut values: Vec<Value> = Vec::with_capacity(items.len());
                let mut seen = HashSet::with_capacity(items.len());
                for item in items {
                    let value = check(item)?;
                    if !seen.insert(ValueKey::of(value)) {
                        return Err(Issue::new(
                            item.span(),
                            key,
                            format!("duplicate value {value} on the axis"),
                        ));
                    }
                    values.push(value);
                }
                values
            }
        };
        axes.push(Axis {
            name: param.name,
            values,
        });
    }
    Ok((spec, axes))
}

/// Calls `emit` with every combination of the axes' values, the last axis
/// varying fastest.
fn expand(
    spec: &'static WorkloadSpec,
    axes: &[Axis],
    emit: &mut dyn FnMut(Variant) -> Checked<()>,
) -> Checked<()> {
    let mut at = vec![0usize; axes.len()];
    loop {
        let given: Vec<(String, Value)> = axes
            .iter()
            .zip(&at)
            .map(|(a, &j)| (a.name.to_owned(), a.values[j]))
            .collect();
        // Every value was checked already; the catalogue fills in the defaults.
        let params = catalogue::resolve(spec.name, &given)
            .map_err(|e| Issue::new(0..0, "workloads", e.to_string()))?;
        let mut label = spec.name.to_owned();
        for (name, value) in &given {
            label.push_str(&format!(" {name}={value}"));
        }
        emit(Variant {
            spec,
            params,
            label,
        })?;
        // Advance the odometer.
        let mut d = axes.len();
        loop {
            if d == 0 {
                return Ok(());
            }
            d -= 1;
            at[d] += 1;
            if at[d] < axes[d].values.len() {
                break;
            }
            at[d] = 0;
        }
    }
}

/// Expands every workload entry over its axes, refusing two entries that
/// make the same parameter set (they would run the same cells twice).
pub(super) fn variants(
    raw: &RawMatrix,
    workloads: &[(&'static WorkloadSpec, Vec<Axis>)],
) -> Checked<Vec<Variant>> {
    let mut variants = Vec::new();
    let mut made_by: HashMap<(&'static str, Vec<ValueKey>), usize> = HashMap::new();
    for (i, (spec, axes)) in workloads.iter().enumerate() {
        let name = &raw.workloads.get_ref()[i].get_ref().name;
        expand(spec, axes, &mut |v| {
            let key = (
                v.spec.name,
                v.params.iter().map(|p| ValueKey::of(p.1)).collect(),
            );
            if let Some(&j) = made_by.get(&key).filter(|&&j| j != i) {
                return Err(Issue::new(
                    name.span(),
                    format!("workloads[{i}]"),
                    format!(
                        "`{}` is also made by workloads[{j}] (the parameters resolve to the same \
                         values), which would run the same cells twice",
                        v.label
                    ),
                ));
            }
            made_by.insert(key, i);
            variants.push(v);
            Ok(())
        })?;
    }
    Ok(variants)
}

pub(super) fn wire_param(name: &str, value: Value) -> Param {
    let value = match value {
        Value::Int(v) => ParamValue::Int(v),
        Value::Float(v) => ParamValue::Float(v),
    };
    Param {
        name: name.to_owned(),
        value: Some(value),
    }
}
