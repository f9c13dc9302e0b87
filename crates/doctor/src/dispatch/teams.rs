//! Where the policy names teams (`dispatch.shares`), the namespaces whose dispatched Jobs
//! belong to none of them: they share the team `default`, which is seldom what was meant (a
//! namespace left out of a list, a label missing). Pure.

use std::collections::{BTreeMap, BTreeSet};

use jobwarden_admission::policy::Dispatch;
use jobwarden_dispatcher::shares::Teams;

use super::jobs::DispatchedJob;
use crate::catalogue::NAMESPACES_IN_A_TEAM;
use crate::check::Check;

/// One check where teams are named; none where they are not.
pub fn namespaces_in_a_team(
    policy: &Dispatch,
    jobs: &Result<Vec<DispatchedJob>, String>,
    labels: &BTreeMap<String, BTreeMap<String, String>>,
) -> Option<Check> {
    if policy.shares.is_empty() {
        return None;
    }
    let jobs = match jobs {
        Ok(jobs) => jobs,
        Err(e) => {
            return Some(NAMESPACES_IN_A_TEAM.cannot_tell(
                format!("cannot list the dispatched Jobs to know their namespaces' teams: {e}"),
                "doctor reads the dispatched Jobs, which needs list on jobs (batch) in every namespace",
            ));
        }
    };
    let teams = Teams::from_policy(&policy.shares);
    let default = teams.default_team();
    // A team the policy names `default` is the one unclaimed namespaces join on purpose.
    if policy.shares.iter().any(|s| s.name == teams.name(default)) {
        return Some(NAMESPACES_IN_A_TEAM.ok(format!(
            "the policy's team {} takes every namespace no other team names",
            teams.name(default)
        )));
    }
    let unteamed: BTreeSet<&str> = jobs
        .iter()
        .map(|j| j.namespace.as_str())
        .filter(|ns| teams.team_of(ns, labels.get(*ns)) == default)
        .collect();
    if unteamed.is_empty() {
        return Some(
            NAMESPACES_IN_A_TEAM
                .ok("every namespace with dispatched Jobs belongs to a team of the policy"),
        );
    }
    let list: Vec<&str> = unteamed.into_iter().collect();
    Some(NAMESPACES_IN_A_TEAM.warning(
        format!(
            "the dispatched Jobs of {} belong to no team of the policy: they share the team default (weight 1)",
            list.join(", ")
        ),
        "name the namespaces in a team's namespaces.names, or label them to match its selector, or name a team default to give them a weight",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jobwarden_admission::policy::{NamespaceMatch, Share};
    use jobwarden_dispatcher::copy::record::OnWorkerLost;
    use jobwarden_dispatcher::placement::Named;

    use crate::check::Status;

    fn job(ns: &str) -> DispatchedJob {
        DispatchedJob {
            namespace: ns.to_owned(),
            name: "j".to_owned(),
            worker: None,
            named: Named::Any,
            lost_since: None,
            on_worker_lost: OnWorkerLost::parse(None),
        }
    }

    fn policy(teams: &[(&str, &str)]) -> Dispatch {
        Dispatch {
            shares: teams
                .iter()
                .map(|(name, ns)| Share {
                    name: (*name).to_owned(),
                    namespaces: NamespaceMatch {
                        names: vec![(*ns).to_owned()],
                        selector: None,
                    },
                    weight: 1.0,
                })
                .collect(),
            ..Dispatch::default()
        }
    }

    fn status(policy: &Dispatch, jobs: &[&str]) -> Option<(Status, String)> {
        let jobs = Ok(jobs.iter().map(|ns| job(ns)).collect());
        namespaces_in_a_team(policy, &jobs, &BTreeMap::new()).map(|c| (c.status, c.message))
    }

    #[test]
    fn no_teams_no_check() {
        assert_eq!(status(&policy(&[]), &["a"]), None);
    }

    #[test]
    fn a_namespace_in_no_team_is_warned_of_by_name() {
        let (status, message) = status(
            &policy(&[("research", "research")]),
            &["research", "scratch"],
        )
        .expect("a check");
        assert_eq!(status, Status::Warning);
        assert!(
            message.contains("scratch") && !message.contains("research,"),
            "{message}"
        );
    }

    #[test]
    fn every_namespace_in_a_team_or_a_team_named_default_is_fine() {
        let p = policy(&[("research", "research")]);
        assert_eq!(status(&p, &["research"]).map(|s| s.0), Some(Status::Ok));
        let p = policy(&[("research", "research"), ("default", "other")]);
        assert_eq!(status(&p, &["scratch"]).map(|s| s.0), Some(Status::Ok));
    }
}
