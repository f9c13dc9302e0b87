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
//! A folder for each part of the design in docs/dispatch.md, the pure deciding apart from the
//! acting inside each:
//!
//! * `copy`: the copy built from the user's Job, recognised by its origin UID, and the spec
//!   patch that keeps it in line; `copy::status` (the copy's status mirrored, or a failure of
//!   the dispatcher's own, each held to the Job status rules) and `copy::record` (what the
//!   dispatcher keeps on a user's Job, read back). Pure.
//! * `placement`: which worker (pure), with `loads` (unfinished Jobs per worker),
//!   `reservations` (the room placed Jobs hold until their pods are seen), `moving` (when a
//!   copy that cannot be scheduled moves) and `placing_lane` (how many syncs may place at once).
//! * `room`: whether a Job's pods fit on a worker's nodes now, and why not: kube-scheduler's
//!   filter over compact views of its Nodes and pods. Pure.
//! * `plan`: the decision for one Job, over all of the above. Pure.
//! * `shares`: fair shares between teams (the policy's `dispatch.shares`): the order of the
//!   waiting Jobs by weighted dominant share, each team's usage, and the room held for the
//!   head of the order on one worker. Pure.
//! * `worker`: one worker cluster: its kubeconfig judged and followed, the link to it (client,
//!   copies, reach, fence), its namespaces, and its Nodes and unfinished pods watched into its
//!   room.
//! * `sync`: one Job: its view gathered, its plan carried out (`sync::carry_out`).
//! * `run`: the loop of one term of leadership, and the fleet changed under it
//!   (`run::fleet_change`).
//! * `api`: the calls, fenced by leadership; `metrics`.

pub mod api;
pub mod copy;
pub mod metrics;
pub mod placement;
pub mod plan;
pub mod room;
pub mod run;
pub mod shares;
pub mod sync;
pub mod worker;

pub use metrics::{DispatchMetrics, register_metrics};
pub use run::{DispatchConfig, run_term};
