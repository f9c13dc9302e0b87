//! jobwarden's dispatcher (KEP-4368's manager-worker layout): a Job created in this, the
//! management cluster, with `spec.managedBy: jobwarden.io/dispatcher` runs as a copy on a
//! worker cluster, and the copy's status is mirrored back onto it.
//!
//! # Layout
//!
//! Deciding, pure: `copy` (the copy built from the user's Job, recognised by its origin UID,
//! and the spec patch that keeps it in line), `status` (the copy's status mirrored, or a
//! failure of the dispatcher's own, each held to the Job status rules), `placement` (which
//! worker), `credentials` (a worker's kubeconfig judged), `fence` (which copies on a worker
//! must go), and over them `plan` (the decision for one Job).

pub mod copy;
pub mod credentials;
pub mod fence;
pub mod placement;
pub mod plan;
pub mod status;
