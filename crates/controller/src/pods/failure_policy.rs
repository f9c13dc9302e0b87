//! Matching a failed pod against `spec.podFailurePolicy`, as upstream's `matchPodFailurePolicy`:
//! rules in order, the first that matches acts. Pure reads of the pod's status; it decides what
//! a rule says, never what the Job does about it (that is `plan`'s).

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern,
};

use super::{CachedPod, ExitedContainer};

/// What the first matching rule asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    FailJob,
    FailIndex,
    Ignore,
    Count,
}

impl Action {
    /// `None` for a value this controller does not know: upstream's `switch` has no case for
    /// it either, so such a rule never acts and the next one is tried.
    fn parse(s: &str) -> Option<Action> {
        match s {
            "FailJob" => Some(Action::FailJob),
            "FailIndex" => Some(Action::FailIndex),
            "Ignore" => Some(Action::Ignore),
            "Count" => Some(Action::Count),
            _ => None,
        }
    }

    /// The action as the API spells it (`FailJob`).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::FailJob => "FailJob",
            Action::FailIndex => "FailIndex",
            Action::Ignore => "Ignore",
            Action::Count => "Count",
        }
    }
}

/// The rule a failed pod matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyMatch {
    pub action: Action,
    /// The rule's position in `spec.podFailurePolicy.rules`.
    pub rule: usize,
    /// Upstream's wording of what matched, e.g. `Container main for pod ns/p failed with exit
    /// code 2 matching FailJob rule at index 0`: the `FailureTarget`/`Failed` message.
    pub message: String,
}

impl PolicyMatch {
    /// Upstream's `countFailed`: only an `Ignore` match keeps a failure from counting.
    pub fn counts_as_failure(&self) -> bool {
        self.action != Action::Ignore
    }
}

/// The first rule that matches `pod` (of the Job in `namespace`), if any. Whether the pod
/// failed at all is the caller's question (upstream only asks this of failed pods).
pub fn match_pod(
    policy: &PodFailurePolicy,
    pod: &CachedPod,
    namespace: &str,
) -> Option<PolicyMatch> {
    let name = &pod.name;
    for (rule, r) in policy.rules.iter().enumerate() {
        let what = if let Some(req) = &r.on_exit_codes {
            // Regular containers first, then init containers, as upstream; `exited` holds
            // them in that order.
            let Some(c) = pod.exited.iter().find(|c| container_matches(c, req)) else {
                continue;
            };
            format!(
                "Container {} for pod {namespace}/{name} failed with exit code {}",
                c.name, c.exit_code
            )
        } else if let Some(patterns) = &r.on_pod_conditions {
            let Some((type_, _)) = matching_condition(&pod.conditions, patterns) else {
                continue;
            };
            format!("Pod {namespace}/{name} has condition {type_}")
        } else {
            continue;
        };
        let Some(action) = Action::parse(&r.action) else {
            continue;
        };
        return Some(PolicyMatch {
            action,
            rule,
            message: format!("{what} matching {} rule at index {rule}", action.as_str()),
        });
    }
    None
}

/// Upstream's `getMatchingContainerFromList`: a terminated container with a non-zero exit code
/// (all `exited` holds) that the requirement names (any container when it names none) and whose
/// code the operator accepts.
fn container_matches(c: &ExitedContainer, req: &PodFailurePolicyOnExitCodesRequirement) -> bool {
    req.container_name.as_deref().is_none_or(|n| n == &*c.name)
        && operator_matches(c.exit_code, req)
}

fn operator_matches(code: i32, req: &PodFailurePolicyOnExitCodesRequirement) -> bool {
    match req.operator.as_str() {
        "In" => req.values.contains(&code),
        "NotIn" => !req.values.contains(&code),
        _ => false,
    }
}

