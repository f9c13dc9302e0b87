//! The dispatcher on real clusters (issue 42): a management kube-apiserver and two workers,
//! each with upstream's kube-controller-manager, jobwarden run as deploy/ installs it and
//! configured only through its policy file, the worker side installed as deploy/worker/ makes
//! it. Every test also holds that no Job ever had two copies at once (`env::Census`), and the
//! last that neither jobwarden nor its worker identity was refused anything.
//!
//! Skipped with one line without the control-plane binaries (docs/development.md).

mod env;
mod fleet_changes;
mod lost;
mod placement;
mod scenarios;
mod seen;
mod shares;
