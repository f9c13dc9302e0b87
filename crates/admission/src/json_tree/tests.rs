//! The strict reader against serde_json's own, and the deserializer against `&Value`'s.

use k8s_openapi::api::batch::v1::JobSpec;
use proptest::prelude::*;
use serde::Deserialize;
use serde_json::json;

use super::*;

fn read(text: &[u8]) -> Result<Value, String> {
    parse(text)
        .map(|t| t.root().to_value())
        .map_err(|e| e.to_string())
}

/// The reader this module replaced (a strict visitor building a `serde_json::Value`), kept
/// as the oracle: the tree must accept, refuse and word errors exactly as it did.
mod reference {
    use std::fmt;

    use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
    use serde_json::{Map, Number, Value};

    pub(super) fn read(body: &[u8]) -> Result<Value, String> {
        serde_json::from_slice::<Strict>(body)
            .map(|Strict(v)| v)
            .map_err(|e| e.to_string())
    }

    struct Strict(Value);

    impl<'de> Deserialize<'de> for Strict {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            d.deserialize_any(StrictVisitor).map(Strict)
        }
    }

    struct StrictVisitor;

    impl<'de> Visitor<'de> for StrictVisitor {
        type Value = Value;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
            Ok(Value::Bool(v))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
            Ok(Value::Number(v.into()))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
            Ok(Value::Number(v.into()))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
            Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
        }
        fn visit_str<E>(self, v: &str) -> Result<Value, E> {
            Ok(Value::String(v.to_owned()))
        }
        fn visit_unit<E>(self) -> Result<Value, E> {
            Ok(Value::Null)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
            let mut items = Vec::new();
            while let Some(Strict(v)) = seq.next_element()? {
                items.push(v);
            }
            Ok(Value::Array(items))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
            let mut object = Map::new();
            while let Some(key) = map.next_key::<String>()? {
                if object.contains_key(&key) {
                    return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
                }
                let Strict(v) = map.next_value()?;
                object.insert(key, v);
            }
            Ok(Value::Object(object))
        }
    }
}

#[test]
fn reads_what_serde_json_reads_and_fails_where_it_fails() {
    for text in [
        &br#"{"a":[1,-2,3.5,true,null,"\u00e9"],"b":{"c":{}},"d":18446744073709551615}"#[..],
        br#"{"a":[1,-2,3.5,1e400,true,null]}"#,
        br#"[]"#,
        b" {\"x\" : \"\\ud83d\\ude00\"} ",
        br#"{"a":"\ud800"}"#,
        b"{\"a\":\"\xff\"}",
        b"{\"a\":1} x",
        b"",
        b"[1,]",
    ] {
        let theirs: Result<Value, String> = serde_json::from_slice(text).map_err(|e| e.to_string());
        assert_eq!(read(text), theirs, "{}", String::from_utf8_lossy(text));
        assert_eq!(read(text), reference::read(text));
    }
}

