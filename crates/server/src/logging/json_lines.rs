//! The JSON log line of `--log-format json`, written straight into the line's buffer. The line
//! is the one tracing-subscriber's `fmt().json().flatten_event(true).with_current_span(false)`
//! writes, byte for byte (the tests compare the two): timestamp, level, the event's fields in
//! order, target, and the list of entered spans from the root when there is one.
//!
//! Why not tracing-subscriber's own: it sends every piece of the line through an `io::Write`
//! adaptor that checks each piece for UTF-8 again, and renders every `%` field through
//! `format_args!` into serde_json's `collect_str`. A review's line cost 25k instructions in the
//! server that way (filter, format and hand-off to the writer thread), a third as much as the
//! typical create's review itself; with this writer it costs 13k (BENCHMARKS.md,
//! `bench/profile_server.sh`). json-subscriber, the drop-in replacement, measured slower than
//! tracing-subscriber's.

use std::fmt::{self, Write};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// One JSON object per event; `T` writes the timestamp (tracing-subscriber's by default).
#[derive(Debug, Clone, Default)]
pub struct JsonLines<T = SystemTime> {
    timer: T,
}

impl<T> JsonLines<T> {
    #[cfg(test)]
    pub fn with_timer(timer: T) -> Self {
        JsonLines { timer }
    }
}

impl<S, T> FormatEvent<S, JsonFields> for JsonLines<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        use tracing_log::NormalizeEvent;
        // Events forwarded from the `log` crate carry their real target in fields.
        let normalized = event.normalized_metadata();
        let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());

        writer.write_str("{\"timestamp\":\"")?;
        self.timer.format_time(&mut writer)?;
        writer.write_str("\",\"level\":\"")?;
        writer.write_str(meta.level().as_str())?;
        writer.write_char('"')?;

        let mut fields = Fields {
            writer: &mut writer,
            result: Ok(()),
        };
        event.record(&mut fields);
        fields.result?;

        writer.write_str(",\"target\":")?;
        write_string(&mut writer, meta.target())?;

        // As tracing-subscriber: a list whenever the event has a span, of the current spans.
        let current = ctx.lookup_current();
        let has_span = current.is_some() || event.parent().and_then(|id| ctx.span(id)).is_some();
        if has_span {
            writer.write_str(",\"spans\":[")?;
            if let Some(leaf) = current {
                for (i, span) in leaf.scope().from_root().enumerate() {
                    if i > 0 {
                        writer.write_char(',')?;
                    }
                    let extensions = span.extensions();
                    let recorded = extensions
                        .get::<FormattedFields<JsonFields>>()
                        .map_or("", |f| f.fields.as_str());
                    write_span(&mut writer, recorded, span.metadata().name())?;
                }
            }
            writer.write_char(']')?;
        }
        writer.write_str("}\n")
    }
}

/// A span as tracing-subscriber writes it: the fields its `JsonFields` recorded, read back as a
/// JSON object (so in the map order of serde_json), then its name. Spans are rare on the
/// request path, so this reads them the way tracing-subscriber does rather than quickly.
fn write_span(writer: &mut Writer<'_>, recorded: &str, name: &str) -> fmt::Result {
    writer.write_char('{')?;
    match serde_json::from_str::<serde_json::Value>(recorded) {
        Ok(serde_json::Value::Object(fields)) => {
            for (key, value) in fields {
                write_key(writer, &key)?;
                write!(writer, "{value}")?;
                writer.write_char(',')?;
            }
        }
        Ok(other) => {
            write_key(writer, "field")?;
            write!(writer, "{other},")?;
            write_key(writer, "field_error")?;
            writer.write_str("\"field was no a valid object\",")?;
        }
        Err(e) => {
            write_key(writer, "field_error")?;
            write_string(writer, &e.to_string())?;
            writer.write_char(',')?;
        }
    }
    write_key(writer, "name")?;
    write_string(writer, name)?;
    writer.write_char('}')
}

/// Writes each field as `,"name":value`, as tracing-serde's map visitor serializes it.
struct Fields<'w, 'b> {
    writer: &'w mut Writer<'b>,
    result: fmt::Result,
}

impl Fields<'_, '_> {
    fn entry(&mut self, field: &Field, value: impl FnOnce(&mut Writer<'_>) -> fmt::Result) {
        if self.result.is_ok() {
            self.result = self
                .writer
                .write_char(',')
                .and_then(|()| write_key(self.writer, field.name()))
                .and_then(|()| value(self.writer));
        }
    }
}

impl Visit for Fields<'_, '_> {
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, |w| write!(w, "{value}"));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // serde_json's number (shortest round-trip digits), or null when not finite.
        self.entry(field, |w| match serde_json::Number::from_f64(value) {
            Some(number) => write!(w, "{number}"),
            None => w.write_str("null"),
        });
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, |w| write_string(w, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.entry(field, |w| {
            w.write_char('"')?;
            write!(Escaped(w), "{value:?}")?;
            w.write_char('"')
        });
    }
}

fn write_key(writer: &mut Writer<'_>, key: &str) -> fmt::Result {
    write_string(writer, key)?;
    writer.write_char(':')
}

fn write_string(writer: &mut Writer<'_>, value: &str) -> fmt::Result {
    writer.write_char('"')?;
    Escaped(writer).write_str(value)?;
    writer.write_char('"')
}

/// Writes what it is given as the inside of a JSON string, escaped as serde_json escapes:
/// `"` and `\`, the short escapes for \b \f \n \r \t, `\u00XX` for other control characters.
struct Escaped<'w, 'b>(&'w mut Writer<'b>);

impl Write for Escaped<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut plain = 0;
        for (i, byte) in s.bytes().enumerate() {
            let escape = match byte {
                b'"' => "\\\"",
                b'\\' => "\\\\",
                b'\n' => "\\n",
                b'\r' => "\\r",
                b'\t' => "\\t",
                0x08 => "\\b",
                0x0c => "\\f",
                0x00..=0x1f => "",
                _ => continue,
            };
            // `i` is at an ASCII byte, so both slices end on character boundaries.
            self.0.write_str(s.get(plain..i).unwrap_or(""))?;
            match escape {
                "" => write!(self.0, "\\u{byte:04x}")?,
                escape => self.0.write_str(escape)?,
            }
            plain = i + 1;
        }
        self.0.write_str(s.get(plain..).unwrap_or(""))
    }
}

#[cfg(test)]
mod tests;
