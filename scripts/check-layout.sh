#!/usr/bin/env bash
# Starts the production layout from docker-compose.yml as written, with a compose engine
# (docker-compose against podman's Docker API), and checks it through the TLS proxy as a
# partner would: the first start hands-free from a filled .env (the intake-api's own client
# made by the deployment), metadata and JWKS at the public issuer, a client made with the
# auth-server's CLI, a token, an enquiry, an attach, the case read back, a DPoP-bound token
# and enquiry (requests-oauth2client); /metrics not routed; every Prometheus target up; the
# proxy's limits on body size and on slow request heads; a second `up` that changes
# nothing; requests still answered with one intake-api replica stopped.
#
#   scripts/check-layout.sh        # as root, after scripts/check-image.sh built IMAGE
#
# IMAGE (default localhost/partner-intake:check) is the services' image, tagged for the run
# as the compose file names it; PostgreSQL, Redis, nginx and Prometheus are the images
# scripts/base-images.sh makes where no registry is reachable (Debian's versions: PostgreSQL
# 15, Redis 7.0, nginx 1.22, Prometheus 2.42). Grafana is left out, as Debian has no package
# for it. Podman 4.3 runs health checks only from systemd timers, so the run ticks them
# itself (`podman healthcheck run`), as the engine would every interval.
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-localhost/partner-intake:check}
tag=layout-check
project=pilayout

