//! The tree as a serde `Deserializer`, shaped on serde_json's `impl Deserializer for &Value` so
//! that a type reads the same from a tree as from the `Value` of the same document.

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};
use serde::forward_to_deserialize_any;
use serde_json::Error;

use super::{Elements, Item, Members, Node};

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
    pub(super) item: Item<'t, 'a>,
    pub(super) skip: &'static str,
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
