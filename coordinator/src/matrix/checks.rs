//! The checks every axis shares: a value given, an axis not empty, a number
//! within bounds, a name not taken; each refusal an [`Issue`] at the value's span.

use std::ops::RangeInclusive;

use toml::Spanned;

use super::location::{Checked, Issue, join};
use super::raw::Int;

pub(super) fn non_empty(value: &Spanned<String>, key: &str) -> Checked<String> {
    if value.get_ref().trim().is_empty() {
        return Err(Issue::new(value.span(), key, "must not be empty"));
    }
    Ok(value.get_ref().clone())
}

/// The longest name of a matrix, a state or a host. Names are copied into
/// every cell, status and series label: a 20 KB state name × 1,000 cells
/// grew a coordinator by 168 MB before this limit.
pub const MAX_NAME_BYTES: usize = 128;

/// A name: not empty, and at most [`MAX_NAME_BYTES`] long.
pub(super) fn name(value: &Spanned<String>, key: &str) -> Checked<String> {
    let v = non_empty(value, key)?;
    if v.len() > MAX_NAME_BYTES {
        return Err(Issue::new(
            value.span(),
            key,
            format!(
                "name `{}` is {} bytes; the limit (MAX_NAME_BYTES) is {}",
                farm_spec::excerpt(&v),
                v.len(),
                MAX_NAME_BYTES
            ),
        ));
    }
    Ok(v)
}

pub(super) fn non_empty_axis<'a, T>(axis: &'a Spanned<Vec<T>>, key: &str) -> Checked<&'a [T]> {
    if axis.get_ref().is_empty() {
        return Err(Issue::new(
            axis.span(),
            key,
            "empty axis: give at least one value",
        ));
    }
    Ok(axis.get_ref())
}

/// An integer within `range`, converted to the type it is stored in.
pub(super) fn bounded<T: TryFrom<i64>>(
    value: Option<&Spanned<Int>>,
    key: &str,
    range: RangeInclusive<i64>,
    default: T,
) -> Checked<T> {
    let Some(value) = value else {
        return Ok(default);
    };
    let n = value.get_ref().0;
    let out_of_range = || {
        Issue::new(
            value.span(),
            key,
            format!("{n} is out of range {}..={}", range.start(), range.end()),
        )
    };
    if !range.contains(&n) {
        return Err(out_of_range());
    }
    T::try_from(n).map_err(|_| out_of_range())
}

/// The `name` of a state or host: not empty, and not taken by an earlier one.
pub(super) fn unique_name<'a>(
    name: &Spanned<String>,
    key: &str,
    what: &str,
    earlier: impl Iterator<Item = &'a str>,
) -> Checked<String> {
    let key = join(key, "name");
    let value = self::name(name, &key)?;
    let plural = if what == "host" { "hosts" } else { "states" };
    if let Some(j) = earlier.into_iter().position(|n| n == value) {
        return Err(Issue::new(
            name.span(),
            key,
            format!("duplicate {what} name `{value}` (also {plural}[{j}])"),
        ));
    }
    Ok(value)
}
