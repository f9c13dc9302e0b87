//! One permission, as RBAC grants it and an access review asks about it: a verb on a resource
//! (of a group, perhaps in one namespace, perhaps on one named object), or a verb on a URL
//! path. The install's roles expand into these, jobwarden's uses are listed as these, and the
//! shell asks the API server about each.

use std::fmt;

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Access {
    Resource {
        /// `None`: cluster-wide (every namespace, or a cluster-scoped resource).
        namespace: Option<String>,
        /// `""` for the core group.
        group: String,
        /// With its subresource: `jobs/status`.
        resource: String,
        /// `None`: any object of the resource.
        name: Option<String>,
        verb: String,
    },
    /// A non-resource URL (`/metrics`).
    Path { path: String, verb: String },
}

impl Access {
    pub fn resource(
        namespace: Option<&str>,
        group: &str,
        resource: &str,
        name: Option<&str>,
        verb: &str,
    ) -> Access {
        Access::Resource {
            namespace: namespace.map(str::to_owned),
            group: group.to_owned(),
            resource: resource.to_owned(),
            name: name.map(str::to_owned),
            verb: verb.to_owned(),
        }
    }

    /// The same permission for each verb.
    pub fn verbs(
        namespace: Option<&str>,
        group: &str,
        resource: &str,
        name: Option<&str>,
        verbs: &[&str],
    ) -> Vec<Access> {
        verbs
            .iter()
            .map(|v| Access::resource(namespace, group, resource, name, v))
            .collect()
    }

    /// The `resourceAttributes` or `nonResourceAttributes` of an access review's spec.
    pub fn review_attributes(&self) -> (&'static str, Value) {
        match self {
            Access::Resource {
                namespace,
                group,
                resource,
                name,
                verb,
            } => {
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, s)) => (r, Some(s)),
                    None => (resource.as_str(), None),
                };
                let mut attributes = serde_json::json!({
                    "verb": verb, "group": group, "resource": resource,
                });
                for (key, value) in [
                    ("subresource", subresource),
                    ("namespace", namespace.as_deref()),
                    ("name", name.as_deref()),
                ] {
                    if let Some(value) = value {
                        attributes[key] = Value::from(value);
                    }
                }
                ("resourceAttributes", attributes)
            }
            Access::Path { path, verb } => (
                "nonResourceAttributes",
                serde_json::json!({"verb": verb, "path": path}),
            ),
        }
    }
}

/// `create pods in namespace x`, `patch jobs/status (batch) cluster-wide`, `get leases
/// (coordination.k8s.io) named jobwarden-job-controller in namespace x`, `get /metrics`: as
/// kube-apiserver's refusals name them.
impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Access::Resource {
                namespace,
                group,
                resource,
                name,
                verb,
            } => {
                write!(f, "{verb} {resource}")?;
                if !group.is_empty() {
                    write!(f, " ({group})")?;
                }
                if let Some(name) = name {
                    write!(f, " named {name}")?;
                }
                match namespace {
                    Some(ns) => write!(f, " in namespace {ns}"),
                    None => write!(f, " cluster-wide"),
                }
            }
            Access::Path { path, verb } => write!(f, "{verb} {path}"),
        }
    }
}

/// Every permission an RBAC role's `rules` grant, expanded one verb, resource and name at a
/// time; `namespace` is the Role's (or a RoleBinding's), `None` for a ClusterRole bound
/// cluster-wide. Malformed rules grant nothing.
/// Core cluster-scoped resources that no namespace holds.
const NODE_LIKE: [&str; 2] = ["nodes", "persistentvolumes"];

pub fn granted_by(rules: &Value, namespace: Option<&str>) -> Vec<Access> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    let mut out = Vec::new();
    for rule in rules.as_array().into_iter().flatten() {
        let verbs = strings(&rule["verbs"]);
        for path in strings(&rule["nonResourceURLs"]) {
            out.extend(verbs.iter().map(|verb| Access::Path {
                path: path.clone(),
                verb: verb.clone(),
            }));
        }
        let names = strings(&rule["resourceNames"]);
        let names: Vec<Option<&str>> = if names.is_empty() {
            vec![None]
        } else {
            names.iter().map(|n| Some(n.as_str())).collect()
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                // A ClusterRole bound in a namespace grants nothing of a cluster-scoped kind
                // (the worker's role names `nodes`, which a RoleBinding leaves out). Not
                // `namespaces`: its get in namespace X is the get of X itself.
                if namespace.is_some() && group.is_empty() && NODE_LIKE.contains(&resource.as_str())
                {
                    continue;
                }
                for name in &names {
                    for verb in &verbs {
                        out.push(Access::resource(namespace, &group, &resource, *name, verb));
                    }
                }
            }
        }
    }
    out
}

/// Up to `shown` items, `, `-joined, then how many more: a check's message stays one line.
pub fn listed<T: fmt::Display>(items: &[T], shown: usize) -> String {
    let mut text = items
        .iter()
        .take(shown)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > shown {
        text.push_str(&format!(" and {} more", items.len() - shown));
    }
    text
}
