//! One worker cluster, checked as the dispatcher meets it: its kubeconfig found and accepted by
//! the dispatcher's own judge (`jobwarden_dispatcher::worker::credentials::check`), its API server
//! answering with those credentials, the credentials taken (a SelfSubjectReview; a 401 is a
//! token expired or not the worker's), every call the dispatcher makes there allowed
//! (SelfSubjectAccessReviews as the dispatcher), and the namespaces its Jobs need there. Each
//! check that cannot be made because an earlier one failed is said once, skipped. Pure.

use jobwarden_admission::policy::Worker;
use jobwarden_dispatcher::worker::credentials::{self, Refusal};
use kube::config::Kubeconfig;

use crate::access::{Access, listed};
use crate::answer::{Reply, refusal};
use crate::catalogue::{
    WORKER_ANSWERS, WORKER_CREDENTIALS, WORKER_KUBECONFIG, WORKER_NAMESPACES, WORKER_PERMISSIONS,
};
use crate::check::Check;
use crate::installed::permissions::worker_uses;
use crate::pre::Allowed;

/// A worker's kubeconfig as doctor found it, where the policy says it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigRead {
    /// The worker is this cluster (`local: true`): there is no kubeconfig.
    Local,
    /// Read from `from` (`Secret jobwarden-system/jobwarden-worker-east`).
    Read { from: String, text: String },
    /// There is none where the policy says (no Secret, no key): why.
    Missing { from: String, why: String },
    /// It could not be read (the caller may not, a file in jobwarden's container doctor cannot
    /// see): why.
    Unreadable { from: String, why: String },
}

/// Whether the dispatcher's identity on a worker sees a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NamespaceFound {
    Exists,
    Missing,
    /// It may not get it: the dispatcher takes a refusal for "no such namespace".
    NotAllowed,
    Unknown(String),
}

/// A namespace the worker must have, the Jobs that need it, and what the worker says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceSeen {
    pub name: String,
    /// `namespace/name` of the Jobs placed there or waiting for a worker.
    pub jobs: Vec<String>,
    pub found: NamespaceFound,
}

/// What the worker answered, asked with its accepted kubeconfig.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    /// The kubeconfig's server.
    pub server: String,
    /// `GET /version`.
    pub version: Reply,
    /// A SelfSubjectReview.
    pub whoami: Reply,
    /// SelfSubjectAccessReviews of [`reviews`].
    pub permissions: Vec<(Access, Allowed)>,
    /// SelfSubjectAccessReviews of what it reads for where a Job fits
    /// (`worker_room_uses(None)`: Nodes and pods, cluster-wide).
    pub room: Vec<(Access, Allowed)>,
    /// The namespaces its Jobs need there, or why they are not known (the Jobs could not be
    /// listed).
    pub namespaces: Result<Vec<NamespaceSeen>, String>,
}

/// One configured worker, as read.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerObserved {
    pub name: String,
    pub kubeconfig: KubeconfigRead,
    /// With a kubeconfig the dispatcher accepts: what the worker answered, or why no client
    /// could be made from it.
    pub reached: Option<Result<Reached, String>>,
}

/// The access reviews of what the dispatcher does on `worker`: in each namespace the policy
/// gives it by name (its roles may be granted there only), else cluster-wide. The `get` of a
/// namespace is reviewed as kube-apiserver authorizes `GET /api/v1/namespaces/X`: a request in
/// namespace X for the object X.
pub fn reviews(worker: &Worker) -> Vec<Access> {
    let ns = &worker.namespaces;
    if ns.selector.is_some() || ns.names.is_empty() {
        return worker_uses(None);
    }
    ns.names
        .iter()
        .flat_map(|n| {
            worker_uses(Some(n))
                .into_iter()
                .map(move |access| match access {
                    Access::Resource {
                        group,
                        resource,
                        verb,
                        namespace,
                        ..
                    } if resource == "namespaces" => Access::Resource {
                        name: namespace.clone(),
                        namespace,
                        group,
                        resource,
                        verb,
                    },
                    other => other,
                })
        })
        .collect()
}

/// The kubeconfig the dispatcher would use, or its refusal; `None` when there is none to judge.
pub fn accepted(read: &KubeconfigRead) -> Option<Result<Kubeconfig, Refusal>> {
    match read {
        KubeconfigRead::Read { text, .. } => Some(credentials::check(text)),
        _ => None,
    }
}

