# syntax=docker/dockerfile:1
# One image with both service binaries; docker-compose.yml picks the command.

FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
# Build dependencies first, from the manifests alone, so source edits reuse that layer.
COPY Cargo.toml Cargo.lock ./
COPY shared/Cargo.toml shared/Cargo.toml
COPY service-kit/Cargo.toml service-kit/Cargo.toml
COPY auth-server/Cargo.toml auth-server/Cargo.toml
COPY intake-api/Cargo.toml intake-api/Cargo.toml
COPY test-support/Cargo.toml test-support/Cargo.toml
RUN for d in shared service-kit auth-server intake-api test-support; do mkdir -p $d/src && echo '' > $d/src/lib.rs; done \
 && echo 'fn main() {}' > auth-server/src/main.rs && cp auth-server/src/main.rs intake-api/src/main.rs \
 && mkdir -p src && cp auth-server/src/main.rs src/main.rs \
 && cargo build --release --locked -p auth-server -p intake-api \
 && rm -rf shared/src service-kit/src auth-server/src intake-api/src test-support/src src
COPY . .
# The commit the build_info metric names (the context has no .git):
#   docker build --build-arg BUILD_COMMIT=$(git rev-parse --short HEAD) .
# Declared here, after the dependency layer, so that a new commit rebuilds only our crates.
ARG BUILD_COMMIT=unknown
# Touch the sources so cargo rebuilds the workspace crates over the placeholder builds.
RUN find shared service-kit auth-server intake-api src -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p auth-server -p intake-api \
 && cp target/release/auth-server target/release/intake-api /usr/local/bin/

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app --create-home app
COPY --from=build /usr/local/bin/auth-server /usr/local/bin/intake-api /usr/local/bin/
USER app
WORKDIR /app
ENV LOG_FORMAT=json \
    HEALTHCHECK_URL=http://127.0.0.1:8081/healthz
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS "$HEALTHCHECK_URL" > /dev/null || exit 1
EXPOSE 8081 8082
CMD ["auth-server", "serve"]
