//! A small fake of kube-apiserver's Job LIST endpoints on 127.0.0.1 over plain HTTP: the
//! cluster-wide and namespaced collections, real paging (`limit`, opaque `continue` tokens,
//! `remainingItemCount` when no selector is given), label selectors in the apiserver's syntax,
//! and the failures an audit meets (an expired continue token, with or without a fresh one; a
//! cluster-scope LIST that RBAC forbids). It records every request it serves, and keeps the
//! core/v1 Events created through it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use serde_json::{Value, json};

/// What the next request with a continue token gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    Never,
    /// 410 Gone once, with a fresh "inconsistent" token as kube-apiserver gives.
    OnceWithFreshToken,
    /// 410 Gone once, and no token to go on with.
    OnceWithoutToken,
}

#[derive(Default)]
struct Cluster {
    /// By etcd key order: `namespace/name`.
    jobs: BTreeMap<String, Value>,
    resource_version: u64,
    requests: Vec<String>,
    expiry: Option<Expiry>,
    forbid_cluster_scope: bool,
    /// `(method, path, body)` of every Event write.
    events: Vec<(String, String, Value)>,
}

pub struct FakeApiServer {
    pub url: String,
    cluster: Arc<Mutex<Cluster>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl FakeApiServer {
    /// Serves `jobs` (stored objects, with their namespace and name) until dropped.
    pub fn start(jobs: Vec<Value>) -> Self {
        let cluster = Arc::new(Mutex::new(Cluster {
            resource_version: 1000,
            ..Cluster::default()
        }));
        for job in jobs {
            insert(&mut lock(&cluster), job);
        }
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<SocketAddr>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let state = cluster.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the fake apiserver");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("a free port");
                addr_tx
                    .send(listener.local_addr().expect("an address"))
                    .expect("the test is waiting");
                let app = Router::new()
                    .route("/apis/batch/v1/jobs", get(list_all))
                    .route(
                        "/apis/batch/v1/namespaces/{namespace}/jobs",
                        get(list_namespaced),
                    )
                    .route(
                        "/api/v1/namespaces/{namespace}/events",
                        axum::routing::post(write_event),
                    )
                    .fallback(not_found)
                    .with_state(state);
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .expect("the fake apiserver serves");
            });
        });
        let addr = addr_rx.recv().expect("the fake apiserver starts");
        FakeApiServer {
            url: format!("http://{addr}"),
            cluster,
            stop: Some(stop),
        }
    }

    pub fn expire_next_continue(&self, expiry: Expiry) {
        lock(&self.cluster).expiry = Some(expiry);
    }

    pub fn forbid_cluster_scope(&self) {
        lock(&self.cluster).forbid_cluster_scope = true;
    }

    /// Adds or replaces a Job, as a write between two pages would.
    pub fn store(&self, job: Value) {
        insert(&mut lock(&self.cluster), job);
    }

    /// `(method, path, body)` of every Event written so far.
    pub fn events(&self) -> Vec<(String, String, Value)> {
        lock(&self.cluster).events.clone()
    }

    /// `path?query` of every request served so far.
    pub fn requests(&self) -> Vec<String> {
        lock(&self.cluster).requests.clone()
    }

    /// A kubeconfig for this server (no credentials), written to `path`.
    pub fn write_kubeconfig(&self, path: &std::path::Path) {
        write_kubeconfig(path, &self.url);
    }
}

/// A kubeconfig whose current context is the server at `url`, without credentials.
pub fn write_kubeconfig(path: &std::path::Path, url: &str) {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: {url}\nusers:\n- name: nobody\n  user: {{}}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: nobody\n    namespace: default\ncurrent-context: fake\n"
    );
    std::fs::write(path, text).expect("the kubeconfig is written");
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

fn lock(cluster: &Mutex<Cluster>) -> std::sync::MutexGuard<'_, Cluster> {
    cluster.lock().unwrap_or_else(|e| e.into_inner())
}

/// Stores a Job as the apiserver would: a resourceVersion, and managedFields.
fn insert(cluster: &mut Cluster, mut job: Value) {
    cluster.resource_version += 1;
    let namespace = job["metadata"]["namespace"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let name = job["metadata"]["name"].as_str().unwrap_or("").to_owned();
    job["metadata"]["resourceVersion"] = json!(cluster.resource_version.to_string());
    job["metadata"]["managedFields"] = json!([{
        "manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "batch/v1",
        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:template": {}}}
    }]);
    cluster.jobs.insert(format!("{namespace}/{name}"), job);
}

async fn list_all(State(cluster): State<Arc<Mutex<Cluster>>>, uri: Uri) -> Response {
    list(&cluster, None, &uri)
}

async fn list_namespaced(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    Path(namespace): Path<String>,
    uri: Uri,
) -> Response {
    list(&cluster, Some(namespace), &uri)
}

/// Creates (POST) or patches an Event, answering with it as the apiserver would.
async fn write_event(
    State(cluster): State<Arc<Mutex<Cluster>>>,
    method: axum::http::Method,
    uri: Uri,
    body: axum::body::Bytes,
) -> Response {
    let Ok(event) = serde_json::from_slice::<Value>(&body) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the body is not JSON",
            None,
        );
    };
    let mut cluster = lock(&cluster);
    cluster.requests.push(uri.to_string());
    cluster
        .events
        .push((method.to_string(), uri.path().to_owned(), event.clone()));
    let code = if method == axum::http::Method::POST {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    (
        code,
        [("content-type", "application/json")],
        event.to_string(),
    )
        .into_response()
}

