//! A request body read once, strictly, into a flat tree whose strings borrow from the body. A
//! key repeated in one object is refused as it is read: serde_json would keep the last of two
//! equal keys and other parsers keep the first, so such a body could have one Job checked and
//! another stored (kube-apiserver never sends one). serde_json's parser reads the bytes, so what
//! is JSON, its depth limit (128) and every error message are serde_json's.
//!
//! The tree is a serde `Deserializer` that behaves as `&serde_json::Value`'s does, so typed views
//! decode from it exactly as they would from a `Value`, without one being built; `to_value`
//! builds one where a `Value` is needed. Nothing here knows about Jobs.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Unexpected, Visitor};
use serde_json::{Error, Map, Number, Value};

/// One value of the document, in document order: an array or object node is followed by its
/// members (an object's as key, value, key, value …), and `end` is the index after them.
#[derive(Debug, Clone, PartialEq)]
enum Node<'a> {
    Null,
    Bool(bool),
    PosInt(u64),
    NegInt(i64),
    Float(f64),
    Str(Cow<'a, str>),
    Array { len: usize, end: usize },
    Object { len: usize, end: usize },
}

static NULL: Node<'static> = Node::Null;

/// A whole document.
#[derive(Debug)]
pub(crate) struct Tree<'a> {
    nodes: Vec<Node<'a>>,
}

/// Objects with more keys than this check for repeated keys with a hash set rather than by
/// comparing each key with the ones before it.
const LINEAR_KEY_CHECK: usize = 16;

/// Reads `body`: JSON, with no key repeated in any object.
pub(crate) fn parse(body: &[u8]) -> Result<Tree<'_>, Error> {
    // One UTF-8 check of the whole body lets serde_json skip checking each string again; a
    // body that is not UTF-8 is read as bytes, so its error is serde_json's, where it occurs.
    // About one node per 6 bytes in Kubernetes objects; a guess that is too small only regrows.
    let mut nodes = Vec::with_capacity(body.len() / 6 + 8);
    let mut keys = Vec::new();
    let builder = Builder {
        nodes: &mut nodes,
        keys: &mut keys,
    };
    match std::str::from_utf8(body) {
        Ok(text) => {
            let mut de = serde_json::Deserializer::from_str(text);
            builder.deserialize(&mut de)?;
            de.end()?;
        }
        Err(_) => {
            let mut de = serde_json::Deserializer::from_slice(body);
            builder.deserialize(&mut de)?;
            de.end()?;
        }
    }
    Ok(Tree { nodes })
}

impl<'a> Tree<'a> {
    pub(crate) fn root(&self) -> Item<'_, 'a> {
        Item {
            nodes: &self.nodes,
            at: 0,
        }
    }
}

/// Appends one value (and its members) to `nodes`.
struct Builder<'t, 'a> {
    nodes: &'t mut Vec<Node<'a>>,
    /// Node indexes of the keys of the objects being read, innermost last.
    keys: &'t mut Vec<usize>,
}

impl<'de> DeserializeSeed<'de> for Builder<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Builder<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.nodes.push(Node::Bool(v));
        Ok(())
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        // As serde_json's Number: a non-negative integer is a PosInt.
        self.nodes.push(match u64::try_from(v) {
            Ok(v) => Node::PosInt(v),
            Err(_) => Node::NegInt(v),
        });
        Ok(())
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.nodes.push(Node::PosInt(v));
        Ok(())
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        // serde_json's Value turns a non-finite float into null; its parser never makes one.
        self.nodes.push(if v.is_finite() {
            Node::Float(v)
        } else {
            Node::Null
        });
        Ok(())
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<(), E> {
        self.nodes.push(Node::Str(Cow::Borrowed(v)));
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.nodes.push(Node::Str(Cow::Owned(v.to_owned())));
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.nodes.push(Node::Null);
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let at = self.nodes.len();
        self.nodes.push(Node::Array { len: 0, end: 0 });
        let mut len = 0;
        while seq
            .next_element_seed(Builder {
                nodes: &mut *self.nodes,
                keys: &mut *self.keys,
            })?
            .is_some()
        {
            len += 1;
        }
        let end = self.nodes.len();
        if let Some(node) = self.nodes.get_mut(at) {
            *node = Node::Array { len, end };
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let at = self.nodes.len();
        self.nodes.push(Node::Object { len: 0, end: 0 });
        let first_key = self.keys.len();
        let mut wide: Option<HashSet<Cow<'de, str>>> = None;
        while let Some(key) = map.next_key_seed(KeySeed)? {
            let seen = match &mut wide {
                Some(set) => !set.insert(key.clone()),
                None => self.keys[first_key..]
                    .iter()
                    .any(|&k| matches!(self.nodes.get(k), Some(Node::Str(s)) if *s == key)),
            };
            if seen {
                return Err(de::Error::custom(format_args!("duplicate key {key:?}")));
            }
            self.keys.push(self.nodes.len());
            self.nodes.push(Node::Str(key));
            if wide.is_none() && self.keys.len() - first_key > LINEAR_KEY_CHECK {
                let set = self.keys[first_key..]
                    .iter()
                    .filter_map(|&k| match self.nodes.get(k) {
                        Some(Node::Str(s)) => Some(s.clone()),
                        _ => None,
                    })
                    .collect();
                wide = Some(set);
            }
            map.next_value_seed(Builder {
                nodes: &mut *self.nodes,
                keys: &mut *self.keys,
            })?;
        }
        let len = self.keys.len() - first_key;
        self.keys.truncate(first_key);
        let end = self.nodes.len();
        if let Some(node) = self.nodes.get_mut(at) {
            *node = Node::Object { len, end };
        }
        Ok(())
    }
}

