#!/usr/bin/env bash
# Proves the Dockerfile without a Docker engine: checkov scans it, its build stages run on
# this machine (scripts/replay_dockerfile.py: the context as docker sends it, the same
# commands, this machine's Rust and Debian release checked against the base images'), and
# the image's binaries then start as the image runs them: as its user, with its
# environment, answering its HEALTHCHECK command.
#   scripts/check-image.sh [OUT_DIR]   # OUT_DIR receives the image's binaries
# IMAGE_WORK (default /var/tmp/partner-intake-image) holds the stages and, under cache/,
# the layers kept for the next build, as Docker's layer cache would.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-}
image_work=${IMAGE_WORK:-/var/tmp/partner-intake-image}

log() { printf '  - %s\n' "$*"; }

checkov_out=$(mktemp)
# The runtime base is pinned by tag, as the compose file's images are; a digest would have
# to be updated by hand with every Debian point release.
if ! scripts/checkov.sh --quiet --compact --skip-download --framework dockerfile -f Dockerfile >"$checkov_out" 2>&1; then
    cat "$checkov_out" >&2
    echo "checkov found problems in the Dockerfile" >&2
    exit 1
fi
rm -f "$checkov_out"
log "checkov: the Dockerfile passes every check"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
python3 scripts/replay_dockerfile.py --context . --work "$image_work/work" \
    --cache "$image_work/cache" --build-arg "BUILD_COMMIT=$commit"

image_json="$image_work/work/image.json"
field() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {}, v))' "$image_json" "$1"; }
root=$(field root)
user=$(field user)
case "$user" in
    '' | root | 0) echo "the image runs as root" >&2; exit 1 ;;
esac
[[ "$user" =~ ^[0-9]+$ ]] || { echo "USER $user is not numeric: Kubernetes cannot check runAsNonRoot against a name" >&2; exit 1; }
healthcheck=$(field healthcheck)
[[ "$healthcheck" == *"CMD "* ]] || { echo "the image has no HEALTHCHECK command" >&2; exit 1; }
health_cmd=${healthcheck#*CMD }
for bin in auth-server intake-api; do
    [ -x "$root/usr/local/bin/$bin" ] || { echo "the image has no /usr/local/bin/$bin" >&2; exit 1; }
done
log "image: $(du -ch "$root"/usr/local/bin/* | tail -1 | cut -f1) of binaries on $(field base), user $user"

# The image's environment, its user and a home it owns; the databases are the default
# SQLite files under its working directory, as a container with no settings has.
home=$(mktemp -d)
chown "$user:$user" "$home"
cleanup() {
    pkill -f "^$root/usr/local/bin/" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$home"
}
trap cleanup EXIT
image_env=()
while IFS= read -r pair; do image_env+=("$pair"); done < <(field "'\n'.join(f'{k}={v}' for k, v in env.items())")
as_image() { # VAR=value... -- command...
    local extra=()
    while [ "$1" != -- ]; do extra+=("$1"); shift; done
    shift
    (cd "$home" && exec setpriv --reuid="$user" --regid="$user" --clear-groups \
        env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$home" "${image_env[@]}" "${extra[@]}" "$@")
}

for bin in auth-server intake-api; do
    version=$(as_image -- "$root/usr/local/bin/$bin" --version)
    log "$version"
done

# The health check is the image's own command, run as the image would run it, against each
# service started as the compose file starts it (HEALTHCHECK_URL names each one's port).
kek=$(openssl rand -base64 32)
intake_kek=$(openssl rand -base64 32)
healthy() { # HEALTHCHECK_URL
    local url=$1
    for _ in $(seq 1 60); do
        if as_image HEALTHCHECK_URL="$url" -- sh -c "$health_cmd" 2>/dev/null; then return 0; fi
        sleep 0.5
    done
    return 1
}
start() { # name url command...
    local name=$1 url=$2; shift 2
    as_image AUTH_KEY_ENCRYPTION_KEY="$kek" INTAKE_KEY_ENCRYPTION_KEY="$intake_kek" -- "$@" >"$home/$name.log" 2>&1 &
    if ! healthy "$url"; then
        echo "$name did not pass the image's health check:" >&2
        tail -n 30 "$home/$name.log" >&2
        exit 1
    fi
    log "$name serves as uid $user and passes the health check ($health_cmd)"
}
start auth-server "$(field 'env["HEALTHCHECK_URL"]')" "$root/usr/local/bin/auth-server" serve
# Liveness only: a client the auth-server does not know keeps the intake-api alive but not
# ready, which the layout and Kubernetes checks cover with a real one.
start intake-api http://127.0.0.1:8082/healthz env INTAKE_REVOCATIONS_CLIENT_ID=image-check \
    INTAKE_REVOCATIONS_CLIENT_SECRET=image-check "$root/usr/local/bin/intake-api" serve
metrics=$(curl -fsS http://127.0.0.1:8081/metrics)
grep -q "build_info{.*commit=\"$commit\"" <<<"$metrics" || {
    echo "build_info does not name commit $commit:" >&2
    grep build_info <<<"$metrics" >&2
    exit 1
}
log "build_info names commit $commit"

if [ -n "$out" ]; then
    mkdir -p "$out"
    # The layout and Kubernetes checks run them as the image's user, as the image does.
    chmod 755 "$out"
    cp "$root"/usr/local/bin/* "$out/"
    log "binaries copied to $out"
fi
echo "the image builds and its binaries start"
