//! `[build]` and `[builds.<name>]`: how the matrix's `git:` kernels are
//! built, checked by `farm_spec::KernelBuild` (the parser the agent uses on
//! the wire's copy). A `git:<repo>@<ref>` kernel is built as `[build]`
//! says; `git:<repo>@<ref>#<name>` as `[builds.<name>]` says, so that one
//! matrix compares a commit with the same commit patched.

use farm_spec::{GitKernel, Kernel, KernelBuild};
use toml::Spanned;

use super::location::{Checked, Issue};
use super::raw::{RawBuild, RawMatrix};

/// Each kernel's build, in the axis' order: `None` for kernels that are not
/// built and for the default build (tinyconfig, nothing added), which the
/// wire leaves out so that series keep their keys. A table no kernel uses
/// is refused: its author meant it to apply to something.
pub(super) fn builds(raw: &RawMatrix, kernels: &[Kernel]) -> Checked<Vec<Option<KernelBuild>>> {
    let default = raw.build.as_ref().map(|t| table(t, "build")).transpose()?;
    let mut named: Vec<(String, std::ops::Range<usize>, KernelBuild, bool)> = Vec::new();
    if let Some(map) = &raw.builds {
        for (name, t) in map.get_ref() {
            let key = format!("builds.{}", name.get_ref());
            if !GitKernel::valid_variant(name.get_ref()) {
                return Err(Issue::new(
                    name.span(),
                    key,
                    format!(
                        "a build's name is at most {} lowercase letters, digits, _ and -, \
                         starting with a letter or digit",
                        GitKernel::MAX_VARIANT_LEN
                    ),
                ));
            }
            named.push((name.get_ref().clone(), name.span(), table(t, &key)?, false));
        }
    }
    let mut out = Vec::with_capacity(kernels.len());
    let mut default_used = false;
    for (i, k) in kernels.iter().enumerate() {
        let Kernel::Git(g) = k else {
            out.push(None);
            continue;
        };
        let build = match g.variant() {
            None => {
                default_used = true;
                default.clone()
            }
            Some(v) => {
                let Some(n) = named.iter_mut().find(|n| n.0 == v) else {
                    let span = raw
                        .kernels
                        .as_ref()
                        .and_then(|l| l.get_ref().get(i).map(Spanned::span))
                        .unwrap_or(raw.name.span());
                    return Err(Issue::new(
                        span,
                        format!("kernels[{i}]"),
                        format!("`{k}`: the matrix has no [builds.{v}]"),
                    ));
                };
                n.3 = true;
                Some(n.2.clone())
            }
        };
        out.push(build.filter(|b| !b.is_default()));
    }
    if let Some(t) = &raw.build
        && !default_used
    {
        return Err(Issue::new(
            t.span(),
            "build",
            "no kernel of the matrix is built by it (`git:<repo>@<ref>`, without `#<build>`)",
        ));
    }
    if let Some((name, span, ..)) = named.iter().find(|n| !n.3) {
        return Err(Issue::new(
            span.clone(),
            format!("builds.{name}"),
            format!("no kernel of the matrix is built by it (`git:<repo>@<ref>#{name}`)"),
        ));
    }
    Ok(out)
}

/// One build table, its errors pointing at the value refused: an item of a
/// list, else the list, else the table.
fn table(t: &Spanned<RawBuild>, prefix: &str) -> Checked<KernelBuild> {
    let b = t.get_ref();
    let config = b.config.as_ref().map_or("", |c| c.get_ref().as_str());
    KernelBuild::parse(config, &text(&b.fragments), &text(&b.patches)).map_err(|e| {
        let item = |name: &str, l: &Option<Spanned<Vec<Spanned<String>>>>| {
            let i: Option<usize> = e
                .key
                .strip_prefix(name)
                .and_then(|k| k.strip_prefix('['))
                .and_then(|k| k.strip_suffix(']'))
                .and_then(|k| k.parse().ok());
            let l = l.as_ref()?;
            Some(match i {
                Some(i) => l.get_ref().get(i).map_or(l.span(), Spanned::span),
                None => l.span(),
            })
        };
        let span = if e.key == "config" {
            b.config.as_ref().map(Spanned::span)
        } else if e.key.starts_with("fragments") {
            item("fragments", &b.fragments)
        } else {
            item("patches", &b.patches)
        };
        Issue::new(
            span.unwrap_or(t.span()),
            format!("{prefix}.{}", e.key),
            e.error.to_string(),
        )
    })
}

/// A list's strings, none when it is left out.
fn text(l: &Option<Spanned<Vec<Spanned<String>>>>) -> Vec<&str> {
    l.as_ref()
        .map(|l| l.get_ref().iter().map(|s| s.get_ref().as_str()).collect())
        .unwrap_or_default()
}
