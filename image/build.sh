#!/usr/bin/env bash
# Builds jobwarden's image from the Dockerfile, pulling nothing: the static binary is built
# here and copied in (the Dockerfile's prebuilt stage), as goreleaser and ko build images.
#
#   image/build.sh           the binary, its SBOM, and the image jobwarden:dev, also tagged
#                            jobwarden:VERSION (the tag the chart and deploy/ name)
#   image/build.sh binary    the binary and its SBOM only (the Dockerfile's build stage runs this)
#   image/build.sh tools     cargo-auditable and cargo-cyclonedx only (the same stage, in a
#                            layer of its own)
#
# Writes target/image/: jobwarden (the binary the image holds) and jobwarden.cdx.json (its
# CycloneDX SBOM). Both travel in the image, as Kyverno's and Kueue's do: the SBOM at
# /usr/share/doc/jobwarden/sbom.cdx.json, and OCI labels naming the commit (revision, the
# same value the binary's `--version` prints), when it was made (created: the commit's time,
# so the same commit gives the same label), source, version and the binary's sha256
# (io.jobwarden.binary.digest). The engine is podman where it answers, else docker
# (image/engine.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# The tools, pinned: cargo-auditable embeds the dependency list in the binary, cargo-cyclonedx
# (the CycloneDX project's own) writes the SBOM.
AUDITABLE=0.7.7
CYCLONEDX=0.5.9
OUT=target/image
TAGS=(jobwarden:dev)

# Installs cargo-$1 at version $2 from crates.io unless that version is installed.
need() {
  if ! cargo install --list | grep -q "^cargo-$1 v$2:"; then
    echo "== cargo install cargo-$1 $2"
    cargo install --locked --quiet "cargo-$1" --version "$2"
  fi
}

# Static glibc rather than musl (README, "Why these crates"); build scripts and proc macros
# stay dynamic, host-built, because the target is named. Without its symbol table, and built
# as one codegen unit (Cargo.toml), the binary (27.5 MB) fits the image's 30 MiB budget; a
# panic still says where it happened.
target=$(rustc -vV | sed -n 's/^host: //p')
case $target in
  *-linux-gnu) ;;
  *)
    echo "image/build.sh: the image's static binary is built on Linux (a *-linux-gnu host); this is $target" >&2
    exit 2
    ;;
esac

# The commit, as build.rs finds it; given (the Dockerfile's build stage has no .git), or
# "unknown". Passed to cargo too, so that the binary and the label say the same.
REVISION=${JOBWARDEN_REVISION:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
export JOBWARDEN_REVISION=$REVISION
# The commit's time, for the SBOM and the created label (reproducible builds' convention).
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
export SOURCE_DATE_EPOCH

build_binary() {
  need auditable "$AUDITABLE"
  echo "== static binary ($target, revision $REVISION)"
  RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static -C strip=symbols" \
    cargo auditable build --release --locked --target "$target" -p jobwarden
  mkdir -p "$OUT"
  install -m 0755 "target/$target/release/jobwarden" "$OUT/jobwarden"
}

write_sbom() {
  need cyclonedx "$CYCLONEDX"
  echo "== SBOM"
  # What the binary is built from for this target, without build or dev dependencies,
  # dated by the commit so that the same commit gives the same file.
  cargo cyclonedx --format json --spec-version 1.5 --target "$target" --no-build-deps \
    --describe binaries --quiet
  # cargo-cyclonedx writes it beside Cargo.toml, named for the binary.
  mv jobwarden_bin.cdx.json "$OUT/jobwarden.cdx.json"
}

case ${1:-all} in
  tools) need auditable "$AUDITABLE"; need cyclonedx "$CYCLONEDX"; exit 0 ;;
  binary) build_binary; write_sbom; exit 0 ;;
  all) ;;
  *) echo "usage: image/build.sh [binary|tools]" >&2; exit 2 ;;
esac
build_binary
write_sbom

# shellcheck source=image/engine.sh
. image/engine.sh
engine_detect
version=$("$OUT/jobwarden" --version | awk '{print $2}')
TAGS+=("jobwarden:$version")
previous=$("${engine[@]}" image inspect --format '{{.Id}}' jobwarden:dev 2>/dev/null || true)
echo "== ${engine[*]} build ${TAGS[*]}"
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
digest=sha256:$(sha256sum "$OUT/jobwarden" | awk '{print $1}')
build=("${engine[@]}" build --file Dockerfile --build-arg JOBWARDEN_BINARY=prebuilt
  --build-arg "VERSION=$version" --build-arg "REVISION=$REVISION"
  --build-arg "CREATED=$created" --build-arg "BINARY_DIGEST=$digest")
# docker has no "never": it pulls only what the stages it builds name, and here they name
# none. podman keeps no image per step, only the result.
if [ "${engine[0]}" = podman ]; then
  build+=(--pull=never --layers=false)
fi
for tag in "${TAGS[@]}"; do
  build+=(--tag "$tag")
done
"${build[@]}" .
# The image this one replaces, unless something else still names it.
current=$("${engine[@]}" image inspect --format '{{.Id}}' jobwarden:dev)
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  "${engine[@]}" image rm "$previous" >/dev/null 2>&1 || true
fi

# It runs here as the tests will run it.
engine_probe jobwarden:dev
echo "${engine[*]} run ${run_flags[*]} jobwarden:dev --version: $("${engine[@]}" run --rm --network=none "${run_flags[@]}" jobwarden:dev --version)"
"${engine[@]}" image ls jobwarden
# shellcheck disable=SC2016 # a Go template for the engine, not the shell's
"${engine[@]}" image inspect --format '{{range $k, $v := .Labels}}{{$k}}={{$v}}{{println}}{{end}}' jobwarden:dev
echo "SBOM: $OUT/jobwarden.cdx.json, in the image at /usr/share/doc/jobwarden/sbom.cdx.json"
