//! Refusing JSON objects with a repeated key. serde_json keeps the last of two equal keys, other
//! parsers keep the first; a body that reads differently to jobwarden and to whoever stored it
//! could have one Job checked and another admitted. kube-apiserver never sends one, so a body
//! that has one did not come from it and gets a 400. One pass over the bytes, no tree built;
//! serde_json's depth limit (128) applies as in the review itself.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// The first key found twice in one object, with where it was found; `None` when there is
/// none or the body is not JSON at all (the review reports that, in its own words).
pub(crate) fn first_duplicate(body: &[u8]) -> Option<String> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_slice(body);
    if let Err(error) = (Value { found: &mut found }).deserialize(&mut de) {
        // The visitor stops at the duplicate with an error that says where it is.
        return found.map(|key| format!("duplicate key {key:?} ({error})"));
    }
    None
}

/// Any JSON value; records the first repeated key in `found`.
struct Value<'f> {
    found: &'f mut Option<String>,
}

impl<'de> DeserializeSeed<'de> for Value<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Value<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(Value {
                found: &mut *self.found,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // Objects in a Job have a handful of keys, where a linear scan beats hashing; large
        // ones (labels, annotations, env) move to a set so the check stays linear.
        let mut few: Vec<Cow<'de, str>> = Vec::new();
        let mut many: Option<HashSet<Cow<'de, str>>> = None;
        while let Some(Key(key)) = map.next_key()? {
            let repeated = match &mut many {
                Some(set) => !set.insert(key.clone()),
                None if few.contains(&key) => true,
                None => {
                    few.push(key.clone());
                    if few.len() == 32 {
                        many = Some(few.drain(..).collect());
                    }
                    false
                }
            };
            if repeated {
                let message = format!("duplicate key {key:?}");
                *self.found = Some(key.into_owned());
                return Err(de::Error::custom(message));
            }
            map.next_value_seed(Value {
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

/// An object key, borrowed from the body unless it has escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> de::Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(s.to_owned())))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_keys_are_found_at_any_depth() {
        let cases: &[(&str, Option<&str>)] = &[
            (r#"{"a":1,"b":2}"#, None),
            (r#"{"a":{"x":1},"b":{"x":1}}"#, None),
            (r#"[{"a":1},{"a":2}]"#, None),
            (r#"{"a":1,"a":2}"#, Some("a")),
            (r#"{"r":{"uid":"1","o":[{"k":1,"k":2}]}}"#, Some("k")),
            // The same key spelled with an escape is the same key.
            (r#"{"uid":"1","\u0075id":"2"}"#, Some("uid")),
            ("not json", None),
            (r#"{"a":1,"a""#, Some("a")),
        ];
        for (body, key) in cases {
            let found = first_duplicate(body.as_bytes());
            match key {
                None => assert_eq!(found, None, "{body}"),
                Some(key) => {
                    let message = found.unwrap_or_else(|| panic!("{body}: nothing found"));
                    assert!(
                        message.starts_with(&format!("duplicate key {key:?}")),
                        "{message}"
                    );
                    assert!(message.contains("column"), "{message}");
                }
            }
        }
    }

    #[test]
    fn large_objects_are_checked_too() {
        let keys: Vec<String> = (0..200).map(|i| format!("\"k{i}\":{i}")).collect();
        let unique = format!("{{{}}}", keys.join(","));
        assert_eq!(first_duplicate(unique.as_bytes()), None);
        let repeated = format!("{{{},\"k7\":0}}", keys.join(","));
        assert!(first_duplicate(repeated.as_bytes()).is_some());
    }
}
