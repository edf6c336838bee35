#!/usr/bin/env bash
# Checks both services' /metrics with promtool after real traffic: tokens, enquiries, an
# attach and its redirect link redeemed, a replayed Idempotency-Key, a case read back,
# webhooks refused once then delivered, refused and rate-limited requests, and a Redis that
# does not answer, so that every metric the alerts and the dashboard use is recorded. Starts the
# one-process stack (target/debug/partner-intake, or target/release/ when given --release;
# the auth-server and intake-api binaries of the same profile serve as the CLIs) on free
# ports in a temporary directory; the two services share one process there, so each scrape
# holds both services' metrics. With SCRAPES_DIR set, the scrapes are kept there
# (auth-server.prom, intake-api.prom) for scripts/check-monitoring.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
command -v promtool >/dev/null || { echo "promtool is not installed (Debian: apt-get install prometheus)" >&2; exit 1; }
profile=debug
[ "${1:-}" = "--release" ] && profile=release
bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile"
for b in auth-server intake-api; do
    [ -x "$bin/$b" ] || { echo "$bin/$b not built: cargo build -p $b" >&2; exit 1; }
done
# Nothing listens on this port: the rate limiters fail over to their own counts.
no_redis=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# One failed authentication locks a client out (429) for the window.
start_stack "$@" INTAKE_ACTIVATION_DELAY_SECS=0 REDIS_URL="redis://127.0.0.1:$no_redis" AUTH_FAILED_AUTH_LIMIT=1 \
    INTAKE_WEBHOOK_ALLOW_INSECURE=true INTAKE_WEBHOOK_POLL_MS=100 INTAKE_WEBHOOK_BACKOFF_MS=200

# A partner's webhook receiver that refuses the first request and accepts the rest.
receiver_port=$(free_port)
python3 - "$receiver_port" <<'PY' &
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

class Handler(BaseHTTPRequestHandler):
    seen = 0
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        Handler.seen += 1
        self.send_response(503 if Handler.seen == 1 else 204)
        self.end_headers()
    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
receiver_pid=$!
trap 'kill $receiver_pid 2>/dev/null; stop_stack' EXIT

field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
token_for() { # client_id secret scope
    curl -fsS "$auth/oauth/token" -d grant_type=client_credentials -d "client_id=$1" \
        -d "client_secret=$2" -d "scope=$3" | field access_token
}
id=$(field client_id <"$work/data/demo-client.json")
secret=$(field client_secret <"$work/data/demo-client.json")
cli_env=(env RUST_LOG=warn AUTH_DATABASE_URL="sqlite://$work/data/auth.db?mode=rwc"
    INTAKE_DATABASE_URL="sqlite://$work/data/intake.db?mode=rwc" INTAKE_WEBHOOK_ALLOW_INSECURE=true
    INTAKE_KEY_ENCRYPTION_KEY="$(cat "$work/data/intake-key-encryption-key")"
    AUTH_KEY_ENCRYPTION_KEY="$(cat "$work/data/key-encryption-key")")
"${cli_env[@]}" "$bin/intake-api" webhook set "$id" "http://127.0.0.1:$receiver_port/hooks" \
    --show-secret >/dev/null
portal=$("${cli_env[@]}" "$bin/auth-server" client create --name "Metrics portal" --scopes portal:redirect:redeem --brands brand_a)

token=$(token_for "$id" "$secret" enquiry:case:intake:create)
portal_token=$(token_for "$(field client_id <<<"$portal")" "$(field client_secret <<<"$portal")" portal:redirect:redeem)
refused() { curl -s -o /dev/null "$auth/oauth/token" -d grant_type=client_credentials -d scope=enquiry:case:intake:create "$@"; }
refused -d client_id=nobody -d client_secret=x
refused -d "client_id=$id" -d client_secret=wrong
refused -d "client_id=$id" -d client_secret=wrong # locked out
enquiry=$(sed 's/EMAIL/metrics@example.com/' bench/enquiry.json)
post() { # path body [header]
    curl -fsS "$intake$1" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
        ${3:+-H "$3"} -d "$2"
}
reference=$(post /partners/external/intake "$enquiry" 'Idempotency-Key: metrics-1' | field reference)
post /partners/external/intake "$enquiry" 'Idempotency-Key: metrics-1' >/dev/null
redirect=$(post /partners/external/intake/attach \
    '{"email":"metrics@example.com","product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}' | field redirect)
curl -fsS -o /dev/null "$intake/portal/redirect-tokens/redeem" -H "Authorization: Bearer $portal_token" \
    -H 'Content-Type: application/json' -d "{\"token\":\"${redirect##*token=}\"}"
curl -fsS -o /dev/null "$intake/partners/external/cases/$reference" -H "Authorization: Bearer $token"
curl -s -o /dev/null "$intake/partners/external/intake" -H 'Content-Type: application/json' -d '{}'
curl -s -o /dev/null "$intake/no/such/path"
sleep 1.5 # the activation worker's next pass, and the webhook's retry

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
    [ -n "${SCRAPES_DIR:-}" ] && cp "$work/$name.prom" "$SCRAPES_DIR/"
done
exit $fail
