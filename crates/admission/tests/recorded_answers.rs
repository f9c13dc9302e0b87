//! Every conformance case through `Reviewer::review`, both webhooks, under the empty policy and
//! under a policy that turns every option on: the answer must be, byte for byte, what was
//! recorded in `recorded/answers.jsonl`. The recording was made with the tree-based review that
//! predates the borrowed decoding (issue 11), so a faster review can never change an answer.
//! The inputs of the fuzz corpus (`fuzz/corpus/review`: hostile, broken and odd bodies) go
//! through the same four reviews, and their answers are kept as hashes in
//! `recorded/fuzz_answers.txt` (the answers themselves would be megabytes). Those were recorded
//! after issue 11's steps, whose answers to the same inputs had been compared, before and after
//! each step, with the tree-based review's.
//! `JOBWARDEN_RECORD_ANSWERS=1 cargo test -p jobwarden-admission --test recorded_answers`
//! rewrites both files (for a deliberate change of answers, reviewed in the diff).

use std::collections::BTreeMap;
use std::hash::Hasher as _;
use std::path::{Path, PathBuf};

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
            ..Delegation::default()
        },
        ..Policy::default()
    }
}

/// The four reviews every recorded body goes through: (policy, webhook, answer).
fn four_answers(body: &[u8]) -> Vec<(&'static str, String, String)> {
    let labels = |_: &str| Some(BTreeMap::from([("team".to_owned(), "batch".to_owned())]));
    let with_labels = Context {
        namespace_labels: Some(&labels),
    };
    let policies = [
        ("empty", Reviewer::default(), Context::default()),
        ("everything", Reviewer::new(everything_on()), with_labels),
    ];
    let mut out = Vec::new();
    for (policy, reviewer, ctx) in &policies {
        for webhook in [Webhook::Validate, Webhook::Mutate] {
            let answer = match reviewer.review(webhook, body, ctx) {
                Ok(reviewed) => String::from_utf8(reviewed.body).unwrap(),
                Err(unreadable) => format!("unreadable: {unreadable}"),
            };
            out.push((*policy, webhook.to_string(), answer));
        }
    }
    out
}

fn answers() -> Vec<Value> {
    let mut out = Vec::new();
    for case in jobwarden_corpus::cases() {
        let body = serde_json::to_vec(case.review()).unwrap();
        for (policy, webhook, answer) in four_answers(&body) {
            out.push(json!({"case": case.stem(), "policy": policy, "webhook": webhook, "answer": answer}));
        }
    }
    out
}

#[test]
fn answers_are_the_recorded_bytes() {
    let file = recording("answers.jsonl");
    let now = answers();
    if recording_wanted() {
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

fn recording(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/recorded")
        .join(name)
}

fn recording_wanted() -> bool {
    std::env::var_os("JOBWARDEN_RECORD_ANSWERS").is_some()
}

/// FNV-1a of an answer: stable across builds and platforms, unlike std's hasher.
fn answer_hash(answer: &str) -> String {
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(answer.as_bytes());
    format!("{:016x}", hasher.finish())
}

/// One line per fuzz input: its file name, then the hashes of its four answers in the order of
/// `four_answers`. The body is the input less its first byte, as the fuzz target reads it.
fn fuzz_answer_line(dir: &Path, name: &str) -> String {
    let data = std::fs::read(dir.join(name))
        .unwrap_or_else(|e| panic!("{name}: {e} (the corpus changed: record the answers again)"));
    let body = data.get(1..).unwrap_or_default();
    let hashes: Vec<String> = four_answers(body)
        .iter()
        .map(|(_, _, answer)| answer_hash(answer))
        .collect();
    format!("{name} {}", hashes.join(" "))
}

/// Only the inputs recorded are checked, so that a local fuzzing run adding inputs to the
/// corpus does not fail the test; recording again takes them in.
#[test]
fn fuzz_corpus_answers_are_the_recorded_ones() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/review");
    let file = recording("fuzz_answers.txt");
    if recording_wanted() {
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let text: String = names
            .iter()
            .map(|name| fuzz_answer_line(&dir, name) + "\n")
            .collect();
        std::fs::write(&file, text).unwrap();
        return;
    }
    let recorded = std::fs::read_to_string(&file).unwrap();
    let mut differ = Vec::new();
    for line in recorded.lines() {
        let name = line.split(' ').next().unwrap_or_default();
        let now = fuzz_answer_line(&dir, name);
        if now != line {
            let body = std::fs::read(dir.join(name)).unwrap();
            let answers = four_answers(body.get(1..).unwrap_or_default());
            differ.push(format!(
                "{name}\n  recorded: {line}\n  now:      {now}\n  answers now: {answers:?}"
            ));
        }
    }
    assert!(!recorded.is_empty(), "the recording lists no inputs");
    assert!(
        differ.is_empty(),
        "{} fuzz inputs are answered differently:\n{}",
        differ.len(),
        differ.join("\n")
    );
}
