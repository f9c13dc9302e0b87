//! What every jobwarden controller stands on and none owns: leader election on a Lease, the
//! kube clients with their request budgets, the Job watch cache's view of a Job, and Event
//! writing. The Job controller and the dispatcher both import it; it imports neither, and knows
//! no controller's decisions.
//!
//! # Public API
//!
//! ```no_run
//! # async fn serve(kube_config: kube::Config) -> Result<(), Box<dyn std::error::Error>> {
//! use jobwarden_runtime::Election;
//! use jobwarden_runtime::client::{ControllerClients, RateLimit};
//! use jobwarden_runtime::leader::{LeaseSettings, Term};
//! use jobwarden_runtime::leader::metrics::LeaderMetrics;
//! let mut registry = prometheus_client::registry::Registry::default();
//! let lease = LeaseSettings {
//!     namespace: "jobwarden-system".to_owned(),
//!     name: "jobwarden-job-controller".to_owned(),
//!     identity: "jobwarden-7d9f-abcde".to_owned(),
//!     lease_duration: std::time::Duration::from_secs(15),
//!     renew_deadline: std::time::Duration::from_secs(10),
//!     retry_period: std::time::Duration::from_secs(2),
//!     annotations: Default::default(),
//!     published: None,
//! };
//! let limit = RateLimit { qps: 50.0, burst: 100 };
//! let clients = ControllerClients::new(kube_config, "jobwarden.io/job-controller", Some(limit), lease.renew_deadline)?;
//! let election = Election {
//!     client: clients.leader_election.clone(),
//!     lease,
//!     component: "jobwarden.io/job-controller".to_owned(),
//!     answers: clients.answers.clone(),
//!     metrics: LeaderMetrics::register(registry.sub_registry_with_prefix("jobwarden_controller")),
//! };
//! let shutdown = async { let _ = tokio::signal::ctrl_c().await; };
//! election
//!     .run(shutdown, |term: Term| async move {
//!         // Each controller's task, joined: every write checks `term.leading` first, and
//!         // each task stops when `term.stop` resolves.
//!         term.stop.await;
//!     })
//!     .await?;
//! # Ok(())
//! # }
//! ```
//!
//! * [`Election`]: one Lease, and in each term of leadership the task it is given; the
//!   `LeaderElection` Events on the Lease and the leadership metrics
//!   ([`leader::metrics::LeaderMetrics`]) on the way. [`leader`] holds the election itself
//!   (client-go's semantics) and the [`leader::Term`] a task is handed.
//! * [`client`]: clients that name their component, a work client within a request budget of
//!   its own, Event writes after the rest ([`client::work_client`], one per API server), and a
//!   controller's pair of work and Lease clients ([`client::ControllerClients`]).
//! * [`events`]: Event writing for any controller: the outbox a sync leaves its Events in
//!   ([`events::outbox::EventOutbox`]: bounded, repeats merged, written apart from the syncs
//!   or inline, counted in [`events::metrics::EventMetrics`]) through the controller's
//!   [`events::EventWriter`], and the per-Job spam filter ([`events::limiter::EventLimiter`]).
//! * [`job_cache::CachedJob`]: a Job as a watch cache keeps it, its JSON text.
//! * [`error_chain`]: an error with its causes, on one line.
//!
//! # Layout
//!
//! From the ground up; a module imports only those on its own layer or below.
//!
//! 1. `error_chain`; `job_cache`; `events/` (the `EventWriter` trait; `limiter`, `queue`,
//!    `metrics`, and over them `outbox`); `client/` (the clients, and `request_budget`, the
//!    pure token bucket with two priorities their budget keeps); `leader/` (the election, its
//!    `tests`; `events`, who leads said on the Lease; `metrics`, who leads counted, over
//!    `client`'s `Answers`).
//! 2. `election`: the election with its Events and metrics, running a task each term.

pub mod client;
mod election;
mod error_chain;
pub mod events;
pub mod job_cache;
pub mod leader;
pub mod wakes;

pub use election::Election;
pub use error_chain::error_chain;
