//! A Job's timeline, drawn: a lane per completion index (or pod slot), a bar per pod attempt
//! coloured and patterned by how it ended, the pod failure policy rule each failure matched,
//! back-offs, and the Job's own moments across every lane, on a time axis whose idle
//! stretches are compressed. `simulate` and `explain` each turn their story into a
//! [`Timeline`] (through [`Builder`]); [`svg`] draws it.
//!
//! Pure: no I/O, no clock, no randomness. The same timeline gives the same bytes (one decimal
//! per number, fixed ids, no time but the story's own), and the file needs nothing outside
//! itself (no script, no font, no stylesheet). Names from the cluster are escaped in one place
//! (`xml`). It imports only `jobwarden-rules` (durations are written as the stories write them).

mod axis;
mod lanes;
mod model;
mod render;
mod style;
mod xml;

pub use model::{
    BackOff, Bar, Builder, Lane, LaneKind, MAX_BARS, MAX_LANES, Moment, MomentKind, Outcome,
    RuleMark, Timeline,
};
pub use render::svg;
