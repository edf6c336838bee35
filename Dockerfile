# syntax=docker/dockerfile:1
# One image with both service binaries; docker-compose.yml and deploy/k8s pick the command.
# scripts/check-image.sh builds and runs it with podman (scripts/base-images.sh makes the
# two base images where no registry is reachable).

FROM rust:1.95-slim-bookworm AS chef
# cargo-chef reads the workspace's manifests into a recipe, so the dependency layer below
# follows the workspace's members by itself instead of a hand-kept list.
RUN cargo install cargo-chef --locked --version 0.1.78
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
# Dependencies only: this layer is reused until a manifest or Cargo.lock changes.
RUN cargo chef cook --release --locked --recipe-path recipe.json -p auth-server -p intake-api
COPY . .
# The commit the build_info metric names (the context has no .git):
#   docker build --build-arg BUILD_COMMIT=$(git rev-parse --short HEAD) .
# Declared after the dependency layer, so that a new commit rebuilds only our crates.
ARG BUILD_COMMIT=unknown
RUN cargo build --release --locked -p auth-server -p intake-api

FROM debian:bookworm-slim
# curl is the health check's client; the image has no shell tools beyond Debian's base.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /app --create-home app
COPY --from=build /src/target/release/auth-server /src/target/release/intake-api /usr/local/bin/
USER 10001
WORKDIR /app
ENV LOG_FORMAT=json \
    HEALTHCHECK_URL=http://127.0.0.1:8081/healthz
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD curl -fsS "$HEALTHCHECK_URL" > /dev/null || exit 1
EXPOSE 8081 8082
CMD ["auth-server", "serve"]