ok() { echo "ok   $*"; }
die() { echo "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root: rootful podman publishes the proxy's ports 443 and 8443"
for tool in podman:podman docker-compose:docker-compose curl:curl openssl:openssl; do
    command -v "${tool%%:*}" >/dev/null || die "${tool%%:*} is missing (Debian: apt-get install ${tool#*:})"
done
# podman, and the API service docker-compose talks to, with runc (scripts/podman-runtime.sh).
. scripts/podman-runtime.sh
python3 -c 'import yaml, requests_oauth2client' 2>/dev/null ||
    die "python3 needs PyYAML and requests-oauth2client (pip install pyyaml requests-oauth2client)"
podman image exists "$image" || die "$image is missing: scripts/check-image.sh builds it"
scripts/base-images.sh --ensure || die "making the base images failed (above): the layout cannot start without them"

umask 022
tmp=$(mktemp -d /tmp/check-layout.XXXXXX)
chmod 755 "$tmp"
export DOCKER_HOST=unix://$tmp/podman.sock COMPOSE_PROJECT_NAME=$project
compose() { (cd "$tmp/compose" && docker-compose "$@"); }
service_pid= ticker_pid=

cleanup() {
    local status=$?
    set +e
    trap '' INT TERM HUP PIPE
    [ -n "$ticker_pid" ] && kill "$ticker_pid" 2>/dev/null
    if [ -n "$service_pid" ]; then
        compose down --volumes --remove-orphans --timeout 10 >"$tmp/down.log" 2>&1 ||
            { echo "--- docker-compose down" >&2; tail -n 20 "$tmp/down.log" >&2; }
        kill "$service_pid" 2>/dev/null
    fi
    wait 2>/dev/null
    podman untag "$image" "localhost/partner-intake:$tag" "docker.io/library/partner-intake:$tag" 2>/dev/null
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE

# Whatever a run cut off before its own clean-up left behind goes first.
podman pod rm -f "$(podman pod ls -q --filter "label=com.docker.compose.project=$project")" >/dev/null 2>&1 || true
podman rm -f -t 2 $(podman ps -aq --filter "label=com.docker.compose.project=$project") >/dev/null 2>&1 || true
podman volume rm -f $(podman volume ls -q --filter "label=com.docker.compose.project=$project") >/dev/null 2>&1 || true
podman network rm -f $(podman network ls -q --filter "label=com.docker.compose.project=$project") >/dev/null 2>&1 || true

fail() { # message services-whose-logs-to-show...
    echo "FAIL $1" >&2
    shift
    local svc id
    # A container that exited with an error first: its last lines are the cause, and the
    # others' logs would push them out of sight.
    for id in $(podman ps -aq --filter "label=com.docker.compose.project=$project" --filter status=exited); do
        [ "$(podman inspect --format '{{.State.ExitCode}}' "$id" 2>/dev/null)" = 0 ] && continue
        echo "--- $(podman inspect --format '{{.Name}}' "$id"): exited with an error; last lines of its log" >&2
        podman logs --tail 25 "$id" >&2 2>&1 || true
    done
    for svc in "$@"; do
        echo "--- $svc: last lines of its log" >&2
        compose logs --no-color --tail 25 "$svc" >&2 2>&1 || true
    done
    echo "--- containers" >&2
    podman ps -a --filter "label=com.docker.compose.project=$project" \
        --format '{{.Names}} {{.Status}}' >&2 || true
    exit 1
}

# The file's fixed subnets must be free: podman hands out 10.89.0.0/24 first to a network
# made without one.
for subnet in $(python3 -c 'import sys,yaml
for n in (yaml.safe_load(open(sys.argv[1])).get("networks") or {}).values():
    for c in ((n or {}).get("ipam") or {}).get("config", []): print(c["subnet"])' docker-compose.yml); do
    for net in $(podman network ls -q); do
        podman network inspect "$net" --format '{{range .Subnets}}{{.Subnet}} {{end}}' | grep -qw "$subnet" &&
            die "podman network $(podman network inspect "$net" --format '{{.Name}}') holds $subnet, which docker-compose.yml gives its internal network: remove it first"
    done
done

# The operator's part: the compose file and deploy/ as they are, a .env from
# deploy/env.example with every secret generated, and a local certificate.
mkdir -p "$tmp/compose"
cp docker-compose.yml Dockerfile "$tmp/compose/"
cp -r deploy "$tmp/compose/"
rm -rf "$tmp/compose/deploy/tls"
secret() { openssl rand -base64 32; }
sed -e "s|^POSTGRES_PASSWORD=.*|POSTGRES_PASSWORD=$(openssl rand -hex 16)|" \
    -e "s|^AUTH_KEY_ENCRYPTION_KEY=.*|AUTH_KEY_ENCRYPTION_KEY=$(secret)|" \
    -e "s|^INTAKE_KEY_ENCRYPTION_KEY=.*|INTAKE_KEY_ENCRYPTION_KEY=$(secret)|" \
    -e "s|^INTAKE_REVOCATIONS_CLIENT_SECRET=.*|INTAKE_REVOCATIONS_CLIENT_SECRET=$(secret)|" \
    -e "s|^GRAFANA_ADMIN_PASSWORD=.*|GRAFANA_ADMIN_PASSWORD=$(openssl rand -hex 16)|" \
    deploy/env.example >"$tmp/compose/.env"
echo "PARTNER_INTAKE_TAG=$tag" >>"$tmp/compose/.env"
"$tmp/compose/deploy/make-local-cert.sh" >/dev/null
ca=$tmp/compose/deploy/tls/ca.crt
# The compose file builds the image; here it is the one already built, under the name the
# file gives it (the Docker API names an unqualified image as Docker Hub's library would).
podman tag "$image" "localhost/partner-intake:$tag" "docker.io/library/partner-intake:$tag"

# The containers' limits, as runc may set them here (scripts/podman-limits.sh).
printf '[containers]\ndefault_ulimits = [%s]\n' \
    "$(scripts/podman-limits.sh | sed 's/[^ ]*/"&"/g; s/ /, /')" >"$tmp/containers.conf"
CONTAINERS_CONF=$tmp/containers.conf podman system service --time=0 "$DOCKER_HOST" >"$tmp/podman-service.log" 2>&1 &
service_pid=$!
deadline=$((SECONDS + 30))
until curl -fsS --unix-socket "$tmp/podman.sock" http://d/_ping >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { cat "$tmp/podman-service.log" >&2; die "podman's API did not answer on $DOCKER_HOST"; }
    sleep 0.2
done
ok "podman $(podman version --format '{{.Server.Version}}') serves the Docker API; docker-compose $(docker-compose version --short)"

# Health checks run as the engine runs them, every second here (each service's own interval
# is at least that).
(
    while :; do
        for id in $(podman ps -q --filter "label=com.docker.compose.project=$project" --filter health=starting) \
            $(podman ps -q --filter "label=com.docker.compose.project=$project" --filter health=healthy) \
            $(podman ps -q --filter "label=com.docker.compose.project=$project" --filter health=unhealthy); do
            podman healthcheck run "$id" >/dev/null 2>&1 || true
        done
        sleep 1
    done
) &
ticker_pid=$!

# The whole first start: `up` with the filled .env, nothing else. Grafana alone is left out.
services=$(compose config --services | grep -vx grafana)
start=$SECONDS
# shellcheck disable=SC2086
timeout 300 docker-compose --project-directory "$tmp/compose" -f "$tmp/compose/docker-compose.yml" \
    up -d --no-build $services >"$tmp/up.log" 2>&1 ||
    { cat "$tmp/up.log" >&2; fail "docker-compose up -d did not finish" $services; }
ok "docker-compose up -d: $(echo $services | wc -w) services in $((SECONDS - start)) s (depends_on conditions applied by the engine)"

state() { # service: its container's state, as the engine reports it
    podman inspect --format '{{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' \
        "$(compose ps -q "$1")" 2>/dev/null
}
# Every long-running service up (with its health check healthy, where it has one), every
# one-shot exited 0, and both servers ready (the intake-api: the JWKS fetched through the proxy).
deadline=$((SECONDS + 120))
for svc in $services; do
    while :; do
        read -r status code health <<<"$(state "$svc")" || true
        restart=$(compose config | python3 -c 'import sys,yaml; print(yaml.safe_load(sys.stdin)["services"][sys.argv[1]].get("restart","no"))' "$svc")
        if [ "$restart" = no ]; then
            [ "$status" = exited ] && [ "$code" = 0 ] && { ok "$svc completed successfully"; break; }
            [ "$status" = exited ] && fail "$svc exited with $code" "$svc"
        elif [ "$status" = running ] && { [ -z "$health" ] || [ "$health" = healthy ]; }; then
            ok "$svc running${health:+, healthy}"
            break
        fi
        [ $SECONDS -lt $deadline ] || fail "$svc is $status $code ${health:-}" "$svc"
        sleep 0.5
    done
done
ready() { # services: each answers /readyz beside its health URL, within a minute
    local svc url deadline=$((SECONDS + 60))
    for svc in "$@"; do
        url=$(compose exec -T "$svc" printenv HEALTHCHECK_URL | tr -d '\r')
        until compose exec -T "$svc" curl -fsS -o /dev/null "${url%/healthz}/readyz" 2>/dev/null; do
            [ $SECONDS -lt $deadline ] || fail "$svc is not ready: ${url%/healthz}/readyz" "$svc" proxy
            sleep 0.5
        done
        ok "$svc ready"
    done
}
ready auth-server intake-api-1 intake-api-2
outcomes() { compose logs --no-color intake-client | sed -n 's/.*"outcome": "\([a-z]*\)".*/\1/p' | paste -sd ' '; }
[ "$(outcomes)" = created ] ||
    fail "the intake-api's client was not made by the deployment" intake-client
ok "the intake-api's own client made by the deployment (auth-server client ensure), no person in the middle"

# --- As a partner: only through the proxy's published ports.
field() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1:]: v=v[int(k) if isinstance(v,list) else k]
print(v)' "$@"; }
request() { # curl arguments: sets status, the answer in $tmp/answer
    status=$(curl -sS --cacert "$ca" -o "$tmp/answer" -w '%{http_code}' "$@") || status=000
}
expect() { # status what services-whose-logs-to-show...
    local want=$1 what=$2
    shift 2
    [ "$status" = "$want" ] || fail "$what: $status, not $want: $(head -c 300 "$tmp/answer")" "$@"
}
env_file() { sed -n "s/^$1=//p" "$tmp/compose/.env"; }

issuer=$(env_file PUBLIC_AUTH_URL)
intake=https://localhost:$(env_file PUBLIC_INTAKE_PORT)
request "$issuer/.well-known/oauth-authorization-server"
expect 200 "metadata at $issuer" auth-server proxy
[ "$(field issuer <"$tmp/answer")" = "$issuer" ] || fail "the metadata names issuer $(field issuer <"$tmp/answer")"
token_endpoint=$(field token_endpoint <"$tmp/answer")
jwks_uri=$(field jwks_uri <"$tmp/answer")
case "$token_endpoint $jwks_uri" in
    "$issuer/"*" $issuer/"*) ;;
    *) fail "the metadata's endpoints are not under the issuer: $token_endpoint $jwks_uri" ;;
