//! The requests kube-apiserver answered, counted from its audit log (one JSON event a line) by
//! the client that sent them (its User-Agent) and by verb and resource, in one namespace: the
//! one list and watch each controller makes at start, cluster-wide, is left out, and so is
//! what another workload did on the same API server.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

/// Requests by User-Agent, then by `verb resource[/subresource]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    by_agent: BTreeMap<String, BTreeMap<String, u64>>,
}

impl Requests {
    /// The requests in `namespace` that `audit_log` records as answered.
    pub fn in_namespace(audit_log: &Path, namespace: &str) -> Requests {
        let text = std::fs::read_to_string(audit_log).unwrap_or_default();
        Requests::parse(&text, namespace)
    }

    fn parse(text: &str, namespace: &str) -> Requests {
        let mut by_agent: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for line in text.lines() {
            let Ok(event) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if event["stage"] != "ResponseComplete" || event["objectRef"]["namespace"] != namespace
            {
                continue;
            }
            let agent = event["userAgent"].as_str().unwrap_or("").to_owned();
            let object = &event["objectRef"];
            let mut resource = object["resource"].as_str().unwrap_or("").to_owned();
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            let verb = event["verb"].as_str().unwrap_or("");
            *by_agent
                .entry(agent)
                .or_default()
                .entry(format!("{verb} {resource}"))
                .or_default() += 1;
        }
        Requests { by_agent }
    }

    /// The requests of the clients of `product` (the User-Agent's first word, before its
    /// version: `jobwarden`, `kube-controller-manager`) that name `component` last
    /// (`jobwarden.io/dispatcher`, `job-controller`): client-go appends a controller's name
    /// with `/`, jobwarden its component after the platform with a space. A component is not
    /// its sub-components: `jobwarden.io/dispatcher` is not `jobwarden.io/dispatcher/east`.
    pub fn of(&self, product: &str, component: &str) -> Calls {
        let mut calls = BTreeMap::new();
        for (agent, counts) in &self.by_agent {
            let from_product = agent
                .split_once('/')
                .is_some_and(|(first, _)| first == product);
            let named = agent
                .strip_suffix(component)
                .is_some_and(|before| before.ends_with(' ') || before.ends_with('/'));
            if from_product && named {
                for (call, n) in counts {
                    *calls.entry(call.clone()).or_default() += n;
                }
            }
        }
        Calls(calls)
    }
}

/// One client's requests by `verb resource`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls(pub BTreeMap<String, u64>);

impl Calls {
    pub fn total(&self) -> u64 {
        self.0.values().sum()
    }

    /// `n verb resource` each, most first, in one line: `1000 create pods, 3 patch jobs`.
    pub fn describe(&self) -> String {
        let mut calls: Vec<(&String, &u64)> = self.0.iter().collect();
        calls.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let parts: Vec<String> = calls.iter().map(|(k, v)| format!("{v} {k}")).collect();
        parts.join(", ")
    }

    /// As [`describe`](Self::describe), each count divided by `per` (requests per Job).
    pub fn describe_per(&self, per: usize) -> String {
        let per = per.max(1) as f64;
        let mut calls: Vec<(&String, &u64)> = self.0.iter().collect();
        calls.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let parts: Vec<String> = calls
            .iter()
            .map(|(k, v)| format!("{:.2} {k}", **v as f64 / per))
            .collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(agent: &str, verb: &str, resource: &str, sub: Option<&str>, ns: &str) -> String {
        let mut object = serde_json::json!({"resource": resource, "namespace": ns});
        if let Some(sub) = sub {
            object["subresource"] = serde_json::json!(sub);
        }
        serde_json::json!({"stage": "ResponseComplete", "userAgent": agent, "verb": verb,
                           "objectRef": object})
        .to_string()
    }

    #[test]
    fn counts_a_client_s_calls_in_the_namespace_by_its_component() {
        let kcm = "kube-controller-manager/v1.36.2 (linux/amd64) kubernetes/abc1234/job-controller";
        let dispatcher = "jobwarden/0.1.0 (linux/amd64) jobwarden.io/dispatcher";
        let east = "jobwarden/0.1.0 (linux/amd64) jobwarden.io/dispatcher/east";
        let controller = "jobwarden/0.1.0 (linux/amd64) jobwarden.io/job-controller";
        let text = [
            line(kcm, "create", "pods", None, "w"),
            line(kcm, "update", "jobs", Some("status"), "w"),
            line(kcm, "update", "jobs", Some("status"), "w"),
            line(kcm, "list", "pods", None, "elsewhere"),
            line(dispatcher, "patch", "jobs", Some("status"), "w"),
            line(east, "create", "jobs", None, "w"),
            line(controller, "create", "pods", None, "w"),
            r#"{"stage": "RequestReceived", "userAgent": "jobwarden/0.1.0 (linux/amd64) jobwarden.io/dispatcher", "verb": "patch", "objectRef": {"resource": "jobs", "namespace": "w"}}"#.to_owned(),
            "not json".to_owned(),
        ]
        .join("\n");
        let requests = Requests::parse(&text, "w");
        let upstream = requests.of("kube-controller-manager", "job-controller");
        assert_eq!(upstream.total(), 3);
        assert_eq!(upstream.describe(), "2 update jobs/status, 1 create pods");
        assert_eq!(
            upstream.describe_per(2),
            "1.00 update jobs/status, 0.50 create pods"
        );
        let management = requests.of("jobwarden", "jobwarden.io/dispatcher");
        assert_eq!(management.describe(), "1 patch jobs/status");
        assert_eq!(
            requests
                .of("jobwarden", "jobwarden.io/dispatcher/east")
                .describe(),
            "1 create jobs"
        );
        // jobwarden's Job controller is not kube-controller-manager's.
        assert_eq!(
            requests
                .of("jobwarden", "jobwarden.io/job-controller")
                .total(),
            1
        );
    }
}
