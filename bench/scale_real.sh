#!/usr/bin/env bash
# The reconcile loop at scale on a real control plane, jobwarden beside upstream's Job
# controller: builds jobwarden in release and runs crates/envtest/examples/scale.rs, which
# starts etcd, kube-apiserver (audit log on) and kube-controller-manager (its Job controller
# alone) from the kube-envtest binaries (docs/development.md), runs an Indexed Job of 1,000
# pods ("indexed"), 20 Jobs x 50 pods ("fan-out") and a burst of 1,000 one-pod Jobs ("burst")
# under upstream's controller and under jobwarden at its default and at 20 qps/burst 30, and
# prints a Markdown table: time to the last Complete, Events written and dropped, requests by
# verb and resource from the audit log, CPU and RSS growth of each process.
# Arguments pick shapes: bench/scale_real.sh burst
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin jobwarden
cargo run --release --locked -p jobwarden-envtest --example scale -- "$PWD/target/release/jobwarden" "$@"
