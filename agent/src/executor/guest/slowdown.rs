//! How much slower a guest ran than its host (`guest_slowdown`): the
//! sampler's calibration (`farm-sample --calibrate`, `image/calibrate.c`)
//! times a fixed loop of plain CPU work in the guest before the workload,
//! and the agent times the same loop natively
//! ([`crate::executor::guest::image::sampler::host_calibration`]); the
//! figure is the ratio of their medians. Under TCG, which accounts no
//! steal, it is the one guest-side figure of how slowly the guest ran
//! (the emulation and the host's preemption of its vCPUs together); under
//! KVM it is close to 1, and steal says the rest.
//!
//! `calibrate <iterations> <ns>...`: the loop's iterations, then each
//! repetition's CPU time in ns. Both sides' lines are parsed here, into a
//! [`Calibration`] whose values are within bounds.

use farm_proto::Metric;
use farm_spec::metric::GUEST_SLOWDOWN;

use super::decimal;
use crate::telemetry::report::known;

/// The most repetitions a line may carry (the sampler writes 5).
pub const MAX_REPS: usize = 16;
/// The most iterations a loop may have: 10⁹ is seconds natively, hours
/// under TCG.
const MAX_ITERATIONS: u64 = 1_000_000_000;
/// One repetition's bounds: below 1 µs is no loop of iterations (nor a
/// clock that can time one), beyond a minute no calibration of a few
/// milliseconds, however slow the emulation.
const MIN_NS: u64 = 1_000;
const MAX_NS: u64 = 60_000_000_000;
/// The longest value an error quotes.
const QUOTE: usize = 24;

/// One side's timing of the calibration loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// The loop's iterations: the two sides are compared only when they
    /// ran the same loop.
    pub iterations: u64,
    /// The median of the repetitions' CPU times, in ns: the first one
    /// pays for TCG's translation, and a busy host preempts some.
    pub median_ns: u64,
}

/// Why a `calibrate` line was refused (the caller names the line).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrationError {
    #[error("expected `calibrate <iterations> <ns>...` with 1 to {MAX_REPS} times")]
    Shape,
    #[error("{0:?} is not a count of iterations from 1 to 1000000000")]
    Iterations(String),
    #[error("{0:?} is not a time in ns from 1 µs to 60 s")]
    Time(String),
}

impl Calibration {
    /// What follows `calibrate ` on the line.
    pub fn parse(rest: &str) -> Result<Calibration, CalibrationError> {
        let mut fields = rest.split(' ');
        let iterations = fields.next().unwrap_or("");
        let iterations = decimal::number(iterations)
            .filter(|n| (1..=MAX_ITERATIONS).contains(n))
            .ok_or_else(|| CalibrationError::Iterations(quote(iterations)))?;
        let mut ns = Vec::new();
        for f in fields {
            if ns.len() == MAX_REPS {
                return Err(CalibrationError::Shape);
            }
            let t = decimal::number(f)
                .filter(|t| (MIN_NS..=MAX_NS).contains(t))
                .ok_or_else(|| CalibrationError::Time(quote(f)))?;
            ns.push(t);
        }
        if ns.is_empty() {
            return Err(CalibrationError::Shape);
        }
        ns.sort_unstable();
        let n = ns.len();
        // Within bounds, so the sum of two cannot overflow.
        let median_ns = if n % 2 == 1 {
            ns[n / 2]
        } else {
            (ns[n / 2 - 1] + ns[n / 2]) / 2
        };
        Ok(Calibration {
            iterations,
            median_ns,
        })
    }
}

/// `guest_slowdown`, the guest's median time over the host's, when both
/// sides timed the same loop; `None` without either side (a runner that
/// did not calibrate, a host that could not), or when their loops differ.
pub fn metric(guest: Option<&Calibration>, host: Option<&Calibration>) -> Option<Metric> {
    let (guest, host) = (guest?, host?);
    if guest.iterations != host.iterations {
        tracing::warn!(
            guest = guest.iterations,
            host = host.iterations,
            "the guest's calibration loop is not the host's: guest_slowdown is left out"
        );
        return None;
    }
    Some(known(
        GUEST_SLOWDOWN,
        guest.median_ns as f64 / host.median_ns as f64,
    ))
}

/// At most [`QUOTE`] characters of a value.
fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}...", &s[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_of_each_side_and_their_ratio() {
        // A 4-vCPU TCG guest on a 2-CPU host: the first repetition pays
        // for the translation, the fourth was preempted.
        let guest = Calibration::parse("400000 3412875 2361204 2340312 4870551 2398110");
        assert_eq!(
            guest,
            Ok(Calibration {
                iterations: 400000,
                median_ns: 2398110,
            })
        );
        let host = Calibration::parse("400000 1147130 1045801 1020243 988244").unwrap();
        assert_eq!(host.median_ns, (1020243 + 1045801) / 2);
        let m = metric(Some(&guest.unwrap()), Some(&host)).unwrap();
        assert_eq!((m.name.as_str(), m.unit.as_str()), ("guest_slowdown", "×"));
        assert_eq!(m.value, 2398110.0 / 1033022.0);
        // Either side missing, or another loop: no figure.
        assert_eq!(metric(None, Some(&host)), None);
        assert_eq!(metric(Some(&host), None), None);
        let other = Calibration {
            iterations: 1000,
            ..host
        };
        assert_eq!(metric(Some(&other), Some(&host)), None);
    }
}