fn server_of(config: &Kubeconfig) -> &str {
    config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.as_deref())
        .unwrap_or("?")
}

fn credential_of(config: &Kubeconfig) -> &'static str {
    let token = config
        .auth_infos
        .first()
        .and_then(|u| u.auth_info.as_ref())
        .is_some_and(|u| u.token.is_some());
    if token {
        "a token"
    } else {
        "a client certificate"
    }
}

/// Where a kubeconfig is put right, for a hint.
fn put_in(read: &KubeconfigRead) -> String {
    match read {
        KubeconfigRead::Read { from, .. }
        | KubeconfigRead::Missing { from, .. }
        | KubeconfigRead::Unreadable { from, .. } => from.clone(),
        KubeconfigRead::Local => "the worker's kubeconfig".to_owned(),
    }
}

/// The checks of one worker, in order, each naming it.
pub fn checks(w: &WorkerObserved, jobwarden_namespace: &str) -> Vec<Check> {
    let name = &w.name;
    let (kubeconfig, config) = match kubeconfig(w, jobwarden_namespace) {
        Ok(accepted) => accepted,
        Err(out) => return out,
    };
    let mut out = vec![kubeconfig];
    let Some(Ok(reached)) = &w.reached else {
        return out;
    };
    let server = if reached.server.is_empty() {
        server_of(&config).to_owned()
    } else {
        reached.server.clone()
    };
    match answers(name, &server, &reached.version) {
        Ok(check) => out.push(check),
        Err(last) => {
            out.extend(last);
            return out;
        }
    }
    match credentials(w, &reached.whoami) {
        Ok(check) => out.push(check),
        Err(last) => {
            out.extend(last);
            return out;
        }
    }
    out.push(permissions(name, &reached.permissions));
    out.push(namespaces(name, &reached.namespaces));
    out.push(crate::dispatch::room::readable(name, &reached.room));
    out
}

/// The kubeconfig check, with the kubeconfig the dispatcher accepts; `Err`: every check said
/// of a worker that can be checked no further (its kubeconfig local, missing, unreadable,
/// refused, or no client made from it).
fn kubeconfig(
    w: &WorkerObserved,
    jobwarden_namespace: &str,
) -> Result<(Check, Kubeconfig), Vec<Check>> {
    let name = &w.name;
    match (&w.kubeconfig, accepted(&w.kubeconfig)) {
        (KubeconfigRead::Local, _) => Err(vec![WORKER_KUBECONFIG.ok(format!(
            "worker {name} is this cluster (local: true): jobwarden's own Job controller runs its Jobs in place"
        ))]),
        (KubeconfigRead::Missing { why, .. }, _) => Err(skipped_after(
            vec![WORKER_KUBECONFIG.error(
                format!("worker {name}: {why}; the dispatcher never uses it"),
                format!(
                    "make its kubeconfig (docs/dispatch.md#the-workers-kubeconfig) and give it to the dispatcher: `kubectl -n {jobwarden_namespace} create secret generic SECRET --from-file=kubeconfig=FILE`, SECRET as the policy's kubeconfigSecret names it"
                ),
            )],
            name,
            "it has no kubeconfig",
        )),
        (KubeconfigRead::Unreadable { from, why }, _) => Err(skipped_after(
            vec![WORKER_KUBECONFIG.cannot_tell(
                format!("cannot read worker {name}'s kubeconfig ({from}): {why}"),
                format!(
                    "doctor reads a worker's kubeconfig Secret with your credentials (get on secrets in namespace {jobwarden_namespace}); a kubeconfigFile it finds through the Secret jobwarden's Deployment mounts there"
                ),
            )],
            name,
            "its kubeconfig could not be read",
        )),
        (KubeconfigRead::Read { from, .. }, Some(Err(refused))) => Err(skipped_after(
            vec![WORKER_KUBECONFIG.error(
                format!(
                    "worker {name}: the dispatcher refuses the kubeconfig in {from} ({}): {}; it never uses the worker",
                    refused.reason.label(),
                    refused.message
                ),
                "hold the credentials in the kubeconfig itself (its server, certificate-authority-data and a token, or client-certificate-data and client-key-data): the dispatcher runs no plugin and reads no file",
            )],
            name,
            "its kubeconfig is refused",
        )),
        (KubeconfigRead::Read { from, .. }, Some(Ok(config))) => {
            if let Some(Err(e)) = &w.reached {
                return Err(skipped_after(
                    vec![WORKER_KUBECONFIG.error(
                        format!(
                            "worker {name}: the kubeconfig in {from} passes the dispatcher's checks, but no client can be made from it: {e}"
                        ),
                        "check its certificate-authority-data (base64 of the worker's CA in PEM) and server URL",
                    )],
                    name,
                    "no client can be made from its kubeconfig",
                ));
            }
            let check = WORKER_KUBECONFIG.ok(format!(
                "worker {name}: {from} holds a kubeconfig the dispatcher accepts (server {}, {})",
                server_of(&config),
                credential_of(&config)
            ));
            Ok((check, config))
        }
        (KubeconfigRead::Read { .. }, None) => Err(Vec::new()),
    }
}

