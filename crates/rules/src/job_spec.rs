//! TODO(stub being replaced)
use super::{ErrorList, JobObject};
pub fn validate_job(_job: &JobObject<'_>, _prefixed: bool) -> ErrorList { Vec::new() }
pub fn old_has_prefixed_labels(_old: &JobObject<'_>) -> bool { true }
