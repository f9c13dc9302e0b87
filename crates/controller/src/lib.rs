//! TODO docs
pub mod backoff;
pub mod conditions;
pub mod plan;
pub mod pod_template;
pub mod pods;
pub mod well_known;

#[cfg(test)]
mod testing;
