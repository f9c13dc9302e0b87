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

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
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

// The deserializer, shaped on serde_json's `impl Deserializer for &Value` so that a type reads
// the same from a tree as from the `Value` of the same document.

impl<'t, 'a> Deserializer<'t> for Item<'t, 'a> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Null => visitor.visit_unit(),
            Node::Bool(b) => visitor.visit_bool(*b),
            Node::PosInt(n) => visitor.visit_u64(*n),
            Node::NegInt(n) => visitor.visit_i64(*n),
            Node::Float(f) => visitor.visit_f64(*f),
            Node::Str(s) => visit_str(s, visitor),
            Node::Array { .. } => visit_elements(self, visitor),
            Node::Object { .. } => visit_members(self, None, visitor),
        }
    }

    fn deserialize_option<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_enum<V: Visitor<'t>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.node() {
            Node::Object { .. } => {
                let mut members = self.members();
                let (Some((variant, value)), None) = (members.next(), members.next()) else {
                    return Err(de::Error::invalid_value(
                        Unexpected::Map,
                        &"map with a single key",
                    ));
                };
                visitor.visit_enum(Variant {
                    name: variant,
                    value: Some(value),
                })
            }
            Node::Str(s) => visitor.visit_enum(Variant {
                name: s,
                value: None,
            }),
            _ => Err(de::Error::invalid_type(self.unexpected(), &"string or map")),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_bool<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Bool(b) => visitor.visit_bool(*b),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_str<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Str(s) => visit_str(s, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_string<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_char<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_identifier<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_str(visitor)
    }

    fn deserialize_bytes<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Str(s) => visit_str(s, visitor),
            Node::Array { .. } => visit_elements(self, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_byte_buf<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_bytes(visitor)
    }

    fn deserialize_unit<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Null => visitor.visit_unit(),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_unit_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_seq<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Array { .. } => visit_elements(self, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_tuple<V: Visitor<'t>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_map<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.node() {
            Node::Object { .. } => visit_members(self, None, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.node() {
            Node::Array { .. } => visit_elements(self, visitor),
            Node::Object { .. } => visit_members(self, None, visitor),
            _ => Err(self.invalid_type(&visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        <W: Visitor<'t>>
        i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64
    }
}

fn visit_str<'t, V: Visitor<'t>>(s: &'t str, visitor: V) -> Result<V::Value, Error> {
    visitor.visit_borrowed_str(s)
}

fn visit_elements<'t, V: Visitor<'t>>(item: Item<'t, '_>, visitor: V) -> Result<V::Value, Error> {
    let len = item.elements().len();
    let mut access = ElementAccess(item.elements());
    let value = visitor.visit_seq(&mut access)?;
    if access.0.left == 0 {
        Ok(value)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in array"))
    }
}

fn visit_members<'t, V: Visitor<'t>>(
    item: Item<'t, '_>,
    skip: Option<&'static str>,
    visitor: V,
) -> Result<V::Value, Error> {
    let len = item.members().len();
    let mut access = MemberAccess {
        members: item.members(),
        skip,
        value: None,
    };
    let value = visitor.visit_map(&mut access)?;
    if access.members.left == 0 {
        Ok(value)
    } else {
        Err(de::Error::invalid_length(len, &"fewer elements in map"))
    }
}

impl ExactSizeIterator for Elements<'_, '_> {}
impl ExactSizeIterator for Members<'_, '_> {}

struct ElementAccess<'t, 'a>(Elements<'t, 'a>);

impl<'t> SeqAccess<'t> for ElementAccess<'t, '_> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'t>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        self.0.next().map(|e| seed.deserialize(e)).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.left)
    }
}

struct MemberAccess<'t, 'a> {
    members: Members<'t, 'a>,
    skip: Option<&'static str>,
    value: Option<Item<'t, 'a>>,
}

impl<'t> MapAccess<'t> for MemberAccess<'t, '_> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'t>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        loop {
            let Some((key, value)) = self.members.next() else {
                return Ok(None);
            };
            if Some(key) == self.skip {
                continue;
            }
            self.value = Some(value);
            return seed.deserialize(KeyDeserializer(key)).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'t>>(&mut self, seed: V) -> Result<V::Value, Error> {
        match self.value.take() {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.members.left)
    }
}

/// An object key: a string. (serde_json's `Value` also reads a key as a number where the map's
/// key type is one; no type read from a tree has such a map, and reading one fails here.)
struct KeyDeserializer<'t>(&'t str);

impl<'t> Deserializer<'t> for KeyDeserializer<'t> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_borrowed_str(self.0)
    }

    fn deserialize_option<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'t>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'t>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.0
            .into_deserializer()
            .deserialize_enum(name, variants, visitor)
    }

    forward_to_deserialize_any! {
        <W: Visitor<'t>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}

struct Variant<'t, 'a> {
    name: &'t str,
    value: Option<Item<'t, 'a>>,
}

impl<'t, 'a> EnumAccess<'t> for Variant<'t, 'a> {
    type Error = Error;
    type Variant = VariantValue<'t, 'a>;

    fn variant_seed<V: DeserializeSeed<'t>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Self::Variant), Error> {
        let name: de::value::BorrowedStrDeserializer<'t, Error> =
            de::value::BorrowedStrDeserializer::new(self.name);
        Ok((seed.deserialize(name)?, VariantValue(self.value)))
    }
}

/// An enum variant's value: none for a variant written as a string.
struct VariantValue<'t, 'a>(Option<Item<'t, 'a>>);

impl<'t> VariantAccess<'t> for VariantValue<'t, '_> {
    type Error = Error;

    fn unit_variant(self) -> Result<(), Error> {
        match self.0 {
            None => Ok(()),
            Some(value) => serde::Deserialize::deserialize(value),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'t>>(self, seed: T) -> Result<T::Value, Error> {
        match self.0 {
            Some(value) => seed.deserialize(value),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"newtype variant",
            )),
        }
    }

    fn tuple_variant<V: Visitor<'t>>(self, _len: usize, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Some(value) if matches!(value.node(), Node::Array { .. }) => {
                visit_elements(value, visitor)
            }
            Some(value) => Err(value.invalid_type(&"tuple variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"tuple variant",
            )),
        }
    }

    fn struct_variant<V: Visitor<'t>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Some(value) if value.is_object() => visit_members(value, None, visitor),
            Some(value) => Err(value.invalid_type(&"struct variant")),
            None => Err(de::Error::invalid_type(
                Unexpected::UnitVariant,
                &"struct variant",
            )),
        }
    }
}

/// An object read as a map of its members but one, as `jobwarden_rules::JobObject::parse`
/// reads the parts of a Job (see `Item::without`).
#[derive(Clone, Copy)]
pub(crate) struct Without<'t, 'a> {
    item: Item<'t, 'a>,
    skip: &'static str,
}

impl<'t> Deserializer<'t> for Without<'t, '_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'t>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.item.node() {
            Node::Object { .. } => visit_members(self.item, Some(self.skip), visitor),
            _ => Err(self.item.invalid_type(&visitor)),
        }
    }

    forward_to_deserialize_any! {
        <W: Visitor<'t>>
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
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
            let theirs: Result<Value, String> =
                serde_json::from_slice(text).map_err(|e| e.to_string());
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
}
