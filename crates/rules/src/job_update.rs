//! TODO(stub being replaced)
use super::{ErrorList, JobObject};
pub fn validate_spec_update(_n: &JobObject<'_>, _o: &JobObject<'_>) -> ErrorList { Vec::new() }
pub fn validate_jobwarden_update(_n: &JobObject<'_>, _o: &JobObject<'_>) -> ErrorList { Vec::new() }
