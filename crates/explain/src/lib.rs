//! `jobwarden explain`: the story of a live Job, in `simulate`'s voice. Who runs it and whether
//! that controller shows signs of acting; each finished pod and the pod failure policy rule it
//! matched; what the Job waits for now (a back-off, pods terminating, the success policy, the
//! active deadline, a suspension); a per-index view for an Indexed Job.
//!
//! * [`story`] (pure): `explain(observed, now, settings) -> Explanation`, over the controller's
//!   own matcher and back-off arithmetic and the audit's stuck-delegation decision.
//! * [`explanation`]: the story as data (`-o json`; the schema is in docs/cli.md).
//! * [`text`] (pure): the story as text.
//! * [`timeline`] (pure): the story drawn, an SVG timeline (`-o svg`).
//! * [`dispatch`] (pure): for a Job jobwarden's dispatcher runs, its worker, a lost worker's
//!   mark and what follows it, why it waits for a worker, and its copy's story as read from
//!   the worker, told by [`story`] over the copy and its pods there.
//! * [`read`]: the thin, read-only shell that reads the Job, its pods, its events and
//!   jobwarden's Lease with the caller's credentials; and, for a dispatched Job, its copy,
//!   pods and events on the worker, with a kubeconfig the caller gives or the worker's own
//!   (the dispatcher's, judged by the dispatcher's judge first).
//! * [`fit`] (pure): where a dispatched Job would fit now, per candidate worker, by the
//!   dispatcher's `room` core; where a placed Job's copy's pods are bound.
//! * [`workers`]: `jobwarden workers`, the fleet and the room on each worker, read with the
//!   same reach and summed by the dispatcher's `room` core; `explain` judges an unplaced Job
//!   by the same views.

pub mod dispatch;
pub mod explanation;
pub mod fit;
mod pods;
pub mod reach;
pub mod read;
pub mod story;
pub mod text;
pub mod timeline;
pub mod workers;

pub use dispatch::{CopyReading, DispatchReading};
pub use explanation::Explanation;
pub use reach::WorkerAccess;
pub use read::{ReadError, Target, read, read_dispatch};
pub use story::{ExplainError, LeaseReading, MAX_EVENTS, Observed, Settings, explain};
pub use text::render;

#[cfg(test)]
mod tests;
