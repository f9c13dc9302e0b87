#!/usr/bin/env bash
# A worker's room on a real control plane (issue 48): builds jobwarden in release and runs
# crates/envtest/examples/room_memory.rs, which starts a management plane and one worker,
# runs jobwarden dispatching to it, lays out Nodes and pods bound to them on the worker in
# steps (500 nodes + 5,000 pods, then 2,000 + 20,000, then 5,000 + 50,000 in all) and prints
# jobwarden's resident memory per node and per pod its view of the worker holds. The harness
# itself is built in the dev profile: it is not what is measured, and a release build of it
# would add minutes. Arguments are the steps' totals, NODESxPODS:
#   bench/room_memory_real.sh 10000x0 10000x50000   # Nodes alone, then pods alone
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked --bin jobwarden
cargo run --locked -p jobwarden-envtest --example room_memory -- \
  "$PWD/target/release/jobwarden" "$@"
