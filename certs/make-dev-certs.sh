#!/usr/bin/env bash
# Makes a local CA and a serving certificate signed by it, for running `jobwarden serve`
# outside a cluster and for tests. Writes, in OUT_DIR (default: certs/out, git-ignored):
#   ca.crt, ca.key     the CA (kept across runs, so clients keep trusting it)
#   tls.crt, tls.key   the serving certificate and key, named as in a cert-manager Secret
#
#   certs/make-dev-certs.sh [OUT_DIR]            # CA if missing, then a new serving cert
#   certs/make-dev-certs.sh --rotate [OUT_DIR]   # new serving cert under the same CA,
#                                                # published atomically (try hot reload)
#
#   jobwarden serve --tls-cert certs/out/tls.crt --tls-key certs/out/tls.key
#   curl --cacert certs/out/ca.crt https://localhost:8443/validate ...
#
# Extra names for the certificate: JOBWARDEN_CERT_NAMES="host1 host2" (DNS names).
set -euo pipefail

rotate=false
if [[ "${1:-}" == "--rotate" ]]; then
  rotate=true
  shift
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/out}"
mkdir -p "$out"
umask 077

command -v openssl >/dev/null || { echo "openssl is required" >&2; exit 2; }

if [[ ! -s "$out/ca.crt" || ! -s "$out/ca.key" ]]; then
  openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
    -keyout "$out/ca.key" -out "$out/ca.crt" -days 3650 -sha256 \
    -subj "/CN=jobwarden development CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  chmod 644 "$out/ca.crt"
  echo "made a new CA: $out/ca.crt"
elif ! $rotate; then
  echo "keeping the CA in $out/ca.crt"
fi

# localhost for local runs; the Service names of deploy/ for in-cluster experiments.
names=(localhost jobwarden jobwarden.jobwarden-system.svc jobwarden.jobwarden-system.svc.cluster.local)
# shellcheck disable=SC2206 # word splitting is the point
names+=(${JOBWARDEN_CERT_NAMES:-})
san="IP:127.0.0.1,IP:::1"
for name in "${names[@]}"; do san+=",DNS:$name"; done

work="$(mktemp -d "$out/.new.XXXXXX")"
trap 'rm -rf "$work"' EXIT
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -keyout "$work/tls.key" -out "$work/tls.csr" -subj "/CN=jobwarden" 2>/dev/null
openssl x509 -req -in "$work/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
  -CAcreateserial -out "$work/tls.crt" -days 90 -sha256 \
  -extfile <(printf '%s\n' \
    "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth" \
    "subjectAltName=$san") 2>/dev/null
# The key is PKCS#8 already (openssl 3); the server reads PKCS#8, SEC1 and PKCS#1 alike.
chmod 600 "$work/tls.key"
chmod 644 "$work/tls.crt"

# Each rename is atomic, the pair is not: a server polling in between may read the new key
# with the old certificate. It keeps serving the old certificate and takes the new pair up
# at its next poll, without reporting an error (a mismatch must persist to be one).
mv -f "$work/tls.key" "$out/tls.key"
mv -f "$work/tls.crt" "$out/tls.crt"
rm -f "$out/ca.srl"
echo "serving certificate: $out/tls.crt (key $out/tls.key), for: ${names[*]} 127.0.0.1 ::1"
