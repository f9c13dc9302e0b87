//! jobwarden's dispatcher (KEP-4368's manager-worker layout): a Job created in this, the
//! management cluster, with `spec.managedBy: jobwarden.io/dispatcher` runs as a copy on a
//! worker cluster, and the copy's status is mirrored back onto it. The worker's own Job
//! controller runs the copy; the dispatcher never touches a Job it did not create there, and
//! of pods only deletes those of a copy it takes back while it still runs (its Job moved off
//! a lost worker, was deleted, or failed here): the worker's garbage collector would reach
//! them only once its controller manager's watches have backed off and come back, up to a
//! minute after a lost API server answers again.
//!
//! ```text
//!  management cluster                                 worker clusters (their own Job controller)
//!  user's Job (managedBy: dispatcher) ── place ──▶ annotation jobwarden.io/worker: east (first)
//!         ▲                                    └──▶ copy: same ns/name, no managedBy,
//!         │ status (mirrored, fenced)                  labels jobwarden.io/origin-uid, origin
//!         └──────────── watch (origin label) ◀───────── copy's status, written by the worker
//! ```
//!
//! # Layout
//!
//! 1. Deciding, pure: `copy` (the copy built from the user's Job, recognised by its origin UID,
//!    and the spec patch that keeps it in line), `status` (the copy's status mirrored, or a
//!    failure of the dispatcher's own, each held to the Job status rules), `placement` (which
//!    worker), `credentials` (a worker's kubeconfig judged), `fence` (which copies on a worker
//!    must go), `loads` (unfinished Jobs per worker), `record` (what the dispatcher keeps on
//!    a user's Job, read back), `room` (whether a Job's pods fit on a worker's nodes now,
//!    and why not: kube-scheduler's filter over compact views of its Nodes and pods),
//!    `moving` (when a copy that cannot be scheduled moves), `reservations` (the room placed
//!    Jobs hold until their pods are seen), and over them `plan` (the decision for one Job).
//! 2. Acting: `api` (the calls, fenced by leadership), `credential_source` (a worker's
//!    kubeconfig as it changes), `namespace_labels`, `worker_link` (one worker: its client,
//!    copies, reach and fence), `worker_view` and `room_watch` (a worker's nodes and
//!    unfinished pods, watched into its room), `sync` (one Job: its view gathered, its plan
//!    carried out, the longer steps in `steps`),
//!    `placing_lane` (how many syncs may place at once), `run` (the loop of one term of
//!    leadership).
//! 3. `metrics`.

pub mod api;
pub mod copy;
pub mod credential_source;
pub mod credentials;
pub mod fence;
pub mod fleet_change;
pub mod loads;
pub mod metrics;
pub mod moving;
pub mod namespace_labels;
pub mod placement;
pub mod placing_lane;
pub mod plan;
pub mod record;
pub mod reservations;
pub mod room;
pub mod room_watch;
pub mod run;
pub mod status;
mod steps;
pub mod sync;
pub mod worker_link;
pub mod worker_view;

pub use metrics::{DispatchMetrics, register_metrics};
pub use run::{DispatchConfig, run_term};
