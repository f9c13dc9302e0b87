//! A Job from the request's tree, as `jobwarden_rules::JobObject`: the typed views decoded
//! straight from the tree, beside the raw JSON the rules read, built from the tree when a rule
//! first reads it. That raw JSON is not the whole object but the members the rules read as raw
//! JSON (`RULES_RAW`), and for a spec update the pod template too, which it compares as raw
//! JSON; building only those from the tree keeps `metadata.managedFields` and the status out of
//! a spec update's cost. A rule that starts reading another member as raw JSON must be added
//! there (the recorded answers and the fuzz corpus, compared with the whole object, say so
//! when one is missed).
//!
//! Decoding never differs from `JobObject::parse` on the whole object: when the tree cannot be
//! read into the views, `JobObject::parse` itself runs on the object, so an error reads as it
//! always has.

use std::sync::OnceLock;

use jobwarden_rules::{JobObject, RawJson, RawOnDemand, TemplateView};
use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::json_tree::Item;

/// The members the rules read as raw JSON on a create or a status update, by part: the
/// selector and the two policies (`job_spec.rs`, `pod_failure_policy.rs`, `success_policy.rs`,
/// `rule_names.rs`) and the uncounted pods (`status_transitions.rs`).
const RULES_RAW: [(&str, &[&str]); 2] = [
    ("spec", &["selector", "podFailurePolicy", "successPolicy"]),
    ("status", &["uncountedTerminatedPods"]),
];

/// How much of the object the rules get as raw JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Raw {
    /// What a create or a status update reads.
    RulesOnly,
    /// That and `spec.template`, for a spec update.
    WithTemplate,
}

/// The typed views of a Job, waiting for the raw JSON they are read beside.
pub(crate) struct Views {
    metadata: ObjectMeta,
    spec: JobSpec,
    status: JobStatus,
    template: TemplateView,
}

impl Views {
    pub(crate) fn with_raw<'r>(self, raw: &'r RawFromTree<'_, '_>) -> JobObject<'r> {
        JobObject {
            raw: RawJson::OnDemand(raw),
            metadata: self.metadata,
            spec: self.spec,
            status: self.status,
            template: self.template,
        }
    }
}

/// The raw JSON the rules read of a Job, built from the tree only if a rule reads it: a valid
/// create without a pod failure policy never does.
pub(crate) struct RawFromTree<'t, 'a> {
    object: Item<'t, 'a>,
    raw: Raw,
    built: OnceLock<Value>,
}

impl RawOnDemand for RawFromTree<'_, '_> {
    fn raw(&self) -> &Value {
        self.built.get_or_init(|| rules_raw(self.object, self.raw))
    }
}

/// The raw JSON and the views of the Job `object`, or why it cannot be read (the message of
/// `JobObject::parse`).
pub(crate) fn decode<'t, 'a>(
    object: Item<'t, 'a>,
    raw: Raw,
) -> Result<(RawFromTree<'t, 'a>, Views), String> {
    let mut source = RawFromTree {
        object,
        raw,
        built: OnceLock::new(),
    };
    match views(object) {
        Ok(views) => Ok((source, views)),
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
            source.built = OnceLock::from(whole);
            Ok((source, views))
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

/// What the rules read as raw JSON (see the module comment).
fn rules_raw(object: Item<'_, '_>, raw: Raw) -> Value {
    let mut out = Map::new();
    for (part, members) in RULES_RAW {
        let Some(item) = object.get(part) else {
            continue;
        };
        let value = if item.is_object() {
            let template = (part == "spec" && raw == Raw::WithTemplate).then_some("template");
            let read = members
                .iter()
                .copied()
                .chain(template)
                .filter_map(|m| Some((m.to_owned(), item.get(m)?.to_value())));
            Value::Object(read.collect())
        } else {
            item.to_value()
        };
        out.insert(part.to_owned(), value);
    }
    Value::Object(out)
}
