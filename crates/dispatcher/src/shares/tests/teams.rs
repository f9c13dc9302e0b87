use std::collections::BTreeMap;

use jobwarden_admission::policy::{NamespaceMatch, Share};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::builders::share;
use crate::shares::Teams;

fn selecting(name: &str, names: &[&str], team_label: &str) -> Share {
    Share {
        namespaces: NamespaceMatch {
            selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([("team".to_owned(), team_label.to_owned())])),
                ..LabelSelector::default()
            }),
            ..share(name, 1.0, names).namespaces
        },
        ..share(name, 1.0, names)
    }
}

fn labels(team: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("team".to_owned(), team.to_owned())])
}

#[test]
fn names_beat_selectors_then_selectors_go_in_the_policys_order() {
    let teams = Teams::from_policy(&[
        selecting("prod", &["prod-batch"], "ml"),
        selecting("research", &["research"], "ml"),
    ]);
    let of = |ns: &str, team: &str| teams.name(teams.team_of(ns, Some(&labels(team))));
    // "research" is named by research, though prod (first) selects its labels.
    assert_eq!(of("research", "ml"), "research");
    // Selected by both: the first in the policy.
    assert_eq!(of("notebooks", "ml"), "prod");
    assert_eq!(of("notebooks", "web"), "default");
    // Labels not known: only names count.
    assert_eq!(teams.name(teams.team_of("notebooks", None)), "default");
    assert_eq!(teams.name(teams.team_of("prod-batch", None)), "prod");
}

#[test]
fn the_default_team_is_last_and_weighs_one() {
    let teams = Teams::from_policy(&[share("research", 2.0, &["research"])]);
    let names: Vec<&str> = teams.iter().map(|t| teams.name(t)).collect();
    assert_eq!(names, ["research", "default"]);
    let default = teams.default_team();
    assert_eq!(teams.team_of("anything", None), default);
    assert_eq!(teams.weight(default), 1.0);
    assert_eq!(teams.weight(teams.team_of("research", None)), 2.0);
    let none = Teams::default();
    assert_eq!(none.len(), 1);
    assert_eq!(none.name(none.team_of("ml", None)), "default");
}

#[test]
fn a_team_named_default_is_that_team_in_its_place() {
    let teams = Teams::from_policy(&[
        share("default", 3.0, &["sandbox"]),
        share("prod", 1.0, &["prod-batch"]),
    ]);
    let names: Vec<&str> = teams.iter().map(|t| teams.name(t)).collect();
    assert_eq!(names, ["default", "prod"], "no second default");
    let default = teams.default_team();
    assert_eq!(teams.team_of("sandbox", None), default);
    assert_eq!(teams.team_of("unclaimed", None), default);
    assert_eq!(teams.weight(default), 3.0);
}

#[test]
fn what_the_policy_refuses_cannot_break_the_teams() {
    let teams = Teams::from_policy(&[
        share("a", 0.0, &["x"]),
        share("a", 5.0, &["y"]),
        share("b", f64::NAN, &["x"]),
    ]);
    let names: Vec<&str> = teams.iter().map(|t| teams.name(t)).collect();
    assert_eq!(names, ["a", "b", "default"], "the first of a name wins");
    let a = teams.find("a").unwrap();
    assert_eq!(teams.weight(a), 1.0);
    assert_eq!(teams.team_of("x", None), a, "the first team naming it");
    assert_eq!(teams.team_of("y", None), teams.default_team());
    assert_eq!(teams.weight(teams.find("b").unwrap()), 1.0);
}
