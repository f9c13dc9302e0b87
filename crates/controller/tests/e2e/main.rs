//! End-to-end tests of the reconcile loop against a real cluster, playing the kubelet the way
//! upstream's integration tests do: pods are never scheduled (an unknown `schedulerName`), and
//! the test patches their phase and container exit codes itself.
//!
//! Run them with a kubeconfig for a disposable cluster, Kubernetes 1.32 or newer (for
//! `spec.managedBy`), e.g. a kind cluster:
//!
//! ```sh
//! kind create cluster --name jobwarden-e2e
//! kind get kubeconfig --name jobwarden-e2e > /tmp/e2e.kubeconfig
//! JOBWARDEN_E2E_KUBECONFIG=/tmp/e2e.kubeconfig cargo test -p jobwarden-controller --test e2e
//! ```
//!
//! Without `JOBWARDEN_E2E_KUBECONFIG` every test prints a skip message and passes. Each test
//! makes its own namespace and runs its own controller under its own controller name, so the
//! tests run in parallel without touching each other's Jobs; the namespaces are deleted at the
//! end.

mod adoption;
mod delegated_job;
mod leader_lease;
mod lifecycle;
mod policies;
mod support;
