# The portfolio-replica image: the release binary on distroless.
#
#   docker build -t portfolio-replica .            (or: podman build --format docker ...)
#   docker run --rm -p 127.0.0.1:8080:8080 -p 127.0.0.1:9090:9090 portfolio-replica
#   curl -s -H 'Authorization: Bearer cura_demo_acme_key' http://127.0.0.1:8080/portfolio?limit=2
#
# The image serves the demo workspaces of snapshots/ from /snapshots; mount
# your own directory over it (read-only is enough), or point
# PORTFOLIO_SNAPSHOTS / --snapshots elsewhere (an s3:// URL included).
#
# Build stage: the official Rust image on the same Debian release as the
# runtime (bookworm = debian12), so the binary links against the glibc it
# will find there. Cache mounts keep the registry and target/ between builds
# (BuildKit, buildah and podman honour them; they are not part of the image).
FROM docker.io/library/rust:1.95-slim-bookworm AS build
WORKDIR /build
# Only what `cargo build --release` reads: the manifest and lock file, the
# workspace's crates, the binary, and benches/ (Cargo.toml names a [[bench]]
# target, and cargo refuses a manifest whose declared target file is
# missing).
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
COPY src ./src
COPY benches ./benches
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/build/target \
    cargo build --release --locked --bin portfolio-replica \
 && install -D -m 0755 target/release/portfolio-replica /out/portfolio-replica

# Runtime: glibc, libgcc, CA certificates (for https object storage) and
# nothing else: no shell, no package manager, no curl. The :nonroot tag runs
# as uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="portfolio-replica" \
      org.opencontainers.image.description="Serves the read-only Portfolio API from memory, hot-loaded from JSON snapshot files" \
      org.opencontainers.image.licenses="MIT"
COPY --from=build /out/portfolio-replica /usr/local/bin/portfolio-replica
# The demo snapshots, owned by root and world-readable: the server only
# reads them, and the non-root user cannot alter what it serves.
COPY --chmod=0644 snapshots/*.json /snapshots/

# Defaults as environment variables, not as flags baked into ENTRYPOINT:
# every flag also reads its PORTFOLIO_* variable and a flag on the command
# line wins, so `docker run IMAGE --listen 0.0.0.0:8081` or Kubernetes
# `args:` / `env:` override one setting without restating the others, and
# the subcommands (`check`, `hash-key`, `probe`) run in the same image
# unaffected. In a container both listeners must face the network namespace
# (0.0.0.0), not the loopback default meant for a developer's machine.
ENV PORTFOLIO_LISTEN=0.0.0.0:8080 \
    PORTFOLIO_ADMIN_LISTEN=0.0.0.0:9090 \
    PORTFOLIO_SNAPSHOTS=/snapshots

# Numeric, so Kubernetes' runAsNonRoot can check it without /etc/passwd.
USER 65532:65532
# 8080: the API plus /healthz and /readyz. 9090: /metrics and /snapshots
# (operators only; do not publish it to the internet).
EXPOSE 8080 9090
# SIGTERM: /readyz turns 503, listeners stop accepting, in-flight requests
# finish, exit 0 within --shutdown-grace (default 10 s).
STOPSIGNAL SIGTERM
# `probe` GETs http://127.0.0.1:8080/readyz and exits 0 on 200, else 1: no
# shell or curl needed. Docker and podman (with --format docker) use this;
# Kubernetes ignores it and uses the probes of its manifest. The start period
# covers loading a large snapshot (about 5-10 s per GB).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/portfolio-replica", "probe"]
ENTRYPOINT ["/usr/local/bin/portfolio-replica"]
CMD ["serve"]
