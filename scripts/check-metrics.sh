#!/usr/bin/env bash
# Checks both services' /metrics with promtool after real traffic: a token, an enquiry, an
# attach, a case read back, refused requests. Starts the one-process stack
# (target/debug/partner-intake, or target/release/ when given --release) on free ports in a
# temporary directory; the two services share one process there, so each scrape holds both
# services' metrics.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=debug
[ "${1:-}" = "--release" ] && profile=release
bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/partner-intake"
[ -x "$bin" ] || { echo "$bin not built: cargo build -p partner-intake${1:+ $1}" >&2; exit 1; }
command -v promtool >/dev/null || { echo "promtool is not installed (Debian: apt-get install prometheus)" >&2; exit 1; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
auth_port=$(free_port); intake_port=$(free_port)
auth=http://127.0.0.1:$auth_port intake=http://127.0.0.1:$intake_port
work=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
(cd "$work" && AUTH_BIND=127.0.0.1:$auth_port INTAKE_BIND=127.0.0.1:$intake_port \
    AUTH_ISSUER=$auth INTAKE_ISSUER=$auth INTAKE_JWKS_URL=$auth/.well-known/jwks.json \
    INTAKE_ACTIVATION_DELAY_SECS=0 exec "$bin" > stack.log 2>&1) &
pid=$!
for _ in $(seq 1 60); do
    curl -fsS "$intake/readyz" >/dev/null 2>&1 && break
    sleep 0.5
done
curl -fsS "$intake/readyz" >/dev/null || { echo "the stack did not start:" >&2; cat "$work/stack.log" >&2; exit 1; }

field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
id=$(field client_id <"$work/data/demo-client.json")
secret=$(field client_secret <"$work/data/demo-client.json")
scope=enquiry:case:intake:create
token=$(curl -fsS "$auth/oauth/token" -d grant_type=client_credentials -d "client_id=$id" \
    -d "client_secret=$secret" -d "scope=$scope" | field access_token)
curl -s -o /dev/null "$auth/oauth/token" -d grant_type=client_credentials -d client_id=nobody -d client_secret=x
enquiry=$(sed 's/EMAIL/metrics@example.com/' bench/enquiry.json)
reference=$(curl -fsS "$intake/partners/external/intake" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -d "$enquiry" | field reference)
curl -fsS -o /dev/null "$intake/partners/external/intake/attach" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' \
    -d '{"email":"metrics@example.com","product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}'
curl -fsS -o /dev/null "$intake/partners/external/cases/$reference" -H "Authorization: Bearer $token"
curl -s -o /dev/null "$intake/partners/external/intake" -H 'Content-Type: application/json' -d '{}'
curl -s -o /dev/null "$intake/no/such/path"
sleep 1.5 # the activation worker's next pass

fail=0
for service in auth-server:$auth intake-api:$intake; do
    name=${service%%:*} url=${service#*:}
    curl -fsS "$url/metrics" >"$work/$name.prom"
    if out=$(promtool check metrics <"$work/$name.prom" 2>&1); then
        echo "ok   $name: promtool check metrics"
    else
        echo "FAIL $name: promtool check metrics" >&2
        echo "$out" >&2
        fail=1
    fi
done
exit $fail
