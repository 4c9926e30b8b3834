//! `[baseline]`: which cell each cell is compared with.
//!
//! A cell's coordinates are its kernel, state, host, workload name and fully
//! resolved parameters. Its baseline is the cell found by substituting the
//! `[baseline]` values into those coordinates:
//! - `kernel`, `state`, `host` replace that coordinate;
//! - a parameter name replaces that parameter, in every workload that has it;
//! - `workload` replaces the workload name. The target's parameters must then
//!   equal the cell's wherever both workloads have a parameter of that name;
//!   the target's other parameters are free, and if that leaves more than one
//!   candidate the baseline is refused as ambiguous.
//!
//! A cell that already has every baseline value is a baseline itself and gets
//! none; so does a cell whose substituted coordinates name no cell (e.g.
//! `threads = 1` for a workload entry whose `threads` is fixed at 4).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Range;

use farm_proto::{HostSelector, MachineState};
use farm_workload::catalogue::{self, Value};
use toml::Spanned;

use super::location::{Checked, Issue};
use super::raw::{Number, Scalar};
use super::workloads::{ValueKey, Variant, typed};

/// The `[baseline]` table after validation.
pub(super) struct Baseline {
    pub kernel: Option<usize>,
    pub state: Option<usize>,
    pub host: Option<usize>,
    /// For each workload variant, the variant its cells are compared with.
    pub variant_targets: Vec<Option<usize>>,
}

/// The axes of the matrix a `[baseline]` is checked against.
pub(super) struct Axes<'a> {
    pub kernels: &'a [String],
    pub states: &'a [MachineState],
    pub hosts: &'a [HostSelector],
    pub variants: &'a [Variant],
}

type RawBaseline = Spanned<BTreeMap<Spanned<String>, Spanned<Scalar>>>;

pub(super) fn resolve(raw: &RawBaseline, axes: &Axes<'_>) -> Checked<Baseline> {
    if raw.get_ref().is_empty() {
        return Err(Issue::new(
            raw.span(),
            "baseline",
            "empty baseline: name at least one axis, e.g. `state = \"default\"`",
        ));
    }
    let mut entries: Vec<_> = raw.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);

    let mut kernel = None;
    let mut state = None;
    let mut host = None;
    let mut workload: Option<(&'static str, Range<usize>)> = None;
    let mut params: Vec<(&'static str, Number)> = Vec::new();
    for (name, value) in entries {
        let key = format!("baseline.{}", name.get_ref());
        match name.get_ref().as_str() {
            "kernel" => {
                let names: Vec<&str> = axes.kernels.iter().map(String::as_str).collect();
                kernel = Some(position(value, &key, "kernel", &names)?);
            }
            "state" => {
                let names: Vec<&str> = axes.states.iter().map(|s| s.name.as_str()).collect();
                state = Some(position(value, &key, "state", &names)?);
            }
            "host" => {
                let names: Vec<&str> = axes.hosts.iter().map(|h| h.name.as_str()).collect();
                host = Some(position(value, &key, "host", &names)?);
            }
            "workload" => {
                let mut names: Vec<&'static str> = Vec::new();
                for v in axes.variants {
                    if !names.contains(&v.spec.name) {
                        names.push(v.spec.name);
                    }
                }
                let i = position(value, &key, "workload", &names)?;
                workload = Some((names[i], value.span()));
            }
            param => params.push(parameter(param, name, value, &key, axes.variants)?),
        }
    }

    let mut targets = Targets {
        variants: axes.variants,
        params: &params,
        indexes: HashMap::new(),
    };
    let variant_targets = axes
        .variants
        .iter()
        .map(|v| {
            let target = workload.as_ref().map_or(v.spec.name, |(name, _)| *name);
            match targets.find(v, target) {
                Found::None => Ok(None),
                Found::One(t) => Ok(Some(t)),
                Found::Many(candidates) => {
                    // Only a `workload` substitution leaves parameters free.
                    let span = workload.as_ref().map_or(raw.span(), |(_, s)| s.clone());
                    let labels: Vec<String> = candidates
                        .iter()
                        .take(3)
                        .map(|&c| format!("`{}`", axes.variants[c].label))
                        .collect();
                    Err(Issue::new(
                        span,
                        "baseline.workload",
                        format!(
                            "ambiguous: `{}` matches {} workloads ({}{}); add the parameters \
                             that tell them apart to [baseline]",
                            v.label,
                            candidates.len(),
                            labels.join(", "),
                            if candidates.len() > 3 { ", ..." } else { "" },
                        ),
                    ))
                }
            }
        })
        .collect::<Checked<Vec<_>>>()?;
    Ok(Baseline {
        kernel,
        state,
        host,
        variant_targets,
    })
}

/// The index of a name on an axis.
fn position(value: &Spanned<Scalar>, key: &str, axis: &str, names: &[&str]) -> Checked<usize> {
    let Scalar::Text(name) = value.get_ref() else {
        return Err(Issue::new(
            value.span(),
            key,
            format!("expected a {axis} name (a string)"),
        ));
    };
    names.iter().position(|n| n == name).ok_or_else(|| {
        Issue::new(
            value.span(),
            key,
            format!(
                "{axis} `{name}` is not in the matrix (it has: {})",
                names.join(", ")
            ),
        )
    })
}

/// Checks a parameter baseline: the parameter belongs to a workload of the
/// matrix and the value occurs in some cell.
fn parameter(
    param: &str,
    name: &Spanned<String>,
    value: &Spanned<Scalar>,
    key: &str,
    variants: &[Variant],
) -> Checked<(&'static str, Number)> {
    let having: Vec<&Variant> = variants
        .iter()
        .filter(|v| v.param(param).is_some())
        .collect();
    let Some(first) = having.first() else {
        let mut known: BTreeSet<&str> = variants
            .iter()
            .flat_map(|v| v.params.iter().map(|p| p.0))
            .collect();
        known.extend(["kernel", "state", "host", "workload"]);
        let known: Vec<&str> = known.into_iter().collect();
        return Err(Issue::new(
            name.span(),
            key,
            format!(
                "unknown baseline axis `{param}` (known: {})",
                known.join(", ")
            ),
        ));
    };
    // The parameter's name as the catalogue spells it, with a 'static lifetime.
    let param = first
        .params
        .iter()
        .find(|p| p.0 == param)
        .map_or("", |p| p.0);
    let Scalar::Number(number) = *value.get_ref() else {
        return Err(Issue::new(
            value.span(),
            key,
            "expected a parameter value (a number)",
        ));
    };
    let occurs = having.iter().any(|v| {
        let spec = v.spec.param(param).ok();
        let wanted = spec.and_then(|s| typed(s, number).ok());
        wanted.is_some() && wanted == v.param(param)
    });
    if occurs {
        return Ok((param, number));
    }
    // Explain with the first error the catalogue gives, or with the values there are.
    let refusal = having.iter().find_map(|v| {
        v.spec
            .param(param)
            .ok()
            .and_then(|s| typed(s, number).err())
    });
    let message = match refusal {
        Some(err) => err.to_string(),
        None => {
            let mut seen: Vec<Value> = Vec::new();
            for v in &having {
                if let Some(x) = v.param(param).filter(|x| !seen.contains(x)) {
                    seen.push(x);
                }
            }
            let seen: Vec<String> = seen.iter().map(Value::to_string).collect();
            format!(
                "`{param}` = {} does not occur in the matrix (it has: {})",
                show(number),
                seen.join(", ")
            )
        }
    };
    Err(Issue::new(value.span(), key, message))
}

fn show(n: Number) -> String {
    match n {
        Number::Int(v) => v.to_string(),
        Number::Float(v) => v.to_string(),
    }
}

enum Found {
    None,
    One(usize),
    Many(Vec<usize>),
}

/// Finds baseline variants through hash indexes, so that a matrix of a
/// million cells is not compared pairwise.
struct Targets<'a> {
    variants: &'a [Variant],
    params: &'a [(&'static str, Number)],
    /// Per (source workload, target workload): the target's variants keyed by
    /// the parameters the source pins down.
    indexes: HashMap<(&'static str, &'static str), Index>,
}

