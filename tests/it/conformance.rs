//! Every case in `tests/conformance/cases` (verdicts taken from a real kube-apiserver, and from
//! the seeds for rules upstream lacks) goes through the built binary's `review`, exactly as an
//! operator would run it. Checked: the verdict, every field path upstream named, the patch for
//! mutate cases, and — where the case records it — upstream's full message, to the byte.

use std::process::{Command, Stdio};

use base64::Engine as _;
use serde_json::Value;

fn review(webhook: &str, request: &Value) -> (i32, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobwarden"));
    cmd.arg("review");
    if webhook == "mutate" {
        cmd.arg("--mutate");
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("jobwarden starts");
    let body = serde_json::to_vec(request).expect("serialisable");
    std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), &body).expect("write");
    let out = child.wait_with_output().expect("jobwarden finishes");
    let response = serde_json::from_slice(&out.stdout).expect("review prints JSON");
    (out.status.code().unwrap_or(-1), response)
}

/// UUIDs differ between the run that recorded a message and the run that recorded the object.
fn without_uuids(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let candidate = s.get(i..i + 36).unwrap_or("");
        let is_uuid = candidate.len() == 36
            && candidate.char_indices().all(|(j, c)| match j {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            });
        if is_uuid {
            out.push_str("<uuid>");
            i += 36;
        } else {
            let c = s[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// Upstream prints `spec.template` values as its internal PodSpec with every Go field name;
/// jobwarden prints the raw v1 template (README, "Known differences"). Everything else about
/// such a message must still match.
fn template_value_elided(s: &str) -> String {
    [
        "spec.template: Invalid value: ",
        "spec.template.spec: Invalid value: ",
    ]
    .iter()
    .fold(s.to_owned(), |msg, marker| {
        match (msg.find(marker), msg.rfind(": field is immutable")) {
            (Some(start), Some(end)) if end > start => {
                format!("{}{marker}<template>{}", &msg[..start], &msg[end..])
            }
            _ => msg,
        }
    })
}

fn pointer_after_patch(object: &Value, response: &Value, pointer: &str) -> Option<Value> {
    let mut patched = object.clone();
    if let Some(patch) = response.get("patch").and_then(Value::as_str) {
        assert_eq!(response["patchType"], "JSONPatch");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(patch)
            .expect("base64 patch");
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).expect("a JSON Patch");
        json_patch::patch(&mut patched, &patch).expect("the patch applies");
    }
    patched.pointer(pointer).cloned()
}

#[test]
fn every_conformance_case_agrees_with_kube_apiserver() {
    let cases = jobwarden_corpus::cases();
    assert!(
        cases.len() >= 190,
        "expected the full corpus, found {}",
        cases.len()
    );
    let mut failures = Vec::new();
    let mut exact_messages = 0;
    for recorded in &cases {
        let name = &recorded.file;
        let case = &recorded.value;
        let webhook = case["webhook"].as_str().unwrap_or("validate");
        let expect = &case["expect"];
        let (code, out) = review(webhook, &case["review"]);
        let response = &out["response"];
        let mut fail = |why: String| failures.push(format!("{name}: {why}"));
        if out["apiVersion"] != "admission.k8s.io/v1"
            || response["uid"] != case["review"]["request"]["uid"]
        {
            fail(format!("not a v1 response with the request uid: {out}"));
        }
        let allowed = response["allowed"].as_bool();
        if allowed != expect["allowed"].as_bool() {
            fail(format!(
                "allowed {allowed:?}, want {}; {}",
                expect["allowed"], response["status"]["message"]
            ));
            continue;
        }
        if code != if allowed == Some(true) { 0 } else { 1 } {
            fail(format!("exit code {code}"));
        }
        let message = response["status"]["message"].as_str().unwrap_or("");
        for field in expect["fields"].as_array().into_iter().flatten() {
            let field = field.as_str().unwrap_or("");
            if !message.contains(&format!("{field}: ")) {
                fail(format!("message does not name {field}: {message}"));
            }
        }
        if let Some(upstream) = case["upstreamMessage"]
            .as_str()
            .filter(|m| m.starts_with("Job.batch"))
        {
            let normalise = |m: &str| template_value_elided(&without_uuids(m));
            if normalise(upstream) == normalise(message) {
                exact_messages += 1;
            } else {
                fail(format!(
                    "message differs from kube-apiserver's:\n  upstream: {upstream}\n  ours:     {message}"
                ));
            }
        }
        if webhook == "mutate" {
            let object = &case["review"]["request"]["object"];
            for (pointer, want) in expect["pointers"].as_object().into_iter().flatten() {
                let got = pointer_after_patch(object, response, pointer);
                let want = (!want.is_null()).then(|| want.clone());
                if got != want {
                    fail(format!(
                        "{pointer} is {got:?} after the patch, want {want:?}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert!(
        exact_messages >= 90,
        "only {exact_messages} messages compared to the byte"
    );
    println!(
        "{} cases agree; {exact_messages} messages identical to kube-apiserver's",
        cases.len()
    );
}
