//! One sync's view of a cached pod: the pod, and the pod failure policy rule it matches. It
//! stands above `pods` (what the cache holds) and `pods::failure_policy` (which rule a pod
//! matches), so that the matcher reads pods and pods know nothing of policies.

use std::ops::Deref;

use super::CachedPod;
use super::failure_policy::PolicyMatch;

/// One sync's view of a cached pod: the pod, and the pod failure policy rule it matches (only
/// `plan` knows the Job, so only it can say).
#[derive(Debug, Clone)]
pub struct PodView<'a> {
    pub pod: &'a CachedPod,
    pub policy: Option<PolicyMatch>,
    /// Holds the tracking finalizer and no removal of it is under way: its outcome is still
    /// the controller's to record. A pod whose removal is in flight counts as released.
    pub tracked: bool,
}

impl Deref for PodView<'_> {
    type Target = CachedPod;

    fn deref(&self) -> &CachedPod {
        self.pod
    }
}

impl PodView<'_> {
    /// Upstream's `countFailed`: a failure an `Ignore` rule matched is not counted.
    pub fn counts_as_failure(&self) -> bool {
        self.policy
            .as_ref()
            .is_none_or(PolicyMatch::counts_as_failure)
    }
}
