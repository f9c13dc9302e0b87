# jobwarden's image: one static binary in an empty image, run as uid 65532. No shell, no
# package manager, no libraries, nothing writable.
#
# The binary comes from one of two stages, chosen by JOBWARDEN_BINARY:
#   compiled  (the default) built here, in the Rust project's image (the build stage, by
#             image/build.sh's `binary` step): a machine with Docker and internet access
#             needs nothing else.
#               docker build -t jobwarden:dev .
#   prebuilt  target/image/jobwarden, built outside by image/build.sh, which then builds this
#             file with JOBWARDEN_BINARY=prebuilt: nothing is pulled, as goreleaser and ko
#             build their images. The README's "Build the image" line.
# BuildKit and buildah build only the stages the last one needs, so the prebuilt path never
# pulls the Rust image.
#
#   docker run --rm -p 8443:8443 -p 8080:8080 jobwarden:dev serve --dev

ARG JOBWARDEN_BINARY=compiled

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# cargo-auditable and cargo-cyclonedx, at the versions the script pins, in a layer of its own
# that a source change does not rebuild.
COPY image/build.sh image/build.sh
RUN --mount=type=cache,target=/usr/local/cargo/registry image/build.sh tools
COPY . .
# The context has no .git: the commit and its time come as arguments (build.rs embeds the
# revision; the SBOM is dated by SOURCE_DATE_EPOCH), else "unknown" and the build's time.
ARG REVISION=
ARG SOURCE_DATE_EPOCH=
# The cache mounts keep crates and build outputs between builds; they are not part of the
# image, so the binary and its SBOM are copied out of the cached target directory.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    JOBWARDEN_REVISION="${REVISION}" SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH}" image/build.sh binary \
 && install -D -m 0755 target/image/jobwarden /out/jobwarden \
 && install -D -m 0644 target/image/jobwarden.cdx.json /out/jobwarden.cdx.json

# The two ways to the binary, each an empty image holding it, its SBOM (CycloneDX JSON, at a
# fixed path that scanners and `podman cp` read) and how names are looked up (read by the
# static glibc's resolver), nothing else.
FROM scratch AS compiled
COPY image/nsswitch.conf /etc/nsswitch.conf
COPY --from=build /out/jobwarden.cdx.json /usr/share/doc/jobwarden/sbom.cdx.json
COPY --from=build /out/jobwarden /usr/local/bin/jobwarden

FROM scratch AS prebuilt
COPY image/nsswitch.conf /etc/nsswitch.conf
COPY target/image/jobwarden.cdx.json /usr/share/doc/jobwarden/sbom.cdx.json
COPY target/image/jobwarden /usr/local/bin/jobwarden

FROM ${JOBWARDEN_BINARY}
# image/build.sh passes the crate's version, the commit (the revision the binary's
# `--version` prints, which the image tests compare with their own), the commit's time and
# the binary's sha256; tests/image_e2e checks these defaults against Cargo.toml's version,
# repository and license.
ARG VERSION=0.1.0
ARG SOURCE=https://github.com/jobwarden/jobwarden
ARG REVISION=
ARG CREATED=
ARG BINARY_DIGEST=
LABEL org.opencontainers.image.title="jobwarden" \
      org.opencontainers.image.description="Guards and runs Kubernetes batch/v1 Jobs: admission webhook, Job controller and offline checker" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      io.jobwarden.binary.digest="${BINARY_DIGEST}" \
      io.jobwarden.sbom="/usr/share/doc/jobwarden/sbom.cdx.json"
# Numeric, so that Kubernetes can check runAsNonRoot without an /etc/passwd (distroless's
# "nonroot" is this uid too).
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/jobwarden"]
CMD ["serve", "--dev"]
