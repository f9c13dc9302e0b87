//! KEP-3998 success policy, as upstream's `matchSuccessPolicy`: which rule of
//! `spec.successPolicy.rules`, in order, the succeeded indexes satisfy first. Pure set arithmetic
//! over `IndexSet`; it never looks at pods or conditions.

use jobwarden_rules::indexes::IndexSet;
use k8s_openapi::api::batch::v1::SuccessPolicy;

/// The index of the first rule that holds, or `None`. No rule holds while no index has
/// succeeded, whatever its `succeededCount` (upstream returns early on an empty set, so a
/// count of 0 does not end a Job before anything ran).
pub fn matched_rule(
    policy: &SuccessPolicy,
    completions: i32,
    succeeded: &IndexSet,
) -> Option<usize> {
    if succeeded.is_empty() {
        return None;
    }
    policy
        .rules
        .iter()
        .position(|rule| match &rule.succeeded_indexes {
            Some(listed) => {
                // Read leniently, as upstream's `parseIndexesFromString`; a list that yields no
                // index (empty or unreadable) means the rule is skipped.
                let required = IndexSet::parse_lenient(listed, completions);
                if required.is_empty() {
                    return false;
                }
                let done = succeeded.intersection_count(&required);
                done == required.count()
                    || rule
                        .succeeded_count
                        .is_some_and(|n| done >= u64::try_from(n).unwrap_or(0))
            }
            None => rule
                .succeeded_count
                .is_some_and(|n| succeeded.count() >= u64::try_from(n).unwrap_or(0)),
        })
}

const MESSAGE_PREFIX: &str = "Matched rules at index ";

/// The `SuccessCriteriaMet`/`Complete` message for rule `index`, upstream's words.
pub fn message(index: usize) -> String {
    format!("{MESSAGE_PREFIX}{index}")
}

/// The rule a `message` names, read back from a stored condition.
pub fn rule_of_message(message: &str) -> Option<usize> {
    let digits = message.strip_prefix(MESSAGE_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(rules: &[(Option<&str>, Option<i32>)]) -> SuccessPolicy {
        let rules: Vec<_> = rules
            .iter()
            .map(|(i, c)| json!({"succeededIndexes": i, "succeededCount": c}))
            .collect();
        serde_json::from_value(json!({ "rules": rules })).expect("test policies decode")
    }

    fn done(s: &str) -> IndexSet {
        IndexSet::parse_lenient(s, 10)
    }

    #[test]
    fn rules_in_order_first_that_holds() {
        #[allow(clippy::type_complexity)]
        let cases: &[(&str, &[(Option<&str>, Option<i32>)], &str, Option<usize>)] = &[
            (
                "indexes only: all listed succeeded",
                &[(Some("0"), None)],
                "0",
                Some(0),
            ),
            (
                "indexes only: one listed missing",
                &[(Some("0-2"), None)],
                "0,2",
                None,
            ),
            (
                "indexes only: extra indexes do not matter",
                &[(Some("1,2"), None)],
                "0-5",
                Some(0),
            ),
            ("count only: reached", &[(None, Some(3))], "1,4,7", Some(0)),
            ("count only: short", &[(None, Some(3))], "1,4", None),
            (
                "both: count of the listed reached",
                &[(Some("1-9"), Some(5))],
                "0,2-6",
                Some(0),
            ),
            (
                "both: listed short of the count",
                &[(Some("1-9"), Some(5))],
                "0-4",
                None,
            ),
            (
                "both: all listed succeeded is enough",
                &[(Some("1,2"), Some(2))],
                "1,2",
                Some(0),
            ),
            (
                "story 2: the leader",
                &[(Some("0"), Some(1)), (Some("1-9"), Some(5))],
                "0",
                Some(0),
            ),
            (
                "story 2: five workers",
                &[(Some("0"), Some(1)), (Some("1-9"), Some(5))],
                "2,4,6,8,9",
                Some(1),
            ),
            (
                "the first rule that holds wins",
                &[(None, Some(1)), (Some("0"), None)],
                "0",
                Some(0),
            ),
            (
                "an empty list is skipped",
                &[(Some(""), Some(0)), (None, Some(1))],
                "3",
                Some(1),
            ),
            (
                "nothing succeeded: a count of 0 does not hold",
                &[(None, Some(0))],
                "",
                None,
            ),
            (
                "count 0 holds once anything succeeded",
                &[(None, Some(0))],
                "5",
                Some(0),
            ),
            (
                "unreadable indexes are skipped",
                &[(Some("x"), None)],
                "0-9",
                None,
            ),
        ];
        for (name, rules, succeeded, want) in cases {
            let got = matched_rule(&policy(rules), 10, &done(succeeded));
            assert_eq!(got, *want, "{name}");
        }
        assert_eq!(message(1), "Matched rules at index 1");
        assert_eq!(rule_of_message(&message(17)), Some(17));
        for other in [
            "Reached expected number of succeeded pods",
            "Matched rules at index ",
            "Matched rules at index +1",
            "Matched rules at index 1 and 2",
            "Matched rules at index 99999999999999999999999",
        ] {
            assert_eq!(rule_of_message(other), None, "{other}");
        }
    }
}
