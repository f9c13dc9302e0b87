//! The AdmissionReview v1 wire format, as much of it as jobwarden reads and writes. The object
//! and old object stay raw JSON: patches are computed on them so no unknown field is lost.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub resource: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub uid: String,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    #[serde(default)]
    pub kind: GroupVersionKind,
    #[serde(default)]
    pub resource: GroupVersionResource,
    #[serde(default)]
    pub sub_resource: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub user_info: UserInfo,
    /// Moved out of the envelope before the rest is decoded (`Request::from_value`), so the
    /// object trees are never copied.
    #[serde(skip)]
    pub object: Option<Value>,
    #[serde(skip)]
    pub old_object: Option<Value>,
    #[serde(default)]
    pub dry_run: Option<bool>,
}

impl Request {
    /// Decodes a request, moving `object` and `oldObject` into place rather than rebuilding
    /// them: a Job can be megabytes, and the review reads it as it came.
    pub fn from_value(mut request: Value) -> Result<Request, serde_json::Error> {
        let mut take = |key: &str| {
            request
                .get_mut(key)
                .map(Value::take)
                .filter(|v| !v.is_null())
        };
        let (object, old_object) = (take("object"), take("oldObject"));
        let mut decoded = Request::deserialize(request)?;
        decoded.object = object;
        decoded.old_object = old_object;
        Ok(decoded)
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewOut<'a> {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub response: Response<'a>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response<'a> {
    pub uid: &'a str,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// Base64 of the JSON Patch, as the API wants it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// A `metav1.Status` as kube-apiserver builds it for a rejected object.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Status {
    pub metadata: Empty,
    pub status: &'static str,
    pub message: String,
    pub reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    pub code: u16,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Empty {}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StatusDetails {
    pub name: String,
    pub group: &'static str,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Cause {
    pub reason: &'static str,
    pub message: String,
    pub field: String,
}
