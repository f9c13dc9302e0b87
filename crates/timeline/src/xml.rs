//! A small XML writer, enough for one SVG file: elements, attributes, text. Names from the
//! cluster (pods, rules, reasons, messages) are untrusted, so every attribute value and text
//! is escaped here and nowhere else, and the characters XML 1.0 forbids (NUL and the other C0
//! controls, U+FFFE, U+FFFF) become U+FFFD: an escaped `&#1;` would still make the file
//! unreadable. Numbers are written with one decimal, so the same picture is the same bytes.

use std::fmt::Write as _;

/// An attribute value: text, or a coordinate.
pub(crate) enum Value<'a> {
    Text(&'a str),
    Number(f64),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Text(s)
    }
}

impl<'a> From<&'a String> for Value<'a> {
    fn from(s: &'a String) -> Self {
        Value::Text(s)
    }
}

impl From<f64> for Value<'_> {
    fn from(x: f64) -> Self {
        Value::Number(x)
    }
}

pub(crate) struct Writer {
    out: String,
    depth: usize,
}

impl Writer {
    pub fn new() -> Writer {
        Writer {
            out: String::with_capacity(64 * 1024),
            depth: 0,
        }
    }

    pub fn finish(self) -> String {
        self.out
    }

    fn start_tag(&mut self, name: &str, attrs: &[(&str, Value)]) {
        for _ in 0..self.depth {
            self.out.push(' ');
        }
        self.out.push('<');
        self.out.push_str(name);
        for (key, value) in attrs {
            self.out.push(' ');
            self.out.push_str(key);
            self.out.push_str("=\"");
            match value {
                Value::Text(s) => escape_into(&mut self.out, s, true),
                Value::Number(x) => number_into(&mut self.out, *x),
            }
            self.out.push('"');
        }
    }

    /// `<name attrs>`, its content to follow.
    pub fn open(&mut self, name: &str, attrs: &[(&str, Value)]) {
        self.start_tag(name, attrs);
        self.out.push_str(">\n");
        self.depth += 1;
    }

    pub fn close(&mut self, name: &str) {
        self.depth = self.depth.saturating_sub(1);
        for _ in 0..self.depth {
            self.out.push(' ');
        }
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push_str(">\n");
    }

    /// `<name attrs/>`.
    pub fn empty(&mut self, name: &str, attrs: &[(&str, Value)]) {
        self.start_tag(name, attrs);
        self.out.push_str("/>\n");
    }

    /// `<name attrs>text</name>`.
    pub fn text(&mut self, name: &str, attrs: &[(&str, Value)], text: &str) {
        self.start_tag(name, attrs);
        self.out.push('>');
        escape_into(&mut self.out, text, false);
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push_str(">\n");
    }

    /// `<name attrs><title>title</title></name>`: a shape with its hover text.
    pub fn titled(&mut self, name: &str, attrs: &[(&str, Value)], title: &str) {
        self.start_tag(name, attrs);
        self.out.push_str("><title>");
        escape_into(&mut self.out, title, false);
        self.out.push_str("</title></");
        self.out.push_str(name);
        self.out.push_str(">\n");
    }

    /// `<name attrs><title>title</title>text</name>`: text with its hover text (a shortened
    /// label and its whole words).
    pub fn text_titled(&mut self, name: &str, attrs: &[(&str, Value)], title: &str, text: &str) {
        self.start_tag(name, attrs);
        self.out.push_str("><title>");
        escape_into(&mut self.out, title, false);
        self.out.push_str("</title>");
        escape_into(&mut self.out, text, false);
        self.out.push_str("</");
        self.out.push_str(name);
        self.out.push_str(">\n");
    }
}

/// Whether XML 1.0 allows `c` in a document (its `Char` production).
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

fn escape_into(out: &mut String, s: &str, attribute: bool) {
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' if attribute => out.push_str("&quot;"),
            '\'' if attribute => out.push_str("&#39;"),
            // An attribute's line breaks and tabs would be read back as spaces.
            '\n' if attribute => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' if attribute => out.push_str("&#9;"),
            c if allowed(c) => out.push(c),
            _ => out.push('\u{FFFD}'),
        }
    }
}

/// One decimal, no `-0.0`, no `NaN`: the same picture is the same bytes.
fn number_into(out: &mut String, x: f64) {
    let x = if x.is_finite() { x } else { 0.0 };
    let tenths = (x * 10.0).round() as i64;
    if tenths < 0 {
        out.push('-');
    }
    let tenths = tenths.unsigned_abs();
    let _ = write!(out, "{}", tenths / 10);
    if !tenths.is_multiple_of(10) {
        let _ = write!(out, ".{}", tenths % 10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_the_cluster_cannot_break_the_file() {
        let mut w = Writer::new();
        w.text(
            "text",
            &[("data-pod", "a\"b'c<d>&e\nf".into())],
            "<script>&amp;\u{0}\u{1b}\u{FFFF}'\"",
        );
        assert_eq!(
            w.finish(),
            "<text data-pod=\"a&quot;b&#39;c&lt;d&gt;&amp;e&#10;f\">&lt;script&gt;&amp;amp;\u{FFFD}\u{FFFD}\u{FFFD}'\"</text>\n"
        );
    }

    #[test]
    fn numbers_have_one_decimal_and_no_negative_zero() {
        let mut out = String::new();
        for x in [0.0, -0.01, 12.34, 7.0, -3.26, f64::NAN, 1e9] {
            number_into(&mut out, x);
            out.push(' ');
        }
        assert_eq!(out, "0 0 12.3 7 -3.3 0 1000000000 ");
    }

    #[test]
    fn elements_nest_and_indent() {
        let mut w = Writer::new();
        w.open("g", &[("id", "x".into())]);
        w.empty("rect", &[("x", 1.5.into())]);
        w.titled("rect", &[], "t");
        w.close("g");
        assert_eq!(
            w.finish(),
            "<g id=\"x\">\n <rect x=\"1.5\"/>\n <rect><title>t</title></rect>\n</g>\n"
        );
    }
}
