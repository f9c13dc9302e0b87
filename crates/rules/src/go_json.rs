//! Values printed the way Go's `json.Marshal` prints upstream's internal (hub) types, which have
//! no json tags: `{"Rules":[{"SucceededIndexes":"0","SucceededCount":null}]}`. Rendered from the
//! raw JSON so that absent lists print `null` and present empty ones `[]`, as upstream does.

use serde_json::Value;

use super::field::BadValue;

/// A JSON string as Go writes it: HTML-sensitive characters and line separators escaped.
pub fn string(s: &str) -> String {
    let plain = Value::from(s).to_string();
    if !plain.contains(['<', '>', '&', '\u{2028}', '\u{2029}']) {
        return plain;
    }
    plain
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// Any JSON value, maps with sorted keys (Go sorts map keys; serde_json's map is sorted too).
pub fn value(v: &Value) -> String {
    match v {
        Value::String(s) => string(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(value).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", string(k), value(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        other => other.to_string(),
    }
}

pub fn bad_value(v: &Value) -> BadValue {
    BadValue::Json(value(v))
}

/// A struct in declared field order; each field rendered from `raw[json_name]` or its zero value.
fn go_struct(raw: Option<&Value>, fields: &[(&str, &str, Zero)]) -> String {
    let Some(raw) = raw.filter(|v| v.is_object()) else {
        return "null".to_owned();
    };
    let inner: Vec<String> = fields
        .iter()
        .map(|(go_name, json_name, zero)| {
            let field = raw.get(*json_name).filter(|v| !v.is_null());
            let rendered = match (field, zero) {
                (Some(v), Zero::Nested(render)) => render(Some(v)),
                (Some(v), _) => value(v),
                (None, Zero::Null | Zero::Nested(_)) => "null".to_owned(),
                (None, Zero::EmptyString) => "\"\"".to_owned(),
            };
            format!("\"{go_name}\":{rendered}")
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// What Go prints for a field the JSON does not carry.
#[derive(Clone, Copy)]
enum Zero {
    /// Pointers, slices, maps.
    Null,
    /// Plain `string` fields.
    EmptyString,
    /// A nested struct or a list of them, with its own renderer.
    Nested(fn(Option<&Value>) -> String),
}

fn list_of(raw: Option<&Value>, item: fn(Option<&Value>) -> String) -> String {
    match raw {
        Some(Value::Array(items)) => {
            let inner: Vec<String> = items.iter().map(|i| item(Some(i))).collect();
            format!("[{}]", inner.join(","))
        }
        Some(v) if !v.is_null() => value(v),
        _ => "null".to_owned(),
    }
}

fn success_policy_rule(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[
            ("SucceededIndexes", "succeededIndexes", Zero::Null),
            ("SucceededCount", "succeededCount", Zero::Null),
        ],
    )
}

fn success_policy_rules(raw: Option<&Value>) -> String {
    list_of(raw, success_policy_rule)
}

/// `batch.SuccessPolicy`.
pub fn success_policy(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[("Rules", "rules", Zero::Nested(success_policy_rules))],
    )
}

fn on_exit_codes(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[
            ("ContainerName", "containerName", Zero::Null),
            ("Operator", "operator", Zero::EmptyString),
            ("Values", "values", Zero::Null),
        ],
    )
}

fn on_pod_condition(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[
            ("Type", "type", Zero::EmptyString),
            ("Status", "status", Zero::EmptyString),
        ],
    )
}

fn on_pod_conditions(raw: Option<&Value>) -> String {
    list_of(raw, on_pod_condition)
}

fn pod_failure_policy_rule(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[
            ("Action", "action", Zero::EmptyString),
            ("OnExitCodes", "onExitCodes", Zero::Nested(on_exit_codes)),
            (
                "OnPodConditions",
                "onPodConditions",
                Zero::Nested(on_pod_conditions),
            ),
        ],
    )
}