/// Whether the worker's API server answers `GET /version`; `Err`: the checks said when it does
/// not.
fn answers(name: &str, server: &str, version: &Reply) -> Result<Check, Vec<Check>> {
    match version {
        Err(e) => Err(vec![
            WORKER_ANSWERS.error(
                format!("worker {name}: {server} does not answer: {e}"),
                "the dispatcher counts a worker that does not answer as lost, and its Jobs follow jobwarden.io/on-worker-lost after dispatch.workerLostSeconds: is its API server up, and reachable at that address (from jobwarden's pods as from here)?",
            ),
            WORKER_CREDENTIALS.skipped(format!(
                "worker {name}: credentials, permissions and namespaces not checked: it does not answer"
            )),
        ]),
        Ok(answer) => {
            let version = answer.body["gitVersion"]
                .as_str()
                .filter(|_| answer.succeeded());
            Ok(WORKER_ANSWERS.ok(match version {
                Some(v) => format!("worker {name}: {server} answers (Kubernetes {v})"),
                None => format!("worker {name}: {server} answers ({})", answer.code),
            }))
        }
    }
}

/// Whether the worker takes the kubeconfig's credentials (its SelfSubjectReview); `Err`: the
/// checks said when it refuses them.
fn credentials(w: &WorkerObserved, whoami: &Reply) -> Result<Check, Vec<Check>> {
    let name = &w.name;
    match whoami {
        Ok(answer) if answer.succeeded() => {
            let user = answer.body["status"]["userInfo"]["username"]
                .as_str()
                .unwrap_or("?");
            Ok(WORKER_CREDENTIALS.ok(format!(
                "worker {name} takes the kubeconfig's credentials for {user}"
            )))
        }
        Ok(answer) if answer.code == 401 => Err(vec![
            WORKER_CREDENTIALS.error(
                format!(
                    "worker {name} refuses the kubeconfig's credentials as unauthorized (401): its token expired, or is not one of that cluster's; the dispatcher counts the worker lost"
                ),
                format!(
                    "make a new token on the worker (`kubectl --context {name} -n jobwarden-worker create token jobwarden-dispatcher --duration=720h`) and put it in {}: the dispatcher takes a changed Secret up without a restart",
                    put_in(&w.kubeconfig)
                ),
            ),
            WORKER_PERMISSIONS.skipped(format!(
                "worker {name}: permissions and namespaces not checked: it refuses the credentials"
            )),
        ]),
        Ok(answer) => Ok(WORKER_CREDENTIALS.cannot_tell(
            format!(
                "worker {name} did not say whom it takes the credentials for: {}",
                refusal(answer)
            ),
            "a SelfSubjectReview (authentication.k8s.io/v1, Kubernetes 1.28 and later) tells",
        )),
        Err(e) => Ok(WORKER_CREDENTIALS.cannot_tell(
            format!("worker {name} did not say whom it takes the credentials for: {e}"),
            "a SelfSubjectReview (authentication.k8s.io/v1) tells; try again",
        )),
    }
}

/// The one line said for the checks an earlier failure leaves unmade.
fn skipped_after(mut out: Vec<Check>, name: &str, why: &str) -> Vec<Check> {
    out.push(WORKER_ANSWERS.skipped(format!(
        "worker {name}: its API server, credentials, permissions and namespaces not checked: {why}"
    )));
    out
}

