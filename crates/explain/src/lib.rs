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
//! * [`read`]: the thin, read-only shell that reads the Job, its pods, its events and
//!   jobwarden's Lease with the caller's credentials.

pub mod explanation;
mod pods;
pub mod read;
pub mod story;
pub mod text;
pub mod timeline;

pub use explanation::Explanation;
pub use read::{ReadError, Target, read};
pub use story::{ExplainError, LeaseReading, MAX_EVENTS, Observed, Settings, explain};
pub use text::render;

#[cfg(test)]
mod tests;