/// Upstream's `matchOnPodConditions`: type and status must both be equal. The status is compared
/// as stored; the apiserver defaults an empty one to `True`, and so does this.
fn matching_condition<'a>(
    conditions: &'a [(Box<str>, Box<str>)],
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a (Box<str>, Box<str>)> {
    conditions.iter().find(|(type_, status)| {
        patterns.iter().any(|p| {
            let want = p
                .status
                .as_deref()
                .filter(|s| !s.is_empty())
                .unwrap_or("True");
            p.type_ == **type_ && want == &**status
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::{Value, json};

    fn policy(rules: Value) -> PodFailurePolicy {
        serde_json::from_value(json!({ "rules": rules })).expect("test policies decode")
    }

    fn pod(status: Value) -> CachedPod {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "status": status,
        }))
        .expect("test pods decode");
        CachedPod::from_pod(&pod)
    }

    fn terminated(name: &str, code: i32) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": false, "restartCount": 0,
               "state": {"terminated": {"exitCode": code}}})
    }

    fn running(name: &str) -> Value {
        json!({"name": name, "image": "i", "imageID": "", "ready": true, "restartCount": 0,
               "state": {"running": {}}})
    }

    fn exit_rule(action: &str, container: Option<&str>, op: &str, values: &[i32]) -> Value {
        json!({"action": action,
               "onExitCodes": {"containerName": container, "operator": op, "values": values}})
    }

    fn cond_rule(action: &str, type_: &str, status: &str) -> Value {
        json!({"action": action, "onPodConditions": [{"type": type_, "status": status}]})
    }

    /// What a case expects: `(action, rule, message)` of the match.
    type Want = Option<(Action, usize, &'static str)>;

    /// `(action, rule, message)` of the match, for one-line expectations.
    fn matched(p: &PodFailurePolicy, pod: &CachedPod) -> Option<(Action, usize, String)> {
        match_pod(p, pod, "ns").map(|m| (m.action, m.rule, m.message))
    }

    #[test]
    fn exit_code_rules() {
        let failed_main_2 = pod(json!({"phase": "Failed",
                                        "containerStatuses": [terminated("main", 2)]}));
        let cases: Vec<(&str, Value, &CachedPod, Want)> = vec![
            (
                "In matches, upstream's message",
                json!([exit_rule("FailJob", Some("main"), "In", &[2])]),
                &failed_main_2,
                Some((
                    Action::FailJob,
                    0,
                    "Container main for pod ns/p failed with exit code 2 matching FailJob rule at index 0",
                )),
            ),
            (
                "first matching rule wins",
                json!([
                    exit_rule("Ignore", None, "In", &[3]),
                    exit_rule("Count", None, "In", &[2]),
                    exit_rule("FailJob", None, "In", &[2]),
                ]),
                &failed_main_2,
                Some((
                    Action::Count,
                    1,
                    "Container main for pod ns/p failed with exit code 2 matching Count rule at index 1",
                )),
            ),
            (
                "NotIn",
                json!([exit_rule("FailJob", None, "NotIn", &[1, 3])]),
                &failed_main_2,
                Some((
                    Action::FailJob,
                    0,
                    "Container main for pod ns/p failed with exit code 2 matching FailJob rule at index 0",
                )),
            ),
            (
                "NotIn excludes",
                json!([exit_rule("FailJob", None, "NotIn", &[2])]),
                &failed_main_2,
                None,
            ),
            (
                "another container named",
                json!([exit_rule("FailJob", Some("side"), "In", &[2])]),
                &failed_main_2,
                None,
            ),
            (
                "an unknown action is skipped, the next rule acts",
                json!([
                    exit_rule("Restart", None, "In", &[2]),
                    exit_rule("Ignore", None, "In", &[2]),
                ]),
                &failed_main_2,
                Some((
                    Action::Ignore,
                    1,
                    "Container main for pod ns/p failed with exit code 2 matching Ignore rule at index 1",
                )),
            ),
        ];
        for (name, rules, pod, want) in cases {
            let got = matched(&policy(rules), pod);
            let want = want.map(|(a, r, m)| (a, r, m.to_owned()));
            assert_eq!(got, want, "{name}");
        }
    }

    #[test]
    fn only_terminated_non_zero_containers_match_regular_ones_first() {
        let p = policy(json!([exit_rule("FailJob", None, "NotIn", &[7])]));
        // Exit code 0 never matches, even for NotIn; a running container has no code.
        let ok = pod(json!({"phase": "Failed",
                            "containerStatuses": [terminated("a", 0), running("b")]}));
        assert_eq!(matched(&p, &ok), None);
        // The init container failed with 5 and the regular one with 9: the regular one is named.
        let both = pod(json!({"phase": "Failed",
                              "initContainerStatuses": [terminated("init", 5)],
                              "containerStatuses": [terminated("main", 9)]}));
        assert_eq!(
            matched(&p, &both).map(|m| m.2),
            Some(
                "Container main for pod ns/p failed with exit code 9 matching FailJob rule at index 0"
                    .to_owned()
            )
        );
        let init_only = pod(json!({"phase": "Failed",
                                   "initContainerStatuses": [terminated("init", 5)],
                                   "containerStatuses": [running("main")]}));
        assert_eq!(
            matched(&p, &init_only).map(|m| m.2),
            Some(
                "Container init for pod ns/p failed with exit code 5 matching FailJob rule at index 0"
                    .to_owned()
            )
        );
        assert_eq!(matched(&p, &pod(json!({"phase": "Failed"}))), None);
        assert_eq!(matched(&p, &pod(Value::Null)), None);
    }

    #[test]
    fn pod_condition_rules_match_type_and_status() {
        let disrupted = pod(json!({"phase": "Failed", "conditions": [
            {"type": "Ready", "status": "False"},
            {"type": "DisruptionTarget", "status": "True"},
        ]}));
        let p = policy(json!([cond_rule("Ignore", "DisruptionTarget", "True")]));
        assert_eq!(
            matched(&p, &disrupted),
            Some((
                Action::Ignore,
                0,
                "Pod ns/p has condition DisruptionTarget matching Ignore rule at index 0"
                    .to_owned()
            ))
        );
        assert!(
            !match_pod(&p, &disrupted, "ns")
                .expect("matches")
                .counts_as_failure()
        );
        let p = policy(json!([cond_rule("FailJob", "DisruptionTarget", "False")]));
        assert_eq!(matched(&p, &disrupted), None);
        let p = policy(json!([cond_rule("FailJob", "Ready", "False")]));
        assert_eq!(
            matched(&p, &disrupted).map(|m| m.2),
            Some("Pod ns/p has condition Ready matching FailJob rule at index 0".to_owned())
        );
    }
}
