//! Field paths and validation errors in the shape of apimachinery's `field.ErrorList`, rendered
//! exactly as kube-apiserver renders them (`spec.x: Invalid value: 5: detail`).
//! Pure data: no I/O, no async.

use std::fmt::{self, Write as _};

/// A path to a field, built the way upstream builds `field.Path`: a linked list on the stack,
/// `.child("rules").index(2)`, so walking a valid Job allocates nothing; the path is rendered
/// only when an error is reported.
#[derive(Debug, Clone, Copy)]
pub struct FieldPath<'a> {
    parent: Option<&'a FieldPath<'a>>,
    segment: Segment<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Segment<'a> {
    Root(&'a str),
    Child(&'a str),
    Index(usize),
    Key(&'a str),
}

impl<'a> FieldPath<'a> {
    /// A root; it may name several levels at once (`"spec.template.spec"`).
    pub const fn new(root: &'a str) -> Self {
        FieldPath {
            parent: None,
            segment: Segment::Root(root),
        }
    }

    pub fn child<'b>(&'b self, name: &'b str) -> FieldPath<'b> {
        FieldPath {
            parent: Some(self),
            segment: Segment::Child(name),
        }
    }

    pub fn index(&self, i: usize) -> FieldPath<'_> {
        FieldPath {
            parent: Some(self),
            segment: Segment::Index(i),
        }
    }

    /// A map key, as upstream's `Path.Key` renders it: `metadata.annotations[some/key]`.
    pub fn key<'b>(&'b self, key: &'b str) -> FieldPath<'b> {
        FieldPath {
            parent: Some(self),
            segment: Segment::Key(key),
        }
    }

    fn write(&self, out: &mut String) {
        if let Some(parent) = self.parent {
            parent.write(out);
        }
        match self.segment {
            Segment::Root(name) => out.push_str(name),
            Segment::Child(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Segment::Index(i) => {
                let _ = write!(out, "[{i}]");
            }
            Segment::Key(key) => {
                let _ = write!(out, "[{key}]");
            }
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render())
    }
}

/// The offending value as upstream prints it. Go prints integers with `%v`, Go strings with `%q`
/// and everything else (named string types, pointers, structs) as JSON.
#[derive(Debug, Clone, PartialEq)]
pub enum BadValue {
    /// No value segment at all (`field.OmitValueType`).
    Omit,
    Int(i64),
    /// A Go `string`, printed quoted.
    Str(String),
    /// Pre-rendered JSON (`null`, `"Foo"`, `[19,11]`, `{"Rules":[]}`).
    Json(String),
}

impl BadValue {
    pub fn json_str(s: &str) -> Self {
        BadValue::Json(serde_json::Value::from(s).to_string())
    }

    pub fn json<T: serde::Serialize + ?Sized>(v: &T) -> Self {
        BadValue::Json(serde_json::to_string(v).unwrap_or_else(|_| "null".to_owned()))
    }

    fn write(&self, out: &mut String) {
        match self {
            BadValue::Omit => {}
            BadValue::Int(i) => {
                let _ = write!(out, "{i}");
            }
            BadValue::Str(s) => go_quote(s, out),
            BadValue::Json(j) => out.push_str(j),
        }
    }
}

/// Upstream's error types, named as in `field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Required,
    Invalid,
    NotSupported,
    Duplicate,
    TooLong,
    TooMany,
    Forbidden,
}

impl ErrorKind {
    fn label(self) -> &'static str {
        match self {
            ErrorKind::Required => "Required value",
            ErrorKind::Invalid => "Invalid value",
            ErrorKind::NotSupported => "Unsupported value",
            ErrorKind::Duplicate => "Duplicate value",
            ErrorKind::TooLong => "Too long",
            ErrorKind::TooMany => "Too many",
            ErrorKind::Forbidden => "Forbidden",
        }
    }

    /// The `reason` of a `details.causes[]` entry (metav1.CauseType).
    pub fn cause_reason(self) -> &'static str {
        match self {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid => "FieldValueInvalid",
            ErrorKind::NotSupported => "FieldValueNotSupported",
            ErrorKind::Duplicate => "FieldValueDuplicate",
            ErrorKind::TooLong => "FieldValueTooLong",
            ErrorKind::TooMany => "FieldValueTooMany",
            ErrorKind::Forbidden => "FieldValueForbidden",
        }
    }

    /// Required, Forbidden and TooLong never print the value, whatever it is.
    fn shows_value(self) -> bool {
        !matches!(
            self,
            ErrorKind::Required | ErrorKind::Forbidden | ErrorKind::TooLong
        )
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The rendered path, `spec.successPolicy.rules[0].succeededIndexes`.
    pub path: String,
    pub kind: ErrorKind,
    pub value: BadValue,
    pub detail: String,
}

