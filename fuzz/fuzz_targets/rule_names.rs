//! The rule-names annotation (`jobwarden.io/pod-failure-policy-rule-names`, KEP-4443): any text
//! in the annotation, on a Job with zero to seven pod-failure-policy rules (some with a `name`
//! field), through the validation, the controller's lenient reading and the full create check.
#![no_main]

use jobwarden_rules::rule_names::{self, ANNOTATION};
use jobwarden_rules::{JobObject, validate_create};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

fuzz_target!(|data: &[u8]| {
    // The first byte: how many rules (low three bits), whether the Job has a policy at all
    // (bit 3), and whether rule 0 carries its own `name` (bit 4). The rest is the annotation.
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let Ok(annotation) = std::str::from_utf8(rest) else {
        return;
    };
    let rules: Vec<Value> = (0..usize::from(shape & 7))
        .map(|i| {
            let mut rule = json!({
                "action": "FailJob",
                "onExitCodes": {"operator": "In", "values": [i as i64 + 1]}
            });
            if i == 0 && shape & 16 != 0 {
                rule["name"] = json!("Named");
            }
            rule
        })
        .collect();
    let mut raw = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "fuzz", "namespace": "default",
                     "annotations": {ANNOTATION: annotation}},
        "spec": {
            "completions": 1,
            "template": {"spec": {"restartPolicy": "Never",
                                  "containers": [{"name": "c", "image": "busybox"}]}}
        }
    });
    if shape & 8 == 0 {
        raw["spec"]["podFailurePolicy"] = json!({"rules": rules});
    }
    let Ok(job) = JobObject::parse(&raw) else {
        return;
    };
    let errors = rule_names::validate(&job);
    for error in &errors {
        let _ = error.to_string();
    }
    let names = rule_names::effective_names(&job);
    for i in 0..names.len() {
        assert!(rule_names::failure_reason(&names, i).starts_with(rule_names::REASON_PREFIX));
    }
    for error in validate_create(&job) {
        let _ = error.to_string();
    }
});
