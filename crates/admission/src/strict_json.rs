//! Request bodies decoded strictly: a key repeated in one JSON object is refused while the tree
//! is built (one pass). serde_json would keep the last of two equal keys and other parsers keep
//! the first, so such a body could have one Job checked and another stored; kube-apiserver
//! never sends one. serde_json's depth limit (128) still applies.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

pub fn from_slice(body: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<Strict>(body).map(|Strict(v)| v)
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

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads() {
        let text =
            br#"{"a":[1,-2,3.5,1e400,true,null,"\u00e9"],"b":{"c":{}},"d":18446744073709551615}"#;
        let strict = from_slice(text).ok();
        let plain: Option<Value> = serde_json::from_slice(text).ok();
        // serde_json itself refuses 1e400; so must we.
        assert_eq!(strict, plain);
        let text = br#"{"a":[1,-2,3.5,true,null,"\u00e9"],"b":{"c":{}},"d":18446744073709551615}"#;
        assert_eq!(from_slice(text).ok(), serde_json::from_slice(text).ok());
        assert_eq!(from_slice(b"[]").ok(), Some(json!([])));
    }

    #[test]
    fn refuses_repeated_keys_at_any_depth() {
        for body in [
            &br#"{"a":1,"a":2}"#[..],
            br#"{"x":{"spec":{},"spec":{}}}"#,
            br#"[{"k":1,"k":1}]"#,
        ] {
            let err = from_slice(body).expect_err("a repeated key");
            assert!(err.to_string().starts_with("duplicate key"), "{err}");
        }
        assert!(from_slice(br#"{"a":{"b":1},"b":{"a":1}}"#).is_ok());
    }

    #[test]
    fn keeps_serde_jsons_depth_limit() {
        let deep = "[".repeat(10_000);
        assert!(from_slice(deep.as_bytes()).is_err());
    }
}
