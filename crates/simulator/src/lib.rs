//! `jobwarden simulate`: a Job's story told offline. The controller's own sync (the
//! `JobController` and `plan` the reconcile loop runs, through the fake cluster's `Replica`)
//! runs against the fake cluster's in-memory API server, a kubelet ends the pods as a scenario
//! says, and a virtual clock jumps from one moment something can happen to the next. It never
//! sleeps, never touches a real cluster, and stops at clear limits whatever the Job and
//! scenario say. It stands above `jobwarden-controller` and `jobwarden-fake-cluster`; neither
//! imports it.
//!
//! * [`scenario`]: what becomes of each pod (`3=exit:42`, `0@1=disrupted,after:30s`).
//! * [`simulate`]: plays a scenario against a Job manifest and returns the [`Story`].
//! * [`text::render`]: the story for people; `Story` serializes to JSON for scripts.

pub mod scenario;
pub mod story;
pub mod text;
pub mod timeline;

mod book;
mod observer;
mod run;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::Duration;

pub use run::{CLOCK_START, simulate};
pub use scenario::{Scenario, ScenarioError};
pub use story::Story;

/// Where a simulation gives up, so that no Job and no scenario can run it for ever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Virtual time since the Job was created.
    pub max_time: Duration,
    /// How many times the clock may move.
    pub max_steps: usize,
    /// How many pods the controller may create.
    pub max_pods: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_time: Duration::from_secs(24 * 3600),
            max_steps: 10_000,
            max_pods: 10_000,
        }
    }
}

/// Why there is no story to tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimulationError {
    /// `spec.managedBy` names a controller that is neither jobwarden's nor the built-in one:
    /// its behaviour is unknown.
    ForeignController(String),
    /// The API server would refuse the Job (kube-apiserver's message).
    Invalid(String),
    /// The scenario names what this Job cannot have.
    Scenario(ScenarioError),
}

impl fmt::Display for SimulationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimulationError::ForeignController(name) => write!(
                f,
                "spec.managedBy is {name:?}: that controller runs the Job, and only jobwarden's ({}) and the built-in one ({}) can be simulated",
                jobwarden_rules::well_known::JOBWARDEN_CONTROLLER_NAME,
                jobwarden_rules::well_known::BUILT_IN_CONTROLLER_NAME,
            ),
            SimulationError::Invalid(message) => write!(f, "the Job is invalid: {message}"),
            SimulationError::Scenario(e) => write!(f, "the scenario does not fit the Job: {e}"),
        }
    }
}

impl std::error::Error for SimulationError {}
