//! `[schedule]`: what makes a matrix continuous.

use toml::Spanned;

use super::checks::non_empty;
use super::location::Issue;
use super::raw::RawSchedule;
use super::{Checked, Schedule};

/// The `[schedule]` table: a valid cron, a valid glob, at least one.
pub(super) fn schedule(raw: Option<&Spanned<RawSchedule>>) -> Checked<Option<Schedule>> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let s = raw.get_ref();
    let mut out = Schedule {
        cron: String::new(),
        on_new_kernel: String::new(),
    };
    if let Some(c) = &s.cron {
        crate::schedule::cron(c.get_ref()).map_err(|e| Issue::new(c.span(), "schedule.cron", e))?;
        out.cron = c.get_ref().trim().to_owned();
    }
    if let Some(g) = &s.on_new_kernel {
        let text = non_empty(g, "schedule.on_new_kernel")?;
        crate::schedule::kernel_glob(&text)
            .map_err(|e| Issue::new(g.span(), "schedule.on_new_kernel", e))?;
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
