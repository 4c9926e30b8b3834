//! Following a matrix until it ends: a progress bar on a terminal, one line
//! per change otherwise (logs, CI).

use std::time::{Duration, Instant};

use anyhow::Result;
use farm_proto::{MatrixState, MatrixStatus, WatchMatrixRequest};
use indicatif::{ProgressBar, ProgressStyle};
use tracing::warn;

use farm_proto::coordinators::Urls;

use crate::client::{Access, Client};
use crate::render;

/// How long a broken watch stream is retried (a coordinator restarting).
const RECONNECT_FOR: Duration = Duration::from_secs(120);

/// Watches `matrix_id` until it ends and returns its last status. With
/// `leaders` (a farm of several coordinators), a broken stream is taken up
/// again on whichever of them leads then.
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
                        eprintln!("{line}");
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

/// With several coordinators: `client` becomes one of the leader's (the
/// old one is kept when none leads yet; the next try says so).
async fn relead(client: &mut Client, leaders: Option<(&Urls, &Access)>) {
    if let Some((urls, access)) = leaders
        && urls.len() > 1
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

/// Remaining runs × median run time, spread over the agents at work on it.
fn eta(st: &MatrixStatus) -> String {
    let c = st.counts.unwrap_or_default();
    let left = c.queued + c.running;
    // Nothing running means nothing to extrapolate from (cells may be waiting).
    if left == 0 || c.running == 0 || st.median_run_seconds <= 0.0 {
        return String::new();
    }
    let secs = f64::from(left) * st.median_run_seconds / f64::from(c.running.max(1));
    format!(" · ETA {}", humanize(secs))
}

fn humanize(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}