impl FieldError {
    pub fn required(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Required, BadValue::Omit, detail)
    }

    pub fn invalid(path: &FieldPath, value: BadValue, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Invalid, value, detail)
    }

    pub fn forbidden(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(path, ErrorKind::Forbidden, BadValue::Omit, detail)
    }

    pub fn duplicate(path: &FieldPath, value: BadValue) -> Self {
        Self::new(path, ErrorKind::Duplicate, value, "")
    }

    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(path: &FieldPath, value: BadValue, supported: &[&str]) -> Self {
        let mut detail = String::from("supported values: ");
        for (i, s) in supported.iter().enumerate() {
            if i > 0 {
                detail.push_str(", ");
            }
            go_quote(s, &mut detail);
        }
        Self::new(path, ErrorKind::NotSupported, value, detail)
    }

    pub fn too_long(path: &FieldPath, max_bytes: usize) -> Self {
        let unit = if max_bytes == 1 { "byte" } else { "bytes" };
        Self::new(
            path,
            ErrorKind::TooLong,
            BadValue::Omit,
            format!("may not be more than {max_bytes} {unit}"),
        )
    }

    pub fn too_many(path: &FieldPath, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::new(
            path,
            ErrorKind::TooMany,
            BadValue::Int(actual as i64),
            format!("must have at most {max} {unit}"),
        )
    }

    /// The check every `ValidateNonnegativeField` call makes.
    pub fn negative(path: &FieldPath, value: i64) -> Self {
        Self::invalid(
            path,
            BadValue::Int(value),
            "must be greater than or equal to 0",
        )
    }

    pub fn immutable(path: &FieldPath, value: BadValue) -> Self {
        Self::invalid(path, value, "field is immutable")
    }

    fn new(path: &FieldPath, kind: ErrorKind, value: BadValue, detail: impl Into<String>) -> Self {
        FieldError {
            path: path.render(),
            kind,
            value,
            detail: detail.into(),
        }
    }

    /// Upstream's `ErrorBody`: everything after `<path>: `.
    pub fn body(&self) -> String {
        let mut s = String::from(self.kind.label());
        if self.kind.shows_value() && self.value != BadValue::Omit {
            s.push_str(": ");
            self.value.write(&mut s);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.body())
    }
}

pub type ErrorList = Vec<FieldError>;

/// The message kube-apiserver returns for a rejected object:
/// `Job.batch "name" is invalid: <one error>` or `...: [e1, e2]`, identical messages once.
pub fn invalid_message(kind_group: &str, name: &str, errors: &[FieldError]) -> String {
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<String> = errors
        .iter()
        .map(ToString::to_string)
        .filter(|m| seen.insert(m.clone()))
        .collect();
    let mut quoted_name = String::new();
    go_quote(name, &mut quoted_name);
    let aggregate = match unique.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{kind_group} {quoted_name} is invalid: {aggregate}")
}

/// Go's `strconv.Quote`: printable characters stay, `"` and `\` are escaped, the rest become
/// `\n`, `\x07`, `\u2028`-style escapes.
pub fn go_quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() || is_go_unprintable(c) => {
                let cp = c as u32;
                if cp <= 0xffff {
                    let _ = write!(out, "\\u{cp:04x}");
                } else {
                    let _ = write!(out, "\\U{cp:08x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A close approximation of Go's `unicode.IsPrint` complement for non-control characters:
/// separators other than the ASCII space, and the replacement character that stands for
/// invalid UTF-8 on the Go side.
fn is_go_unprintable(c: char) -> bool {
    matches!(
        c,
        '\u{2028}' | '\u{2029}' | '\u{00a0}' | '\u{feff}' | '\u{fffd}'
    ) || ('\u{2000}'..='\u{200f}').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_each_kind_like_apimachinery() {
        let spec = FieldPath::new("spec");
        let rules = spec.child("rules");
        let rule = rules.index(0);
        let p = rule.child("x");
        let cases = [
            (
                FieldError::required(&p, ""),
                "spec.rules[0].x: Required value",
            ),
            (
                FieldError::required(&p, "when y"),
                "spec.rules[0].x: Required value: when y",
            ),
            (
                FieldError::invalid(&p, BadValue::Int(-1), "must be greater than or equal to 0"),
                "spec.rules[0].x: Invalid value: -1: must be greater than or equal to 0",
            ),
            (
                FieldError::invalid(&p, BadValue::Omit, "cannot set"),
                "spec.rules[0].x: Invalid value: cannot set",
            ),
            (
                FieldError::not_supported(&p, BadValue::Str("Foo".into()), &["A", "B"]),
                "spec.rules[0].x: Unsupported value: \"Foo\": supported values: \"A\", \"B\"",
            ),
            (
                FieldError::duplicate(&p, BadValue::Int(11)),
                "spec.rules[0].x: Duplicate value: 11",
            ),
            (
                FieldError::too_long(&p, 63),
                "spec.rules[0].x: Too long: may not be more than 63 bytes",
            ),
            (
                FieldError::too_many(&p, 21, 20),
                "spec.rules[0].x: Too many: 21: must have at most 20 items",
            ),
            (
                FieldError::too_many(&p, 2, 1),
                "spec.rules[0].x: Too many: 2: must have at most 1 item",
            ),
            (
                FieldError::forbidden(&p, "no"),
                "spec.rules[0].x: Forbidden: no",
            ),
        ];
        for (err, want) in cases {
            assert_eq!(err.to_string(), want);
        }
    }

    #[test]
    fn aggregate_deduplicates_and_brackets() {
        let spec = FieldPath::new("spec");
        let p = spec.child("a");
        let e = FieldError::required(&p, "");
        assert_eq!(
            invalid_message("Job.batch", "j", std::slice::from_ref(&e)),
            "Job.batch \"j\" is invalid: spec.a: Required value"
        );
        let f = FieldError::forbidden(&p, "x");
        assert_eq!(
            invalid_message("Job.batch", "j", &[e.clone(), f, e]),
            "Job.batch \"j\" is invalid: [spec.a: Required value, spec.a: Forbidden: x]"
        );
    }

    #[test]
    fn quotes_like_go() {
        let mut s = String::new();
        go_quote("a\"b\\c\n\u{1}é", &mut s);
        assert_eq!(s, r#""a\"b\\c\n\x01é""#);
        let meta = FieldPath::new("metadata");
        let annotations = meta.child("annotations");
        assert_eq!(annotations.key("a/b").render(), "metadata.annotations[a/b]");
        assert_eq!(
            FieldPath::new("spec.template").index(2).render(),
            "spec.template[2]"
        );
    }
}
