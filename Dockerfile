# toolbridge: a multi-stage build. The builder compiles the release binary; the runtime image
# holds only that binary, on distroless (glibc, CA certificates, no shell), as a non-root user.
#
#   docker build -t toolbridge .
#   docker run -p 8080:8080 -e TOOLBRIDGE_UPSTREAM_URL=http://host:11434/v1 toolbridge

FROM rust:1.95-bookworm AS build
WORKDIR /src
# cmake and clang build aws-lc-sys (the TLS crypto provider).
RUN apt-get update \
    && apt-get install -y --no-install-recommends cmake clang \
    && rm -rf /var/lib/apt/lists/*
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p toolbridge-gateway --bin toolbridge \
    && cp target/release/toolbridge /toolbridge \
    && mkdir -p /data

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /toolbridge /usr/local/bin/toolbridge
COPY --from=build --chown=nonroot:nonroot /data /data
# Listen on every interface inside the container; the data directory is the default SQLite
# store's home (use PostgreSQL to run more than one gateway).
ENV TOOLBRIDGE_LISTEN=0.0.0.0:8080 \
    TOOLBRIDGE_STORE_URL=sqlite:///data/toolbridge.db
WORKDIR /data
USER nonroot:nonroot
EXPOSE 8080
# distroless has no shell or curl: the binary checks its own /healthz.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/toolbridge", "healthcheck", "--url", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/usr/local/bin/toolbridge"]
CMD ["serve"]
