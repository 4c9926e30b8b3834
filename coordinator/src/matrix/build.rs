//! `[build]`: how the matrix's `git:` kernels are built, checked by
//! `farm_spec::KernelBuild` (the parser the agent uses on the wire's copy).

use farm_spec::{Kernel, KernelBuild};
use toml::Spanned;

use super::Checked;
use super::location::Issue;
use super::raw::RawMatrix;

/// The `[build]` table, `None` without it or when it asks for the default
/// build. A table in a matrix without a `git:` kernel is refused: it would
/// apply to nothing, and its author meant it to.
pub(super) fn build(raw: &RawMatrix, kernels: &[Kernel]) -> Checked<Option<KernelBuild>> {
    let Some(table) = &raw.build else {
        return Ok(None);
    };
    if !kernels.iter().any(|k| matches!(k, Kernel::Git(_))) {
        return Err(Issue::new(
            table.span(),
            "build",
            "no kernel of the matrix is built from a tree (`git:<repo>@<ref>`)",
        ));
    }
    let b = table.get_ref();
    let config = b.config.as_ref().map_or("", |c| c.get_ref().as_str());
    let parsed =
        KernelBuild::parse(config, &text(&b.fragments), &text(&b.patches)).map_err(|e| {
            // Point at the value refused: an item, else its list, else the table.
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
                span.unwrap_or(table.span()),
                format!("build.{}", e.key),
                e.error.to_string(),
            )
        })?;
    Ok((!parsed.is_default()).then_some(parsed))
}

/// A list's strings, none when it is left out.
fn text(l: &Option<Spanned<Vec<Spanned<String>>>>) -> Vec<&str> {
    l.as_ref()
        .map(|l| l.get_ref().iter().map(|s| s.get_ref().as_str()).collect())
        .unwrap_or_default()
}
