#!/usr/bin/env bash
# Where a request's instructions go inside the running server: the release `jobwarden serve`
# under callgrind, sent N keep-alive HTTPS requests by oha with one conformance case as the
# body; prints the instructions per request in all (less the server's start and stop, measured
# by a run with no request), in the review and in the log line. Instruction counts do not
# drift with the machine's load the way requests per second do (BENCHMARKS.md).
#
#   bench/setup.sh                                  # once: oha, openssl, valgrind
#   bench/profile_server.sh [ENDPOINT] [CASE] [N]   # validate|mutate|floor, 027-, 3000
#   JOBWARDEN_BIN=/path/to/old/jobwarden bench/profile_server.sh   # another build, to compare
#
# "floor" is the transport floor of bench/run.sh: the same POST as text/plain with no body,
# answered 415 before any body is read. Takes a minute or two (valgrind runs the server ~50x
# slower); loopback only; everything it starts it stops.
set -euo pipefail

endpoint="${1:-validate}"
case_prefix="${2:-027-}"
requests="${3:-3000}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="$here/out/profile"
target="${CARGO_TARGET_DIR:-$root/target}"
PORT="${PORT:-18543}"
METRICS_PORT="${METRICS_PORT:-18180}"

for tool in oha valgrind callgrind_annotate python3; do
  command -v "$tool" >/dev/null || { echo "$tool is missing: run bench/setup.sh" >&2; exit 2; }
done
mkdir -p "$out"
bin="${JOBWARDEN_BIN:-$target/release/jobwarden}"
[[ -n ${JOBWARDEN_BIN:-} ]] || (cd "$root" && cargo build --release -p jobwarden)
"$root/certs/make-dev-certs.sh" "$out/certs" >/dev/null
python3 - "$root/tests/conformance/cases" "$case_prefix" "$out/body.json" <<'EOF'
import json, pathlib, sys
cases, prefix, body = sys.argv[1:]
case = next(p for p in sorted(pathlib.Path(cases).glob("*.json")) if p.name.startswith(prefix))
review = json.loads(case.read_text())["review"]
pathlib.Path(body).write_text(json.dumps(review, separators=(",", ":")))
print(f"body: {case.name}, {len(pathlib.Path(body).read_bytes())} bytes")
EOF

# profile NAME COUNT: the server under callgrind, COUNT requests, then SIGTERM; prints the
# callgrind file's path.
profile() {
  local name=$1 count=$2
  KUBECONFIG=/nonexistent RUST_LOG=info valgrind --tool=callgrind \
    --callgrind-out-file="$out/$name.callgrind" "$bin" serve \
    --tls-cert "$out/certs/tls.crt" --tls-key "$out/certs/tls.key" \
    --listen "127.0.0.1:$PORT" --metrics-listen "127.0.0.1:$METRICS_PORT" \
    --no-controller --log-format json >"$out/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    curl -fsS "http://127.0.0.1:$METRICS_PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  if ((count > 0)); then
    local flags=(-n "$count" -c 4 --no-tui -m POST --cacert "$out/certs/ca.crt")
    case $endpoint in
      floor) flags+=(-T text/plain) ;;
      *) flags+=(-T application/json -D "$out/body.json") ;;
    esac
    local path=$endpoint
    [[ $endpoint == floor ]] && path=validate
    oha "${flags[@]}" "https://localhost:$PORT/$path" >"$out/$name.oha.txt"
  fi
  kill -TERM "$pid"
  wait "$pid" || true
}

# instructions FILE [FUNCTION]: the program's total, or FUNCTION's inclusive count.
instructions() {
  local file=$1 function=${2:-}
  if [[ -z $function ]]; then
    # No early exit in awk: callgrind_annotate would fail on the closed pipe.
    callgrind_annotate "$file" | awk '/PROGRAM TOTALS/ && !n++ {gsub(",", "", $1); print $1}'
  else
    callgrind_annotate --inclusive=yes "$file" |
      awk -v f="$function" 'index($0, f " [") && !n++ {gsub(",", "", $1); print $1}'
  fi
}

profile idle 0
profile "$endpoint" "$requests"
answered=$(grep -c '"message":"review"\|"message":"admission request refused"' "$out/$endpoint.log" || true)
total=$(( $(instructions "$out/$endpoint.callgrind") - $(instructions "$out/idle.callgrind") ))
review=$(instructions "$out/$endpoint.callgrind" "jobwarden_admission::Reviewer::review")
log=$(instructions "$out/$endpoint.callgrind" "tracing_core::dispatcher::get_default")
echo "$endpoint, $answered requests answered of $requests sent; instructions per request:"
echo "  all       $((total / answered))"
echo "  review    $((${review:-0} / answered))"
echo "  log line  $((${log:-0} / answered))   (every log event on the request path)"
