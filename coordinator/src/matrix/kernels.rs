//! The `kernels` axis: each name parsed as a `farm_spec::Kernel` (the one
//! parser the agent uses too), and a schedule trigger's new kernel added.

use farm_spec::Kernel;
use farm_spec::kernel::KernelError;
use toml::Spanned;

use super::checks::{non_empty, non_empty_axis};
use super::location::{Checked, Issue};
use super::raw::RawMatrix;

/// The kernel axis, in file order; `running` when the file gives none.
pub(super) fn kernels(raw: Option<&Spanned<Vec<Spanned<String>>>>) -> Checked<Vec<Kernel>> {
    let Some(raw) = raw else {
        return Ok(vec![Kernel::Running]);
    };
    let mut out: Vec<Kernel> = Vec::new();
    for (i, kernel) in non_empty_axis(raw, "kernels")?.iter().enumerate() {
        let key = format!("kernels[{i}]");
        let name = non_empty(kernel, &key)?;
        let parsed = name
            .parse::<Kernel>()
            .map_err(|e| Issue::new(kernel.span(), &key, e.to_string()))?;
        if let Some(j) = out.iter().position(|k| *k == parsed) {
            return Err(Issue::new(
                kernel.span(),
                key,
                format!("duplicate kernel `{name}` (also kernels[{j}])"),
            ));
        }
        out.push(parsed);
    }
    Ok(out)
}

/// Puts a schedule trigger's `new_kernel` on the kernel axis — after the
/// file's kernels, or alone when the file gives none — checked as the file's
/// kernels are. Gives the kernel when it was added (the file may run it anyway).
pub(super) fn add_new_kernel<'k>(
    raw: &RawMatrix,
    kernels: &mut Vec<Kernel>,
    new_kernel: Option<&'k str>,
) -> Checked<Option<&'k str>> {
    let Some(k) = new_kernel else {
        return Ok(None);
    };
    let span = raw
        .schedule
        .as_ref()
        .and_then(|s| s.get_ref().on_new_kernel.as_ref())
        .map_or(raw.name.span(), |g| g.span());
    // As the file's kernels: the store keeps seen kernels one a line.
    let kernel = k.parse::<Kernel>().map_err(|e| {
        let why = match e {
            KernelError::Empty | KernelError::Whitespace => {
                format!("`{k}`: a kernel name is not empty and has no whitespace")
            }
            e => e.to_string(),
        };
        Issue::new(span, "schedule.on_new_kernel", format!("new kernel: {why}"))
    })?;
    if raw.kernels.is_none() {
        *kernels = vec![kernel];
        Ok(Some(k))
    } else if !kernels.contains(&kernel) {
        kernels.push(kernel);
        Ok(Some(k))
    } else {
        Ok(None)
    }
}
