//! The numbers of the lines a guest prints (the runner's and the sampler's
//! calibration): one parser, so that both refuse the same text.

/// Decimal digits only (no sign, unlike `str::parse`), at most 19 of them.
pub(crate) fn number(s: &str) -> Option<u64> {
    (!s.is_empty() && s.len() <= 19 && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}
