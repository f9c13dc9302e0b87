# syntax=docker/dockerfile:1
# jobwarden: one static-ish binary on a distroless, non-root runtime image.
#
#   docker build -t jobwarden:dev .
#   docker run --rm -p 8443:8443 -p 8080:8080 jobwarden:dev serve --dev

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and build outputs between builds; the binary is copied out
# of the cached target directory because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p jobwarden \
 && install -D -m 0755 target/release/jobwarden /out/jobwarden

# glibc and libgcc (for unwinding) but no shell or package manager; "nonroot" is uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/jobwarden /usr/local/bin/jobwarden
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/jobwarden"]
CMD ["serve", "--dev"]
