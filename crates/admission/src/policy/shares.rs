//! The policy file's `dispatch.shares`: the teams whose waiting Jobs the dispatcher orders by
//! fair share (dominant resource fairness, weighted). Data and its checks only; the ordering
//! itself is the dispatcher's (`jobwarden_dispatcher::shares`). A namespace no team names or
//! selects belongs to the team `default` (weight 1), which a share may name to set its weight.

use jobwarden_rules::{FieldPath, names, selector};
use serde::Deserialize;

use super::NamespaceMatch;

/// The name of the team every namespace no other team takes belongs to.
pub const DEFAULT_TEAM: &str = "default";

/// One team: the namespaces whose Jobs are its, and its weight against the others.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Share {
    /// A DNS label, as a worker's name: it is printed by `jobwarden workers` and `explain`.
    pub name: String,
    /// Names first, then selectors, across all teams in the policy's order.
    #[serde(default)]
    pub namespaces: NamespaceMatch,
    /// A team of weight 2 is entitled to twice the dominant share of a team of weight 1.
    #[serde(default = "default_weight")]
    pub weight: f64,
}

fn default_weight() -> f64 {
    1.0
}

/// What serde cannot see in `dispatch.shares`; each problem begins with its path in the file,
/// and every problem is reported, in the order of the file.
pub fn problems(shares: &[Share]) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, share) in shares.iter().enumerate() {
        let at = format!("dispatch.shares[{i}]");
        problems.extend(name_problem(shares, i, share, &at));
        problems.extend(weight_problem(share.weight, &at));
        problems.extend(namespace_problems(shares, i, share, &at));
        if let Some(sel) = &share.namespaces.selector {
            let path = format!("{at}.namespaces.selector");
            let errors = selector::validate(sel, &FieldPath::new(&path));
            problems.extend(errors.iter().map(ToString::to_string));
        }
    }
    problems
}

/// A team's name is a DNS label, and no earlier team has it.
fn name_problem(shares: &[Share], i: usize, share: &Share, at: &str) -> Option<String> {
    let errs = names::dns1123_label(&share.name);
    if !errs.is_empty() {
        return Some(format!("{at}.name: {:?}: {}", share.name, errs.join("; ")));
    }
    let first = shares.iter().take(i).position(|s| s.name == share.name)?;
    Some(format!(
        "{at}.name: {:?} names two teams (shares[{first}] and shares[{i}])",
        share.name
    ))
}

/// A weight divides a team's dominant share: zero, negative, NaN or infinite weights would
/// put a team always first or always last, which is not a share.
fn weight_problem(weight: f64, at: &str) -> Option<String> {
    (!(weight.is_finite() && weight > 0.0))
        .then(|| format!("{at}.weight: {weight}: must be a positive, finite number"))
}

/// A namespace named by an earlier team: its Jobs would be counted against one team while
/// the file says two.
fn namespace_problems(shares: &[Share], i: usize, share: &Share, at: &str) -> Vec<String> {
    share
        .namespaces
        .names
        .iter()
        .enumerate()
        .filter_map(|(k, ns)| {
            let first = shares
                .iter()
                .take(i)
                .position(|s| s.namespaces.names.contains(ns))?;
            Some(format!(
                "{at}.namespaces.names[{k}]: {ns:?} is named by two teams (shares[{first}] and shares[{i}])"
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(shares: &str) -> Vec<String> {
        let policy: super::super::Policy =
            serde_json::from_str(&format!(r#"{{"dispatch": {{"shares": {shares}}}}}"#))
                .expect("a policy");
        problems(&policy.dispatch.shares)
    }

    #[test]
    fn the_issue_example_parses_and_is_usable() {
        let policy: super::super::Policy = serde_json::from_str(
            r#"{"dispatch": {"shares": [
                {"name": "research", "weight": 2,
                 "namespaces": {"names": ["research"], "selector": {"matchLabels": {"team": "research"}}}},
                {"name": "prod", "namespaces": {"names": ["prod-batch"]}}]}}"#,
        )
        .expect("a policy");
        let shares = &policy.dispatch.shares;
        assert_eq!(shares.len(), 2);
        assert_eq!(shares.first().map(|s| s.weight), Some(2.0));
        assert_eq!(
            shares.get(1).map(|s| s.weight),
            Some(1.0),
            "weight defaults to 1"
        );
        assert!(problems(shares).is_empty());
        assert!(policy.problems().is_empty(), "{:?}", policy.problems());
        assert!(super::super::Dispatch::default().shares.is_empty());
    }

    #[test]
    fn each_refusal_says_where_and_why() {
        let cases: &[(&str, &[&str])] = &[
            (
                r#"[{"name": "research", "namespaces": {"names": ["research"]}},
                    {"name": "ml", "namespaces": {"names": ["ml", "research"]}}]"#,
                &[
                    r#"dispatch.shares[1].namespaces.names[1]: "research" is named by two teams (shares[0] and shares[1])"#,
                ],
            ),
            (
                r#"[{"name": "a", "weight": 0}, {"name": "b", "weight": -1.5}]"#,
                &[
                    "dispatch.shares[0].weight: 0: must be a positive, finite number",
                    "dispatch.shares[1].weight: -1.5: must be a positive, finite number",
                ],
            ),
            (
                r#"[{"name": "a"}, {"name": "b"}, {"name": "a"}]"#,
                &[r#"dispatch.shares[2].name: "a" names two teams (shares[0] and shares[2])"#],
            ),
            (
                r#"[{"name": "Research"}]"#,
                &[
                    r#"dispatch.shares[0].name: "Research": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
                ],
            ),
            (
                r#"[{"name": "a", "namespaces": {"selector": {"matchExpressions": [{"key": "team", "operator": "Sometimes"}]}}}]"#,
                &[
                    r#"dispatch.shares[0].namespaces.selector.matchExpressions[0].operator: Invalid value: "Sometimes": not a valid selector operator"#,
                ],
            ),
        ];
        for (shares, expected) in cases {
            assert_eq!(parse(shares), *expected, "{shares}");
        }
    }

    #[test]
    fn a_weight_that_is_not_finite_is_refused() {
        for weight in [f64::NAN, f64::INFINITY] {
            let share = Share {
                name: "a".to_owned(),
                namespaces: NamespaceMatch::default(),
                weight,
            };
            assert_eq!(
                problems(&[share]),
                [format!(
                    "dispatch.shares[0].weight: {weight}: must be a positive, finite number"
                )]
            );
        }
    }

    #[test]
    fn a_team_named_default_and_one_naming_a_namespace_twice_are_fine() {
        assert!(
            parse(r#"[{"name": "default", "weight": 3, "namespaces": {"names": ["x", "x"]}}]"#)
                .is_empty()
        );
    }

    #[test]
    fn unknown_fields_are_refused() {
        let policy: Result<super::super::Policy, _> =
            serde_json::from_str(r#"{"dispatch": {"shares": [{"name": "a", "weigth": 2}]}}"#);
        assert!(policy.is_err());
    }
}
