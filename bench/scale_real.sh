#!/usr/bin/env bash
# The reconcile loop at scale on a real control plane, jobwarden beside upstream's Job
# controller: builds jobwarden in release and runs crates/envtest/examples/scale.rs, which
# starts etcd, kube-apiserver (audit log on) and kube-controller-manager (its Job controller
# alone) from the kube-envtest binaries (docs/development.md), runs an Indexed Job of 1,000
# pods and 20 Jobs x 50 pods under each controller in turn, and prints a Markdown table:
# requests by verb and resource from the audit log, CPU and RSS growth of each process.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin jobwarden
cargo run --release --locked -p jobwarden-envtest --example scale -- "$PWD/target/release/jobwarden" "$@"