fn pod_failure_policy_rules(raw: Option<&Value>) -> String {
    list_of(raw, pod_failure_policy_rule)
}

/// `batch.PodFailurePolicy`.
pub fn pod_failure_policy(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[("Rules", "rules", Zero::Nested(pod_failure_policy_rules))],
    )
}

/// `batch.UncountedTerminatedPods`.
pub fn uncounted_terminated_pods(raw: Option<&Value>) -> String {
    go_struct(
        raw,
        &[
            ("Succeeded", "succeeded", Zero::Null),
            ("Failed", "failed", Zero::Null),
        ],
    )
}

/// `metav1.LabelSelector` has json tags, and Go writes its fields in declared order
/// (`matchLabels` before `matchExpressions`), empty ones omitted.
pub fn label_selector(raw: Option<&Value>) -> String {
    let Some(raw) = raw.filter(|v| v.is_object()) else {
        return "null".to_owned();
    };
    let mut parts = Vec::new();
    for key in ["matchLabels", "matchExpressions"] {
        match raw.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(Value::Object(o)) if o.is_empty() => {}
            Some(Value::Array(exprs)) => {
                let rendered: Vec<String> = exprs.iter().map(requirement).collect();
                parts.push(format!("\"{key}\":[{}]", rendered.join(",")));
            }
            Some(v) => parts.push(format!("\"{key}\":{}", value(v))),
        }
    }
    format!("{{{}}}", parts.join(","))
}

fn requirement(raw: &Value) -> String {
    let mut parts = Vec::new();
    for key in ["key", "operator", "values"] {
        match raw.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(v) => parts.push(format!("\"{key}\":{}", value(v))),
        }
    }
    format!("{{{}}}", parts.join(","))
}

/// The pod template as upstream prints `spec.template`: the ObjectMeta fields inline (they have
/// json tags) and the pod spec under `Spec`. Upstream prints the spec as the internal PodSpec
/// with every Go field name; jobwarden prints the raw v1 spec instead.
pub fn pod_template(raw: Option<&Value>) -> String {
    let Some(raw) = raw.filter(|v| v.is_object()) else {
        return "null".to_owned();
    };
    let mut parts = Vec::new();
    if let Some(Value::Object(meta)) = raw.get("metadata") {
        for (k, v) in meta {
            parts.push(format!("{}:{}", string(k), value(v)));
        }
    }
    parts.push(format!(
        "\"Spec\":{}",
        raw.get("spec").map_or_else(|| "null".to_owned(), value)
    ));
    format!("{{{}}}", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_internal_types_like_go() {
        assert_eq!(
            success_policy(Some(&json!({"rules": []}))),
            r#"{"Rules":[]}"#
        );
        assert_eq!(success_policy(Some(&json!({}))), r#"{"Rules":null}"#);
        assert_eq!(
            success_policy(Some(&json!({"rules": [{"succeededCount": 2}]}))),
            r#"{"Rules":[{"SucceededIndexes":null,"SucceededCount":2}]}"#
        );
        assert_eq!(
            pod_failure_policy(Some(
                &json!({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1, 2]}}]})
            )),
            r#"{"Rules":[{"Action":"FailJob","OnExitCodes":{"ContainerName":null,"Operator":"In","Values":[1,2]},"OnPodConditions":null}]}"#
        );
        assert_eq!(
            uncounted_terminated_pods(Some(&json!({"failed": ["a"]}))),
            r#"{"Succeeded":null,"Failed":["a"]}"#
        );
        assert_eq!(
            label_selector(Some(
                &json!({"matchExpressions": [{"operator": "Exists", "key": "k"}], "matchLabels": {"b": "2", "a": "1"}})
            )),
            r#"{"matchLabels":{"a":"1","b":"2"},"matchExpressions":[{"key":"k","operator":"Exists"}]}"#
        );
        assert_eq!(success_policy(None), "null");
        assert_eq!(string("a<b>&"), r#""a\u003cb\u003e\u0026""#);
    }
}
