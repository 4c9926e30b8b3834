//! `[schedule]`: what makes a matrix continuous.

use toml::Spanned;

use super::checks::non_empty;
use super::location::{Checked, Issue};
use super::raw::{RawMatrix, RawSchedule};

/// A validated `[schedule]`; an empty field is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub cron: String,
    pub on_new_kernel: String,
    /// Bisect each regression an execution finds between two `git:`
    /// kernels of one repository (the cell's baseline's and its own).
    pub bisect: bool,
}

/// The `[schedule]` table: a valid cron, a valid glob, at least one.
pub(super) fn schedule(raw: Option<&Spanned<RawSchedule>>) -> Checked<Option<Schedule>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let s = raw.get_ref();
    let mut out = Schedule {
        cron: String::new(),
        on_new_kernel: String::new(),
        bisect: s.bisect.as_ref().is_some_and(|b| *b.get_ref()),
    };
    if let Some(c) = &s.cron {
        crate::schedule::cron(c.get_ref())
            .map_err(|e| Issue::new(c.span(), "schedule.cron", e.to_string()))?;
        out.cron = c.get_ref().trim().to_owned();
    }
    if let Some(g) = &s.on_new_kernel {
        let text = non_empty(g, "schedule.on_new_kernel")?;
        crate::schedule::kernel_glob(&text)
            .map_err(|e| Issue::new(g.span(), "schedule.on_new_kernel", e.to_string()))?;
        out.on_new_kernel = text;
    }
    if out.cron.is_empty() && out.on_new_kernel.is_empty() {
        return Err(Issue::new(
            raw.span(),
            "schedule",
            "a schedule needs `cron` (e.g. \"0 3 * * *\") or `on_new_kernel` (a kernel glob)",
        ));
    }
    Ok(Some(out))
}

/// `bisect = true` needs what an automatic bisection starts from: cells
/// compared with a baseline (`[baseline]`), and `git:` kernels of one
/// repository on the kernel axis, so that a regression's two kernels span
/// a git range an agent can list.
pub(super) fn bisectable(
    raw: &RawMatrix,
    schedule: Option<&Schedule>,
    kernels: &[farm_spec::Kernel],
) -> Checked<()> {
    let Some(flag) = raw
        .schedule
        .as_ref()
        .and_then(|s| s.get_ref().bisect.as_ref())
        .filter(|_| schedule.is_some_and(|s| s.bisect))
    else {
        return Ok(());
    };
    let refuse = |why: &str| Err(Issue::new(flag.span(), "schedule.bisect", why));
    if raw.baseline.is_none() {
        return refuse(
            "a bisection runs from a regressed cell's baseline kernel to its own: give a \
             [baseline] (e.g. kernel = \"git:linux@v6.1\")",
        );
    }
    let mut repos: Vec<&str> = kernels
        .iter()
        .filter_map(|k| match k {
            farm_spec::Kernel::Git(g) => Some(g.repo()),
            _ => None,
        })
        .collect();
    let gits = repos.len();
    repos.sort_unstable();
    repos.dedup();
    if gits < 2 || repos.len() == gits {
        return refuse(
            "an automatic bisection lists the commits between two `git:` kernels of one \
             repository: the kernel axis has no two",
        );
    }
    Ok(())
}
