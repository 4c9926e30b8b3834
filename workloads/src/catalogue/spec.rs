//! What a catalogue entry is: a workload's bounded parameters, its metrics
//! and where it comes from, and why a value was refused.

use std::fmt;

/// A parameter value after validation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Int(i64),
    Float(f64),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Int(v) => write!(f, "{v}"),
            Value::Float(v) => write!(f, "{v}"),
        }
    }
}

/// The type and bounds of one parameter. Bounds are inclusive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Int { min: i64, max: i64 },
    Float { min: f64, max: f64 },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Value,
    pub doc: &'static str,
}

/// Whether a smaller or a larger value of a metric is the better one: the
/// farm's one `Direction`.
pub use farm_spec::Direction;

/// A figure of merit a workload reports about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricSpec {
    pub name: &'static str,
    pub unit: &'static str,
    pub direction: Direction,
}

/// Where a workload's code comes from, which decides what can run it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Implemented in this crate: `farm-workload <name>` runs it anywhere.
    BuiltIn,
    /// A program of its own: an agent runs it where it finds `program` (a
    /// file name, looked for in `PATH` or in the agent's tools directories)
    /// and only such agents list it in their capabilities. `farm-workload`
    /// refuses it.
    External { program: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkloadSpec {
    pub name: &'static str,
    pub doc: &'static str,
    pub params: &'static [ParamSpec],
    pub metrics: &'static [MetricSpec],
    pub origin: Origin,
}

/// Why a parameter was refused.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamError {
    UnknownWorkload {
        workload: String,
        /// The built-in workloads' names and the external ones', as the
        /// error lists them.
        built_in: String,
        external: String,
    },
    UnknownParam {
        workload: &'static str,
        param: String,
        /// The workload's parameters, which the error lists.
        known: &'static [ParamSpec],
    },
    WrongType {
        param: &'static str,
        expected: &'static str,
    },
    OutOfRange {
        param: &'static str,
        value: String,
        min: String,
        max: String,
    },
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::UnknownWorkload {
                workload,
                built_in,
                external,
            } => write!(
                f,
                "unknown workload `{workload}` (known: {built_in}) (external: {external})"
            ),
            ParamError::UnknownParam {
                workload,
                param,
                known,
            } => {
                let known: Vec<_> = known.iter().map(|p| p.name).collect();
                write!(
                    f,
                    "unknown parameter `{param}` of workload `{workload}` (known: {})",
                    known.join(", ")
                )
            }
            ParamError::WrongType { param, expected } => {
                write!(f, "parameter `{param}` must be {expected}")
            }
            ParamError::OutOfRange {
                param,
                value,
                min,
                max,
            } => {
                write!(
                    f,
                    "parameter `{param}` = {value} is out of range {min}..={max}"
                )
            }
        }
    }
}

impl std::error::Error for ParamError {}

impl WorkloadSpec {
    /// The program an agent must have to run this workload; `None` for a
    /// built-in one.
    pub fn external_program(&self) -> Option<&'static str> {
        match self.origin {
            Origin::BuiltIn => None,
            Origin::External { program } => Some(program),
        }
    }

    pub fn param(&self, name: &str) -> Result<&'static ParamSpec, ParamError> {
        // `params` is 'static, so the found spec is too.
        let params: &'static [ParamSpec] = self.params;
        params
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| ParamError::UnknownParam {
                workload: self.name,
                param: name.to_string(),
                known: self.params,
            })
    }
}

impl ParamSpec {
    /// Checks an integer given for this parameter. Integers are accepted for
    /// float parameters too (`seconds = 2`).
    pub fn check_int(&self, v: i64) -> Result<Value, ParamError> {
        match self.kind {
            Kind::Int { min, max } => {
                if (min..=max).contains(&v) {
                    Ok(Value::Int(v))
                } else {
                    Err(self.out_of_range(v.to_string()))
                }
            }
            Kind::Float { .. } => self.check_float(v as f64),
        }
    }

    pub fn check_float(&self, v: f64) -> Result<Value, ParamError> {
        match self.kind {
            Kind::Int { .. } => Err(ParamError::WrongType {
                param: self.name,
                expected: "an integer",
            }),
            Kind::Float { min, max } => {
                // NaN fails the range test, so it is refused here too.
                if v >= min && v <= max {
                    Ok(Value::Float(v))
                } else {
                    Err(self.out_of_range(v.to_string()))
                }
            }
        }
    }

    pub fn expected(&self) -> &'static str {
        match self.kind {
            Kind::Int { .. } => "an integer",
            Kind::Float { .. } => "a number",
        }
    }

    fn out_of_range(&self, value: String) -> ParamError {
        let (min, max) = match self.kind {
            Kind::Int { min, max } => (min.to_string(), max.to_string()),
            Kind::Float { min, max } => (min.to_string(), max.to_string()),
        };
        ParamError::OutOfRange {
            param: self.name,
            value,
            min,
            max,
        }
    }
}

/// The most threads any workload's `threads` parameter allows.
pub(super) const THREADS_MAX: i64 = 4096;
