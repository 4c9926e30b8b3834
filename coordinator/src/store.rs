//! What the scheduler keeps: the records, the changes to them ([`Op`]), and
//! the [`Backend`] that makes a batch of changes durable and gives them all
//! back after a restart ([`Snapshot`]).
//!
//! Every change goes through [`Backend::apply`], one atomic batch of
//! [`Op`]s: the scheduler commits a batch before it sends any
//! acknowledgement or assignment that depends on it, which is what makes a
//! SIGKILL at any instant lose nothing. Batching is also what makes it
//! fast: one fsync covers every result that arrived while the previous
//! batch was being written.
//!
//! The operations are puts and deletes of whole records under a key, the
//! shape of an etcd transaction, so that control state can move to etcd
//! without changing the scheduler. What every backend must do is one suite,
//! `coordinator/tests/store.rs`; the embedded backend is [`Sqlite`].

mod backend;
#[cfg(feature = "ha")]
pub mod etcd;
mod location;
mod sqlite;

pub use backend::{
    AgentRecord, Backend, Error, Execution, MatrixRecord, Op, Result, RunRecord, RunState,
    ScheduleRecord, Snapshot, Unreadable,
};
#[cfg(feature = "ha")]
pub use etcd::Etcd;
pub use location::{Endpoints, Location, Prefix};
pub use sqlite::{BUSY_TIMEOUT, Sqlite};
