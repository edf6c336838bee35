#!/usr/bin/env bash
# Builds the image with a container engine (podman) from the Dockerfile as it is, and runs it
# as an operator would: checkov scans the file; `podman build --format docker` keeps its
# HEALTHCHECK; the auth-server and the intake-api then run from the image, as its user, with
# its environment and a read-only root, on a network of their own where the intake-api finds
# the auth-server by name; the image's own health check must pass (`podman healthcheck run`),
# build_info must name the commit, and a partner on the host gets a token and files an
# enquiry through the published ports.
#   scripts/check-image.sh
# IMAGE (default localhost/partner-intake:check) is the tag built; podman keeps the layers,
# so a second build on a machine rebuilds only what changed. Where no registry is reachable,
# scripts/base-images.sh makes the base images the Dockerfile names.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-localhost/partner-intake:check}
name=partner-intake-image-check

log() { printf '  - %s\n' "$*"; }
die() { echo "$*" >&2; exit 1; }
# podman with runc, whatever else the machine has (scripts/podman-runtime.sh).
. scripts/podman-runtime.sh
log "podman runs containers with $PODMAN_RUNTIME_PATH"

checkov_out=$(mktemp)
# The runtime base is pinned by tag, as the compose file's images are; a digest would have
# to be updated by hand with every Debian point release.
if ! scripts/checkov.sh --quiet --compact --skip-download --framework dockerfile -f Dockerfile >"$checkov_out" 2>&1; then
    cat "$checkov_out" >&2
    die "checkov found problems in the Dockerfile"
fi
rm -f "$checkov_out"
log "checkov: the Dockerfile passes every check"

scripts/base-images.sh --ensure || die "making the base images failed (above): the image cannot be built without them"

# Whatever an earlier run left behind (one cut off before its own clean-up) goes first.
remove_containers() {
    podman rm -f -t 2 "$name-auth" "$name-intake" >/dev/null 2>&1 || true
    podman volume rm -f "$name-auth" "$name-intake" >/dev/null 2>&1 || true
    podman network rm -f "$name" >/dev/null 2>&1 || true
}
remove_containers
work=$(mktemp -d)
trap 'remove_containers; rm -rf "$work"' EXIT

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
start=$SECONDS
podman build --format docker --build-arg "BUILD_COMMIT=$commit" -t "$image" . >"$work/build.log" 2>&1 \
    || { tail -n 40 "$work/build.log" >&2; die "podman build failed"; }
log "podman build: $image in $((SECONDS - start)) s ($(grep -c 'Using cache' "$work/build.log" || true) steps from the layer cache)"

# The engine's default limits are above what runc may set here (scripts/podman-limits.sh).
limits=()
for l in $(scripts/podman-limits.sh); do limits+=(--ulimit "$l"); done
# Without systemd, podman says at error level that it cannot set or remove a health check
# timer; the checks run `podman healthcheck run` themselves, so that noise goes to a log.
quiet() { "$@" 2>>"$work/podman.log" || { grep -v 'systemd' "$work/podman.log" | tail -n 20 >&2; return 1; }; }

inspect() { podman image inspect --format "$1" "$image"; }
user=$(inspect '{{.Config.User}}')
case "$user" in
    '' | root | 0) die "the image runs as root" ;;
esac
[[ "$user" =~ ^[0-9]+$ ]] || die "USER $user is not numeric: Kubernetes cannot check runAsNonRoot against a name"
[[ "$(inspect '{{json .Config.Healthcheck}}')" == *CMD* ]] || die "the image has no HEALTHCHECK (was it built without --format docker?)"
for bin in auth-server intake-api; do
    version=$(quiet podman run --rm --read-only "${limits[@]}" "$image" "$bin" --version) \
        || die "$bin --version did not run in the image"
    log "$version"
done
log "image: $(inspect '{{.Size}}' | awk '{printf "%.0f MB", $1 / 1e6}'), user $user"

