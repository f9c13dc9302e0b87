//! deploy/worker/ (and deploy/worker/namespaced/), the worker side of the dispatcher: on a
//! worker cluster, a ServiceAccount the dispatcher acts as, granted exactly the calls it makes
//! there (`worker_uses` in crates/doctor/src/installed/permissions.rs), cluster-wide or only in
//! the namespaces an admin names, and nothing that runs.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::deploy::*;

/// The worker side, granted in every namespace.
pub const WORKER: &str = "deploy/worker";
/// The worker side, granted in chosen namespaces by RoleBindings.
pub const WORKER_NAMESPACED: &str = "deploy/worker/namespaced";

/// What the worker side may hold: an identity and its grants, no workload and no Role of its
/// own (the one ClusterRole is bound cluster-wide, or in chosen namespaces).
const WORKER_KINDS: [&str; 5] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "RoleBinding",
];

pub struct WorkerRenders {
    pub cluster_wide: Vec<Value>,
    pub namespaced: Vec<Value>,
}

pub fn replayed_worker() -> WorkerRenders {
    WorkerRenders {
        cluster_wide: kustomize::build(&root().join(WORKER)),
        namespaced: kustomize::build(&root().join(WORKER_NAMESPACED)),
    }
}

/// The worker side's namespace: the one Namespace it creates, or (a chart, which Helm installs
/// into a namespace it does not make) the ServiceAccount's.
fn worker_namespace(objects: &[Value]) -> String {
    let accounts: Vec<&Value> = of_kind(objects, "ServiceAccount").collect();
    let [account] = accounts.as_slice() else {
        panic!("the worker side has one ServiceAccount: {}", accounts.len());
    };
    let namespace = str_at(account, "/metadata/namespace").to_owned();
    let namespaces: Vec<&str> = of_kind(objects, "Namespace").map(name).collect();
    assert!(
        namespaces.is_empty() || namespaces == [namespace.as_str()],
        "the worker side creates its ServiceAccount's namespace {namespace} and no other: \
         {namespaces:?}"
    );
    namespace
}

/// One install of the worker side: only the kinds above, everything namespaced in its own
/// namespace but the RoleBindings, and its ServiceAccount granted exactly the dispatcher's
/// calls in every namespace (`namespaces` None), or in each of `namespaces` and no other.
pub fn check_worker_side(what: &str, objects: &[Value], namespaces: Option<&[&str]>) {
    for o in objects {
        assert!(
            WORKER_KINDS.contains(&kind(o)),
            "{what}: {} {} has no place on a worker",
            kind(o),
            name(o)
        );
    }
    let ns = worker_namespace(objects);
    for o in objects
        .iter()
        .filter(|o| !kustomize::cluster_scoped(kind(o)) && kind(o) != "RoleBinding")
    {
        assert_eq!(
            o.pointer("/metadata/namespace").and_then(Value::as_str),
            Some(ns.as_str()),
            "{what}: {} {}",
            kind(o),
            name(o)
        );
    }
    let account = name(
        of_kind(objects, "ServiceAccount")
            .next()
            .expect("a ServiceAccount"),
    );
    let want: BTreeSet<Grant> = match namespaces {
        None => worker_needs(None)
            .into_iter()
            .chain(worker_room_needs(None))
            .collect(),
        Some(namespaces) => namespaces
            .iter()
            .flat_map(|n| {
                worker_needs(Some(n))
                    .into_iter()
                    .chain(worker_room_needs(Some(n)))
            })
            .collect(),
    };
    let granted = grants_by_service_account(objects, &ns);
    assert_eq!(
        granted,
        BTreeMap::from([(account.to_owned(), want)]),
        "{what}: the dispatcher's grants on a worker"
    );
    let bindings = |k| of_kind(objects, k).count();
    match namespaces {
        None => assert_eq!(
            (bindings("ClusterRoleBinding"), bindings("RoleBinding")),
            (1, 0),
            "{what}: one ClusterRoleBinding"
        ),
        Some(namespaces) => assert_eq!(
            (bindings("ClusterRoleBinding"), bindings("RoleBinding")),
            (0, namespaces.len()),
            "{what}: a RoleBinding in each chosen namespace, no ClusterRoleBinding"
        ),
    }
}

/// Both variants, as the admin applies them: rolebindings.yaml's example namespace is the one
/// the namespaced variant grants in.
pub fn check_worker_renders(w: &WorkerRenders) {
    check_worker_side(WORKER, &w.cluster_wide, None);
    check_worker_side(WORKER_NAMESPACED, &w.namespaced, Some(&["ml-training"]));
    // The same identity and role; only the bindings differ.
    let without_bindings = |objects: &[Value]| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| !kind(o).ends_with("Binding"))
            .cloned()
            .collect()
    };
    assert_eq!(
        by_identity(&without_bindings(&w.cluster_wide), false),
        by_identity(&without_bindings(&w.namespaced), false),
        "{WORKER} and {WORKER_NAMESPACED} differ in more than their bindings"
    );
}

#[test]
fn the_worker_side_grants_the_dispatcher_exactly_its_calls() {
    check_worker_renders(&replayed_worker());
}

/// The grants are the dispatcher's calls on a worker, written out here once more so that a
/// change to that list is a change a reviewer sees twice: jobs, the deletion of a taken-back
/// copy's pods, and the get of a namespace.
#[test]
fn the_dispatchers_calls_on_a_worker_are_jobs_their_pods_deletion_and_the_get_of_a_namespace() {
    let listed: BTreeSet<String> = worker_needs(None).iter().map(|a| a.to_string()).collect();
    let want: BTreeSet<String> = [
        "get jobs (batch) cluster-wide",
        "list jobs (batch) cluster-wide",
        "watch jobs (batch) cluster-wide",
        "create jobs (batch) cluster-wide",
        "patch jobs (batch) cluster-wide",
        "delete jobs (batch) cluster-wide",
        "deletecollection pods cluster-wide",
        "get namespaces cluster-wide",
    ]
    .map(str::to_owned)
    .into_iter()
    .collect();
    assert_eq!(listed, want);
}

/// Where a Job fits: the worker's Nodes and pods read and watched, cluster-wide; in one
/// namespace, its pods only (a RoleBinding grants no Nodes).
#[test]
fn where_a_job_fits_is_read_from_the_workers_nodes_and_pods() {
    let said = |ns| -> BTreeSet<String> {
        worker_room_needs(ns)
            .iter()
            .map(|a| a.to_string())
            .collect()
    };
    let want =
        |lines: &[&str]| -> BTreeSet<String> { lines.iter().map(|l| (*l).to_owned()).collect() };
    assert_eq!(
        said(None),
        want(&[
            "get nodes cluster-wide",
            "list nodes cluster-wide",
            "watch nodes cluster-wide",
            "get pods cluster-wide",
            "list pods cluster-wide",
            "watch pods cluster-wide",
        ])
    );
    assert_eq!(
        said(Some("ml-training")),
        want(&[
            "get pods in namespace ml-training",
            "list pods in namespace ml-training",
            "watch pods in namespace ml-training",
        ])
    );
}
