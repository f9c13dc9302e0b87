//! A Job from the request's tree, as `jobwarden_rules::JobObject`: the typed views decoded
//! straight from the tree, beside the raw JSON the rules read. For a create or a status update
//! that raw JSON is not the whole object but the parts the rules read as raw JSON, built from
//! the tree: `spec` without its pod template (the selector and the failure and success
//! policies are read there) and `status.uncountedTerminatedPods`. A rule that starts reading
//! anything else as raw JSON on a create or a status update must be added to `rules_raw`. A
//! spec update gets the whole object (its template is compared as raw JSON).
//!
//! Decoding never differs from `JobObject::parse` on the whole object: when the tree cannot be
//! read into the views, `JobObject::parse` itself runs on the object, so an error reads as it
//! always has.

use jobwarden_rules::{JobObject, TemplateView};
use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::json_tree::Item;

/// How much of the object the rules get as raw JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Raw {
    /// What a create or a status update reads.
    RulesOnly,
    /// The whole object.
    Whole,
}

/// The typed views of a Job, waiting for the raw JSON they are read beside.
pub(crate) struct Views {
    metadata: ObjectMeta,
    spec: JobSpec,
    status: JobStatus,
    template: TemplateView,
}

impl Views {
    pub(crate) fn with_raw(self, raw: &Value) -> JobObject<'_> {
        JobObject {
            raw,
            metadata: self.metadata,
            spec: self.spec,
            status: self.status,
            template: self.template,
        }
    }
}

/// The raw JSON and the views of the Job `object`, or why it cannot be read (the message of
/// `JobObject::parse`).
pub(crate) fn decode(object: Item<'_, '_>, raw: Raw) -> Result<(Value, Views), String> {
    match views(object) {
        Ok(views) => {
            let raw = match raw {
                Raw::RulesOnly => rules_raw(object),
                Raw::Whole => object.to_value(),
            };
            Ok((raw, views))
        }
        Err(_) => {
            let whole = object.to_value();
            let views = match JobObject::parse(&whole) {
                Ok(job) => Views {
                    metadata: job.metadata,
                    spec: job.spec,
                    status: job.status,
                    template: job.template,
                },
                Err(e) => return Err(e.to_string()),
            };
            Ok((whole, views))
        }
    }
}

/// The views, read as `JobObject::parse` reads them: each part on its own, without
/// `metadata.managedFields` and `spec.template` (the template only through `TemplateView`).
fn views(object: Item<'_, '_>) -> Result<Views, serde_json::Error> {
    if !object.is_object() {
        return Err(serde::de::Error::custom("not an object"));
    }
    let spec = object.get("spec");
    let template = match spec.and_then(|s| s.get_set("template")) {
        None => TemplateView::default(),
        Some(t) => TemplateView::deserialize(t)?,
    };
    Ok(Views {
        metadata: part(object.get("metadata"), "managedFields")?,
        spec: part(spec, "template")?,
        status: part(object.get("status"), "")?,
        template,
    })
}

fn part<T: Default + for<'de> Deserialize<'de>>(
    item: Option<Item<'_, '_>>,
    skip: &'static str,
) -> Result<T, serde_json::Error> {
    match item {
        None => Ok(T::default()),
        Some(item) if item.is_null() => Ok(T::default()),
        Some(item) if item.is_object() => T::deserialize(item.without(skip)),
        Some(item) => T::deserialize(item),
    }
}

/// What the rules read as raw JSON on a create or a status update (see the module comment).
fn rules_raw(object: Item<'_, '_>) -> Value {
    let mut raw = Map::new();
    match object.get("spec") {
        Some(spec) if spec.is_object() => {
            let members = spec
                .members()
                .filter(|(k, _)| *k != "template")
                .map(|(k, v)| (k.to_owned(), v.to_value()));
            raw.insert("spec".to_owned(), Value::Object(members.collect()));
        }
        Some(spec) => {
            raw.insert("spec".to_owned(), spec.to_value());
        }
        None => {}
    }
    match object.get("status") {
        Some(status) if status.is_object() => {
            let members = status
                .get("uncountedTerminatedPods")
                .map(|u| ("uncountedTerminatedPods".to_owned(), u.to_value()));
            raw.insert(
                "status".to_owned(),
                Value::Object(members.into_iter().collect()),
            );
        }
        Some(status) => {
            raw.insert("status".to_owned(), status.to_value());
        }
        None => {}
    }
    Value::Object(raw)
}