#[test]
fn refuses_repeated_keys_at_any_depth_where_the_old_reader_did() {
    for body in [
        &br#"{"a":1,"a":2}"#[..],
        br#"{"x":{"spec":{},"spec":{}}}"#,
        br#"[{"k":1,"k":1}]"#,
        // Keys are compared after unescaping.
        br#"{"ab":1,"a\u0062":2}"#,
    ] {
        let error = read(body).expect_err("a repeated key");
        assert!(error.starts_with("duplicate key"), "{error}");
        assert_eq!(Err(error), reference::read(body));
    }
    assert!(read(br#"{"a":{"b":1},"b":{"a":1}}"#).is_ok());
}

#[test]
fn wide_objects_are_checked_too() {
    let keys: Vec<String> = (0..200).map(|i| format!("\"k{i}\":{i}")).collect();
    let wide = format!("{{{}}}", keys.join(","));
    assert_eq!(
        read(wide.as_bytes()).map(|v| v.as_object().map(Map::len)),
        Ok(Some(200))
    );
    for repeat in [0, 15, 16, 17, 199] {
        let text = format!("{{{},\"k{repeat}\":0}}", keys.join(","));
        let error = read(text.as_bytes()).expect_err("a repeated key");
        assert!(
            error.starts_with(&format!("duplicate key \"k{repeat}\"")),
            "{error}"
        );
    }
}

#[test]
fn keeps_serde_jsons_depth_limit() {
    let deep = "[".repeat(10_000);
    assert_eq!(
        read(deep.as_bytes()),
        Err("recursion limit exceeded at line 1 column 128".to_owned())
    );
}

#[test]
fn members_and_lookups() {
    let tree = parse(br#"{"a":{"b":[1,{"c":null}],"d":"x"},"e":true}"#).unwrap();
    let root = tree.root();
    let keys: Vec<&str> = root.members().map(|(k, _)| k).collect();
    assert_eq!(keys, ["a", "e"]);
    assert_eq!(root.get("e").and_then(|e| e.as_bool()), Some(true));
    assert_eq!(
        root.get("a")
            .and_then(|a| a.get("d"))
            .and_then(|d| d.as_str()),
        Some("x")
    );
    assert!(root.get("a").and_then(|a| a.get("missing")).is_none());
    assert!(root.get("e").and_then(|e| e.get("x")).is_none());
    assert_eq!(
        root.get("a").unwrap().to_value(),
        json!({"b":[1,{"c":null}],"d":"x"})
    );
    let without = JobSpec::deserialize(
        parse(br#"{"parallelism":2,"template":{"x":1}}"#)
            .unwrap()
            .root()
            .without("template"),
    )
    .unwrap();
    assert_eq!(without.parallelism, Some(2));
}

/// Typed values read from a tree as they read from the `Value` of the same document, and
/// fail where they fail.
#[test]
fn types_read_from_a_tree_as_from_a_value() {
    let specs = [
        json!({"parallelism": 2, "completionMode": "Indexed", "selector": {"matchLabels": {"a": "b"}},
               "podFailurePolicy": {"rules": [{"action": "Ignore", "onExitCodes": {"operator": "In", "values": [1, 2]}}]},
               "unknown": {"deep": [1, 2, {"x": null}]}, "suspend": null}),
        json!({"parallelism": "2"}),
        json!({"parallelism": 2.5}),
        json!({"parallelism": -1, "backoffLimit": 4294967296u64}),
        json!({"selector": []}),
        json!([1, 2]),
        json!("spec"),
        json!({"podFailurePolicy": {"rules": {"not": "a list"}}}),
    ];
    for spec in specs {
        let text = serde_json::to_vec(&spec).unwrap();
        let tree = parse(&text).unwrap();
        let ours = JobSpec::deserialize(tree.root()).map_err(|e| e.to_string());
        let theirs = JobSpec::deserialize(&spec).map_err(|e| e.to_string());
        assert_eq!(format!("{ours:?}"), format!("{theirs:?}"), "{spec}");
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\\\\\"é\\u{1F600}\\n]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z\\\\\"]{0,4}", inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn any_document_reads_back_as_itself(value in json_value()) {
        let text = serde_json::to_vec(&value).unwrap();
        // Floats come back as serde_json's parser reads them, which is not always the bit
        // pattern written.
        let theirs: Value = serde_json::from_slice(&text).unwrap();
        prop_assert_eq!(read(&text), Ok(theirs.clone()));
        let pretty = serde_json::to_vec_pretty(&value).unwrap();
        prop_assert_eq!(read(&pretty), Ok(theirs));
    }

    #[test]
    fn any_bytes_read_as_the_old_reader_read_them(text in proptest::collection::vec(any::<u8>(), 0..64)) {
        prop_assert_eq!(read(&text), reference::read(&text));
    }

    /// Documents with keys repeated here and there, at any depth.
    #[test]
    fn repeated_keys_are_refused_where_the_old_reader_refused_them(
        value in json_value(), at in any::<prop::sample::Index>()
    ) {
        let text = serde_json::to_string(&value).unwrap();
        // Repeat one member `"k":` of the text, keeping it JSON.
        let keys: Vec<usize> = text.match_indices("\":").map(|(i, _)| i).collect();
        if let Some(&end) = keys.get(at.index(keys.len().max(1))) {
            let start = text[..end].rfind(['{', ',']).map_or(0, |s| s + 1);
            let member = &text[start..end + 2];
            let doubled = format!("{}{member}0,{}", &text[..start], &text[start..]);
            prop_assert_eq!(read(doubled.as_bytes()), reference::read(doubled.as_bytes()));
        }
    }
}
