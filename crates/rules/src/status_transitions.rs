//! TODO(stub being replaced)
use super::{ErrorList, JobObject};
pub fn validate(_n: &JobObject<'_>, _o: &JobObject<'_>) -> ErrorList { Vec::new() }
