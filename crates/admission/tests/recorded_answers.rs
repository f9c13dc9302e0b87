//! Every conformance case through `Reviewer::review`, both webhooks, under the empty policy and
//! under a policy that turns every option on: the answer must be, byte for byte, what was
//! recorded in `recorded/answers.jsonl`. The recording was made with the tree-based review that
//! predates the borrowed decoding (issue 11), so a faster review can never change an answer.
//! `JOBWARDEN_RECORD_ANSWERS=1 cargo test -p jobwarden-admission --test recorded_answers`
//! rewrites the file (for a deliberate change of answers, reviewed in the diff).

use std::collections::BTreeMap;
use std::path::Path;

use jobwarden_admission::policy::{Delegation, Identities, NamespaceMatch};
use jobwarden_admission::{Context, Policy, Reviewer, Webhook};
use serde_json::{Value, json};

/// Every policy option on, namespaces chosen by a label every namespace has.
fn everything_on() -> Policy {
    let selector = serde_json::from_value(json!({"matchLabels": {"team": "batch"}})).unwrap();
    Policy {
        allowed_managed_by: vec!["example.com/batch".into()],
        resume: Identities {
            users: vec!["ops".into()],
            groups: vec!["system:masters".into()],
            service_accounts: vec!["batch/scheduler".into()],
        },
        suspend_on_create: NamespaceMatch {
            names: vec!["default".into()],
            selector: None,
        },
        delegate: Delegation {
            jobs_naming_rules: true,
            namespaces: NamespaceMatch {
                names: Vec::new(),
                selector: Some(selector),
            },
        },
        ..Policy::default()
    }
}

fn answers() -> Vec<Value> {
    let labels = |_: &str| Some(BTreeMap::from([("team".to_owned(), "batch".to_owned())]));
    let with_labels = Context {
        namespace_labels: Some(&labels),
    };
    let policies = [
        ("empty", Reviewer::default(), Context::default()),
        ("everything", Reviewer::new(everything_on()), with_labels),
    ];
    let mut out = Vec::new();
    for case in jobwarden_corpus::cases() {
        let body = serde_json::to_vec(case.review()).unwrap();
        for (policy, reviewer, ctx) in &policies {
            for webhook in [Webhook::Validate, Webhook::Mutate] {
                let answer = match reviewer.review(webhook, &body, ctx) {
                    Ok(reviewed) => String::from_utf8(reviewed.body).unwrap(),
                    Err(unreadable) => format!("unreadable: {unreadable}"),
                };
                out.push(json!({"case": case.stem(), "policy": policy, "webhook": webhook.to_string(), "answer": answer}));
            }
        }
    }
    out
}

#[test]
fn answers_are_the_recorded_bytes() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded/answers.jsonl");
    let now = answers();
    if std::env::var_os("JOBWARDEN_RECORD_ANSWERS").is_some() {
        let text: String = now.iter().map(|a| format!("{a}\n")).collect();
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, text).unwrap();
        return;
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let recorded: BTreeMap<(String, String, String), String> = text
        .lines()
        .map(|line| {
            let a: Value = serde_json::from_str(line).unwrap();
            let key = |k: &str| a[k].as_str().unwrap().to_owned();
            ((key("case"), key("policy"), key("webhook")), key("answer"))
        })
        .collect();
    let mut differ = Vec::new();
    for a in &now {
        let key = |k: &str| a[k].as_str().unwrap().to_owned();
        let id = (key("case"), key("policy"), key("webhook"));
        let want = recorded
            .get(&id)
            .unwrap_or_else(|| panic!("{id:?} was never recorded: record the answers again"));
        if *want != key("answer") {
            differ.push(format!(
                "{id:?}\n  recorded: {want}  now:      {}",
                key("answer")
            ));
        }
    }
    assert_eq!(
        now.len(),
        recorded.len(),
        "cases were removed: record again"
    );
    assert!(
        differ.is_empty(),
        "{} answers changed:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
