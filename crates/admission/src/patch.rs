//! The JSON Patch of the `spec` fields the mutating webhook sets, written from the decisions
//! rather than by diffing a copy of the object: each field is `add`ed where it is absent and
//! `replace`d where it is present (null, or another value), in the order of the field names,
//! which is the patch a diff of the object before and after gives. Never touches any other
//! field, so everything the webhook does not set, known to this build or not, is left as sent.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::json_tree::Item;

#[derive(Debug, Default)]
pub(crate) struct SpecPatch {
    /// Field name → (whether the object has the field, its new value).
    fields: BTreeMap<&'static str, (bool, Value)>,
}

#[derive(Serialize)]
struct Operation<'a> {
    op: &'static str,
    path: String,
    value: &'a Value,
}

impl SpecPatch {
    /// Sets `spec.<field>` of the object whose spec is `spec`.
    pub(crate) fn set(&mut self, spec: Item<'_, '_>, field: &'static str, value: Value) {
        self.fields
            .insert(field, (spec.get(field).is_some(), value));
    }

    /// The patch as JSON, or `None` when nothing is set.
    pub(crate) fn into_bytes(self) -> Option<Vec<u8>> {
        if self.fields.is_empty() {
            return None;
        }
        let operations: Vec<Operation<'_>> = self
            .fields
            .iter()
            .map(|(field, (present, value))| Operation {
                op: if *present { "replace" } else { "add" },
                path: format!("/spec/{field}"),
                value,
            })
            .collect();
        serde_json::to_vec(&operations).ok()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::json_tree;

    /// The patch is the one `json_patch::diff` gives for the same change, and applies.
    #[test]
    fn the_patch_is_the_diff_of_the_change() {
        let cases = [
            json!({"spec": {}}),
            json!({"spec": {"suspend": false, "managedBy": null}}),
            json!({"spec": {"podReplacementPolicy": null, "suspend": null, "x": {"y": 1}}}),
            json!({"spec": {"suspend": "yes", "managedBy": null, "podReplacementPolicy": null}}),
        ];
        for object in cases {
            let text = serde_json::to_vec(&object).unwrap();
            let tree = json_tree::parse(&text).unwrap();
            let spec = tree.root().get("spec").unwrap();
            let mut patch = SpecPatch::default();
            let mut after = object.clone();
            for (field, value) in [
                ("suspend", json!(true)),
                ("podReplacementPolicy", json!("Failed")),
                ("managedBy", json!("a.io/b")),
            ] {
                patch.set(spec, field, value.clone());
                after["spec"][field] = value;
            }
            let bytes = patch.into_bytes().unwrap();
            let diff = serde_json::to_vec(&json_patch::diff(&object, &after)).unwrap();
            assert_eq!(
                String::from_utf8(bytes).unwrap(),
                String::from_utf8(diff).unwrap()
            );
        }
        assert_eq!(SpecPatch::default().into_bytes(), None);
    }
}
