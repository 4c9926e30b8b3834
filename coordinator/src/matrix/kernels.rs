//! The `kernels` axis: what a kernel name asks for, and which names are refused.

use toml::Spanned;

use super::Checked;
use super::checks::{non_empty, non_empty_axis};
use super::location::Issue;
use super::raw::RawMatrix;

/// The kernel name that accepts whatever kernel an agent runs, and the default axis.
const RUNNING_KERNEL: &str = "running";

/// What a matrix's kernel name asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// `running`: whatever the agent runs, on the host.
    Running,
    /// A release (`6.1.0-57-amd64`): an agent running exactly it, on the host.
    Release,
    /// `debian:<version>`: Debian's package of that version, booted in a guest
    /// of the arch its flavour names.
    Debian { arch: &'static str },
    /// `file:<absolute path>`: a kernel image of the user's, booted in a guest.
    File,
}

/// Debian kernel flavours' suffixes and the arch (`uname -m`) they run on.
const DEBIAN_FLAVOURS: &[(&str, &str)] = &[
    ("-amd64", "x86_64"),
    ("-s390x", "s390x"),
    ("-arm64", "aarch64"),
    ("-powerpc64le", "ppc64le"),
];

/// The kind of a kernel name the matrix accepted (see [`kernels`]).
pub fn kernel_kind(name: &str) -> KernelKind {
    if name == RUNNING_KERNEL {
        KernelKind::Running
    } else if let Some(v) = name.strip_prefix("debian:") {
        let arch = DEBIAN_FLAVOURS
            .iter()
            .find(|(suffix, _)| v.ends_with(suffix))
            .map_or("x86_64", |(_, a)| a);
        KernelKind::Debian { arch }
    } else if name.starts_with("file:") {
        KernelKind::File
    } else {
        KernelKind::Release
    }
}

/// Checks a `debian:` or `file:` kernel name; why it is refused.
fn check_kernel_name(name: &str) -> Result<(), String> {
    if let Some(v) = name.strip_prefix("debian:") {
        // It becomes a package name on the agent's command line: the
        // characters of Debian versions only, and a known flavour.
        let ok_chars = v
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".+~-".contains(c));
        if v.is_empty() || !ok_chars || !v.starts_with(|c: char| c.is_ascii_alphanumeric()) {
            return Err(format!(
                "`{name}`: a Debian kernel version is letters, digits and . + ~ - (e.g. debian:6.1.0-57-cloud-amd64)"
            ));
        }
        if !DEBIAN_FLAVOURS.iter().any(|(s, _)| v.ends_with(s)) {
            let known: Vec<&str> = DEBIAN_FLAVOURS.iter().map(|(s, _)| &s[1..]).collect();
            return Err(format!(
                "`{name}`: the version must end with a Debian flavour naming its arch ({})",
                known.join(", ")
            ));
        }
    } else if let Some(p) = name.strip_prefix("file:") {
        if !p.starts_with('/') || p.split('/').any(|part| part == "..") {
            return Err(format!(
                "`{name}`: a kernel image is an absolute path without `..`"
            ));
        }
        // It reaches no command line: the agent boots it only if it lies in
        // one of its kernel directories, and placement sends it only to
        // agents that list it.
        let ok_chars = p
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._+-~".contains(c));
        if !ok_chars {
            return Err(format!(
                "`{name}`: a kernel image's path is letters, digits and / . _ + - ~"
            ));
        }
    } else if name.contains(':') {
        return Err(format!(
            "`{name}`: a kernel is `running`, a release, `debian:<version>` or `file:<path>`"
        ));
    }
    Ok(())
}

pub(super) fn kernels(raw: Option<&Spanned<Vec<Spanned<String>>>>) -> Checked<Vec<String>> {
    let Some(raw) = raw else {
        return Ok(vec![RUNNING_KERNEL.to_owned()]);
    };
    let mut out: Vec<String> = Vec::new();
    for (i, kernel) in non_empty_axis(raw, "kernels")?.iter().enumerate() {
        let key = format!("kernels[{i}]");
        let name = non_empty(kernel, &key)?;
        if name.chars().any(char::is_whitespace) {
            return Err(Issue::new(
                kernel.span(),
                key,
                "a kernel release has no whitespace",
            ));
        }
        if let Err(why) = check_kernel_name(&name) {
            return Err(Issue::new(kernel.span(), key, why));
        }
        if let Some(j) = out.iter().position(|k| *k == name) {
            return Err(Issue::new(
                kernel.span(),
                key,
                format!("duplicate kernel `{name}` (also kernels[{j}])"),
            ));
        }
        out.push(name);
    }
    Ok(out)
}

/// Puts a schedule trigger's `new_kernel` on the kernel axis — after the
/// file's kernels, or alone when the file gives none — checked as the file's
/// kernels are. Gives the kernel when it was added (the file may run it anyway).
pub(super) fn add_new_kernel<'k>(
    raw: &RawMatrix,
    kernels: &mut Vec<String>,
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
    let checked = if k.is_empty() || k.chars().any(char::is_whitespace) {
        Err(format!(
            "`{k}`: a kernel name is not empty and has no whitespace"
        ))
    } else {
        check_kernel_name(k)
    };
    if let Err(why) = checked {
        return Err(Issue::new(
            span,
            "schedule.on_new_kernel",
            format!("new kernel: {why}"),
        ));
    }
    if raw.kernels.is_none() {
        *kernels = vec![k.to_owned()];
        Ok(Some(k))
    } else if !kernels.iter().any(|x| x == k) {
        kernels.push(k.to_owned());
        Ok(Some(k))
    } else {
        Ok(None)
    }
}
