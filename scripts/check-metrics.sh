#!/usr/bin/env bash
# Checks both services' /metrics with promtool after real traffic: a token, an enquiry, an
# attach, a case read back, refused requests. Starts the one-process stack
# (target/debug/partner-intake, or target/release/ when given --release) on free ports in a
# temporary directory; the two services share one process there, so each scrape holds both
# services' metrics.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
command -v promtool >/dev/null || { echo "promtool is not installed (Debian: apt-get install prometheus)" >&2; exit 1; }
start_stack "$@" INTAKE_ACTIVATION_DELAY_SECS=0

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
