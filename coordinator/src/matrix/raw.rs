//! The shape of a matrix file as serde reads it, before any validation.
//!
//! Every value a later check may refuse is kept [`Spanned`], so that the error
//! can point at it. Numbers are read as `i64`/`f64` whatever their final type,
//! so that `repetitions = -1` is reported by our own range check ("-1 is out of
//! range 1..=1000") rather than as a serde type mismatch.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawMatrix {
    pub name: Spanned<String>,
    pub repetitions: Option<Spanned<Int>>,
    pub max_cells: Option<Spanned<Int>>,
    pub timeout_s: Option<Spanned<Int>>,
    pub kernels: Option<Spanned<Vec<Spanned<String>>>>,
    pub workloads: Spanned<Vec<Spanned<RawWorkload>>>,
    pub loads: Option<Spanned<Vec<Spanned<RawLoad>>>>,
    pub states: Option<Spanned<Vec<Spanned<RawState>>>>,
    pub hosts: Option<Spanned<Vec<Spanned<RawHost>>>>,
    pub baseline: Option<Spanned<BTreeMap<Spanned<String>, Spanned<Scalar>>>>,
    pub verdict: Option<Spanned<RawVerdict>>,
    pub guest: Option<Spanned<RawGuest>>,
    pub schedule: Option<Spanned<RawSchedule>>,
    pub build: Option<Spanned<RawBuild>>,
    pub builds: Option<Spanned<BTreeMap<Spanned<String>, Spanned<RawBuild>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawBuild {
    pub config: Option<Spanned<String>>,
    pub fragments: Option<Spanned<Vec<Spanned<String>>>>,
    pub patches: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawSchedule {
    pub cron: Option<Spanned<String>>,
    pub on_new_kernel: Option<Spanned<String>>,
    pub bisect: Option<Spanned<bool>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawGuest {
    pub cpus: Option<Spanned<Int>>,
    pub numa_nodes: Option<Spanned<Int>>,
    pub memory_mib: Option<Spanned<Int>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawVerdict {
    pub min_effect_pct: Option<Spanned<Number>>,
    pub max_runs: Option<Spanned<Int>>,
    pub drift_window: Option<Spanned<Int>>,
    #[serde(default)]
    pub mix_executors: bool,
    #[serde(default)]
    pub min_effect_pct_by_metric: BTreeMap<Spanned<String>, Spanned<Number>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawWorkload {
    pub name: Spanned<String>,
    /// A map sorts its keys; declaration order is recovered from the key spans.
    #[serde(default)]
    pub params: BTreeMap<Spanned<String>, Spanned<Setting>>,
}

/// A competing load. Its parameters are read like a workload's, so that an
/// array reaches validation and is refused there with a message of our own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawLoad {
    pub name: Spanned<String>,
    #[serde(default)]
    pub params: BTreeMap<Spanned<String>, Spanned<Setting>>,
    pub instances: Option<Spanned<Int>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawState {
    pub name: Spanned<String>,
    pub hotplug: Option<Spanned<String>>,
    pub cgroup: Option<Spanned<String>>,
    pub cgroup_cpu_weight: Option<Spanned<Int>>,
    pub cgroup_cpu_max: Option<Spanned<String>>,
    pub cgroup_cpuset: Option<Spanned<String>>,
    pub autogroup: Option<Spanned<Int>>,
    pub sched_features: Option<Spanned<Vec<Spanned<String>>>>,
    pub sched_tunables: Option<Spanned<std::collections::BTreeMap<String, Spanned<Int>>>>,
    pub numa_balancing: Option<Spanned<Int>>,
    pub cmdline: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(super) struct RawHost {
    pub name: Spanned<String>,
    pub arch: Option<Spanned<String>>,
    pub min_cpus: Option<Spanned<Int>>,
    pub min_numa_nodes: Option<Spanned<Int>>,
    pub executor: Option<Spanned<String>>,
}

/// A TOML integer.
pub(super) struct Int(pub i64);

/// A TOML integer or float, as given (the catalogue decides what it may be).
#[derive(Clone, Copy)]
pub(super) enum Number {
    Int(i64),
    Float(f64),
}

/// A workload parameter: one fixed value, or an axis of values.
pub(super) enum Setting {
    Fixed(Number),
    Axis(Vec<Spanned<Number>>),
}

/// A `[baseline]` value: a name (kernel, state, host, workload) or a parameter value.
pub(super) enum Scalar {
    Text(String),
    Number(Number),
}

fn too_large<E: de::Error>(v: impl fmt::Display) -> E {
    E::custom(format!("integer {v} is too large"))
}

/// Reads the numeric part of any of the types above; `expecting` says what
/// the whole type accepts.
macro_rules! number_visits {
    ($wrap:expr) => {
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
            Ok($wrap(Number::Int(v)))
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Err(too_large(v))
        }

        fn visit_i128<E: de::Error>(self, v: i128) -> Result<Self::Value, E> {
            Err(too_large(v))
        }

        fn visit_u128<E: de::Error>(self, v: u128) -> Result<Self::Value, E> {
            Err(too_large(v))
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
            // Adding 0.0 turns -0.0 into 0.0, so that equal values compare equal bit for bit.
            Ok($wrap(Number::Float(v + 0.0)))
        }
    };
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Int;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer")
            }

            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int, E> {
                Ok(Int(v))
            }

            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int, E> {
                Err(too_large(v))
            }

            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Int, E> {
                Err(too_large(v))
            }

            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Int, E> {
                Err(too_large(v))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Number;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number")
            }

            number_visits!(|n| n);
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Setting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Setting;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number or an array of numbers")
            }

            number_visits!(Setting::Fixed);

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Setting, A::Error> {
                let mut values = Vec::new();
                while let Some(v) = seq.next_element::<Spanned<Number>>()? {
                    values.push(v);
                }
                Ok(Setting::Axis(values))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a number")
            }

            number_visits!(Scalar::Number);

            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}
