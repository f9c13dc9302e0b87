//! Events about Jobs, as a controller writes them: the per-Job spam filter upstream's recorder
//! applies (`limiter`), and the bounded queue they wait in to be written, repeats merged
//! (`queue`). The Event object itself, and its one writer, are `jobwarden-events`'.

pub mod limiter;
pub mod queue;
