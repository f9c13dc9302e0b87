#!/usr/bin/env bash
# Installs what bench/run.sh needs, from package registries only:
#   oha      the load generator (crates.io): HTTP/1.1 and HTTP/2 over TLS with keep-alive, a
#            fixed request rate (-q) or as fast as it can, request bodies cycled from a file
#            (-Z, one per line), latency percentiles to p99.99 as JSON
#   openssl  for certs/make-dev-certs.sh (Debian)
#   python3  to write the bodies and read the results (on the machine already; Debian if not)
#   valgrind callgrind, for bench/profile_server.sh (Debian)
# Safe to run again: what is there already is kept.
set -euo pipefail

OHA_VERSION="${OHA_VERSION:-1.16.0}"

need_apt=()
command -v openssl >/dev/null || need_apt+=(openssl)
command -v python3 >/dev/null || need_apt+=(python3)
# bench/profile_server.sh: the server's instructions per request.
command -v valgrind >/dev/null || need_apt+=(valgrind)
# oha's TLS (aws-lc-rs) builds C code with cmake.
command -v cmake >/dev/null || need_apt+=(cmake)
if ((${#need_apt[@]})); then
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y "${need_apt[@]}"
fi

if ! command -v oha >/dev/null || ! oha --version | grep -q "$OHA_VERSION"; then
  # Compiles for a few minutes on 2 cores.
  cargo install oha --locked --version "$OHA_VERSION"
fi
oha --version
