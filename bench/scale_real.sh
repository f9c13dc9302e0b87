#!/usr/bin/env bash
# The reconcile loop at scale on a real control plane, jobwarden beside upstream's Job
# controller: builds jobwarden in release and runs crates/envtest/examples/scale.rs, which
# runs an Indexed Job of 1,000 pods ("indexed"), one of 5,000 ("indexed-5000"), 20 Jobs x 50
# pods ("fan-out") and a burst of 1,000 one-pod Jobs ("burst") under upstream's controller and
# under jobwarden at its default and at 20 qps/burst 30, each run on a control plane of its own
# started from the kube-envtest binaries (docs/development.md: etcd, kube-apiserver with its
# audit log, and for upstream a fresh kube-controller-manager, its Job controller alone), and
# prints a Markdown table: time to the last Complete and to the last finalizer gone, leader
# step-downs, Events written and dropped, requests by verb and resource from the audit log, CPU
# and RSS growth (per pod, and of the peak) of each process.
# Arguments pick shapes, RUNS repeats them: RUNS=3 bench/scale_real.sh indexed
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin jobwarden
cargo run --release --locked -p jobwarden-envtest --example scale -- "$PWD/target/release/jobwarden" "$@"
