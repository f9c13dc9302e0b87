//! Which policy the replicas run, from their Events, against the mounted ConfigMap's hash.

use k8s_openapi::jiff::Timestamp;

use super::expect;
use super::{ERROR, OK, UNKNOWN, WARNING};
use crate::catalogue::POLICY_IN_FORCE;
use crate::installed::policy_in_force::{
    POLICY_APPLIED, POLICY_LOADED, POLICY_REFUSED, PolicyEvent, hash_in, policy_in_force,
};

/// The mounted policy's hash, and what the Pods said.
type Mounted = Result<Option<String>, String>;
type Said = Result<Vec<PolicyEvent>, String>;

const MOUNTED: &str = "594bfd540f4e0429";
const OLDER: &str = "249726633b619a8f";

fn event(pod: &str, reason: &str, hash: &str, second: i64) -> PolicyEvent {
    let message = match reason {
        POLICY_REFUSED => format!(
            "new policy (hash {hash}) refused; the running policy (hash {OLDER}) stays: the policy file /etc/jobwarden/policy/policy.yaml is not valid: unknown field `resumee`"
        ),
        _ => format!("running the policy file /etc/jobwarden/policy/policy.yaml (hash {hash})"),
    };
    PolicyEvent {
        pod: pod.to_owned(),
        reason: reason.to_owned(),
        message,
        at: Some(Timestamp::from_second(1_800_000_000 + second).unwrap()),
    }
}

#[test]
fn the_hash_is_read_from_the_message() {
    assert_eq!(
        hash_in(&event("p", POLICY_LOADED, MOUNTED, 0).message),
        Some(MOUNTED)
    );
    assert_eq!(
        hash_in(&event("p", POLICY_REFUSED, MOUNTED, 0).message),
        Some(MOUNTED)
    );
    for message in [
        "no hash",
        "(hash 12)",
        "(hash zzzzzzzzzzzzzzzz)",
        "(hash 594bfd540f4e04290)",
    ] {
        assert_eq!(hash_in(message), None, "{message}");
    }
}

#[test]
fn policy_in_force_table() {
    let pods = ["jobwarden-a".to_owned(), "jobwarden-b".to_owned()];
    let mounted = Ok(Some(MOUNTED.to_owned()));
    let cases: Vec<(&str, Mounted, Said, _, &[&str])> = vec![
        (
            "both run the mounted policy",
            mounted.clone(),
            Ok(vec![
                event("jobwarden-a", POLICY_LOADED, OLDER, 0),
                event("jobwarden-a", POLICY_APPLIED, MOUNTED, 5),
                event("jobwarden-b", POLICY_LOADED, MOUNTED, 1),
            ]),
            OK,
            &["2 replicas run the mounted policy (hash 594bfd540f4e0429)"],
        ),
        (
            "the newest word is a refusal",
            mounted.clone(),
            Ok(vec![
                event("jobwarden-a", POLICY_LOADED, OLDER, 0),
                event("jobwarden-a", POLICY_REFUSED, MOUNTED, 5),
                event("jobwarden-b", POLICY_APPLIED, MOUNTED, 1),
            ]),
            ERROR,
            &[
                "jobwarden-a: new policy (hash 594bfd540f4e0429) refused",
                "unknown field `resumee`",
            ],
        ),
        (
            "a refusal since put right",
            mounted.clone(),
            Ok(vec![
                event("jobwarden-a", POLICY_REFUSED, OLDER, 0),
                event("jobwarden-a", POLICY_APPLIED, MOUNTED, 5),
            ]),
            OK,
            &["1 replica runs the mounted policy"],
        ),
        (
            "a replica behind the ConfigMap",
            mounted.clone(),
            Ok(vec![
                event("jobwarden-a", POLICY_LOADED, MOUNTED, 0),
                event("jobwarden-b", POLICY_LOADED, OLDER, 0),
            ]),
            WARNING,
            &[
                "not the policy the ConfigMap holds (hash 594bfd540f4e0429): jobwarden-b runs 249726633b619a8f",
            ],
        ),
        (
            "a Pod gone is not asked about",
            mounted.clone(),
            Ok(vec![event("jobwarden-gone", POLICY_REFUSED, MOUNTED, 0)]),
            OK,
            &["no replica has said which policy it runs lately"],
        ),
        (
            "Events unreadable",
            mounted.clone(),
            Err("forbidden".to_owned()),
            UNKNOWN,
            &["cannot read the Events of jobwarden's Pods: forbidden"],
        ),
        (
            "ConfigMap unreadable, no refusal",
            Err("forbidden".to_owned()),
            Ok(vec![event("jobwarden-a", POLICY_LOADED, MOUNTED, 0)]),
            UNKNOWN,
            &["the mounted one could not be read: forbidden"],
        ),
    ];
    for (name, mounted, events, status, says) in cases {
        let check = policy_in_force(&mounted, &pods, &events);
        assert_eq!(check.kind, POLICY_IN_FORCE, "{name}");
        expect(&check, POLICY_IN_FORCE, status, says);
    }
}
