//! Structured logging for `jobwarden serve` (and whatever else the binary runs): tracing with
//! human-readable text or one JSON object per line. The level comes from `RUST_LOG` (default
//! `info`); review lines never carry the object, at any level.
//!
//! Lines are written by a background thread (tracing-appender), so a review never waits on a
//! write to stderr: one line per review is a few percent of the server's throughput otherwise.
//! Should the writer fall 128k lines behind, new lines are dropped rather than stalling reviews.

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::JsonFields;
use tracing_subscriber::fmt::time::SystemTime;

use crate::config::LogFormat;
use json_lines::JsonLines;

mod json_lines;

/// Keeps the log writer running; dropping it flushes what is buffered. Hold it until exit.
#[must_use = "dropping the guard stops the log writer"]
pub struct LoggingGuard(#[allow(dead_code)] Option<WorkerGuard>);

/// Installs the global subscriber. Call once, before `run`; a second call changes nothing.
pub fn init_logging(format: LogFormat) -> LoggingGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, guard) = tracing_appender::non_blocking(std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines::<SystemTime>::default())
            .try_init(),
    };
    // Only "already installed" can fail, and then this writer is not the one in use.
    LoggingGuard(installed.ok().map(|()| guard))
}
