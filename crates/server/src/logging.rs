//! Structured logging for `jobwarden serve` (and whatever else the binary runs): tracing with
//! human-readable text or one JSON object per line. The level comes from `RUST_LOG` (default
//! `info`); review lines never carry the object, at any level.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Installs the global subscriber. Call once, before `run`; a second call changes nothing.
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // Only "already installed" can fail here, which is what "changes nothing" means.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
}
