//! The server at its boundary: real HTTPS on loopback with certificates made in the test, real
//! AdmissionReview JSON. One binary with a module per subject, so it is linked once
//! (`cargo test -p jobwarden-server --test it`; a subject: `--test it hostile::`).

#[path = "../support/mod.rs"]
mod support;

mod bad_requests;
mod body_budget;
mod conformance;
mod hostile;
mod lifecycle;
mod listen;
mod metrics_access;
mod tls_policy;
