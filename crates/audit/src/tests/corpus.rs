//! The conformance corpus (verdicts from a real kube-apiserver v1.36, and from the proposals for
//! the rules upstream lacks) read as a set of stored Jobs: every object the validating webhook
//! accepted is clean; every object a create was refused for is reported on the same fields; the
//! denied status writes that break a check v1.36 applies to every status write are reported on
//! the same fields too.

use std::collections::BTreeSet;

use jobwarden_admission::Policy;
use jobwarden_corpus::Case;
use serde_json::Value;

use crate::violations::{Rule, audit_job};

/// The whole corpus: a smaller one would make "no false positive" prove less.
fn cases() -> Vec<Case> {
    let cases = jobwarden_corpus::cases();
    assert!(cases.len() >= 190, "the full corpus, found {}", cases.len());
    cases
}

/// What each case's recorded verdict says, as this test reads it.
trait Recorded {
    fn is_validate(&self) -> bool;
    fn allowed(&self) -> bool;
    fn operation(&self) -> &str;
    fn expected_fields(&self) -> BTreeSet<String>;
    fn audited_fields(&self) -> BTreeSet<String>;
}

impl Recorded for Case {
    fn is_validate(&self) -> bool {
        self.webhook() == "validate"
    }
    fn allowed(&self) -> bool {
        self.value["expect"]["allowed"] == true
    }
    fn operation(&self) -> &str {
        self.request()["operation"].as_str().unwrap_or("")
    }
    fn expected_fields(&self) -> BTreeSet<String> {
        self.value["expect"]["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    }
    fn audited_fields(&self) -> BTreeSet<String> {
        audit_job(&self.request()["object"], &Policy::default())
            .unwrap_or_else(|e| panic!("{}: the object decodes: {e}", self.file))
            .into_iter()
            .map(|v| v.field)
            .collect()
    }
}

#[test]
fn every_accepted_object_is_clean() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases().iter().filter(|c| c.is_validate() && c.allowed()) {
        checked += 1;
        let found = audit_job(&case.request()["object"], &Policy::default())
            .unwrap_or_else(|e| panic!("{}: the object decodes: {e}", case.file));
        if !found.is_empty() {
            let lines: Vec<String> = found.iter().map(|v| format!("[{}] {v}", v.rule)).collect();
            failures.push(format!("{}: {}", case.file, lines.join("; ")));
        }
    }
    assert!(checked >= 70, "only {checked} accepted cases");
    assert!(
        failures.is_empty(),
        "false positives:\n{}",
        failures.join("\n")
    );
}

#[test]
fn every_refused_create_is_reported_on_the_same_fields() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases()
        .iter()
        .filter(|c| c.is_validate() && !c.allowed() && c.operation() == "CREATE")
    {
        checked += 1;
        let (want, got) = (case.expected_fields(), case.audited_fields());
        if want.is_empty() || got != want {
            failures.push(format!("{}: want {want:?}, audit names {got:?}", case.file));
        }
    }
    assert!(checked >= 60, "only {checked} refused creates");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The refused status writes whose object breaks a check that holds for every stored status
/// (module docs of `violations`): the audit names the same fields, under `status`.
#[test]
fn stored_statuses_no_write_could_leave_are_reported() {
    let cases = cases();
    let chosen = [
        "112-st-negative-active.json",
        "113-st-uncounted-invalid-s3.json",
        "114-st-complete-and-failed-from-empty.json",
        "146-st-scm-and-failure-target-scm-then-ft.json",
        "147-st-success-policy-complete-without-scm-c10.json",
    ];
    for file in chosen {
        let case = cases
            .iter()
            .find(|c| c.file == file)
            .unwrap_or_else(|| panic!("{file} is in the corpus"));
        assert!(case.is_status() && !case.allowed(), "{file}");
        let found = audit_job(&case.request()["object"], &Policy::default()).expect("decodes");
        let fields: BTreeSet<String> = found.iter().map(|v| v.field.clone()).collect();
        assert_eq!(fields, case.expected_fields(), "{file}: {found:?}");
        assert!(
            found.iter().all(|v| v.rule == Rule::Status),
            "{file}: {found:?}"
        );
    }
}

/// A refused status write is a write, not a stored state: most of them are refused only
/// because they change a field (ratcheting), and the audit must not report their objects for
/// what an older apiserver could have stored. Those whose old object was accepted as stored
/// (the `stored` cases) say so: the audit is silent on the old objects too.
#[test]
fn statuses_older_apiservers_stored_are_not_reported() {
    let mut checked = 0;
    for case in cases()
        .iter()
        .filter(|c| c.is_status() && c.file.contains("-stored-"))
    {
        checked += 1;
        let old = &case.request()["oldObject"];
        let found = audit_job(old, &Policy::default()).expect("decodes");
        assert!(found.is_empty(), "{}: {found:?}", case.file);
    }
    assert!(checked >= 10, "only {checked} stored-status cases");
}
