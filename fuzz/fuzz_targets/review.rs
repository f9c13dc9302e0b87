//! AdmissionReview decoding and review end to end: any bytes kube-apiserver (or anyone who
//! reaches the port) could send, through both webhooks, with the default policy and with a
//! policy that turns every opt-in rule on. The review must never panic, and whatever it answers
//! must be a JSON AdmissionReview carrying the request's uid.
#![no_main]

use std::collections::BTreeMap;
use std::sync::LazyLock;

use jobwarden_admission::{Context, Policy, Reviewer, Webhook};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

static PLAIN: LazyLock<Reviewer> = LazyLock::new(|| Reviewer::new(Policy::default()));

static CONFIGURED: LazyLock<Reviewer> = LazyLock::new(|| {
    let policy: Policy = serde_json::from_value(serde_json::json!({
        "controllerName": "jobwarden.io/job-controller",
        "allowedManagedBy": ["kueue.x-k8s.io/multikueue"],
        "resume": {"users": ["alice"], "groups": ["batch-admins"],
                   "serviceAccounts": ["queueing/admission"]},
        "suspendOnCreate": {"names": ["default"],
                            "selector": {"matchLabels": {"team": "a"}}},
        "delegate": {"jobsNamingRules": true}
    }))
    .expect("the fuzz policy is valid");
    Reviewer::new(policy)
});

/// Every namespace has the label the fuzz policy's selectors look for.
fn labels(_namespace: &str) -> Option<BTreeMap<String, String>> {
    Some(BTreeMap::from([("team".to_owned(), "a".to_owned())]))
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks the webhook and the policy; the rest is the HTTP body.
    let Some((&choice, body)) = data.split_first() else {
        return;
    };
    let webhook = if choice & 1 == 0 {
        Webhook::Validate
    } else {
        Webhook::Mutate
    };
    let (reviewer, ctx) = if choice & 2 == 0 {
        (&*PLAIN, Context::default())
    } else {
        (
            &*CONFIGURED,
            Context {
                namespace_labels: Some(&labels),
            },
        )
    };
    if let Ok(reviewed) = reviewer.review(webhook, body, &ctx) {
        let answer: Value = serde_json::from_slice(&reviewed.body).expect("the answer is JSON");
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(
            answer["response"]["uid"].as_str(),
            Some(reviewed.summary.uid.as_str())
        );
    }
});
