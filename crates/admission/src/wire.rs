//! The AdmissionReview v1 wire format, as much of it as jobwarden reads and writes. The object
//! and old object are not part of `Request`: they are read from the request's JSON tree, so
//! that no field of theirs, known to this build or not, is lost. The request's strings borrow
//! from the body; only a string with escapes in it is copied.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

pub const API_VERSION: &str = "admission.k8s.io/v1";
pub const KIND: &str = "AdmissionReview";

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct GroupVersionResource<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub resource: Cow<'a, str>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo<'a> {
    #[serde(default, borrow)]
    pub username: Cow<'a, str>,
    #[serde(default, borrow)]
    pub uid: Cow<'a, str>,
    #[serde(default)]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request<'a> {
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: GroupVersionKind<'a>,
    #[serde(default, borrow)]
    pub resource: GroupVersionResource<'a>,
    #[serde(default, borrow)]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub namespace: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub operation: Cow<'a, str>,
    #[serde(default, borrow)]
    pub user_info: UserInfo<'a>,
    #[serde(default)]
    pub dry_run: Option<bool>,
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
