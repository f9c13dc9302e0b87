//! The root package's fast tier: every test of the command line, the shipped files (deploy/,
//! the chart, the docs, the alerts and dashboards), the conformance corpus and the pictures,
//! none of which needs a control plane. One binary with a module per subject, so the program
//! is linked once (`cargo test -p jobwarden --test it`; a subject: `--test it cli::`).

#[path = "../support/mod.rs"]
mod support;

mod audit_cli;
mod audit_events;
mod check_json;
mod cli;
mod conformance;
mod deploy;
mod docs;
mod doctor_cli;
mod kubectl_plugin;
mod metrics;
mod monitoring;
mod policy_reload;
mod simulate_cli;
mod simulate_examples;
mod timeline_render;
mod workers_cli;
