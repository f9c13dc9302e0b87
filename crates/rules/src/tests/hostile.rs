//! Bad input is normal input: whatever JSON arrives in place of a Job's fields, the rules answer
//! with errors and never panic.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::JobBuilder;
use crate::JobObject;

const POINTERS: &[&str] = &[
    "/spec/completions",
    "/spec/parallelism",
    "/spec/completionMode",
    "/spec/managedBy",
    "/spec/suspend",
    "/spec/selector",
    "/spec/successPolicy",
    "/spec/successPolicy/rules",
    "/spec/podFailurePolicy",
    "/spec/podFailurePolicy/rules",
    "/spec/template",
    "/spec/template/spec/containers",
    "/metadata/annotations",
    "/metadata/name",
    "/status",
    "/status/conditions",
    "/status/completedIndexes",
    "/status/failedIndexes",
    "/status/uncountedTerminatedPods",
    "/status/startTime",
];

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-5i32..200).prop_map(|n| json!(n)),
        "[0-9,\\- a-zA-Z_/.]{0,12}".prop_map(Value::String),
        Just(json!("2026-01-01T00:00:00Z")),
        Just(json!({"rules": [{"succeededIndexes": "0-3", "succeededCount": 2}]})),
        Just(
            json!({"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}, "name": "X"}]})
        ),
        Just(json!([{"type": "Complete", "status": "True"}, {"type": "Failed", "status": "True"}])),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn rules_never_panic(
        edits in proptest::collection::vec((0..POINTERS.len(), any_json()), 1..4),
        old_edits in proptest::collection::vec((0..POINTERS.len(), any_json()), 0..3),
    ) {
        let apply = |edits: &[(usize, Value)]| {
            edits.iter().fold(JobBuilder::new().indexed(5), |b, (i, v)| {
                b.set(POINTERS.get(*i).copied().unwrap_or("/spec/x"), v.clone())
            }).build()
        };
        let new = apply(&edits);
        let old = apply(&old_edits);
        if let (Ok(n), Ok(o)) = (JobObject::parse(&new), JobObject::parse(&old)) {
            let _ = crate::validate_create(&n);
            let _ = crate::validate_update(&n, &o);
            let _ = crate::validate_status_update(&n, &o);
            let _ = crate::rule_names::effective_names(&n);
        }
        let mut mutated = new.clone();
        crate::defaults::upstream_defaults(&mut mutated);
        crate::defaults::prepare_for_create(&mut mutated);
        crate::defaults::prepare_for_update(&mut mutated, &old);
    }
}
