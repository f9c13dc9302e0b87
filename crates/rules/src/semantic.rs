//! Semantic equality of raw JSON in the spirit of `apiequality.Semantic.DeepEqual`: a field that
//! is absent, null, an empty list or an empty map all mean "not set" on the Go side.

use serde_json::Value;

fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.values().all(is_unset),
        _ => false,
    }
}

pub fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let same_keys = |from: &serde_json::Map<String, Value>,
                             to: &serde_json::Map<String, Value>| {
                from.iter()
                    .all(|(k, v)| to.get(k).map_or_else(|| is_unset(v), |w| equal(v, w)))
            };
            same_keys(x, y) && same_keys(y, x)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| equal(v, w))
        }
        _ if is_unset(a) && is_unset(b) => true,
        _ => a == b,
    }
}

/// `a` and `b` at the same JSON pointer, compared semantically.
pub fn equal_at(a: &Value, b: &Value, pointer: &str) -> bool {
    let null = Value::Null;
    equal(
        a.pointer(pointer).unwrap_or(&null),
        b.pointer(pointer).unwrap_or(&null),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unset_forms_are_equal() {
        assert!(equal(&json!({"a": null, "b": [], "c": {}}), &json!({})));
        assert!(equal(&json!({"x": {"y": []}}), &json!({"x": null})));
        assert!(!equal(&json!({"a": 1}), &json!({})));
        assert!(!equal(&json!([1, 2]), &json!([2, 1])));
        assert!(equal(&json!([{"a": null}]), &json!([{}])));
        assert!(!equal(&json!({"a": ""}), &json!({"a": "x"})));
    }
}
