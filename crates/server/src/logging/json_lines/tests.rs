//! Every line as tracing-subscriber's JSON format writes it, byte for byte: the same events go
//! through both, with a fixed clock.

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use tracing::{Subscriber, info, info_span, warn};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::time::FormatTime;

use super::JsonLines;

#[derive(Clone, Copy)]
struct FixedClock;

impl FormatTime for FixedClock {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        w.write_str("2026-11-23T02:01:49.064104Z")
    }
}

#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Lines {
    type Writer = Lines;
    fn make_writer(&'a self) -> Lines {
        self.clone()
    }
}

impl Lines {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().map(|b| b.clone()).unwrap_or_default()).unwrap_or_default()
    }
}

fn upstream(lines: Lines) -> impl Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_writer(lines)
        .with_timer(FixedClock)
        .json()
        .flatten_event(true)
        .with_current_span(false)
        .finish()
}

fn ours(lines: Lines) -> impl Subscriber + Send + Sync {
    tracing_subscriber::fmt()
        .with_writer(lines)
        .fmt_fields(JsonFields::new())
        .event_format(JsonLines::with_timer(FixedClock))
        .finish()
}

/// The lines `emit` writes through tracing-subscriber's format and through ours.
fn both(emit: impl Fn()) -> (String, String) {
    let (a, b) = (Lines::default(), Lines::default());
    tracing::subscriber::with_default(upstream(a.clone()), &emit);
    tracing::subscriber::with_default(ours(b.clone()), &emit);
    (a.text(), b.text())
}

#[derive(Debug)]
struct Shape {
    _name: &'static str,
}

#[test]
fn a_review_line_is_the_line_tracing_subscriber_writes() {
    let (expected, actual) = both(|| {
        let (uid, name) = ("8d0ddfa0-8d39-4b06-ae99-d2c9b41a933f", String::from("job"));
        info!(
            webhook = %"validate",
            uid = %uid,
            name = %name,
            sub_resource = "",
            dry_run = false,
            verdict = %"denied_422",
            duration_ms = 0.019,
            "review"
        );
    });
    assert!(
        expected.contains("\"verdict\":\"denied_422\""),
        "{expected}"
    );
    assert_eq!(actual, expected);
}

#[test]
fn every_kind_of_value_reads_the_same() {
    let (expected, actual) = both(|| {
        let error = io::Error::other("refused \"now\"");
        warn!(
            n = -3i64,
            u = 7u64,
            big = 170141183460469231731687303715884105727i128,
            nan = f64::NAN,
            inf = f64::INFINITY,
            whole = 1.0f64,
            tiny = 1e-300f64,
            negative_zero = -0.0f64,
            yes = true,
            debug = ?Shape { _name: "a\tb" },
            error = &error as &dyn std::error::Error,
            bytes = &b"\x00\xff"[..],
            "message with \"quotes\", a \\ backslash, a\nnewline, \u{1} and \u{7f} and ünïcode"
        );
        info!(target: "custom::target", "no fields");
        info!(empty = "", "");
    });
    assert_eq!(actual.lines().count(), 3);
    assert_eq!(actual, expected);
}

#[test]
fn events_in_spans_list_them_from_the_root() {
    let (expected, actual) = both(|| {
        let outer = info_span!(
            "reconciling object",
            object.r#ref = "Job.v1.batch/a.ns",
            n = 2
        );
        let _outer = outer.enter();
        let inner = info_span!("inner", z = "last", a = "first", quoted = "\"x\"");
        let _inner = inner.enter();
        info!(step = "sync", "in two spans");
        let bare = info_span!("bare");
        let _bare = bare.enter();
        info!("in three");
    });
    assert!(expected.contains("\"spans\":["), "{expected}");
    assert_eq!(actual, expected);
}

#[test]
fn an_event_with_an_explicit_parent_outside_any_span() {
    let (expected, actual) = both(|| {
        let parent = info_span!("parent", k = 1);
        info!(parent: &parent, "child");
    });
    assert_eq!(actual, expected);
}

#[test]
fn a_line_from_the_log_crate_carries_its_own_target() {
    let (expected, actual) = both(|| {
        let args = format_args!("handshake failed: {}", "bad certificate");
        let record = log::Record::builder()
            .level(log::Level::Warn)
            .target("rustls::server")
            .module_path(Some("rustls::server::hs"))
            .file(Some("hs.rs"))
            .line(Some(42))
            .args(args)
            .build();
        let _ = tracing_log::format_trace(&record);
    });
    assert!(
        expected.contains("\"target\":\"rustls::server\""),
        "{expected}"
    );
    assert_eq!(actual, expected);
}

proptest! {
    #[test]
    fn any_text_is_escaped_as_serde_json_escapes_it(text in any::<String>(), number in any::<f64>()) {
        let (expected, actual) = both(|| {
            info!(text = %text, plain = text.as_str(), number, "{text}");
        });
        prop_assert_eq!(actual, expected);
    }
}
