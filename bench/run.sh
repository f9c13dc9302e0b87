#!/usr/bin/env bash
# The webhook under load, reproducibly: starts the release `jobwarden serve` on loopback with a
# certificate from certs/make-dev-certs.sh, drives it with oha over HTTPS with keep-alive, and
# writes every figure to bench/out/ (results.md is the table; *.json are oha's raw reports).
#
#   bench/setup.sh          # once: installs oha (crates.io) and openssl
#   bench/run.sh            # about 4 minutes on 2 cores, load generator included
#
# Phases, each bounded in time (DURATION seconds, default 10):
#   floor     per protocol, the transport floor: the same POST as text/plain with no body, which
#             the server answers 415 (TLS, HTTP, routing, limits, metrics and a log line; no
#             body, no review). Saturation runs are judged against it: results.md gives
#             review throughput as a share of the floor measured in the same run, a figure that
#             does not drift with the machine the way requests per second do
#   load      {HTTP/1.1, HTTP/2} x {/validate, /mutate} x {2,000 req/s fixed rate on the whole
#             mix, saturation on the typical Jobs}, and saturation on the 64 KiB worst case
#   rotation  the certificate files are replaced 3 times while oha runs without keep-alive
#             (a new TLS handshake per request): every request must succeed, 3 reloads counted
#   sigterm   SIGTERM while oha runs at 2,000 req/s: every request the server took up must be
#             answered in full (oha's 200s equal the reviews in the server's log), and the
#             process must exit 0. Requests the server never took up (sent on a connection it
#             was closing, or on streams after its GOAWAY) are reported, not failed: no byte of
#             theirs was processed, and clients retry them
# Exits non-zero when a check fails. Loopback only; everything it starts it stops.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$here/out"
cases="${CASES:-$root/tests/conformance/cases}"
DURATION="${DURATION:-10}"
PORT="${PORT:-18443}"
METRICS_PORT="${METRICS_PORT:-18080}"
target="${CARGO_TARGET_DIR:-$root/target}"
bin="$target/release/jobwarden"

command -v oha >/dev/null || { echo "oha is missing: run bench/setup.sh" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out"/*.json "$out"/*.mem "$out"/results.md

(cd "$root" && cargo build --release -p jobwarden)
"$root/certs/make-dev-certs.sh" "$out/certs" >/dev/null
python3 "$here/bodies.py" "$cases" "$out" | tee "$out/bodies.txt"

server_pid=""
stop_server() {
  if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=""
}
trap stop_server EXIT

start_server() {
  # Production logging (one JSON line per review at info) to a file, as a pod's stdout would.
  KUBECONFIG=/nonexistent RUST_LOG=info "$bin" serve \
    --tls-cert "$out/certs/tls.crt" --tls-key "$out/certs/tls.key" --tls-reload-seconds 1 \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --no-controller --log-format json "$@" >"$out/server.log" 2>&1 &
  server_pid=$!
  for _ in $(seq 100); do
    if curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null 2>&1; then return; fi
    sleep 0.1
  done
  echo "the server did not become ready; see $out/server.log" >&2
  exit 1
}

# Peak resident memory since the last reset, in KiB; then reset the mark (clear_refs 5).
peak_memory() {
  local hwm
  hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$server_pid/status")
  echo 5 >"/proc/$server_pid/clear_refs" 2>/dev/null || true
  echo "$hwm"
}

# oha NAME PROTO(h1|h2) RATE(0 = saturation) ENDPOINT BODIES [extra oha flags...]
bench() {
  local name=$1 proto=$2 rate=$3 endpoint=$4 bodies=$5
  shift 5
  # -w: requests still open when the time is up are waited for, not counted as errors.
  local flags=(-z "${DURATION}s" -w --no-tui --output-format json -m POST -T "${CONTENT_TYPE:-application/json}"
    --cacert "$out/certs/ca.crt")
  # "none": no body at all (the floor runs).
  if [[ $bodies != none ]]; then flags+=(-Z "$out/$bodies.lines"); fi
  if [[ $proto == h2 ]]; then
    # One connection per core of the load generator, many streams each.
    flags+=(--http2 -c 2 -p 32)
  else
    # At a fixed rate, a few keep-alive connections, as kube-apiserver keeps to a webhook;
    # at saturation, enough to keep both cores busy.
    if ((rate > 0)); then flags+=(-c 4); else flags+=(-c 32); fi
  fi
  if ((rate > 0)); then
    # Latency measured from when each request was due, not when it was sent, so a stall is
    # not hidden by the generator waiting on it (coordinated omission).
    flags+=(-q "$rate" --latency-correction)
  fi
  peak_memory >/dev/null
  echo "== $name: $proto $endpoint ${rate:-max} req/s, $bodies bodies, ${DURATION}s"
  oha "${flags[@]}" "$@" "https://localhost:$PORT/$endpoint" >"$out/$name.json"
  peak_memory >"$out/$name.mem"
  python3 "$here/report.py" --one "$out/$name.json"
}

# ---- load -------------------------------------------------------------------------------
start_server
peak_memory >/dev/null
echo "idle: $(awk '/^VmRSS:/ {print $2}' "/proc/$server_pid/status") KiB resident" | tee "$out/idle.txt"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) at the start, $(nproc) cores" | tee "$out/load.txt"
for proto in h1 h2; do
  # The floor beside the saturation runs it is compared with, before and after them, so a
  # change in the machine's load during the phase shows as two different floors.
  CONTENT_TYPE=text/plain bench "floor-$proto" "$proto" 0 validate none
  for endpoint in validate mutate; do
    bench "fixed-$proto-$endpoint" "$proto" 2000 "$endpoint" mix
    bench "max-$proto-$endpoint" "$proto" 0 "$endpoint" typical
  done
  CONTENT_TYPE=text/plain bench "floor-$proto-after" "$proto" 0 validate none
  bench "worst-$proto-validate" "$proto" 0 validate worst
done

# ---- rotation under load -------------------------------------------------------------------
reloads() {
  curl -fsS "http://127.0.0.1:$METRICS_PORT/metrics" |
    awk '/^jobwarden_tls_certificate_reloads_total/ {print $2}'
}
before=$(reloads)
(
  for _ in 1 2 3; do
    sleep 3
    "$root/certs/make-dev-certs.sh" --rotate "$out/certs" >/dev/null
  done
) &
rotator=$!
DURATION=12 bench rotation-h1 h1 300 validate typical --disable-keepalive
wait "$rotator"
after=$(reloads)
echo "certificate reloads during the run: $((after - before))" | tee "$out/rotation.txt"
stop_server

# ---- SIGTERM under load --------------------------------------------------------------------
for proto in h1 h2; do
  start_server --shutdown-delay-seconds 2 --shutdown-timeout-seconds 10
  pid=$server_pid
  (
    sleep 3
    date +%s.%N >"$out/sigterm-$proto.sent"
    kill -TERM "$pid"
  ) &
  DURATION=8 bench "sigterm-$proto" "$proto" 2000 validate typical || true
  status=0
  wait "$pid" || status=$?
  server_pid=""
  echo "$status" >"$out/sigterm-$proto.exit"
  # One log line per review the server answered: the check that none of them was lost.
  cp "$out/server.log" "$out/sigterm-$proto.log"
done

python3 "$here/report.py" --all "$out" | tee "$out/results.md"
