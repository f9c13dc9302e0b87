//! The webhook as a real kube-apiserver calls it: the built binary's `serve` on a loopback
//! port, registered with the configurations jobwarden generates (rules, match conditions,
//! namespace selectors, failure policies), with `clientConfig.url` in place of the Service and a
//! CA made in the test.
//!
//! * `reviews`: the API server calls it on Job create, update and status update, and what
//!   kubectl prints is what docs/operations.md shows;
//! * `dispatch`: a dispatch namespace's plain Jobs stored with the dispatcher's name, and the
//!   dispatcher's own writes of its annotations and of its Jobs' status admitted;
//! * `reach`: what reaches it, and what an outage blocks: with nothing serving, plain Jobs
//!   live their whole life and guarded ones are refused; with a replica serving, a plain Job
//!   costs no call; `serve` says when the registered configurations miss what its policy needs.
//!
//! jobwarden runs under the ServiceAccount and RBAC `kubectl kustomize deploy/` installs, and
//! the API server must have refused it nothing.
//!
//! It runs on the test binary's own control plane (`jobwarden-envtest`, with
//! kube-controller-manager's Job controller), and is skipped with one line when the binaries
//! are absent. With `JOBWARDEN_E2E_KUBECONFIG` (another cluster) it is skipped too: a cluster
//! elsewhere cannot call a server on this machine's loopback.

mod dispatch;
mod reach;
mod reviews;
mod served;