run() { # container port env... -- command...
    local ctr=$1 port=$2 args=()
    shift 2
    while [ "$1" != -- ]; do args+=(-e "$1"); shift; done
    shift
    # A named volume starts as a copy of the image's /app, owned by its user: the one place
    # the service writes (its SQLite files) under a read-only root.
    quiet podman run -d --name "$ctr" --network "$name" --read-only -v "$ctr:/app" \
        --cap-drop all --security-opt no-new-privileges -p "127.0.0.1::$port" "${limits[@]}" \
        "${args[@]}" "$image" "$@" >/dev/null
}
healthy() { # container: the image's own HEALTHCHECK, run by the engine
    local ctr=$1
    for _ in $(seq 1 60); do
        podman healthcheck run "$ctr" >/dev/null 2>&1 && return 0
        [ "$(podman inspect --format '{{.State.Running}}' "$ctr")" = true ] || break
        sleep 0.5
    done
    podman logs --tail 30 "$ctr" >&2
    die "$ctr did not pass the image's health check"
}
host_port() { podman port "$1" "$2/tcp" | head -n1 | sed 's/.*://'; }

quiet podman network create "$name" >/dev/null
issuer=http://$name-auth:8081
run "$name-auth" 8081 AUTH_KEY_ENCRYPTION_KEY="$(openssl rand -base64 32)" AUTH_BIND=0.0.0.0:8081 \
    AUTH_ISSUER="$issuer" -- auth-server serve
healthy "$name-auth"
uid=$(podman exec "$name-auth" id -u)
[ "$uid" = "$user" ] || die "the auth-server runs as uid $uid, not the image's $user"
if podman exec "$name-auth" touch /usr/local/bin/written 2>/dev/null; then die "the root file system is writable"; fi
log "auth-server passes the image's health check, as uid $uid on a read-only root"

metrics=$(podman exec "$name-auth" curl -fsS http://127.0.0.1:8081/metrics)
grep -q "build_info{.*commit=\"$commit\"" <<<"$metrics" || {
    grep build_info <<<"$metrics" >&2
    die "build_info does not name commit $commit"
}
log "build_info names commit $commit"

# The intake-api's own client and a partner's, made with the auth-server's command line in
# its container, as an operator does.
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
client() { podman exec "$name-auth" auth-server client create --name "$1" --scopes "$2"; }
reader=$(client intake-api revocations:read)
partner=$(client "Image check" enquiry:case:intake:create)

run "$name-intake" 8082 INTAKE_KEY_ENCRYPTION_KEY="$(openssl rand -base64 32)" INTAKE_BIND=0.0.0.0:8082 \
    HEALTHCHECK_URL=http://127.0.0.1:8082/healthz INTAKE_ISSUER="$issuer" \
    INTAKE_JWKS_URL="$issuer/.well-known/jwks.json" INTAKE_REVOCATIONS_URL="$issuer/revocations" \
    INTAKE_REVOCATIONS_CLIENT_ID="$(field client_id <<<"$reader")" \
    INTAKE_REVOCATIONS_CLIENT_SECRET="$(field client_secret <<<"$reader")" -- intake-api serve
healthy "$name-intake"
intake=http://127.0.0.1:$(host_port "$name-intake" 8082)
for _ in $(seq 1 60); do
    curl -fsS -o /dev/null "$intake/readyz" && break
    sleep 0.5
done
curl -fsS -o /dev/null "$intake/readyz" || { curl -sS "$intake/readyz" >&2; die "the intake-api is not ready"; }
log "intake-api passes the image's health check and is ready: it fetched the JWKS from $issuer"

token=$(curl -fsS "http://127.0.0.1:$(host_port "$name-auth" 8081)/oauth/token" -d grant_type=client_credentials \
    -d "client_id=$(field client_id <<<"$partner")" --data-urlencode "client_secret=$(field client_secret <<<"$partner")" \
    -d scope=enquiry:case:intake:create | field access_token)
sed "s/EMAIL/image-check-$$@example.com/" bench/enquiry.json >"$work/enquiry.json"
status=$(curl -sS -o "$work/answer" -w '%{http_code}' "$intake/partners/external/intake" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d @"$work/enquiry.json")
[ "$status" = 201 ] || { cat "$work/answer" >&2; die "the enquiry got $status"; }
log "a partner on the host got a token and filed case $(field reference <"$work/answer")"

echo "the image builds and runs in podman"
