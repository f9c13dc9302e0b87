//! TODO(stub being replaced)
use super::{ErrorList, JobObject};
pub fn validate(_j: &JobObject<'_>) -> ErrorList { Vec::new() }
