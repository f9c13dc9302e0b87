//! End-to-end tests of the reconcile loop against a real API server, playing the kubelet the
//! way upstream's integration tests do: pods are never scheduled (an unknown `schedulerName`),
//! and the test patches their phase and container exit codes itself.
//!
//! They run on the test binary's own control plane (`jobwarden-envtest`: etcd and
//! kube-apiserver v1.36.2, and kube-controller-manager for the differential test), started
//! from `JOBWARDEN_ENVTEST_BIN` or kube-envtest's cache folder (docs/development.md), or on the
//! cluster `JOBWARDEN_E2E_KUBECONFIG` names. Without either, every test prints one skip line
//! and passes.
//!
//! * `lifecycle` and `policies`: jobwarden alone. Each test makes its own namespace and runs
//!   its own controller under its own controller name, so the tests run in parallel without
//!   touching each other's Jobs.
//! * `differential`: every scenario run by upstream's Job controller and by jobwarden side by
//!   side, compared.

mod adoption;
mod differential;
mod leader_lease;
mod lifecycle;
mod pod_timing;
mod policies;
mod support;
