#!/usr/bin/env bash
# Registers jobwarden's webhook configurations (this directory) for the first time, and only
# once jobwarden is serving: the Certificate is Ready, the webhook Deployment has rolled out,
# and the Service has a ready endpoint. The configurations are created with the CA already in
# their caBundle, so kube-apiserver can verify jobwarden from its very first call; waiting for
# cert-manager's CA injector instead would leave a moment (or, with the injector down, an
# outage) in which two fail-closed webhooks refuse every Job write.
#
# The configurations are this directory's webhooks.yaml, which `jobwarden webhooks` prints for
# the default policy; with --config they are what it prints for that policy file instead (the
# one the Deployment mounts): each webhook is sent only what jobwarden can judge under it.
#
# Later changes: kubectl apply -k deploy/webhooks/ (the CA injector keeps caBundle filled, and
# since no applied configuration ever holds caBundle, no apply removes it).
#
# Usage: deploy/webhooks/register.sh [--timeout DURATION] [--config FILE] [--print [--ca-file FILE]]
#   --timeout   how long to wait for the Certificate and the rollout (default 5m)
#   --config    the policy file; needs the jobwarden binary ($JOBWARDEN, else on the PATH)
#   --print     print the configurations that would be created, and create nothing; with
#               --ca-file the CA is read from FILE (PEM) and no cluster is needed
set -euo pipefail

namespace=jobwarden-system
service=jobwarden
deployment=jobwarden
certificate=jobwarden-tls # its Secret has the same name and holds the CA as ca.crt
timeout=5m
print=false
ca_file=
config=

die() { echo "register.sh: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) [ $# -ge 2 ] || die "--timeout needs a value"; timeout=$2; shift 2 ;;
    --print) print=true; shift ;;
    --ca-file) [ $# -ge 2 ] || die "--ca-file needs a value"; ca_file=$2; shift 2 ;;
    --config) [ $# -ge 2 ] || die "--config needs a value"; config=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ -z "$ca_file" ] || $print || die "--ca-file goes with --print"

here=$(cd "$(dirname "$0")" && pwd)

if [ -n "$ca_file" ]; then
  [ -s "$ca_file" ] || die "$ca_file: missing or empty"
  ca=$(base64 <"$ca_file" | tr -d '\n')
else
  if ! $print; then
    for kind in mutatingwebhookconfiguration validatingwebhookconfiguration; do
      if kubectl get "$kind" jobwarden -o name >/dev/null 2>&1; then
        die "$kind/jobwarden exists already: use kubectl apply -k deploy/webhooks/ to change it"
      fi
    done
    echo "Waiting for certificate/$certificate to be Ready ..."
    kubectl -n "$namespace" wait --for=condition=Ready "certificate/$certificate" --timeout="$timeout"
    echo "Waiting for deploy/$deployment to roll out ..."
    kubectl -n "$namespace" rollout status "deploy/$deployment" --timeout="$timeout"
    ready=$(kubectl -n "$namespace" get endpointslices -l "kubernetes.io/service-name=$service" \
      -o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}')
    grep -qx true <<<"$ready" || die "service/$service has no ready endpoint"
  fi
  ca=$(kubectl -n "$namespace" get secret "$certificate" -o jsonpath='{.data.ca\.crt}')
  [ -n "$ca" ] || die "secret/$certificate has no ca.crt"
fi

# kustomize takes the CA from a ConfigMap that exists only during the build (local-config),
# so the webhook configurations are rendered exactly as kubectl apply -k would, plus caBundle.
# The build directory sits beside this one: kustomize refuses absolute paths to a base, and a
# directory inside the base it builds.
build=$(mktemp -d "$here/../.webhooks-register.XXXXXX")
trap 'rm -rf "$build"' EXIT
source=../$(basename "$here")
if [ -n "$config" ]; then
  # This directory, with the policy's configurations in place of the default policy's.
  mkdir "$build/generated"
  cp "$here/kustomization.yaml" "$build/generated/"
  "${JOBWARDEN:-jobwarden}" webhooks --config "$config" >"$build/generated/webhooks.yaml" ||
    die "jobwarden webhooks --config $config failed"
  source=./generated
fi
cat >"$build/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $source
configMapGenerator:
  - name: jobwarden-register-ca-bundle
    literals:
      - caBundle=$ca
    options:
      disableNameSuffixHash: true
      annotations:
        config.kubernetes.io/local-config: "true"
replacements:
  - source:
      kind: ConfigMap
      name: jobwarden-register-ca-bundle
      fieldPath: data.caBundle
    targets:
      - select:
          group: admissionregistration.k8s.io
        fieldPaths:
          - webhooks.*.clientConfig.caBundle
        options:
          create: true
EOF

if $print; then
  kubectl kustomize "$build"
  exit 0
fi
# create, not apply: caBundle must never be part of an applied configuration, or a later
# kubectl apply -k deploy/webhooks/ (which has none) would remove it.
kubectl kustomize "$build" | kubectl create -f -
echo "Registered. kube-apiserver now calls jobwarden for the Job writes its policy can judge, outside kube-system and $namespace."
