//! TODO docs
pub mod backoff;
pub mod conditions;
pub mod executor;
pub mod plan;
pub mod pod_template;
pub mod pods;
pub mod status_patch;
pub mod well_known;

#[cfg(test)]
mod crash_tests;
#[cfg(test)]
mod fake_cluster;
#[cfg(test)]
mod testing;
