//! Table tests of the rules, read like upstream's `validation_test.go`: a Job described in a line
//! with `JobBuilder`, the errors expected in the next, rendered exactly as kube-apiserver would.

mod builder;
mod create;
mod dispatch_annotations;
mod hostile;
mod pod_timing;
mod status;
mod update;

pub use builder::JobBuilder;

use crate::JobObject;

fn rendered(errs: crate::ErrorList) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

pub fn create_errors(job: &serde_json::Value) -> Vec<String> {
    let job = JobObject::parse(job).expect("test Job decodes");
    rendered(crate::validate_create(&job))
}

pub fn update_errors(new: &serde_json::Value, old: &serde_json::Value) -> Vec<String> {
    let (new, old) = (
        JobObject::parse(new).expect("new Job decodes"),
        JobObject::parse(old).expect("old Job decodes"),
    );
    rendered(crate::validate_update(&new, &old))
}

pub fn status_errors(new: &serde_json::Value, old: &serde_json::Value) -> Vec<String> {
    let (new, old) = (
        JobObject::parse(new).expect("new Job decodes"),
        JobObject::parse(old).expect("old Job decodes"),
    );
    rendered(crate::validate_status_update(&new, &old))
}