esac
ok "metadata at $issuer/.well-known/oauth-authorization-server (token endpoint $token_endpoint)"
request "$jwks_uri"
expect 200 "JWKS at $jwks_uri" auth-server proxy
[ "$(field keys 0 kty <"$tmp/answer")" = RSA ] || fail "the JWKS has no RSA key: $(cat "$tmp/answer")"
ok "JWKS at $jwks_uri"

client=$(compose exec -T auth-server auth-server client create --name "Layout check $$" \
    --scopes enquiry:case:intake:create) || fail "auth-server client create" auth-server
client_id=$(field client_id <<<"$client")
client_secret=$(field client_secret <<<"$client")
ok "client $client_id made with docker-compose exec auth-server auth-server client create"

request "$token_endpoint" -d grant_type=client_credentials -d "client_id=$client_id" \
    --data-urlencode "client_secret=$client_secret" -d scope=enquiry:case:intake:create
expect 200 "token at $token_endpoint" auth-server proxy
token=$(field access_token <"$tmp/answer")
ok "token from $token_endpoint"

email="layout-$$@example.com"
sed "s/EMAIL/$email/" bench/enquiry.json >"$tmp/enquiry.json"
partner() { # path [curl arguments]
    local path=$1
    shift
    request "$intake$path" -H "Authorization: Bearer $token" "$@"
}
partner /partners/external/intake -H 'Content-Type: application/json' -d @"$tmp/enquiry.json"
expect 201 "enquiry" intake-api-1 intake-api-2 proxy
reference=$(field reference <"$tmp/answer")
ok "enquiry: case $reference created"
partner /partners/external/intake/attach -H 'Content-Type: application/json' \
    -d "{\"email\":\"$email\",\"product_uuid\":\"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07\"}"
