//! Which scheduler a request goes to: this coordinator's while it leads,
//! none while it stands by (the caller is told where the leader is, or
//! why none is known).

use tokio::sync::watch;
use tonic::Status;

use crate::scheduler::Handle;

use farm_runtime::coordinators::LEADER_METADATA;

#[derive(Clone)]
pub enum Route {
    Leading(Handle),
    /// Another coordinator leads (its URL, when known), or none does: why.
    Standby {
        leader: Option<String>,
        why: String,
    },
    /// This coordinator's term ended ("leadership lost: …", the same words
    /// its scheduler's last callers got), and it knows no other leader yet.
    Lost(String),
}

/// The current [`Route`], as the leadership changes it.
#[derive(Clone)]
pub struct Router(watch::Receiver<Route>);

impl Router {
    /// A coordinator that always leads (the embedded store).
    pub fn fixed(handle: Handle) -> Router {
        Router(watch::channel(Route::Leading(handle)).1)
    }

    pub fn new(rx: watch::Receiver<Route>) -> Router {
        Router(rx)
    }

    /// The leading scheduler, or the refusal a standby answers with:
    /// `UNAVAILABLE`, saying where the leader is.
    pub fn handle(&self) -> Result<Handle, Status> {
        match &*self.0.borrow() {
            Route::Leading(h) => Ok(h.clone()),
            Route::Standby {
                leader: Some(url),
                why: _,
            } => {
                let mut s =
                    Status::unavailable(format!("this coordinator stands by; the leader is {url}"));
                if let Ok(v) = url.parse() {
                    s.metadata_mut().insert(LEADER_METADATA, v);
                }
                Err(s)
            }
            Route::Standby { leader: None, why } => Err(Status::unavailable(format!(
                "this coordinator stands by and no leader is known: {why}"
            ))),
            Route::Lost(why) => Err(Status::unavailable(why.clone())),
        }
    }
}
