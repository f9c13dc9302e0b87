//! The image the chart runs, `jobwarden:dev` as `image/build.sh` (the README's "Build the
//! image" line) left it in the local container store, run as a pod runs it.
//!
//! * `contents`: what is in it: a numeric non-root user, exactly the binary and
//!   /etc/nsswitch.conf, nothing writable, no shell, a static binary (no `NEEDED`, no
//!   interpreter) carrying cargo-auditable's dependency list, the SBOM inside the image naming
//!   every package that list names, the size budget, the Dockerfile's labels matching
//!   Cargo.toml, and the labels naming this commit, its time and the binary's digest;
//! * `locked_down`: run as the chart runs it (read-only root, every capability dropped, no new
//!   privileges, uid 65532): `--version` with no network, and `serve --dev` answering
//!   `/healthz` and an AdmissionReview over HTTPS;
//! * `in_cluster`: on the real kube-apiserver of the e2e suites, started as the kubelet starts
//!   deploy/'s pod: in-cluster configuration (the ServiceAccount's token, the API server's CA
//!   and the namespace under /var/run/secrets/kubernetes.io/serviceaccount, the
//!   `KUBERNETES_SERVICE_*` variables), deploy/'s arguments, policy and security context, host
//!   networking for the loopback API server. It leads, runs delegated Jobs to the end, its
//!   webhook denies a bad `jobwarden.io/` annotation, and the API server refused it nothing;
//! * `names`: names resolve in the image as a pod resolves them, /etc/hosts before DNS, with
//!   the static glibc's own resolver.
//!
//! The container engine and what it needs here come from `image/engine.sh`, as the build
//! script's do. The tests read the image, never the checkout's target/: an image whose
//! revision label names another commit than these tests were built from (another checkout's,
//! an older build) is stale. Without an engine, without the image, or with a stale one, the
//! suite prints one `skipped: ...` line (naming both revisions and `image/build.sh`) and each
//! test passes; in CI (`CI` set, as `.ci/run` runs, having built the image first) that is a
//! failure instead. The in-cluster tests also need the control plane's binaries
//! (`jobwarden-envtest`) and skip as the other e2e suites do. Containers are removed when a
//! test ends, however it ends.

mod contents;
mod engine;
mod in_cluster;
mod locked_down;
mod names;
mod pod;
