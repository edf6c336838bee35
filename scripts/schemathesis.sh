#!/usr/bin/env bash
# Property-tests both services against their own OpenAPI documents with schemathesis and all
# its checks: no server error; statuses, headers, content types and bodies as documented;
# every schema-valid request accepted (but the webhook endpoint URLs scripts/schemathesis.toml
# names) and every schema-invalid one refused; authentication
# not ignored; `Allow` on 405. SCHEMATHESIS_CHECKS narrows the checks, SCHEMATHESIS_SEED
# changes the seed (1). Starts the one-process stack (target/debug/partner-intake, or
# target/release/ with --release) on free ports in a temporary directory.
#   scripts/schemathesis.sh [--release] [max-examples per operation, default 50]
set -euo pipefail
cd "$(dirname "$0")/.."
profile=debug
if [ "${1:-}" = "--release" ]; then profile=release; shift; fi
examples=${1:-50}
bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/partner-intake"
[ -x "$bin" ] || { echo "$bin not built" >&2; exit 1; }
command -v schemathesis >/dev/null || pip install -q 'schemathesis>=4,<5'

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
auth_port=$(free_port); intake_port=$(free_port)
work=$(mktemp -d)
cleanup() { [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
auth=http://127.0.0.1:$auth_port
intake=http://127.0.0.1:$intake_port
# Limits raised out of the way: the run sends many requests from one client.
(cd "$work" && AUTH_BIND=127.0.0.1:$auth_port INTAKE_BIND=127.0.0.1:$intake_port \
    AUTH_ISSUER=$auth INTAKE_ISSUER=$auth INTAKE_JWKS_URL=$auth/.well-known/jwks.json \
    AUTH_TOKEN_RATE_LIMIT=1000000 AUTH_SOURCE_RATE_LIMIT=1000000 AUTH_FAILED_AUTH_LIMIT=1000000 INTAKE_RATE_LIMIT=1000000 \
    RUST_LOG=warn exec "$bin" > stack.log 2>&1) &
# exec: $! is the stack itself, so the cleanup stops it rather than only the subshell.
pid=$!
for _ in $(seq 1 60); do
    curl -fsS "$intake/readyz" >/dev/null 2>&1 && break
    sleep 0.5
done
# A token of the client kept in $1 (a file the launcher wrote) for scope $2.
token_of() {
    local id secret
    id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["client_id"])' "$1")
    secret=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["client_secret"])' "$1")
    curl -fsS "$auth/oauth/token" -H 'Content-Type: application/json' \
        -d "{\"grant_type\":\"client_credentials\",\"client_id\":\"$id\",\"client_secret\":\"$secret\",\"scope\":\"$2\"}" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])'
}
# The partner's token for the intake API; the auth-server's one protected operation
# (/revocations) is a resource server's, so it gets the intake-api's own client's token.
declare -A token_for
token_for[$intake]=$(token_of "$work/data/demo-client.json" "enquiry:case:intake:create enquiry:referral:create webhooks:manage")
token_for[$auth]=$(token_of "$work/data/intake-revocations-client.json" revocations:read)

# Every check, as scripts/schemathesis.toml sets; SCHEMATHESIS_CHECKS names others instead
# (the command line overrides the file, its per-operation exceptions too).
config=$PWD/scripts/schemathesis.toml
checks=()
[ -n "${SCHEMATHESIS_CHECKS:-}" ] && checks=(--checks "$SCHEMATHESIS_CHECKS")
status=0
for target in "$auth" "$intake"; do
    echo "==> schemathesis against $target"
    # Run from the scratch directory: schemathesis leaves its state in the working directory.
    (cd "$work" && schemathesis --config-file "$config" run "$target/openapi.json" --url "$target" \
        "${checks[@]}" --max-examples "$examples" --seed "${SCHEMATHESIS_SEED:-1}" \
        --header "Authorization: Bearer ${token_for[$target]}" \
        --request-timeout 10 --generation-database none) || status=1
done
exit $status
