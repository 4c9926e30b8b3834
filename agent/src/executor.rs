//! Executors: where and how a run's workload executes.
//!
//! Today only [`host`]: the workload runs as a child of the agent on the
//! machine itself. Guests (QEMU/KVM) come next, behind the same shape.

pub mod host;