/// An object key, borrowed from the body unless it had escapes.
struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }
}

/// One value of a tree.
#[derive(Clone, Copy)]
pub(crate) struct Item<'t, 'a> {
    nodes: &'t [Node<'a>],
    at: usize,
}

impl fmt::Debug for Item<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_value().fmt(f)
    }
}

impl<'t, 'a> Item<'t, 'a> {
    fn node(&self) -> &'t Node<'a> {
        // `at` is only ever set from the tree's own structure, so the fallback is never taken.
        self.nodes.get(self.at).unwrap_or(&NULL)
    }

    fn at(&self, at: usize) -> Item<'t, 'a> {
        Item {
            nodes: self.nodes,
            at,
        }
    }

    /// Where this value's subtree ends.
    fn end(&self) -> usize {
        match self.node() {
            Node::Array { end, .. } | Node::Object { end, .. } => *end,
            _ => self.at + 1,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self.node(), Node::Null)
    }

    pub(crate) fn is_object(&self) -> bool {
        matches!(self.node(), Node::Object { .. })
    }

    pub(crate) fn as_str(&self) -> Option<&'t str> {
        match self.node() {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self.node() {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// An object's members in document order; nothing for any other value.
    pub(crate) fn members(&self) -> Members<'t, 'a> {
        let (next, left) = match self.node() {
            Node::Object { len, .. } => (self.at + 1, *len),
            _ => (self.at, 0),
        };
        Members {
            item: *self,
            next,
            left,
        }
    }

    /// An array's elements; nothing for any other value.
    fn elements(&self) -> Elements<'t, 'a> {
        let (next, left) = match self.node() {
            Node::Array { len, .. } => (self.at + 1, *len),
            _ => (self.at, 0),
        };
        Elements {
            item: *self,
            next,
            left,
        }
    }

    /// The member `key` of an object (keys are unique); `None` for a missing key or a value
    /// that is not an object.
    pub(crate) fn get(&self, key: &str) -> Option<Item<'t, 'a>> {
        self.members().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// `get`, with JSON null read as absent.
    pub(crate) fn get_set(&self, key: &str) -> Option<Item<'t, 'a>> {
        self.get(key).filter(|v| !v.is_null())
    }

    /// The same value as a `serde_json::Value`.
    pub(crate) fn to_value(self) -> Value {
        match self.node() {
            Node::Null => Value::Null,
            Node::Bool(b) => Value::Bool(*b),
            Node::PosInt(n) => Value::Number((*n).into()),
            Node::NegInt(n) => Value::Number((*n).into()),
            Node::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s.clone().into_owned()),
            Node::Array { len, .. } => {
                let mut items = Vec::with_capacity(*len);
                items.extend(self.elements().map(|e| e.to_value()));
                Value::Array(items)
            }
            Node::Object { .. } => {
                // Inserted one by one: collecting would sort the members first, which costs
                // more for the few members of a Kubernetes object (the keys are unique).
                let mut map = Map::new();
                for (k, v) in self.members() {
                    map.insert(k.to_owned(), v.to_value());
                }
                Value::Object(map)
            }
        }
    }

    /// This object without its member `skip`, to deserialize from (as a map: for objects only).
    pub(crate) fn without(self, skip: &'static str) -> Without<'t, 'a> {
        Without { item: self, skip }
    }

    fn unexpected(&self) -> Unexpected<'t> {
        match self.node() {
            Node::Null => Unexpected::Unit,
            Node::Bool(b) => Unexpected::Bool(*b),
            Node::PosInt(n) => Unexpected::Unsigned(*n),
            Node::NegInt(n) => Unexpected::Signed(*n),
            Node::Float(f) => Unexpected::Float(*f),
            Node::Str(s) => Unexpected::Str(s),
            Node::Array { .. } => Unexpected::Seq,
            Node::Object { .. } => Unexpected::Map,
        }
    }

    fn invalid_type<E: de::Error>(&self, exp: &dyn de::Expected) -> E {
        E::invalid_type(self.unexpected(), exp)
    }
}

pub(crate) struct Members<'t, 'a> {
    item: Item<'t, 'a>,
    next: usize,
    left: usize,
}

impl<'t, 'a> Iterator for Members<'t, 'a> {
    type Item = (&'t str, Item<'t, 'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let key = self.item.at(self.next).as_str().unwrap_or("");
        let value = self.item.at(self.next + 1);
        self.next = value.end();
        Some((key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

struct Elements<'t, 'a> {
    item: Item<'t, 'a>,
    next: usize,
    left: usize,
}

impl<'t, 'a> Iterator for Elements<'t, 'a> {
    type Item = Item<'t, 'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let element = self.item.at(self.next);
        self.next = element.end();
        Some(element)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

mod deserializer;

pub(crate) use deserializer::Without;

#[cfg(test)]
mod tests;
