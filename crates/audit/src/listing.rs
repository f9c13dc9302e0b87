//! Listing the Jobs of a cluster page by page (`limit`/`continue`), as raw JSON, so the audit
//! sees each Job as the API returns it and memory holds one page at a time. Thin I/O: it reads,
//! it does not judge.
//!
//! An expired continue token (410 Gone, after more than etcd's compaction interval between two
//! pages) makes kubectl fail. The apiserver's 410 carries a fresh token that lists the rest from
//! a newer snapshot; for an audit that is the better answer (every Job after the last one seen
//! is still listed once; Jobs created or deleted meanwhile may or may not appear), so the lister
//! goes on with it and says so on the page. A 410 without such a token fails, as in kubectl.

use http_body_util::{BodyExt, Limited};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta;
use kube::Client;
use kube::api::ListParams;
use kube::client::Body;
use serde::Deserialize;
use serde_json::Value;

/// Which Jobs to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListScope {
    /// One namespace, or every namespace.
    pub namespace: Option<String>,
    /// A label selector in the apiserver's syntax (`team=a,tier in (batch)`), passed through.
    pub label_selector: Option<String>,
    /// Jobs per page (`limit`); kubectl's `--chunk-size` default is 500.
    pub page_size: u32,
}

impl Default for ListScope {
    fn default() -> Self {
        ListScope {
            namespace: None,
            label_selector: None,
            page_size: 500,
        }
    }
}

/// One page of Jobs.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Value>,
    /// The apiserver's estimate of the Jobs still to come (it gives none with a label
    /// selector).
    pub remaining_item_count: Option<i64>,
    /// Set when this page comes from a fresh snapshot because the previous continue token had
    /// expired: the apiserver's 410 message.
    pub after_expiry: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    #[error("cannot reach the API server: {0}")]
    Request(#[from] kube::Error),
    #[error("cannot build the request: {0}")]
    Build(String),
    /// The apiserver said no: its status code, reason and message.
    #[error("the server answered {code} {reason}: {message}")]
    Api {
        code: u16,
        reason: String,
        message: String,
    },
    #[error("reading the response: {0}")]
    Body(String),
    #[error("the response is not a list of Jobs: {0}")]
    Decode(#[from] serde_json::Error),
}

/// An apiserver never sends more than its request size limit (3 MiB) per object; a page larger
/// than that many objects' worth is not a list, and reading it whole would only exhaust memory.
const MAX_OBJECT_BYTES: usize = 3 * 1024 * 1024;
const MAX_ERROR_BYTES: usize = 1024 * 1024;
/// Fresh tokens that expire again at once mean something is wrong; stop rather than spin.
const MAX_CONSECUTIVE_EXPIRIES: u32 = 3;

#[derive(Deserialize)]
struct JobList {
    #[serde(default)]
    metadata: ListMeta,
    #[serde(default)]
    items: Option<Vec<Value>>,
}

/// The error body of a failed request: a `metav1.Status`, or whatever a proxy sent instead.
#[derive(Deserialize, Default)]
#[serde(default)]
struct StatusBody {
    metadata: ListMeta,
    message: String,
    reason: String,
}

/// Pages through the Jobs of a [`ListScope`].
pub struct JobLister {
    client: Client,
    url_path: String,
    scope: ListScope,
    continue_token: Option<String>,
    done: bool,
}

impl JobLister {
    pub fn new(client: Client, scope: ListScope) -> Self {
        let url_path = <Job as kube::Resource>::url_path(&(), scope.namespace.as_deref());
        JobLister {
            client,
            url_path,
            scope,
            continue_token: None,
            done: false,
        }
    }

    /// The next page, or `None` once the list is complete.
    pub async fn next_page(&mut self) -> Result<Option<Page>, ListError> {
        if self.done {
            return Ok(None);
        }
        let mut after_expiry = None;
        let mut expiries = 0;
        loop {
            match self.request().await {
                Ok(list) => {
                    let token = list.metadata.continue_.filter(|t| !t.is_empty());
                    self.done = token.is_none();
                    self.continue_token = token;
                    return Ok(Some(Page {
                        items: list.items.unwrap_or_default(),
                        remaining_item_count: list.metadata.remaining_item_count,
                        after_expiry,
                    }));
                }
                Err(Failure::Expired {
                    fresh_token,
                    message,
                }) if self.continue_token.is_some() && expiries < MAX_CONSECUTIVE_EXPIRIES => {
                    let Some(token) = fresh_token else {
                        return Err(ListError::Api {
                            code: 410,
                            reason: "Expired".to_owned(),
                            message,
                        });
                    };
                    expiries += 1;
                    self.continue_token = Some(token);
                    after_expiry = Some(message);
                }
                Err(Failure::Expired { message, .. }) => {
                    return Err(ListError::Api {
                        code: 410,
                        reason: "Expired".to_owned(),
                        message,
                    });
                }
                Err(Failure::Other(e)) => return Err(e),
            }
        }
    }

    async fn request(&self) -> Result<JobList, Failure> {
        let mut params = ListParams::default().limit(self.scope.page_size);
        if let Some(selector) = self
            .scope
            .label_selector
            .as_deref()
            .filter(|s| !s.is_empty())
        {
            params = params.labels(selector);
        }
        if let Some(token) = &self.continue_token {
            params = params.continue_token(token);
        }
        let request = kube::core::Request::new(self.url_path.as_str())
            .list(&params)
            .map_err(|e| ListError::Build(e.to_string()))?;
        let response = self
            .client
            .send(request.map(Body::from))
            .await
            .map_err(ListError::from)?;
        let status = response.status();
        if status.is_success() {
            let limit = (self.scope.page_size.max(1) as usize)
                .saturating_mul(MAX_OBJECT_BYTES)
                .saturating_add(MAX_ERROR_BYTES);
            let bytes = read_body(response.into_body(), limit).await?;
            return Ok(serde_json::from_slice(&bytes).map_err(ListError::from)?);
        }
        let bytes = read_body(response.into_body(), MAX_ERROR_BYTES).await?;
        let body: StatusBody = serde_json::from_slice(&bytes).unwrap_or_else(|_| StatusBody {
            message: String::from_utf8_lossy(&bytes)
                .trim()
                .chars()
                .take(500)
                .collect(),
            ..StatusBody::default()
        });
        if status == http::StatusCode::GONE {
            return Err(Failure::Expired {
                fresh_token: body.metadata.continue_.filter(|t| !t.is_empty()),
                message: body.message,
            });
        }
        Err(Failure::Other(ListError::Api {
            code: status.as_u16(),
            reason: if body.reason.is_empty() {
                status.canonical_reason().unwrap_or("").to_owned()
            } else {
                body.reason
            },
            message: body.message,
        }))
    }
}

enum Failure {
    Expired {
        fresh_token: Option<String>,
        message: String,
    },
    Other(ListError),
}

impl From<ListError> for Failure {
    fn from(e: ListError) -> Self {
        Failure::Other(e)
    }
}

async fn read_body(body: Body, limit: usize) -> Result<Vec<u8>, ListError> {
    Limited::new(body, limit)
        .collect()
        .await
        .map(|collected| collected.to_bytes().to_vec())
        .map_err(|e| ListError::Body(e.to_string()))
}