/// Variants of one workload by the values of some of their parameters.
type Index = HashMap<Vec<ValueKey>, Vec<usize>>;

impl Targets<'_> {
    fn find(&mut self, v: &Variant, target: &'static str) -> Found {
        let Ok(spec) = catalogue::lookup(target) else {
            return Found::None;
        };
        // The target's parameters pinned by the baseline or by the source cell.
        let pinned: Vec<&'static str> = spec
            .params
            .iter()
            .map(|p| p.name)
            .filter(|p| self.params.iter().any(|b| b.0 == *p) || v.param(p).is_some())
            .collect();
        let mut wanted = Vec::with_capacity(pinned.len());
        for p in &pinned {
            let value = match self.params.iter().find(|b| b.0 == *p) {
                Some((_, n)) => match spec.param(p).ok().and_then(|s| typed(s, *n).ok()) {
                    Some(value) => value,
                    None => return Found::None,
                },
                None => match v.param(p) {
                    Some(value) => value,
                    None => return Found::None,
                },
            };
            wanted.push(ValueKey::of(value));
        }
        let variants = self.variants;
        let index = self
            .indexes
            .entry((v.spec.name, target))
            .or_insert_with(|| {
                let mut index = Index::new();
                for (i, u) in variants
                    .iter()
                    .enumerate()
                    .filter(|(_, u)| u.spec.name == target)
                {
                    let key = pinned
                        .iter()
                        .filter_map(|p| u.param(p))
                        .map(ValueKey::of)
                        .collect();
                    index.entry(key).or_default().push(i);
                }
                index
            });
        match index.get(&wanted).map(Vec::as_slice) {
            None | Some([]) => Found::None,
            Some([one]) => Found::One(*one),
            Some(many) => Found::Many(many.to_vec()),
        }
    }
}
