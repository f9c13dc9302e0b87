#!/usr/bin/env bash
# The dispatcher at scale on real control planes, beside one cluster's kube-controller-manager
# (issue 44): builds jobwarden in release and runs crates/envtest/examples/dispatch_scale.rs,
# which runs a burst of 1,000 one-pod Jobs ("burst"), ten 100-pod Indexed Jobs
# ("indexed-10x100") and one 5,000-pod Indexed Job ("indexed-5000") twice each, on control
# planes started fresh for each run: created in one worker-like plane and run by its
# kube-controller-manager alone, then created on a management plane and dispatched by
# jobwarden over two workers. Prints Markdown tables: time until every Job shows how it
# ended and the ratio, the mirror's lag (from outside and jobwarden's metric), requests per
# Job to each cluster by verb and resource, copies per worker, leader losses, CPU and memory.
# Arguments pick shapes, RUNS repeats them, flags after -- go to `jobwarden serve`:
#   RUNS=3 bench/dispatch_scale_real.sh burst
#   bench/dispatch_scale_real.sh burst -- --dispatch-concurrent-syncs 20
#   SHARES=1 bench/dispatch_scale_real.sh burst   # with dispatch.shares set
#   WORKERS=3 bench/dispatch_scale_real.sh burst  # over three workers (default two)
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin jobwarden
cargo run --release --locked -p jobwarden-envtest --example dispatch_scale -- "$PWD/target/release/jobwarden" "$@"
