//! `jobwarden workers`: the fleet as the dispatcher places on it. Per worker whether it
//! answers, its schedulable Nodes and the room free on them (summed by the dispatcher's own
//! `room` core), the Jobs placed there; and the Jobs waiting for a worker, by reason.
//!
//! * [`view`] (pure): what was read, as the fleet (`-o json`).
//! * [`text`] (pure): the fleet as a table.
//! * [`room_of`] (pure): a worker's room, by the `room` core.
//! * [`read`]: the read-only shell.

pub mod read;
pub mod room_of;
pub mod teams;
pub mod text;
pub mod view;

pub use view::{WorkersView, fleet};
