#!/usr/bin/env bash
# Webhooks as a partner receives them: a receiver verifying every request with the Standard
# Webhooks reference library (Python `standardwebhooks`), down while a case is created,
# updated and given a product, then back up: every event must arrive, verified, each case's
# in the order the changes happened, and the case's activation after them. Then an endpoint
# the partner makes through the API, receiving only the types it chose, its secret rotated
# by the partner: during the grace every request verifies with both the new and the
# previous secret. Starts the one-process stack (target/debug/partner-intake, or
# target/release/ when given --release).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
python3 -c 'import standardwebhooks' 2>/dev/null ||
    { echo "the standardwebhooks Python package is not installed (pip install standardwebhooks)" >&2; exit 1; }
profile=debug
[ "${1:-}" = "--release" ] && profile=release
intake_bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/intake-api"
[ -x "$intake_bin" ] || { echo "$intake_bin not built: cargo build -p intake-api" >&2; exit 1; }
start_stack "$@" INTAKE_ACTIVATION_DELAY_SECS=3 INTAKE_ACTIVATION_POLL_MS=200 \
    INTAKE_WEBHOOK_ALLOW_INSECURE=true INTAKE_WEBHOOK_POLL_MS=100 INTAKE_WEBHOOK_BACKOFF_MS=200

receiver_port=$(free_port)
touch "$work/down" "$work/events.jsonl"
python3 scripts/webhook_receiver.py "$receiver_port" "$work/secret" "$work/events.jsonl" "$work/down" &
receiver_pid=$!
api_port=$(free_port)
touch "$work/api-events.jsonl" "$work/api-secrets"
python3 scripts/webhook_receiver.py "$api_port" "$work/api-secrets" "$work/api-events.jsonl" "$work/api-down" &
api_receiver_pid=$!
trap 'kill $receiver_pid $api_receiver_pid 2>/dev/null; stop_stack' EXIT

field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
id=$(field client_id <"$work/data/demo-client.json")
secret=$(field client_secret <"$work/data/demo-client.json")
INTAKE_DATABASE_URL="sqlite://$work/data/intake.db?mode=rwc" INTAKE_WEBHOOK_ALLOW_INSECURE=true \
    INTAKE_KEY_ENCRYPTION_KEY="$(cat "$work/data/intake-key-encryption-key")" \
    RUST_LOG=warn "$intake_bin" webhook set "$id" "http://127.0.0.1:$receiver_port/hooks" \
    --show-secret | field secret >"$work/secret"

token=$(curl -fsS "$auth/oauth/token" -d grant_type=client_credentials -d "client_id=$id" \
    -d "client_secret=$secret" -d "scope=enquiry:case:intake:create webhooks:manage" |
    field access_token)
enquiry=$(sed 's/EMAIL/webhooks@example.com/' bench/enquiry.json)
post() { curl -fsS -o /dev/null "$intake$1" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$2"; }
post /partners/external/intake "$enquiry"
post /partners/external/intake "$enquiry"
post /partners/external/intake/attach '{"email":"webhooks@example.com","product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}'
sleep 2 # the receiver is down: the events are tried and refused meanwhile
rm "$work/down"

python3 - "$work/events.jsonl" <<'PY'
import json, sys, time
path = sys.argv[1]
want = ["case.created", "case.updated", "product.attached", "case.activated"]
deadline = time.time() + 30
while True:
    records = [json.loads(l) for l in open(path) if l.strip()]
    forged = [r for r in records if "forged" in r]
    if forged:
        sys.exit(f"FAIL webhooks: a request did not verify: {forged[0]}")
    types = [r["event"]["type"] for r in records]
    if all(t in types for t in want):
        break
    if time.time() > deadline:
        sys.exit(f"FAIL webhooks: got {types}, want all of {want}")
    time.sleep(0.2)
order = [t for t in types if t != "case.activated"]
if order[:3] != want[:3]:
    sys.exit(f"FAIL webhooks: out of order: {types}")
ids = [r["id"] for r in records]
if len(set(ids)) != len(ids):
    print(f"note: an event arrived twice (at least once is the promise): {ids}")
print(f"ok   webhooks: {len(records)} events verified with standardwebhooks, in order: {types}")
PY

# The partner's own endpoint, made and rotated through the API.
api() { curl -fsS "$intake/partners/external/webhooks/endpoints$1" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' -d "$2"; }
made=$(api "" "{\"url\":\"http://127.0.0.1:$api_port/hooks\",\"event_types\":[\"case.created\",\"case.updated\"]}")
endpoint=$(field id <<<"$made")
old=$(field secret <<<"$made")
new=$(api "/$endpoint/rotate-secret" '{"grace_period_secs":3600}' | field secret)
[ "$new" != "$old" ] || { echo "FAIL webhooks: the rotation kept the secret" >&2; exit 1; }
printf '%s\n%s\n' "$new" "$old" >"$work/api-secrets"
rotated=$(sed 's/EMAIL/rotated@example.com/' bench/enquiry.json)
post /partners/external/intake "$rotated"
post /partners/external/intake/attach '{"email":"rotated@example.com","product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}'
post /partners/external/intake "$rotated"

python3 - "$work/api-events.jsonl" <<'PY'
import json, sys, time
path = sys.argv[1]
want = ["case.created", "case.updated"]
deadline = time.time() + 30
while True:
    records = [json.loads(l) for l in open(path) if l.strip()]
    forged = [r for r in records if "forged" in r]
    if forged:
        sys.exit(f"FAIL webhooks: a request to the rotated endpoint did not verify with both secrets: {forged[0]}")
    types = [r["event"]["type"] for r in records]
    if types == want or time.time() > deadline:
        break
    time.sleep(0.2)
if types != want:
    sys.exit(f"FAIL webhooks: the API's endpoint got {types}, want {want} (no product.attached)")
if any(r["secrets"] != 2 for r in records):
    sys.exit(f"FAIL webhooks: not verified with both secrets: {records}")
print(f"ok   webhooks: the partner's own endpoint got only its types, {types}, each verified with standardwebhooks under both the rotated and the previous secret")
PY