expect 200 "attach" intake-api-1 intake-api-2 proxy
field redirect <"$tmp/answer" | grep -q '^https://' || fail "attach gave no redirect: $(cat "$tmp/answer")"
ok "attach: redirect link"
partner "/partners/external/cases/$reference"
expect 200 "case read back" intake-api-1 intake-api-2 proxy
[ "$(field reference <"$tmp/answer")" = "$reference" ] || fail "case read back: $(cat "$tmp/answer")"
ok "case $reference read back ($(field status <"$tmp/answer"))"

# DPoP as a partner's library does it: the proofs name the public https URLs, so the services
# must know them behind the proxy (AUTH_ISSUER, INTAKE_PUBLIC_URL).
dpop=$(REQUESTS_CA_BUNDLE=$ca python3 scripts/dpop_through_proxy.py "$token_endpoint" "$intake" \
    "$client_id" "$client_secret" "layout-dpop-$$@example.com" 2>&1) ||
    fail "DPoP through the proxy: $dpop" intake-api-1 intake-api-2 proxy
ok "DPoP through the proxy: $dpop"

for url in "$intake/metrics" "$issuer/metrics"; do
    request "$url"
    expect 404 "$url" proxy
done
ok "/metrics not routed by the proxy (404 on $intake and $issuer)"

request "$intake/partners/external/intake" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    --data-binary @<(head -c 70000 /dev/zero | tr '\0' ' ')
expect 413 "a 70,000-byte enquiry" proxy
request "$token_endpoint" --data-binary @<(head -c 9000 /dev/zero | tr '\0' a)
expect 413 "a 9,000-byte token request" proxy
ok "bodies over the proxy's limits refused: 413 (64k intake, 8k token)"

# A client that sends part of a request head and stalls: nginx gives up after
# client_header_timeout and closes the connection without an answer (its log says 408).
slow=$(python3 - "$ca" "${intake##*:}" <<'PY'
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[1])
start = time.monotonic()
conn = ctx.wrap_socket(socket.create_connection(("localhost", int(sys.argv[2]))), server_hostname="localhost")
conn.sendall(b"GET /partners/external/cases/1 HTTP/1.1\r\nHost: localhost\r\n")
conn.settimeout(30)
answer = b""
try:
    while chunk := conn.recv(4096):
        answer += chunk