async fn not_found(uri: Uri) -> Response {
    status(
        StatusCode::NOT_FOUND,
        "NotFound",
        &format!("the server could not find the requested resource ({uri})"),
        None,
    )
}

fn list(cluster: &Mutex<Cluster>, namespace: Option<String>, uri: &Uri) -> Response {
    let mut cluster = lock(cluster);
    cluster.requests.push(uri.to_string());
    let query: BTreeMap<String, String> =
        form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
            .into_owned()
            .collect();
    if namespace.is_none() && cluster.forbid_cluster_scope {
        return status(
            StatusCode::FORBIDDEN,
            "Forbidden",
            "jobs.batch is forbidden: User \"system:anonymous\" cannot list resource \"jobs\" in API group \"batch\" at the cluster scope",
            None,
        );
    }
    let selector = match query.get("labelSelector").map(|s| Selector::parse(s)) {
        None => None,
        Some(Ok(selector)) => Some(selector),
        Some(Err(e)) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                &format!("unable to parse requirement: {e}"),
                None,
            );
        }
    };
    let limit: usize = query.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let start = match query.get("continue") {
        None => String::new(),
        Some(token) => {
            let Some(start) = decode_token(token) else {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    "continue key is not valid: illegal base64 data",
                    None,
                );
            };
            match cluster.expiry.take() {
                Some(Expiry::OnceWithFreshToken) => {
                    let fresh = encode_token(cluster.resource_version, &start);
                    return status(StatusCode::GONE, "Expired", EXPIRED, Some(fresh));
                }
                Some(Expiry::OnceWithoutToken) => {
                    return status(StatusCode::GONE, "Expired", EXPIRED, None);
                }
                Some(Expiry::Never) | None => {}
            }
            start
        }
    };
    let matching: Vec<(&String, &Value)> = cluster
        .jobs
        .iter()
        .filter(|(key, _)| start.is_empty() || key.as_str() > start.as_str())
        .filter(|(_, job)| {
            namespace
                .as_deref()
                .is_none_or(|ns| job["metadata"]["namespace"] == ns)
        })
        .filter(|(_, job)| {
            selector
                .as_ref()
                .is_none_or(|s| s.matches(&job["metadata"]["labels"]))
        })
        .collect();
    let page_len = if limit == 0 {
        matching.len()
    } else {
        limit.min(matching.len())
    };
    let mut metadata = json!({"resourceVersion": cluster.resource_version.to_string()});
    if page_len < matching.len() {
        let last = matching[page_len - 1].0;
        metadata["continue"] = json!(encode_token(cluster.resource_version, last));
        if selector.is_none() {
            metadata["remainingItemCount"] = json!(matching.len() - page_len);
        }
    }
    let items: Vec<Value> = matching[..page_len]
        .iter()
        .map(|(_, job)| {
            // Items of a typed list carry no apiVersion or kind.
            let mut item = (*job).clone();
            if let Some(map) = item.as_object_mut() {
                map.remove("apiVersion");
                map.remove("kind");
            }
            item
        })
        .collect();
    let body =
        json!({"kind": "JobList", "apiVersion": "batch/v1", "metadata": metadata, "items": items});
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

const EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

fn status(
    code: StatusCode,
    reason: &str,
    message: &str,
    continue_token: Option<String>,
) -> Response {
    let mut metadata = json!({});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": metadata, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()
    });
    (
        code,
        [("content-type", "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn encode_token(resource_version: u64, start: &str) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": resource_version, "start": start});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token.to_string())
}

fn decode_token(token: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .ok()?;
    let value: Value = serde_json::from_slice(&bytes).ok()?;
    value["start"].as_str().map(str::to_owned)
}

/// A label selector in the apiserver's string syntax.
struct Selector(Vec<Requirement>);

enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

impl Selector {
    fn parse(text: &str) -> Result<Selector, String> {
        let mut parts = Vec::new();
        let (mut depth, mut begin) = (0, 0);
        for (i, c) in text.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&text[begin..i]);
                    begin = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&text[begin..]);
        let mut requirements = Vec::new();
        for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            let set = |rest: &str| -> Result<Vec<String>, String> {
                let inner = rest
                    .trim()
                    .strip_prefix('(')
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(|| format!("{part:?}: expected a set in parentheses"))?;
                Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
            };
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().to_owned(), v.trim().to_owned())
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                Requirement::NotIn(k.trim().to_owned(), set(rest)?)
            } else if let Some((k, rest)) = part.split_once(" in ") {
                Requirement::In(k.trim().to_owned(), set(rest)?)
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::NotExists(k.trim().to_owned())
            } else if part.contains(' ') || part.contains('(') {
                return Err(format!("{part:?}: found unexpected characters"));
            } else {
                Requirement::Exists(part.to_owned())
            };
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    fn matches(&self, labels: &Value) -> bool {
        let get = |k: &str| labels.get(k).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => get(k) == Some(v.as_str()),
            Requirement::NotEquals(k, v) => get(k) != Some(v.as_str()),
            Requirement::Exists(k) => get(k).is_some(),
            Requirement::NotExists(k) => get(k).is_none(),
            Requirement::In(k, vs) => get(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Requirement::NotIn(k, vs) => get(k).is_none_or(|l| vs.iter().all(|v| v != l)),
        })
    }
}
