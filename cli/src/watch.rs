//! Following a matrix until it ends: a progress bar on a terminal, one line
//! per change otherwise (logs, CI). A kernel build's elapsed time moves
//! every 10 s; without a terminal such a change alone is printed every
//! [`QUIET_REPEAT`], so that a log gets a line a minute, not six.

use std::time::{Duration, Instant};

use anyhow::Result;
use farm_proto::{MatrixState, MatrixStatus, WatchMatrixRequest};
use indicatif::{ProgressBar, ProgressStyle};
use tracing::warn;

use farm_runtime::coordinators::Urls;

use crate::client::{Access, Client};
use crate::render;

/// How long a broken watch stream is retried (a coordinator restarting).
const RECONNECT_FOR: Duration = Duration::from_secs(120);

/// Without a terminal, how often a line that differs from the last only
/// in its times (a build's elapsed, the ETA) is printed.
const QUIET_REPEAT: Duration = Duration::from_secs(60);

/// Watches `matrix_id` until it ends and returns its last status. With
/// `leaders` (the coordinators given), a broken stream is taken up again
/// on whichever coordinator leads then.
pub async fn watch(
    client: &mut Client,
    matrix_id: &str,
    leaders: Option<(&Urls, &Access)>,
) -> Result<MatrixStatus> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut last_line = String::new();
    // Without a terminal: the last line printed without its times, and when.
    let mut printed: Option<(String, Instant)> = None;
    let mut last_waiting: Vec<String> = Vec::new();
    let mut broken_since: Option<Instant> = None;
    loop {
        let stream = client
            .watch_matrix(WatchMatrixRequest {
                matrix_id: matrix_id.to_string(),
            })
            .await;
        let mut stream = match stream {
            Ok(s) => {
                broken_since = None;
                s.into_inner()
            }
            Err(e) if e.code() == tonic::Code::Unavailable || e.code() == tonic::Code::Unknown => {
                retry_or_fail(&mut broken_since, e)?;
                tokio::time::sleep(Duration::from_millis(500)).await;
                relead(client, leaders).await;
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        loop {
            match stream.message().await {
                Ok(Some(st)) => {
                    let c = st.counts.unwrap_or_default();
                    bar.set_length(u64::from(c.total));
                    bar.set_position(u64::from(c.finished + c.failed + c.cancelled));
                    let line = format!("{}{}", render::progress_line(&st), eta(&st));
                    bar.set_message(line.clone());
                    let waiting = render::waiting(&st);
                    if waiting != last_waiting {
                        for w in &waiting {
                            // A hidden bar (not a terminal) drops println: say it plainly.
                            if bar.is_hidden() {
                                eprintln!("{w}");
                            } else {
                                bar.println(w);
                            }
                        }
                        last_waiting = waiting;
                    }
                    if bar.is_hidden() && line != last_line {
                        let steady = render::progress_line(&timeless(&st));
                        let due = printed
                            .as_ref()
                            .is_none_or(|(s, t)| *s != steady || t.elapsed() >= QUIET_REPEAT);
                        if due || st.state != MatrixState::Running as i32 {
                            eprintln!("{line}");
                            printed = Some((steady, Instant::now()));
                        }
                    }
                    last_line = line;
                    if st.state != MatrixState::Running as i32 {
                        bar.finish();
                        return Ok(st);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    warn!("watch stream broke: {e}");
                    retry_or_fail(&mut broken_since, e)?;
                    break;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        relead(client, leaders).await;
    }
}

/// `client` becomes one of the leader's, which a standby among the URLs
/// given may name (the old one is kept when none leads yet; the next try
/// says so).
async fn relead(client: &mut Client, leaders: Option<(&Urls, &Access)>) {
    if let Some((urls, access)) = leaders
        && let Ok(c) = crate::client::connect_leader(urls, access).await
    {
        *client = c;
    }
}

fn retry_or_fail(since: &mut Option<Instant>, e: tonic::Status) -> Result<()> {
    let t = since.get_or_insert_with(Instant::now);
    if t.elapsed() > RECONNECT_FOR {
        return Err(anyhow::anyhow!(
            "lost the coordinator for {} s: {e}",
            RECONNECT_FOR.as_secs()
        ));
    }
    Ok(())
}

/// `st` with its builds' elapsed times at zero: what a line says apart
/// from its times.
fn timeless(st: &MatrixStatus) -> MatrixStatus {
    let mut st = st.clone();
    for a in st.cells.iter_mut().flat_map(|c| &mut c.activities) {
        if let Some(b) = &mut a.build {
            b.elapsed_s = 0;
        }
    }
    st
}

/// Remaining runs × median run time (builds left out), and the builds
/// still ahead (`render::build_seconds_left`), spread over the agents at
/// work on it.
fn eta(st: &MatrixStatus) -> String {
    let c = st.counts.unwrap_or_default();
    let left = c.queued + c.running;
    // Nothing running means nothing to extrapolate from (cells may be waiting).
    if left == 0 || c.running == 0 || st.median_run_seconds <= 0.0 {
        return String::new();
    }
    let work = f64::from(left) * st.median_run_seconds + render::build_seconds_left(st);
    format!(" · ETA {}", render::duration(work / f64::from(c.running)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use farm_proto::{BuildProgress, BuildStep, CellStatus, RunActivity, RunCounts};

    /// The matrix: ten runs of ten `git:` kernels on one agent,
    /// after its first run (31.5 s of run beside a 20-minute cold build).
    fn after_first_run() -> MatrixStatus {
        MatrixStatus {
            state: MatrixState::Running as i32,
            counts: Some(RunCounts {
                total: 10,
                finished: 1,
                running: 1,
                queued: 8,
                ..Default::default()
            }),
            cells: vec![CellStatus {
                activities: vec![RunActivity {
                    kernel: "git:linux@v6.1".into(),
                    build: Some(BuildProgress {
                        step: BuildStep::Compile as i32,
                        elapsed_s: 60,
                        estimate_s: 120,
                        warm: true,
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            median_run_seconds: 31.5,
            median_build_seconds: 1200.0,
            builds_pending: 8,
            ..Default::default()
        }
    }

    #[test]
    fn the_eta_counts_builds_ahead_and_not_in_the_run_time() {
        let mut st = after_first_run();
        // 9 runs × 31.5 s + 60 s of the build under way + 8 × 1200 s.
        assert_eq!(eta(&st), " · ETA 2h45m");
        st.median_build_seconds = 130.0;
        assert_eq!(eta(&st), " · ETA 23m04s");
        // Two agents at work share it.
        st.counts.as_mut().unwrap().running = 2;
        st.counts.as_mut().unwrap().queued = 7;
        assert_eq!(eta(&st), " · ETA 11m32s");
        // No run finished yet: nothing to extrapolate from.
        st.median_run_seconds = 0.0;
        assert_eq!(eta(&st), "");
    }

    #[test]
    fn a_line_without_its_times_is_what_a_log_repeats_on() {
        let st = after_first_run();
        assert_eq!(
            render::progress_line(&timeless(&st)),
            "1/10 done · 1 running · 8 queued · 0 failed · building git:linux@v6.1 \
             (compile, 0s of ~2m warm)"
        );
        assert_eq!(
            render::progress_line(&st),
            "1/10 done · 1 running · 8 queued · 0 failed · building git:linux@v6.1 \
             (compile, 1m00s of ~2m warm)"
        );
    }
}