except (ssl.SSLError, ConnectionResetError):
    pass
except socket.timeout:
    answer = b"still open"
print("%.1f %s" % (time.monotonic() - start, answer.split(b"\r\n")[0].decode() or "closed"))
PY
)
timeout_s=$(sed -n 's/.*client_header_timeout \([0-9]*\)s;.*/\1/p' deploy/nginx/nginx.conf)
elapsed=${slow%% *} outcome=${slow#* }
[ "$outcome" = closed ] || fail "a stalled request head: '$outcome' after ${elapsed}s, not closed" proxy
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN{exit !(e >= t - 0.5 && e <= t + 3)}' ||
    fail "a stalled request head was closed after ${elapsed}s, not about ${timeout_s}s" proxy
deadline=$((SECONDS + 5))
until compose logs --no-color proxy 2>/dev/null | grep -c '" 408 ' >/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "the proxy did not log the stalled request as 408" proxy
    sleep 0.2
done
ok "a stalled request head is closed after ${elapsed}s with no answer (client_header_timeout ${timeout_s}s; logged 408)"

# Prometheus: every target of deploy/prometheus/prometheus.yml scraped and up.
want=$(python3 -c 'import sys,yaml; c=yaml.safe_load(open(sys.argv[1]))
print(sum(len(s["targets"]) for j in c["scrape_configs"] for s in j["static_configs"]))' deploy/prometheus/prometheus.yml)
deadline=$((SECONDS + 90))
while :; do
    targets=$(compose exec -T prometheus wget -qO- http://127.0.0.1:9090/api/v1/targets 2>/dev/null | python3 -c '
import json, sys
active = json.load(sys.stdin)["data"]["activeTargets"]
print(" ".join(t["labels"]["instance"] + "=" + t["health"] for t in active))' 2>/dev/null) || targets=
    up=$(tr ' ' '\n' <<<"$targets" | grep -c '=up$' || true)
    [ -n "$targets" ] && [ "$up" = "$want" ] && break
    [ $SECONDS -lt $deadline ] || fail "Prometheus targets not all up: ${targets:-none}" prometheus
    sleep 1
done
ok "Prometheus: all $want targets up ($targets)"

# Restarts change nothing: the client step, run again, finds the intake-api's client as it
# is. (A restarted auth-server gets a new address from podman, which the proxy, resolving
# its upstreams once, does not follow: not checked here.) (docker-compose 1.29 refuses a second
# `up` on a network podman made: podman's API reports an IPAM option Docker's does not.)
compose start intake-client >/dev/null 2>&1 || fail "docker-compose start intake-client" intake-client
deadline=$((SECONDS + 60))
until [ "$(state intake-client | cut -d' ' -f1)" = exited ]; do
    [ $SECONDS -lt $deadline ] || fail "intake-client did not finish again" intake-client
    sleep 0.5
done
[ "$(state intake-client | cut -d' ' -f2)" = 0 ] || fail "intake-client, run again, exited with $(state intake-client | cut -d' ' -f2)" intake-client
[ "$(outcomes)" = "created unchanged" ] ||
    fail "intake-client, run again, did not find the intake-api's client unchanged" intake-client
partner "/partners/external/cases/$reference"
expect 200 "case read back after the client step ran again" intake-api-1 intake-api-2 proxy
ok "a second start changes nothing: intake-client finds the intake-api's client unchanged"

# One intake-api replica stopped: nginx passes requests to the other.
compose stop --timeout 10 intake-api-1 >/dev/null 2>&1
[ "$(state intake-api-1 | cut -d' ' -f1)" = exited ] || fail "intake-api-1 did not stop" intake-api-1
for i in $(seq 1 10); do
    if [ $((i % 2)) = 0 ]; then
        partner "/partners/external/cases/$reference"
    else
        partner /partners/external/intake -H 'Content-Type: application/json' -d @"$tmp/enquiry.json"
    fi
    case $status in 2??) ;; *) fail "request $i with intake-api-1 stopped: $status $(head -c 300 "$tmp/answer")" proxy intake-api-2 ;; esac
done
ok "intake-api-1 stopped: 10 requests in a row through the proxy all answered 2xx"

echo "the production layout works as written"