fn permissions(name: &str, answers: &[(Access, Allowed)]) -> Check {
    let denied: Vec<&Access> = answers
        .iter()
        .filter(|(_, a)| matches!(a, Ok(false)))
        .map(|(access, _)| access)
        .collect();
    if !denied.is_empty() {
        return WORKER_PERMISSIONS.error(
            format!(
                "worker {name}: the dispatcher may not {}",
                listed(&denied, 4)
            ),
            format!(
                "install the worker side there: `kubectl --context {name} apply -k deploy/worker/` (or deploy/worker/namespaced/, its RoleBinding in each namespace the policy gives the worker)"
            ),
        );
    }
    if let Some((access, Err(e))) = answers.iter().find(|(_, a)| a.is_err()) {
        return WORKER_PERMISSIONS.cannot_tell(
            format!("worker {name}: cannot tell whether the dispatcher may {access}: {e}"),
            "doctor asks with SelfSubjectAccessReviews as the dispatcher, which every authenticated user may create",
        );
    }
    let mut scopes: Vec<String> = answers
        .iter()
        .filter_map(|(a, _)| match a {
            Access::Resource { namespace, .. } => namespace.clone(),
            Access::Path { .. } => None,
        })
        .collect();
    scopes.dedup();
    let scope = if scopes.is_empty() {
        "in every namespace".to_owned()
    } else {
        format!("in namespace{} {}", plural(scopes.len()), scopes.join(", "))
    };
    WORKER_PERMISSIONS.ok(format!(
        "worker {name}: the dispatcher may make all {} calls it makes there ({scope})",
        answers.len()
    ))
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `ns (a/j1, a/j2)`, for the namespaces of one kind.
fn with_jobs(seen: &[&NamespaceSeen]) -> String {
    let each: Vec<String> = seen
        .iter()
        .map(|n| format!("{} ({})", n.name, listed(&n.jobs, 3)))
        .collect();
    each.join(", ")
}

fn namespaces(name: &str, seen: &Result<Vec<NamespaceSeen>, String>) -> Check {
    let seen = match seen {
        Ok(seen) => seen,
        Err(e) => {
            return WORKER_NAMESPACES.cannot_tell(
                format!("worker {name}: which namespaces its Jobs need is not known: {e}"),
                "doctor finds them among the dispatched Jobs, which needs list on jobs (batch) in every namespace",
            );
        }
    };
    if seen.is_empty() {
        return WORKER_NAMESPACES.ok(format!(
            "worker {name}: no Job is placed there or waits for a worker it may take"
        ));
    }
    let of = |f: fn(&NamespaceFound) -> bool| -> Vec<&NamespaceSeen> {
        seen.iter().filter(|n| f(&n.found)).collect()
    };
    let not_allowed = of(|f| *f == NamespaceFound::NotAllowed);
    if !not_allowed.is_empty() {
        return WORKER_NAMESPACES.error(
            format!(
                "worker {name}: the dispatcher may not get namespace{} {}, so it takes {} for missing",
                plural(not_allowed.len()),
                with_jobs(&not_allowed),
                if not_allowed.len() == 1 { "it" } else { "them" }
            ),
            format!(
                "grant the worker's role in each namespace its Jobs use (deploy/worker/namespaced/'s RoleBinding there), or cluster-wide (deploy/worker/); the policy's namespaces for worker {name} keep other namespaces' Jobs away from it"
            ),
        );
    }
    let missing = of(|f| *f == NamespaceFound::Missing);
    if !missing.is_empty() {
        return WORKER_NAMESPACES.warning(
            format!(
                "worker {name} has no namespace {}: those Jobs go to another worker, or wait",
                with_jobs(&missing)
            ),
            format!(
                "create {} there (`kubectl --context {name} create namespace NAME`), or give worker {name} other namespaces in the policy",
                if missing.len() == 1 { "it" } else { "them" }
            ),
        );
    }
    if let Some(n) = seen
        .iter()
        .find(|n| matches!(n.found, NamespaceFound::Unknown(_)))
    {
        let why = match &n.found {
            NamespaceFound::Unknown(why) => why.as_str(),
            _ => "",
        };
        return WORKER_NAMESPACES.cannot_tell(
            format!(
                "worker {name}: cannot tell whether it has namespace {}: {why}",
                n.name
            ),
            "try again: doctor asks the worker as the dispatcher",
        );
    }
    let jobs: usize = seen.iter().map(|n| n.jobs.len()).sum();
    WORKER_NAMESPACES.ok(format!(
        "worker {name} has the namespace{} of the {jobs} Job{} placed there or waiting for a worker: {}",
        plural(seen.len()),
        plural(jobs),
        seen.iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
