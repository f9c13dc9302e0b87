//! The root package's tier on real control planes (kube-envtest's binaries, docs/development.md):
//! one binary with a module per suite, so the program is linked once and the suites' waits
//! overlap (`cargo test -p jobwarden --test e2e`; one suite: `--test e2e dispatch::`). Each
//! suite keeps the control plane (or fleet) it needs to itself where its tests change what the
//! whole cluster sees (webhooks registered, API servers stopped), and shares the binary's one
//! plane otherwise, each test in a namespace of its own. Without the binaries every test
//! skips with one line.

#[path = "../support/mod.rs"]
mod support;

mod audit;
mod audit_serve;
mod controller_scale;
mod dispatch;
mod dispatch_scale;
mod disruption;
mod doctor;
mod explain;
mod image;
mod rbac;
mod webhook;
mod workers;
